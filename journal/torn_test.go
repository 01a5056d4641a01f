package journal

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/pgq-dev/pgq"
)

// dirSums returns the sha256 of every file in dir by name; LOCK, which
// Open creates in a directory copied without it, is left out.
func dirSums(t testing.TB, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, e := range ents {
		if e.Name() == LockFile {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sums[e.Name()] = fmt.Sprintf("%x", sha256.Sum256(b))
	}
	return sums
}

// entryStart returns the byte position of the entry of offset off in the
// segment file data whose first record is first.
func entryStart(t testing.TB, data []byte, first, off pgq.Offset) int {
	t.Helper()
	pos := 0
	for o := first; o < off; o++ {
		pos += entryLen(t, data[pos:])
	}
	return pos
}

// bigJournal writes records 1..n (3 changes each) in batches of 100 into
// one segment file and returns it: a stopped journal whose tail holds
// everything.
func bigJournal(t testing.TB, dir string, n int) Segment {
	t.Helper()
	j := openT(t, dir, 64<<20)
	for i := 1; i <= n; i += 100 {
		var b []*pgq.Transaction
		for k := i; k < i+100 && k <= n; k++ {
			b = append(b, wantTx(k))
		}
		if err := j.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	segs, err := j.Segments()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if len(segs) != 1 {
		t.Fatalf("%d segments, want 1", len(segs))
	}
	return segs[0]
}

// TestOpenRefusesFlippedByte is the bug: one flipped byte in the middle
// of the tail segment of a stopped journal made Open cut every record
// from there on (fsynced and confirmed ones), leaving the slot unable to
// send them again. Now Open refuses with a TailCorruptError naming the
// file, the offset and `pgq journal verify`, and no byte in the directory
// changes; the same without a marker (an older journal), because valid
// records follow the damage.
func TestOpenRefusesFlippedByte(t *testing.T) {
	for _, mode := range []string{"marker", "no-marker"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			const n, bad = 3000, 1517
			seg := bigJournal(t, dir, n)
			if mode == "no-marker" {
				if err := os.Remove(filepath.Join(dir, DurableFile)); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(seg.Path)
			if err != nil {
				t.Fatal(err)
			}
			pos := entryStart(t, data, seg.FirstOffset, bad)
			data[pos+entryLen(t, data[pos:])/2] ^= 0x10
			if err := os.WriteFile(seg.Path, data, 0o640); err != nil {
				t.Fatal(err)
			}
			before := dirSums(t, dir)
			if _, ok := before[LockFile]; ok {
				t.Fatal("LOCK left out of the comparison")
			}
			lock, err := os.ReadFile(filepath.Join(dir, LockFile))
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // and again: the first refusal changed nothing
				_, err = Open(Options{Dir: dir, SegmentSize: 64 << 20, Logger: testLogger(t)})
				var te *TailCorruptError
				if !errors.Is(err, ErrCorrupt) || !errors.As(err, &te) || te.Offset != bad || te.Segment != seg.Path || te.Byte != int64(pos) {
					t.Fatalf("Open: %v, want a TailCorruptError at offset %d (byte %d) of %s", err, bad, pos, seg.Path)
				}
				msg := err.Error()
				for _, want := range []string{seg.Path, fmt.Sprintf("offset %d", bad), "pgq journal verify", fmt.Sprintf("--truncate-at %d", bad)} {
					if !strings.Contains(msg, want) {
						t.Fatalf("error does not name %q: %s", want, msg)
					}
				}
				if strings.Contains(msg, "\n") {
					t.Fatalf("error is not one line: %q", msg)
				}
				if after := dirSums(t, dir); !maps.Equal(before, after) {
					t.Fatalf("Open changed the directory:\nbefore %v\nafter  %v", before, after)
				}
				if l, err := os.ReadFile(filepath.Join(dir, LockFile)); err != nil || string(l) != string(lock) {
					t.Fatalf("LOCK changed: %v", err)
				}
			}
		})
	}
}

