package journal

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/pgq-dev/pgq"
)

// bigMixJournal opens a journal in dir with segments of 400 KiB and
// appends records 1..n in batches of 3, every 4th a big record (300 KiB,
// kept by internal/wal only in its file): each segment holds one or two
// of them among small ones.
func bigMixJournal(t *testing.T, dir string, n int) *Journal {
	t.Helper()
	useBigRecords(t, 4)
	j, err := Open(Options{Dir: dir, SegmentSize: 400 << 10, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for o := 1; o <= n; o += 3 {
		if err := j.Append(nextBatch(pgq.Offset(o), min(3, n-o+1))); err != nil {
			t.Fatal(err)
		}
	}
	return j
}

// segmentOf returns the segment of segs holding off and whether it is
// sealed (not the last).
func segmentOf(segs []Segment, off pgq.Offset) (Segment, bool) {
	i := len(segs) - 1
	for i > 0 && segs[i].FirstOffset > off {
		i--
	}
	return segs[i], i < len(segs)-1
}

// flipInRecord flips a byte in the middle of the stored record off of
// seg's file, in place (the same file, as a disk error leaves it).
func flipInRecord(t *testing.T, seg Segment, off pgq.Offset) (pos int) {
	t.Helper()
	data, err := os.ReadFile(seg.Path)
	if err != nil {
		t.Fatal(err)
	}
	pos = entryStart(t, data, seg.FirstOffset, off)
	if n := entryLen(t, data[pos:]); n < 256<<10 {
		t.Fatalf("record %d is %d bytes, not a big one", off, n)
	}
	data[pos+entryLen(t, data[pos:])/2] ^= 0x10
	if err := os.WriteFile(seg.Path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return pos
}

// TestBigRecordCorruptSealed: a byte flipped inside a big record of a
// sealed segment, while the journal runs. The scrub finds it (segment
// and offset), a read of it answers a CorruptError while the records
// around it read, Verify names it in one line, TruncateAt refuses to cut
// above it and cuts at it keeping every record before it, and the
// journal goes on from there.
func TestBigRecordCorruptSealed(t *testing.T) {
	dir := t.TempDir()
	const n, bad = 40, 16
	j := bigMixJournal(t, dir, n)
	defer func() { _ = j.Close() }()
	segs, err := j.Segments()
	if err != nil {
		t.Fatal(err)
	}
	seg, sealed := segmentOf(segs, bad)
	if !sealed || seg.FirstOffset == bad {
		t.Fatalf("record %d in %+v (sealed %v), want it inside a sealed segment", bad, seg, sealed)
	}
	flipInRecord(t, seg, bad)

	scrubOnePass(t, j, 64<<20)
	if c := j.Corruption(); c == nil || c.Source != "scrub" || c.Segment != filepath.Base(seg.Path) || c.Offset != bad {
		t.Fatalf("corruption %+v, want the scrub's at offset %d in %s", c, bad, filepath.Base(seg.Path))
	}
	var ce *CorruptError
	if _, err := j.Read(bad); !errors.As(err, &ce) || ce.Offset != bad {
		t.Fatalf("read %d: %v, want a CorruptError naming it", bad, err)
	}
	for _, o := range []pgq.Offset{seg.FirstOffset, bad - 1, bad + 1, bad + 4, n} {
		if raw, err := j.ReadRaw(o); err != nil || string(raw) != string(wantRecord(o)) {
			t.Fatalf("read %d beside the corrupt record: %v", o, err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	_, err = Verify(dir)
	if !errors.As(err, &ce) || ce.Offset != bad || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Verify: %v, want one line naming offset %d", err, bad)
	}
	before := dirSums(t, dir)
	if _, err := TruncateAt(Options{Dir: dir, Logger: testLogger(t)}, bad+1); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("cut at %d or lower", bad)) {
		t.Fatalf("TruncateAt(%d) above the bad record: %v", bad+1, err)
	}
	if !maps.Equal(before, dirSums(t, dir)) {
		t.Fatal("a refused TruncateAt changed the directory")
	}
	res, err := TruncateAt(Options{Dir: dir, Logger: testLogger(t)}, bad)
	if err != nil || res.KeptLast != bad-1 || res.Segment != seg.Path || res.CutEntries != n-bad+1 {
		t.Fatalf("TruncateAt(%d): %+v %v", bad, res, err)
	}
	checkInvariants(t, vfs.Default, dir, acked{last: bad - 1, endLSN: wantTx(bad - 1).EndLSN}, true)
	if sum, err := Verify(dir); err != nil || sum.Last != bad+1 {
		t.Fatalf("Verify after the cut and two appends: %+v %v", sum, err)
	}
}

// TestBigRecordTail: the tail's last big record is cut short or damaged
// by a crash during its write (past the durable point): Open cuts it and
// keeps every record before it. The same damage at or before the durable
// point is corruption: Open refuses in one line naming it and changes
// nothing, and TruncateAt cuts there.
func TestBigRecordTail(t *testing.T) {
	useBigRecords(t, 4)
	const n, k = 20, 3 // the last batch, records 18..20, ends with a big one
	for _, damage := range []string{"torn", "flipped", "flipped-durable"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			seg, start := lastBatchJournal(t, dir, n, k)
			if damage == "flipped-durable" {
				// The marker as the batch's fsync left it.
				j := openT(t, dir, 64<<20)
				if err := j.Close(); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(seg.Path)
			if err != nil {
				t.Fatal(err)
			}
			pos := entryStart(t, data, 1, n)
			if pos < start || entryLen(t, data[pos:]) < 256<<10 {
				t.Fatalf("record %d at byte %d (batch from %d) is not a big one of the last batch", n, pos, start)
			}
			if damage == "torn" {
				data = data[:pos+entryLen(t, data[pos:])/2]
			} else {
				data[pos+entryLen(t, data[pos:])/2] ^= 0x10
			}
			if err := os.WriteFile(seg.Path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if damage != "flipped-durable" {
				checkInvariants(t, vfs.Default, dir, acked{last: n - 1, endLSN: wantTx(n - 1).EndLSN}, true)
				return
			}
			before := dirSums(t, dir)
			_, err = Open(Options{Dir: dir, Logger: testLogger(t)})
			var te *TailCorruptError
			if !errors.As(err, &te) || te.Offset != n || te.Byte != int64(pos) || strings.Contains(err.Error(), "\n") ||
				!strings.Contains(err.Error(), fmt.Sprintf("--truncate-at %d", n)) {
				t.Fatalf("Open: %v, want one line naming offset %d at byte %d", err, n, pos)
			}
			if !maps.Equal(before, dirSums(t, dir)) {
				t.Fatal("the refused Open changed the directory")
			}
			if _, err := TruncateAt(Options{Dir: dir, Logger: testLogger(t)}, n); err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, vfs.Default, dir, acked{last: n - 1, endLSN: wantTx(n - 1).EndLSN}, true)
		})
	}
}
