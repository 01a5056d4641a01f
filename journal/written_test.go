package journal

import (
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
)

// TestWrittenAt: a record's write time is known from the moment it can
// be read, is the time its batch's fsync returned (between the append's
// call and return), is unknown for records another Journal wrote and,
// past the ring, is a later time (an age's lower bound).
func TestWrittenAt(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tx := func() *pgq.Transaction {
		return &pgq.Transaction{Xid: 1, CommitLSN: 10, EndLSN: 20, CommitTime: time.Now(), Final: true}
	}
	before := time.Now()
	if err := j.AppendRecords(Records([]*pgq.Transaction{tx(), tx()})); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	for off := pgq.Offset(1); off <= 2; off++ {
		w, ok := j.WrittenAt(off)
		if !ok || w.Before(before) || w.After(after) {
			t.Errorf("offset %d: %v, %v; want within the append", off, w, ok)
		}
	}
	if _, ok := j.WrittenAt(3); ok {
		t.Error("offset 3 known before it is written")
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if j, err = Open(Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, ok := j.WrittenAt(1); ok {
		t.Error("offset 1 known to a Journal that did not write it")
	}

	wt := newWrittenTimes()
	wt.note(sizedRange(1, 1, 1))
	time.Sleep(10 * time.Millisecond)
	wt.note(sizedRange(2, writtenRing+5, 1)) // overwrites 1..5
	j.written = wt
	w1, ok1 := j.WrittenAt(1)
	w6, ok6 := j.WrittenAt(6)
	if !ok1 || !ok6 || !w1.Equal(w6) {
		t.Errorf("overwritten offset 1: %v, %v; want the oldest time kept (offset 6's, %v)", w1, ok1, w6)
	}
}

// sizedRange returns records at offsets from..to, each of size bytes.
func sizedRange(from, to pgq.Offset, size int) []*Record {
	var batch []*Record
	for off := from; off <= to; off++ {
		batch = append(batch, &Record{Tx: &pgq.Transaction{Offset: off}, Bytes: size})
	}
	return batch
}

// TestStoredBytes: the stored size of the records between two offsets is
// what Append stored (each record's Bytes, the size the index's entries
// carry), known only while the ring holds both ends and from a run of
// dense offsets.
func TestStoredBytes(t *testing.T) {
	j, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, ok := j.StoredBytes(1, 1); ok {
		t.Fatal("an empty journal knows offset 1")
	}
	tx := func(id string) *pgq.Transaction {
		return &pgq.Transaction{Xid: 1, CommitLSN: 10, EndLSN: 20, CommitTime: time.Now(), Final: true,
			Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: []pgq.Column{{Name: "id", TypeOID: 25}},
				New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte(id)}}}}}
	}
	recs := Records([]*pgq.Transaction{tx("a"), tx("bb"), tx("cccccccc")})
	if err := j.AppendRecords(recs); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to pgq.Offset }{{2, 3}, {3, 3}} {
		var want int64
		for off := c.from; off <= c.to; off++ {
			_, size, err := j.ReadInfo(off)
			if err != nil {
				t.Fatal(err)
			}
			want += int64(size)
		}
		if n, ok := j.StoredBytes(c.from, c.to); !ok || n != want {
			t.Errorf("bytes %d..%d: %d, %v; want %d as read", c.from, c.to, n, ok, want)
		}
	}
	if _, ok := j.StoredBytes(1, 2); ok {
		t.Error("bytes from the first offset known (the record before it is not)")
	}

	wt := newWrittenTimes()
	j.written = wt
	wt.note(sizedRange(5, 9, 10))
	for _, c := range []struct {
		from, to pgq.Offset
		n        int64
		ok       bool
	}{{6, 9, 40, true}, {7, 7, 10, true}, {5, 9, 0, false}, {6, 10, 0, false}} {
		if n, ok := j.StoredBytes(c.from, c.to); n != c.n || ok != c.ok {
			t.Errorf("bytes %d..%d: %d, %v; want %d, %v", c.from, c.to, n, ok, c.n, c.ok)
		}
	}
	wt.note(sizedRange(10, 9+writtenRing, 1)) // overwrites 5..9
	if _, ok := j.StoredBytes(7, 20); ok {
		t.Error("bytes from an overwritten offset known")
	}
	if n, ok := j.StoredBytes(100, 199); !ok || n != 100 {
		t.Errorf("bytes 100..199: %d, %v; want 100", n, ok)
	}
	wt.note(sizedRange(5, 5, 1)) // not dense: starts over
	if _, ok := j.StoredBytes(100, 199); ok {
		t.Error("bytes known across a restart")
	}
}
