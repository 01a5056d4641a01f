package record

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/pgq-dev/pgq"
)

// catalog is an in-memory relation catalog for the tests.
type catalog struct {
	ids  map[string]uint64
	rels [][]byte
}

func (c *catalog) intern(rel []byte) (uint64, error) {
	if err := CheckRelation(rel); err != nil {
		return 0, err
	}
	if c.ids == nil {
		c.ids = map[string]uint64{}
	}
	if id, ok := c.ids[string(rel)]; ok {
		return id, nil
	}
	c.rels = append(c.rels, bytes.Clone(rel))
	c.ids[string(rel)] = uint64(len(c.rels))
	return uint64(len(c.rels)), nil
}

var errUnknownRel = errors.New("unknown relation")

func (c *catalog) lookup(id uint64) ([]byte, error) {
	if id == 0 || id > uint64(len(c.rels)) {
		return nil, fmt.Errorf("%w %d", errUnknownRel, id)
	}
	return c.rels[id-1], nil
}

// TestCompactRoundTrip: Expand(Compact(r)) is r byte for byte, the compact
// form is smaller, relations are interned once across records, and a
// Version 1 record expands to itself.
func TestCompactRoundTrip(t *testing.T) {
	var c catalog
	bf := benchTx(2)
	bf.Backfill = "bf-1"
	for name, tx := range map[string]*pgq.Transaction{"sample": sampleTx(), "one": benchTx(1), "many": benchTx(100), "backfill": bf, "empty": {Xid: 1, CommitLSN: 5, EndLSN: 5, Final: true}} {
		rec := Append(nil, tx)
		comp, err := Compact([]byte("keep"), rec, c.intern)
		if err != nil {
			t.Fatalf("%s: Compact: %v", name, err)
		}
		if string(comp[:4]) != "keep" || comp[4] != VersionCompact {
			t.Fatalf("%s: compact record does not follow dst or has version %d", name, comp[4])
		}
		comp = comp[4:]
		if len(tx.Changes) > 0 && len(comp) >= len(rec) {
			t.Fatalf("%s: compact %d bytes, not smaller than %d", name, len(comp), len(rec))
		}
		back, err := Expand(nil, comp, c.lookup)
		if err != nil {
			t.Fatalf("%s: Expand: %v", name, err)
		}
		if !bytes.Equal(back, rec) {
			t.Fatalf("%s: expanded record differs\n got %x\nwant %x", name, back, rec)
		}
		inPlace, scratch, err := CompactInPlace(bytes.Clone(rec), nil, c.intern)
		if err != nil || !bytes.Equal(inPlace, comp) || len(scratch) == 0 {
			t.Fatalf("%s: CompactInPlace = %v (scratch %d bytes)\n got %x\nwant %x", name, err, len(scratch), inPlace, comp)
		}
		same, err := Expand(nil, rec, c.lookup)
		if err != nil || !bytes.Equal(same, rec) {
			t.Fatalf("%s: Expand of Version 1 = %v", name, err)
		}
		if err := Check(comp); !errors.Is(err, ErrBadVersion) {
			t.Fatalf("%s: Check(compact) = %v, want ErrBadVersion (it must be expanded first)", name, err)
		}
	}
	// benchTx's relation is the same in every record; sampleTx has its own.
	if n := len(c.rels); n < 2 || n > 6 {
		t.Fatalf("%d relations interned", n)
	}
}

func TestCompactErrors(t *testing.T) {
	var c catalog
	rec := Append(nil, benchTx(3))
	comp, err := Compact(nil, rec, c.intern)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(comp)
	bad[len(bad)-1] ^= 1
	if _, err := Expand(nil, bad, c.lookup); !errors.Is(err, ErrChecksum) {
		t.Fatalf("corrupt compact record: %v, want ErrChecksum", err)
	}
	var empty catalog
	if _, err := Expand(nil, comp, empty.lookup); !errors.Is(err, errUnknownRel) {
		t.Fatalf("unknown relation id: %v", err)
	}
	bad = bytes.Clone(rec)
	bad[0] = 9
	if _, err := Compact(nil, bad, c.intern); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("Compact of version 9: %v", err)
	}
	if _, err := Expand(nil, bad, c.lookup); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("Expand of version 9: %v", err)
	}
	failing := func([]byte) (uint64, error) { return 0, errUnknownRel }
	if out, err := Compact([]byte("x"), rec, failing); !errors.Is(err, errUnknownRel) || string(out) != "x" {
		t.Fatalf("Compact with a failing catalog: %q, %v", out, err)
	}
	// CompactInPlace leaves a record it refuses untouched.
	for name, in := range map[string][]byte{"failing catalog": rec, "compact already": comp} {
		orig := bytes.Clone(in)
		if out, _, err := CompactInPlace(in, nil, failing); err == nil || out != nil || !bytes.Equal(in, orig) {
			t.Fatalf("CompactInPlace, %s: %v, %d bytes out, record changed: %v", name, err, len(out), !bytes.Equal(in, orig))
		}
	}
}