// lastBatchJournal writes records 1..n-k and, in one more batch, n-k+1..n
// into one segment, and leaves the marker as it was before that batch:
// the disk as a crash between the batch's write and its marker leaves
// it. It returns the segment and the byte where the batch starts.
func lastBatchJournal(t testing.TB, dir string, n, k int) (Segment, int) {
	t.Helper()
	j := openT(t, dir, 64<<20)
	if err := j.Append(nextBatch(1, n-k)); err != nil {
		t.Fatal(err)
	}
	seg0, end0 := j.w.Tail()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(filepath.Join(dir, DurableFile))
	if err != nil {
		t.Fatal(err)
	}
	j = openT(t, dir, 64<<20)
	if err := j.Append(nextBatch(pgq.Offset(n-k+1), k)); err != nil {
		t.Fatal(err)
	}
	segs, err := j.Segments()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, DurableFile), old, 0o640); err != nil {
		t.Fatal(err)
	}
	if len(segs) != 1 || seg0 != 1 {
		t.Fatalf("want one segment: %v", segs)
	}
	p, ok, err := readDurable(vfs.Default, dir)
	if err != nil || !ok || p.last != pgq.Offset(n-k) || p.end != end0 {
		t.Fatalf("restored marker %+v %v %v, want record %d ending at byte %d", p, ok, err, n-k, end0)
	}
	return segs[0], int(end0)
}

// TestOpenCutsDamagedUnsyncedWrite: a crash in the middle of the last
// batch's write can leave a page of it unwritten (zeros) while later
// pages, with intact entries, reached the disk. All of it lies past the
// durable point: Open cuts at the first bad entry, keeps every record
// before it, and the journal goes on from there. Without a marker the
// same damage is refused, because valid records follow it.
func TestOpenCutsDamagedUnsyncedWrite(t *testing.T) {
	const n, k = 400, 150
	dir := t.TempDir()
	seg, start := lastBatchJournal(t, dir, n, k)
	data, err := os.ReadFile(seg.Path)
	if err != nil {
		t.Fatal(err)
	}
	// Zero a 4 KiB page in the middle of the batch's bytes.
	page := (start + (len(data)-start)/2) &^ 4095
	if page < start {
		t.Fatalf("batch too small: %d..%d", start, len(data))
	}
	clear(data[page : page+4096])
	if err := os.WriteFile(seg.Path, data, 0o640); err != nil {
		t.Fatal(err)
	}
	// The first record the page touches.
	firstBad, pos := pgq.Offset(1), 0
	for pos+entryLen(t, data[pos:]) <= page {
		pos += entryLen(t, data[pos:])
		firstBad++
	}
	if firstBad <= n-k || int(firstBad) >= n-5 {
		t.Fatalf("damage at record %d, want inside the last batch with intact records after it", firstBad)
	}

	legacy := copyDir(t, dir)
	if err := os.Remove(filepath.Join(legacy, DurableFile)); err != nil {
		t.Fatal(err)
	}
	before := dirSums(t, legacy)
	if _, err := Open(Options{Dir: legacy, Logger: testLogger(t)}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open without a marker: %v, want ErrCorrupt (valid records follow)", err)
	}
	if !maps.Equal(before, dirSums(t, legacy)) {
		t.Fatal("Open without a marker changed the directory")
	}

	j := openT(t, dir, 64<<20)
	if got := j.LastOffset(); got != firstBad-1 {
		t.Fatalf("LastOffset %d after the cut, want %d", got, firstBad-1)
	}
	for o := pgq.Offset(1); o < firstBad; o++ {
		raw, err := j.ReadRaw(o)
		if err != nil || string(raw) != string(wantRecord(o)) {
			t.Fatalf("record %d after the cut: %v", o, err)
		}
	}
	if err := j.Append(nextBatch(firstBad, 3)); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if sum, err := Verify(dir); err != nil || sum.Last != firstBad+2 {
		t.Fatalf("Verify: %+v %v", sum, err)
	}
}

