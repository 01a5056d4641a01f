package journal

import (
	"testing"

	"github.com/pgq-dev/pgq"
)

// parts splits mkTx(i, n) into n one-change parts.
func parts(i, n int) []*pgq.Transaction {
	whole := mkTx(i, n)
	var out []*pgq.Transaction
	for k := range n {
		p := *whole
		p.Part, p.Final = uint32(k), k == n-1
		p.Changes = whole.Changes[k : k+1]
		out = append(out, &p)
	}
	return out
}

func TestOpenCutsUnfinishedParts(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, 512) // small segments: the parts span several files
	if err := j.Append([]*pgq.Transaction{mkTx(1, 2)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(parts(2, 5)); err != nil { // complete: offsets 2..6
		t.Fatal(err)
	}
	if got := j.LastEndLSN(); got != mkTx(2, 1).EndLSN {
		t.Fatalf("LastEndLSN after a final part = %s", got)
	}
	unfinished := parts(3, 40)[:30] // offsets 7..36, no final part
	if err := j.Append(unfinished[:10]); err != nil {
		t.Fatal(err)
	}
	if got := j.LastEndLSN(); got != mkTx(2, 1).EndLSN {
		t.Fatalf("LastEndLSN counts a non-final part: %s", got)
	}
	if err := j.Append(unfinished[10:]); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	j = openT(t, dir, 512)
	if j.LastOffset() != 6 || j.LastEndLSN() != mkTx(2, 1).EndLSN {
		t.Fatalf("after reopen: last offset %d, end LSN %s; want 6, %s", j.LastOffset(), j.LastEndLSN(), mkTx(2, 1).EndLSN)
	}
	// The transaction is journaled again, completely, at the next offsets.
	again := parts(3, 40)
	if err := j.Append(again); err != nil {
		t.Fatal(err)
	}
	if again[0].Offset != 7 || j.LastOffset() != 46 {
		t.Fatalf("re-journaled at %d..%d, want 7..46", again[0].Offset, j.LastOffset())
	}
	for off := pgq.Offset(7); off <= 46; off++ {
		tx, err := j.Read(off)
		if err != nil {
			t.Fatal(err)
		}
		if tx.Part != uint32(off-7) || tx.Final != (off == 46) || tx.Xid != again[0].Xid {
			t.Fatalf("offset %d: part %d final %v xid %d", off, tx.Part, tx.Final, tx.Xid)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenCutsUnfinishedPartsToEmpty(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, 0)
	if err := j.Append(parts(1, 3)[:2]); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openT(t, dir, 0)
	defer j.Close()
	if j.LastOffset() != 0 || j.FirstOffset() != 0 || j.LastEndLSN() != 0 {
		t.Fatalf("want an empty journal, have %d..%d end %s", j.FirstOffset(), j.LastOffset(), j.LastEndLSN())
	}
	all := parts(1, 3)
	if err := j.Append(all); err != nil {
		t.Fatal(err)
	}
	if all[0].Offset != 1 || j.FirstOffset() != 1 || j.LastOffset() != 3 {
		t.Fatalf("appended at %d, journal %d..%d", all[0].Offset, j.FirstOffset(), j.LastOffset())
	}
	if j.LastEndLSN() != all[2].EndLSN {
		t.Fatalf("LastEndLSN %s", j.LastEndLSN())
	}
}

// TestTruncateFrontKeepsWholeTransactions: a cut inside a multi-part
// transaction moves back to its part 0.
func TestTruncateFrontKeepsWholeTransactions(t *testing.T) {
	j := openT(t, t.TempDir(), 0)
	defer j.Close()
	batch := []*pgq.Transaction{mkTx(1, 1)}
	for p := 0; p < 3; p++ {
		tx := mkTx(2, 1)
		tx.Part, tx.Final = uint32(p), p == 2
		batch = append(batch, tx)
	}
	batch = append(batch, mkTx(3, 1))
	if err := j.Append(batch); err != nil {
		t.Fatal(err)
	}
	if err := j.TruncateFront(4); err != nil { // offset 4 is part 2
		t.Fatal(err)
	}
	if first := j.FirstOffset(); first != 2 {
		t.Fatalf("first offset %d after cutting at part 2, want 2 (part 0)", first)
	}
	if err := j.TruncateFront(5); err != nil {
		t.Fatal(err)
	}
	if first := j.FirstOffset(); first != 5 {
		t.Fatalf("first offset %d after cutting at a whole transaction, want 5", first)
	}
}
