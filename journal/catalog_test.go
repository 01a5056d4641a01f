package journal

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

// TestMixedVersions: a journal of Version 1 records (the v1 golden) takes
// compact records after them; every record reads back as it was written,
// through Read, ReadRaw (Version 1 frames, as the fetch path sends them),
// Scan and Verify.
func TestMixedVersions(t *testing.T) {
	dir := copyDir(t, goldenDirs["v1"])
	j, err := Open(Options{Dir: dir, SegmentSize: 512, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	want := goldenTxs("v1")
	more := []*pgq.Transaction{mkTx(20, 2), mkTx(21, 3)}
	more[1].Changes[0].Table = "other" // a second relation
	// A relation with type modifiers joins the catalog of relations without.
	withMods := mkTx(22, 1)
	withMods.Changes[0].Columns = []pgq.Column{cols[0], cols[1].WithTypmod(12)}
	more = append(more, withMods)
	if err := j.Append(more); err != nil {
		t.Fatal(err)
	}
	want = append(want, more...)
	check := func(j *Journal) {
		t.Helper()
		for i, w := range want {
			off := pgq.Offset(i + 1)
			got, err := j.Read(off)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := j.ReadRaw(off)
			if err != nil {
				t.Fatal(err)
			}
			w.Offset = off
			if !bytes.Equal(raw, record.Append(nil, w)) {
				t.Fatalf("ReadRaw(%d) is not the Version 1 frame of the record", off)
			}
			w.CommitTime = got.CommitTime
			if !reflect.DeepEqual(got, w) {
				t.Fatalf("record %d\n got %+v\nwant %+v", off, got, w)
			}
		}
	}
	check(j)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := Scan(dir, 0, func(tx *pgq.Transaction) error {
		if tx.Xid != want[n].Xid || len(tx.Changes) != len(want[n].Changes) {
			t.Fatalf("Scan record %d: xid %d with %d changes, want %d with %d", n+1, tx.Xid, len(tx.Changes), want[n].Xid, len(want[n].Changes))
		}
		n++
		return nil
	}); err != nil || n != len(want) {
		t.Fatalf("Scan: %d records, %v", n, err)
	}
	if sum, err := Verify(dir); err != nil || sum.Records != uint64(len(want)) {
		t.Fatalf("Verify: %+v, %v", sum, err)
	}
	j, err = Open(Options{Dir: dir, SegmentSize: 512, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	check(j)
}

// TestCatalogTornTail: an entry of the relation catalog cut short by a
// crash is ignored at Open (no stored record refers to it: the catalog is
// fsynced first) and overwritten by the next new relation.
func TestCatalogTornTail(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, 1<<20)
	if err := j.Append([]*pgq.Transaction{mkTx(1, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, CatalogFile)
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		t.Fatalf("catalog: %d bytes, %v", len(data), err)
	}
	// A torn second entry: a length prefix claiming more than follows.
	if err := os.WriteFile(path, append(bytes.Clone(data), 0x7f, 1, 2, 3), 0o640); err != nil {
		t.Fatal(err)
	}
	j = openT(t, dir, 1<<20)
	tx := mkTx(2, 1)
	tx.Changes[0].Table = "other"
	if err := j.Append([]*pgq.Transaction{tx}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if rels, good := parseCatalog(after); len(rels) != 2 || good != len(after) {
		t.Fatalf("catalog after the repair: %d relations, %d of %d bytes good", len(rels), good, len(after))
	}
	j = openT(t, dir, 1<<20)
	defer j.Close()
	for off, want := range map[pgq.Offset]string{1: "t", 2: "other"} {
		got, err := j.Read(off)
		if err != nil || got.Changes[0].Table != want {
			t.Fatalf("Read(%d) = %v; want table %q", off, err, want)
		}
	}
}

// FuzzParseCatalog: parseCatalog never panics and its good prefix parses
// to the same relations.
func FuzzParseCatalog(f *testing.F) {
	f.Add([]byte{0x7f, 1, 2, 3})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		rels, good := parseCatalog(data)
		again, g2 := parseCatalog(data[:good])
		if g2 != good || len(again) != len(rels) {
			t.Fatalf("good prefix reparsed: %d relations in %d bytes, want %d in %d", len(again), g2, len(rels), good)
		}
	})
}