// TestOpenNoMarkerTornTail: a journal without a usable marker (missing,
// of a newer version, or both slots torn) is opened as one written
// before the marker: a torn last entry with nothing valid after it is
// cut, and Open then writes the marker.
func TestOpenNoMarkerTornTail(t *testing.T) {
	for _, mode := range []string{"missing", "newer-version", "torn"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			seg := bigJournal(t, dir, 300)
			mp := filepath.Join(dir, DurableFile)
			switch mode {
			case "missing":
				if err := os.Remove(mp); err != nil {
					t.Fatal(err)
				}
			case "newer-version":
				b, _ := os.ReadFile(mp)
				for s := 0; s < len(b); s += durableSlotSize {
					b[s+4] = durableVersion + 1
				}
				if err := os.WriteFile(mp, b, 0o640); err != nil {
					t.Fatal(err)
				}
			case "torn":
				if err := os.WriteFile(mp, []byte("pgqD\x01garbage"), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			data, _ := os.ReadFile(seg.Path)
			pos := entryStart(t, data, 1, 300)
			if err := os.WriteFile(seg.Path, data[:pos+entryLen(t, data[pos:])-7], 0o640); err != nil {
				t.Fatal(err)
			}
			j := openT(t, dir, 64<<20)
			if got := j.LastOffset(); got != 299 {
				t.Fatalf("LastOffset %d, want 299", got)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			p, ok, err := readDurable(vfs.Default, dir)
			if err != nil || !ok || p.last != 299 || p.segment != 1 || p.end != int64(pos) {
				t.Fatalf("marker after Open: %+v %v %v, want record 299 ending at byte %d", p, ok, err, pos)
			}
		})
	}
}

// TestDurableMarker: after every Append the marker names the last record
// and where it ends in the tail segment, across segment rolls; Open keeps
// it; the two slots alternate, so a torn write of one leaves the other.
func TestDurableMarker(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, 2048)
	for i := 1; i <= 60; i += 3 {
		if err := j.Append(nextBatch(pgq.Offset(i), 3)); err != nil {
			t.Fatal(err)
		}
		p, ok, err := readDurable(vfs.Default, dir)
		segs, _ := listSegments(vfs.Default, dir)
		tail := segs[len(segs)-1]
		if err != nil || !ok || p.last != pgq.Offset(i+2) || p.segment != tail.FirstOffset || p.end != tail.Bytes {
			t.Fatalf("after records ..%d: marker %+v %v %v; tail %+v", i+2, p, ok, err, tail)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(dir, DurableFile)
	b, err := os.ReadFile(mp)
	if err != nil || len(b) != durableSlots*durableSlotSize {
		t.Fatalf("marker file: %d bytes, %v", len(b), err)
	}
	newest, _ := parseDurable(b)
	// Tear the newest slot: the other one, one batch older, is read.
	slot := int(newest.seq%durableSlots) * durableSlotSize
	b[slot+20] ^= 1
	older, ok := parseDurable(b)
	if !ok || older.seq != newest.seq-1 || older.last != newest.last-3 {
		t.Fatalf("with the newest slot torn: %+v %v, want seq %d, record %d", older, ok, newest.seq-1, newest.last-3)
	}
}

// TestTruncateAt: the operator's cut. It refuses while the journal is
// open (pgq running), offsets outside the journal, and a cut above a bad
// record; it cuts the corrupt journal of TestOpenRefusesFlippedByte at
// the bad record, and the journal then opens with every record before it.
func TestTruncateAt(t *testing.T) {
	dir := t.TempDir()
	const n, bad = 3000, 1517
	seg := bigJournal(t, dir, n)
	data, _ := os.ReadFile(seg.Path)
	pos := entryStart(t, data, 1, bad)
	data[pos+entryLen(t, data[pos:])/2] ^= 0x10
	if err := os.WriteFile(seg.Path, data, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir, Logger: testLogger(t)}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v", err)
	}
	before := dirSums(t, dir)
	for _, c := range []struct {
		off  pgq.Offset
		want error
	}{{0, ErrNotFound}, {bad + 1, ErrCorrupt}, {2500, ErrCorrupt}, {n + 50, ErrCorrupt}} {
		if _, err := TruncateAt(Options{Dir: dir, Logger: testLogger(t)}, c.off); !errors.Is(err, c.want) {
			t.Fatalf("TruncateAt(%d): %v, want %v", c.off, err, c.want)
		}
	}
	if !maps.Equal(before, dirSums(t, dir)) {
		t.Fatal("a refused TruncateAt changed the directory")
	}
	// A running journal holds the lock.
	other := t.TempDir()
	bigJournal(t, other, 10)
	running := openT(t, other, 0)
	if _, err := TruncateAt(Options{Dir: other, Logger: testLogger(t)}, 5); !errors.Is(err, ErrLocked) {
		t.Fatalf("TruncateAt beside an open journal: %v, want ErrLocked", err)
	}
	if err := running.Close(); err != nil {
		t.Fatal(err)
	}
	for _, off := range []pgq.Offset{11, 50} {
		if _, err := TruncateAt(Options{Dir: other, Logger: testLogger(t)}, off); !errors.Is(err, ErrNotFound) {
			t.Fatalf("TruncateAt(%d) of a 10-record journal: %v, want ErrNotFound", off, err)
		}
	}

	res, err := TruncateAt(Options{Dir: dir, Logger: testLogger(t)}, bad)
	if err != nil {
		t.Fatal(err)
	}
	if res.KeptLast != bad-1 || res.Segment != seg.Path || res.CutBytes != int64(len(data)-pos) || res.CutEntries != n-bad+1 {
		t.Fatalf("TruncateAt: %+v", res)
	}
	j := openT(t, dir, 64<<20)
	if j.LastOffset() != bad-1 || j.LastEndLSN() != wantTx(bad-1).EndLSN {
		t.Fatalf("after the cut: last %d, end %v", j.LastOffset(), j.LastEndLSN())
	}
	for _, o := range []pgq.Offset{1, bad / 2, bad - 1} {
		if raw, err := j.ReadRaw(o); err != nil || string(raw) != string(wantRecord(o)) {
			t.Fatalf("record %d after the cut: %v", o, err)
		}
	}
	if err := j.Append(nextBatch(bad, 2)); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if sum, err := Verify(dir); err != nil || sum.Last != bad+1 {
		t.Fatalf("Verify: %+v %v", sum, err)
	}
}

// TestTruncateAtSegments: a cut in an older segment removes the later
// segment files and the journal opens at the cut.
func TestTruncateAtSegments(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir, 1024)
	fill(t, j, 1, 100)
	segs, _ := j.Segments()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if len(segs) < 4 {
		t.Fatalf("%d segments", len(segs))
	}
	if _, err := os.Stat(segs[1].Path + SumSuffix); err != nil {
		t.Fatalf("a sealed segment has no checksum file: %v", err)
	}
	cut := segs[1].FirstOffset + 1
	res, err := TruncateAt(Options{Dir: dir, Logger: testLogger(t)}, cut)
	if err != nil {
		t.Fatal(err)
	}
	// The cut segment is the open tail now and the later ones are gone:
	// no seal-time checksum may describe their old bytes.
	for _, s := range segs[1:] {
		if _, err := os.Stat(s.Path + SumSuffix); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("checksum file of %s after the cut: %v", s.Path, err)
		}
	}
	if res.RemovedSegments != len(segs)-2 || res.CutEntries != uint64(100-cut+1) {
		t.Fatalf("TruncateAt: %+v", res)
	}
	j = openT(t, dir, 1024)
	defer j.Close()
	checkRecords(t, j, 1, int(cut-1))
}

