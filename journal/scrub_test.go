package journal

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
)

// TestSealWritesSum: every sealed segment has a valid checksum file whose
// length and CRC32C are its file's, also for segments holding big records
// (which internal/wal writes from the batch and keeps only in the file)
// and for the tail of a reopened journal sealed later; the tail has none.
func TestSealWritesSum(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(Options{Dir: dir, SegmentSize: 4096, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.Close() }()
	for i := 1; i <= 200; i++ {
		tx := mkTx(i, 3)
		if i%40 == 7 {
			tx = bigTx(i)
		}
		if err := j.Append([]*pgq.Transaction{tx}); err != nil {
			t.Fatal(err)
		}
		if i == 120 {
			// The tail read back from its file is sealed later.
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			if j, err = Open(Options{Dir: dir, SegmentSize: 4096, Logger: testLogger(t)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	segs, err := j.Segments()
	if err != nil || len(segs) < 3 {
		t.Fatalf("segments %v %v", segs, err)
	}
	bigs := 0
	for _, s := range segs[:len(segs)-1] {
		sum, ok, err := j.readSum(s.Path)
		if err != nil || !ok {
			t.Fatalf("%s: no valid sum (%v)", s.Path, err)
		}
		data, err := os.ReadFile(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Bytes != int64(len(data)) || sum.CRC != crc32.Checksum(data, castagnoli) {
			t.Fatalf("%s: sum says %d bytes, CRC %08x; the file has %d, %08x", s.Path, sum.Bytes, sum.CRC, len(data), crc32.Checksum(data, castagnoli))
		}
		if len(data) > 256<<10 {
			bigs++
		}
	}
	if _, ok, _ := j.readSum(segs[len(segs)-1].Path); ok {
		t.Fatal("the tail has a checksum file")
	}
	if bigs < 4 {
		t.Fatalf("%d sealed segments with a big record, want at least 4", bigs)
	}
}

// bigTx returns transaction i of mkTx's with one value of 300 KiB: its
// record is stored whole in the tail's file only (internal/wal's big
// entries, 256 KiB and more).
func bigTx(i int) *pgq.Transaction {
	tx := mkTx(i, 3)
	tx.Changes[1].New[1].Data = bytes.Repeat([]byte{'y', byte(i)}, 150<<10)
	return tx
}

// TestScrubFindsFlippedByte: a byte flipped in an older sealed segment is
// found by the scrub's first pass (file and offset), and a read of the
// record answers a *CorruptError naming it.
func TestScrubFindsFlippedByte(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(Options{Dir: dir, SegmentSize: 4096, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := 1; i <= 200; i++ {
		if err := j.Append([]*pgq.Transaction{mkTx(i, 3)}); err != nil {
			t.Fatal(err)
		}
	}
	segs, _ := j.Segments()
	seg := segs[1]
	// Remove the first segment's sum: the scrub writes it back.
	if err := os.Remove(segs[0].Path + SumSuffix); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(seg.Path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(seg.Path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if c := j.Corruption(); c != nil {
		t.Fatalf("corruption before the scrub: %v", c)
	}
	scrubOnePass(t, j, 1<<20)
	st := j.ScrubStatus()
	if st.Passes != 1 || st.Segments != uint64(len(segs)-1) || st.SumsWritten != 1 {
		t.Fatalf("status %+v, want 1 pass over %d segments, 1 sum written", st, len(segs)-1)
	}
	if _, ok, _ := j.readSum(segs[0].Path); !ok {
		t.Fatal("the scrub did not write the missing sum")
	}
	c := j.Corruption()
	if c == nil || c.Segment != filepath.Base(seg.Path) || c.Source != "scrub" || c.Offset < seg.FirstOffset || c.Offset >= segs[2].FirstOffset {
		t.Fatalf("corruption %+v, want one in %s", c, filepath.Base(seg.Path))
	}
	_, err = j.Read(c.Offset)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Offset != c.Offset {
		t.Fatalf("read %d: %v, want a CorruptError naming it", c.Offset, err)
	}
}

// scrubOnePass runs j's scrub at rate bytes/s until it has finished a
// pass (or 30 s), then stops it.
func scrubOnePass(t *testing.T, j *Journal, rate int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- j.RunScrub(ctx, ScrubOptions{Rate: rate, Pause: time.Hour}) }()
	deadline := time.Now().Add(30 * time.Second)
	for j.ScrubStatus().Passes == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
