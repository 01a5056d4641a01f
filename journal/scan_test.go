package journal

import (
	"errors"
	"os"
	"testing"

	"github.com/pgq-dev/pgq"
)

// TestScanBesideWriter: Scan reads without the lock, from any offset, and
// treats an entry still being written at the tail as the end, while Verify
// calls the same bytes corrupt and names the offset.
func TestScanBesideWriter(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, 4096) // small segments: several files
	fill(t, j, 1, 60)
	segs, err := j.Segments()
	if err != nil || len(segs) < 2 {
		t.Fatalf("want several segments, got %d (%v)", len(segs), err)
	}

	var got []pgq.Offset
	if err := Scan(dir, 25, func(tx *pgq.Transaction) error {
		got = append(got, tx.Offset)
		if tx.Xid != uint32(1000+tx.Offset) {
			t.Fatalf("offset %d has xid %d", tx.Offset, tx.Xid)
		}
		return nil
	}); err != nil {
		t.Fatalf("Scan while open: %v", err)
	}
	if len(got) != 36 || got[0] != 25 || got[35] != 60 {
		t.Fatalf("Scan from 25 returned %d records (%v…)", len(got), got[:min(3, len(got))])
	}

	// A write in flight: a length prefix promising more than is there.
	tail := segs[len(segs)-1].Path
	f, err := os.OpenFile(tail, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0x40, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	n := 0
	if err := Scan(dir, 0, func(*pgq.Transaction) error { n++; return nil }); err != nil || n != 60 {
		t.Fatalf("Scan with a partial tail entry: %d records, err %v", n, err)
	}
	_, err = Verify(dir)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Offset != 61 {
		t.Fatalf("Verify with a torn tail: %v, want corruption at offset 61", err)
	}
	stop := errors.New("enough")
	if err := Scan(dir, 0, func(*pgq.Transaction) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Scan did not return the callback's error: %v", err)
	}
	j.Close()
}