// TestCommitterMarkFailure: the Committer marks a batch durable on its
// publishing goroutine, before the OnAppend hook (ingest's confirmation).
// When the marker's fsync fails, the batch is never handed to the hook
// nor published, Flush and Run return an error wrapping ErrFailed and the
// cause, and the journal is failed. Reopened, the batch's records (whose
// own fsync succeeded) are there, past the marker, as ordinary records.
func TestCommitterMarkFailure(t *testing.T) {
	dir := t.TempDir()
	var armed atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed.Load() && op.Kind == errorfs.OpFileSyncData && strings.HasSuffix(op.Path, DurableFile) {
			return syscall.EIO
		}
		return nil
	})
	j, err := Open(Options{Dir: dir, FS: errorfs.Wrap(vfs.Default, inj), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCommitter(j, CommitterOptions{})
	var hooked atomic.Int64
	c.SetOnAppend(func(b []*Record) { hooked.Add(int64(len(b))) })
	ctx := t.Context()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()
	if err := c.Submit(ctx, wantTx(1), 10); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	if err := c.Submit(ctx, wantTx(2), 10); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Flush with a failing marker: %v, want ErrFailed wrapping EIO", err)
	}
	if err := <-runErr; !errors.Is(err, ErrFailed) {
		t.Fatalf("Run: %v, want ErrFailed", err)
	}
	if off, _ := c.Durable(); off != 1 || hooked.Load() != 1 {
		t.Fatalf("durable %d, hooked %d records; want 1 and 1", off, hooked.Load())
	}
	if !errors.Is(j.Err(), ErrFailed) {
		t.Fatalf("journal Err() = %v", j.Err())
	}
	_ = j.Close()
	// (The marker file may read record 2: its write reached the page
	// cache, only its fsync failed.)
	j = openT(t, dir, 0)
	defer j.Close()
	if j.LastOffset() != 2 {
		t.Fatalf("reopened: last %d, want 2 (record 2 was fsynced)", j.LastOffset())
	}
}