// FuzzCompact: Expand never panics on any input, and whatever Compact
// accepts expands back to itself.
func FuzzCompact(f *testing.F) {
	var c catalog
	for _, tx := range []*pgq.Transaction{sampleTx(), benchTx(2)} {
		rec := Append(nil, tx)
		f.Add(rec)
		comp, err := Compact(nil, rec, c.intern)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(comp)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c catalog
		_, _ = Expand(nil, data, c.lookup)
		comp, err := Compact(nil, data, c.intern)
		if err != nil {
			return
		}
		back, err := Expand(nil, comp, c.lookup)
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("round trip: %v\n got %x\nwant %x", err, back, data)
		}
		inPlace, _, err := CompactInPlace(bytes.Clone(data), nil, c.intern)
		if err != nil || !bytes.Equal(inPlace, comp) {
			t.Fatalf("CompactInPlace differs from Compact: %v\n got %x\nwant %x", err, inPlace, comp)
		}
	})
}

// TestAppendCompactIsCompactOfAppend: AppendCompact gives, byte for byte,
// what Compact makes of Append's record, interning the same relations in
// the same order, after what dst holds; it refuses what Compact refuses
// without appending, and does not allocate once its buffers have grown.
func TestAppendCompactIsCompactOfAppend(t *testing.T) {
	bf := benchTx(2)
	bf.Backfill = "bf-1"
	ord := benchTx(3)
	ord.Part, ord.Final, ord.FirstOrdinal, ord.Origin = 2, false, 7, "node-b"
	txs := map[string]*pgq.Transaction{"sample": sampleTx(), "one": benchTx(1), "many": benchTx(100), "backfill": bf,
		"ordinals": ord, "typmods": typmodTx(), "domains": domainTx(), "empty": {Xid: 1, CommitLSN: 5, EndLSN: 5, Final: true}}
	var viaCompact, direct catalog
	for _, name := range []string{"sample", "one", "many", "backfill", "ordinals", "typmods", "domains", "empty"} {
		tx := txs[name]
		want, err := Compact(nil, Append(nil, tx), viaCompact.intern)
		if err != nil {
			t.Fatalf("%s: Compact: %v", name, err)
		}
		got, _, err := AppendCompact([]byte("keep"), tx, nil, direct.intern)
		if err != nil {
			t.Fatalf("%s: AppendCompact: %v", name, err)
		}
		if string(got[:4]) != "keep" || !bytes.Equal(got[4:], want) {
			t.Fatalf("%s: AppendCompact differs from Compact(Append)\n got %x\nwant %x", name, got, want)
		}
	}
	if len(direct.rels) != len(viaCompact.rels) {
		t.Fatalf("%d relations interned, Compact interned %d", len(direct.rels), len(viaCompact.rels))
	}
	for i := range direct.rels {
		if !bytes.Equal(direct.rels[i], viaCompact.rels[i]) {
			t.Fatalf("relation %d interned differently", i+1)
		}
	}

	back := benchTx(1)
	back.EndLSN = back.CommitLSN - 1
	if _, err := Compact(nil, Append(nil, back), viaCompact.intern); err == nil {
		t.Fatal("Compact accepted an end LSN before the commit LSN")
	}
	if out, _, err := AppendCompact([]byte("x"), back, nil, direct.intern); !errors.Is(err, ErrCorruptRecord) || string(out) != "x" {
		t.Fatalf("AppendCompact of an end LSN before the commit LSN: %q, %v", out, err)
	}
	failing := func([]byte) (uint64, error) { return 0, errUnknownRel }
	if out, _, err := AppendCompact([]byte("x"), benchTx(1), nil, failing); !errors.Is(err, errUnknownRel) || string(out) != "x" {
		t.Fatalf("AppendCompact with a failing catalog: %q, %v", out, err)
	}

	tx := benchTx(5)
	dst, scratch, _ := AppendCompact(nil, tx, nil, direct.intern)
	if n := testing.AllocsPerRun(100, func() {
		dst, scratch, _ = AppendCompact(dst[:0], tx, scratch, direct.intern)
	}); n != 0 {
		t.Fatalf("AppendCompact: %v allocations", n)
	}
}

// BenchmarkAppendCompact: the journal's encoding of a record into its
// stored form, in one pass (AppendCompact) against the two it replaced
// (Append, then Compact re-parsing and re-checksumming the record).
func BenchmarkAppendCompact(b *testing.B) {
	for _, n := range []int{1, 5, 100} {
		tx := benchTx(n)
		var c catalog
		b.Run(fmt.Sprintf("changes=%d/path=one-pass", n), func(b *testing.B) {
			dst, scratch, _ := AppendCompact(nil, tx, nil, c.intern)
			b.SetBytes(int64(len(dst)))
			b.ReportAllocs()
			for b.Loop() {
				dst, scratch, _ = AppendCompact(dst[:0], tx, scratch, c.intern)
			}
		})
		b.Run(fmt.Sprintf("changes=%d/path=append-compact", n), func(b *testing.B) {
			buf := Append(nil, tx)
			dst, _ := Compact(nil, buf, c.intern)
			b.SetBytes(int64(len(dst)))
			b.ReportAllocs()
			for b.Loop() {
				buf = Append(buf[:0], tx)
				dst, _ = Compact(dst[:0], buf, c.intern)
			}
		})
	}
}
