package journal

import (
	"reflect"
	"testing"

	"github.com/pgq-dev/pgq/record"
)

// TestAppendRecordsSizes: AppendRecords writes an encoded record as is and
// encodes the others, reports every record's size and offset, and the
// sizes read back (ReadSized) are the ones reported; the committer's hook
// sees the same sizes.
func TestAppendRecordsSizes(t *testing.T) {
	j := openT(t, t.TempDir(), 1<<20)
	defer j.Close()

	plain := mkTx(1, 3)
	full := mkTx(2, 7)
	hdr := *full
	hdr.Changes = nil
	enc := record.Append(nil, full)
	recs := []*Record{{Tx: plain}, {Tx: &hdr, Encoded: enc, EncodedChanges: len(full.Changes)}}
	if err := j.AppendRecords(recs); err != nil {
		t.Fatal(err)
	}
	// Both are stored compact: smaller than their Version 1 frames.
	if got, v1 := recs[0].Bytes, len(record.Append(nil, plain)); got <= 0 || got >= v1 {
		t.Fatalf("plain record: %d bytes stored, Version 1 is %d", got, v1)
	}
	if got := recs[1].Bytes; got <= 0 || got >= len(enc) {
		t.Fatalf("encoded record: %d bytes stored, Version 1 is %d", got, len(enc))
	}
	// The encoded record was compacted in its own buffer, not copied.
	if e := recs[1].Encoded; len(e) != recs[1].Bytes || e[0] != record.VersionCompact || &e[0] != &enc[0] {
		t.Fatalf("encoded record not compacted in place: %d bytes, version %d, same buffer %v", len(e), e[0], &e[0] == &enc[0])
	}
	if recs[0].ChangeCount() != 3 || recs[1].ChangeCount() != 7 {
		t.Fatalf("change counts %d, %d; want 3, 7", recs[0].ChangeCount(), recs[1].ChangeCount())
	}
	if plain.Offset != 1 || hdr.Offset != 2 {
		t.Fatalf("offsets %d, %d; want 1, 2", plain.Offset, hdr.Offset)
	}
	for i, r := range recs {
		tx, size, err := j.ReadSized(r.Tx.Offset)
		if err != nil {
			t.Fatal(err)
		}
		if size != r.Bytes {
			t.Fatalf("record %d read back as %d bytes, appended as %d", i, size, r.Bytes)
		}
		if len(tx.Changes) != r.ChangeCount() {
			t.Fatalf("record %d read back with %d changes, want %d", i, len(tx.Changes), r.ChangeCount())
		}
	}
	got, err := j.Read(2)
	if err != nil {
		t.Fatal(err)
	}
	full.Offset = 2
	if !reflect.DeepEqual(got, full) {
		t.Fatalf("encoded record read back\n got %+v\nwant %+v", got, full)
	}

	c := NewCommitter(j, CommitterOptions{})
	sizes := make(chan []int, 1)
	c.SetOnAppend(func(b []*Record) {
		s := make([]int, len(b))
		for i, r := range b {
			s[i] = r.Bytes
		}
		sizes <- s
	})
	tx := mkTx(3, 2)
	if err := c.Submit(t.Context(), tx, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	s := <-sizes
	_, size, err := j.ReadSized(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 1 || s[0] != size || tx.Offset != 3 {
		t.Fatalf("hook saw sizes %v for offset %d, want [%d] for 3", s, tx.Offset, size)
	}
}