// TestCommitterMarksWaitingBatchesOnce: batches that become durable while
// the publishing goroutine is busy (here: held in the first batch's hook)
// are covered by one marker write and fsync, not one each, and one hook
// call with their records, still marked before the hook runs and before
// they are published.
func TestCommitterMarksWaitingBatchesOnce(t *testing.T) {
	dir := t.TempDir()
	var counting atomic.Bool
	var markSyncs atomic.Int64
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if counting.Load() && op.Kind == errorfs.OpFileSyncData && strings.HasSuffix(op.Path, DurableFile) {
			markSyncs.Add(1)
		}
		return nil
	})
	j, c := committerOnFS(t, dir, inj)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var markedAtHook, hooked []pgq.Offset // written by the hook goroutine, read after Close
	c.SetOnAppend(func(b []*Record) {
		mp, ok, err := readDurable(vfs.Default, dir)
		if err != nil || !ok {
			t.Errorf("marker at the hook of offset %d: %v (valid %v)", b[0].Tx.Offset, err, ok)
		}
		markedAtHook = append(markedAtHook, mp.last)
		for _, r := range b {
			hooked = append(hooked, r.Tx.Offset)
		}
		if b[0].Tx.Offset == 1 {
			counting.Store(true)
			entered <- struct{}{}
			<-release
		}
	})
	ctx := t.Context()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()
	if err := c.Submit(ctx, wantTx(1), 10); err != nil {
		t.Fatal(err)
	}
	<-entered
	// Two more batches, each written and fsynced on its own while the
	// first hook is held.
	for i := 2; i <= 3; i++ {
		changed := j.Changed()
		if err := c.Submit(ctx, wantTx(i), 10); err != nil {
			t.Fatal(err)
		}
		giveUp := time.After(30 * time.Second)
		for j.LastOffset() < pgq.Offset(i) {
			select {
			case <-changed:
			case <-giveUp:
				close(release)
				t.Fatalf("batch %d was not written while the first hook ran", i)
			}
			changed = j.Changed()
		}
	}
	// Both wait for the publishing goroutine once handed over (right
	// after their write).
	giveUp := time.After(30 * time.Second)
	for len(c.appended) < 2 {
		select {
		case <-giveUp:
			close(release)
			t.Fatalf("%d batches handed over, want 2", len(c.appended))
		case <-time.After(time.Millisecond):
		}
	}
	if off, _ := c.Durable(); off != 0 {
		t.Fatalf("Durable = %d while the first hook runs", off)
	}
	close(release)
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	if n := markSyncs.Load(); n != 1 {
		t.Fatalf("%d marker fsyncs for the two batches that waited, want 1", n)
	}
	if !slices.Equal(markedAtHook, []pgq.Offset{1, 3}) || !slices.Equal(hooked, []pgq.Offset{1, 2, 3}) {
		t.Fatalf("marker at each hook %v, hooked offsets %v; want [1 3] and [1 2 3]", markedAtHook, hooked)
	}
}

// TestCommitterGathersMarksWhileStreaming: while a producer keeps the
// appending goroutine busy (each data fsync takes at least a millisecond
// here, and transactions arrive faster), one marker write and fsync covers
// up to markBatches batches made durable meanwhile, not one marker per batch
// (each batch paid a second flush of the disk, the marker's, before).
// Every hook still runs after a marker that covers its records, in order,
// and the last batch is marked and published once the stream stops.
func TestCommitterGathersMarksWhileStreaming(t *testing.T) {
	dir := t.TempDir()
	var markSyncs, dataSyncs atomic.Int64
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch {
		case op.Kind == errorfs.OpFileSyncData && strings.HasSuffix(op.Path, DurableFile):
			markSyncs.Add(1)
			time.Sleep(time.Millisecond) // a disk flush, as slow as the data's
		case op.Kind == errorfs.OpFileSync && filepath.Clean(op.Path) != filepath.Clean(dir) && !strings.HasSuffix(op.Path, ".sum"):
			dataSyncs.Add(1)
			time.Sleep(time.Millisecond)
		}
		return nil
	})
	_, c := committerOnFS(t, dir, inj)
	// Only markBatches bounds the wait: on a loaded machine a data fsync
	// can take longer than markDelay / markBatches.
	c.markDelay = time.Minute
	var hooked []pgq.Offset  // written by the hook goroutine, read after Close
	var written []pgq.Offset // by the same goroutine (OnWritten)
	var behind []string
	c.SetOnAppend(func(b []*Record) {
		mp, ok, err := readDurable(vfs.Default, dir)
		if last := b[len(b)-1].Tx.Offset; err != nil || !ok || mp.last < last {
			behind = append(behind, fmt.Sprintf("hook of %d..%d: marker at %d (valid %v, %v)", b[0].Tx.Offset, last, mp.last, ok, err))
		}
		for _, r := range b {
			hooked = append(hooked, r.Tx.Offset)
		}
		if len(written) < len(hooked) {
			behind = append(behind, fmt.Sprintf("OnAppend of ..%d before OnWritten saw it (written up to %d records)", b[len(b)-1].Tx.Offset, len(written)))
		}
	})
	// OnWritten sees each batch at its fsync, before any marker names it
	// (the index and the filtered readers' wake-ups must not wait for
	// the gathered marker), in order, before OnAppend.
	var late []string
	c.SetOnWritten(func(b []*Record) {
		mp, ok, err := readDurable(vfs.Default, dir)
		if last := b[len(b)-1].Tx.Offset; err != nil || (ok && mp.last >= last) {
			late = append(late, fmt.Sprintf("written hook of %d..%d: marker already at %d (%v)", b[0].Tx.Offset, last, mp.last, err))
		}
		for _, r := range b {
			written = append(written, r.Tx.Offset)
		}
	})
	ctx := t.Context()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()
	markSyncs.Store(0)
	dataSyncs.Store(0)
	// A stream, not one burst: one transaction every 100µs (a spin, as
	// sleeps that short last a millisecond or more), at least 2,000 and
	// until 20 batches were written (slow fsyncs make fewer, larger ones).
	start := time.Now()
	n := 0
	for i := 1; i <= 2000 || (dataSyncs.Load() < 20 && i <= 200_000); i++ {
		n = i
		for time.Since(start) < time.Duration(i)*100*time.Microsecond {
			runtime.Gosched()
		}
		if err := c.Submit(ctx, wantTx(i), 10); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	marks, batches := markSyncs.Load(), dataSyncs.Load()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	if len(behind) > 0 {
		t.Fatalf("hooks ran before their marker: %v", behind)
	}
	if len(late) > 0 {
		t.Fatalf("written hooks waited for the marker: %v", late)
	}
	if !slices.Equal(written, hooked) {
		t.Fatalf("written hook saw %d offsets, OnAppend %d: want the same, in order", len(written), len(hooked))
	}
	if want := slices.Collect(func(yield func(pgq.Offset) bool) {
		for o := pgq.Offset(1); o <= pgq.Offset(n); o++ {
			if !yield(o) {
				return
			}
		}
	}); !slices.Equal(hooked, want) {
		t.Fatalf("hooked offsets %v, want 1..%d in order", hooked, n)
	}
	if mp, ok, err := readDurable(vfs.Default, dir); err != nil || !ok || mp.last != pgq.Offset(n) {
		t.Fatalf("marker after the stream: %d (valid %v, %v), want %d", mp.last, ok, err, n)
	}
	t.Logf("%d transactions: %d data fsyncs, %d marker fsyncs", n, batches, marks)
	if batches < 20 || marks*2 > batches {
		t.Fatalf("%d marker fsyncs for %d data fsyncs of a stream, want at most half as many (and 20 batches at least)", marks, batches)
	}
}

// committerOnFS opens a journal in dir through errorfs with inj, closed
// at the test's end, and a Committer over it.
func committerOnFS(t *testing.T, dir string, inj errorfs.Injector) (*Journal, *Committer) {
	t.Helper()
	j, err := Open(Options{Dir: dir, FS: errorfs.Wrap(vfs.Default, inj), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j, NewCommitter(j, CommitterOptions{})
}

// TestCommitterMarksAtOnceBehindBigRecords: a small batch made durable
// while the appending goroutine writes big records (more than
// bigRecord: a backfill's chunks) is marked and handed to the
// OnAppend hook (ingest's confirmation) at once, not after the big
// records' own write and fsync: during a full-speed backfill that wait
// held the stream's confirmations up to markDelay.
func TestCommitterMarksAtOnceBehindBigRecords(t *testing.T) {
	dir := t.TempDir()
	var armed atomic.Bool
	var dataSyncs atomic.Int64
	inSync := make(chan int64, 2)
	gates := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		// A segment's fsync (the relation catalog's, before a batch that
		// introduced a relation, is not held).
		if base := filepath.Base(op.Path); armed.Load() && op.Kind == errorfs.OpFileSync && len(base) == 20 && strings.Trim(base, "0123456789") == "" {
			if n := dataSyncs.Add(1); n <= 2 {
				inSync <- n
				<-gates[n-1]
			}
		}
		return nil
	})
	_, c := committerOnFS(t, dir, inj)
	// Only the bytes ahead may end the marker's wait early: neither the
	// delay nor the batch count (2 batches here) would.
	c.markDelay = time.Minute
	ctx := t.Context()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()
	release := func() {
		for _, g := range gates {
			select {
			case <-g:
			default:
				close(g)
			}
		}
	}
	defer release()

	armed.Store(true)
	if err := c.Submit(ctx, mkTx(1, 1), 100); err != nil {
		t.Fatal(err)
	}
	<-inSync // the small batch's fsync holds
	big := mkTx(2, 1)
	big.Changes[0].New[1].Data = make([]byte, 1<<20)
	if err := c.Submit(ctx, big, 1<<20); err != nil {
		t.Fatal(err)
	}
	close(gates[0])
	if n := <-inSync; n != 2 {
		t.Fatalf("fsync %d held, want the big batch's (2)", n)
	}
	// The big batch's fsync holds: the small one must be confirmable.
	deadline := time.Now().Add(5 * time.Second)
	for off, _ := c.Durable(); off != 1; off, _ = c.Durable() {
		if off > 1 || time.Now().After(deadline) {
			t.Fatalf("Durable at %d while the big record's fsync holds, want 1 (the small batch marked at once)", off)
		}
		time.Sleep(time.Millisecond)
	}
	if mp, ok, err := readDurable(vfs.Default, dir); err != nil || !ok || mp.last != 1 {
		t.Fatalf("marker at %d (valid %v, %v) while the big record's fsync holds, want 1", mp.last, ok, err)
	}
	release()
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if off, _ := c.Durable(); off != 2 {
		t.Fatalf("Durable at %d after Flush, want 2", off)
	}
	c.mu.Lock()
	ahead := c.bigAhead
	c.mu.Unlock()
	if ahead != 0 {
		t.Fatalf("%d big records ahead of the publisher with nothing queued, want 0", ahead)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
}

// batchesBehindHeldSync runs a committer whose first segment fsync (of
// a first small record) holds while queue submits the rest, and returns
// the offsets of each batch it wrote, in order.
func batchesBehindHeldSync(t *testing.T, queue func(ctx context.Context, c *Committer)) [][]pgq.Offset {
	t.Helper()
	var armed, held atomic.Bool
	inSync := make(chan struct{}, 1)
	gate := make(chan struct{})
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if base := filepath.Base(op.Path); armed.Load() && op.Kind == errorfs.OpFileSync && len(base) == 20 && strings.Trim(base, "0123456789") == "" {
			if held.CompareAndSwap(false, true) {
				inSync <- struct{}{}
				<-gate
			}
		}
		return nil
	})
	_, c := committerOnFS(t, t.TempDir(), inj)
	var batches [][]pgq.Offset // written by the publishing goroutine, read after Close
	c.SetOnWritten(func(b []*Record) {
		var offs []pgq.Offset
		for _, r := range b {
			offs = append(offs, r.Tx.Offset)
		}
		batches = append(batches, offs)
	})
	ctx := t.Context()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(ctx) }()
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()

	armed.Store(true)
	if err := c.Submit(ctx, mkTx(1, 1), 100); err != nil {
		t.Fatal(err)
	}
	<-inSync // batch 1's fsync holds while the rest queues
	queue(ctx, c)
	close(gate)
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	return batches
}

// TestCommitterBatchBytesCap: records queued while a batch is written are
// taken in batches of at most one big record (bigRecord), so a small
// transaction queued ahead of several big records (a backfill's chunks)
// is fsynced with the first of them, not after all of them, and each big
// record after it gets an fsync of its own. Order stays the submit order.
func TestCommitterBatchBytesCap(t *testing.T) {
	batches := batchesBehindHeldSync(t, func(ctx context.Context, c *Committer) {
		const bigBytes = 600 << 10
		for i := 2; i <= 5; i++ {
			tx, size := mkTx(i, 1), 100
			if i > 2 {
				tx.Changes[0].New[1].Data = make([]byte, bigBytes)
				size = bigBytes
			}
			if err := c.Submit(ctx, tx, size); err != nil {
				t.Fatal(err)
			}
		}
	})
	// 2 (small) goes with 3 (600 KiB, big); 4 and 5 are big too.
	want := [][]pgq.Offset{{1}, {2, 3}, {4}, {5}}
	if !slices.EqualFunc(batches, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", batches, want)
	}
}

// TestCommitterSmallRecordsNotSplit: small records queued while a batch
// is written go out as one batch however many bytes they add up to (a
// drain of small transactions keeps its group commits).
func TestCommitterSmallRecordsNotSplit(t *testing.T) {
	const n, each = 40, bigRecord / 4 // 2.5 MiB in all, each small
	batches := batchesBehindHeldSync(t, func(ctx context.Context, c *Committer) {
		for i := 2; i <= n+1; i++ {
			if err := c.Submit(ctx, mkTx(i, 1), each); err != nil {
				t.Fatal(err)
			}
		}
	})
	var sizes []int
	for _, b := range batches {
		sizes = append(sizes, len(b))
	}
	if want := []int{1, n}; !slices.Equal(sizes, want) {
		t.Fatalf("batches of %v records, want %v", sizes, want)
	}
}
