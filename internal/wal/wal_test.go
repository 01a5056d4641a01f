package wal

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	upstream "github.com/tidwall/wal"
)

func entry(i uint64) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("entry-%d;", i)), int(i%7)+1)
}

// fileSet returns the name and contents of every file in dir.
func fileSet(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}

// writer is the part of both libraries' Log the workload uses.
type writer interface {
	WriteBatch(index uint64, datas [][]byte) error
	TruncateFront(uint64) error
	TruncateBack(uint64) error
	Close() error
}

type forkW struct{ l *Log }

// WriteBatch adds every other entry by reference (WriteRef), so that the
// format comparison covers both ways into a batch.
func (w forkW) WriteBatch(index uint64, datas [][]byte) error {
	var b Batch
	for i, d := range datas {
		if (index+uint64(i))%2 == 0 {
			b.WriteRef(index+uint64(i), d)
		} else {
			b.Write(index+uint64(i), d)
		}
	}
	return w.l.WriteBatch(&b)
}
func (w forkW) TruncateFront(i uint64) error { return w.l.TruncateFront(i) }
func (w forkW) TruncateBack(i uint64) error  { return w.l.TruncateBack(i) }
func (w forkW) Close() error                 { return w.l.Close() }

type upW struct{ l *upstream.Log }

func (w upW) WriteBatch(index uint64, datas [][]byte) error {
	var b upstream.Batch
	for i, d := range datas {
		b.Write(index+uint64(i), d)
	}
	return w.l.WriteBatch(&b)
}
func (w upW) TruncateFront(i uint64) error { return w.l.TruncateFront(i) }
func (w upW) TruncateBack(i uint64) error  { return w.l.TruncateBack(i) }
func (w upW) Close() error                 { return w.l.Close() }

// workload writes entries 1..300 in batches (segments of 512 bytes roll
// often), truncates the front to 40 and the back to 280, and returns the
// range kept.
func workload(t *testing.T, w writer) (first, last uint64) {
	t.Helper()
	next := uint64(1)
	for next <= 300 {
		n := min(next%5+1, 301-next)
		var datas [][]byte
		for i := range n {
			datas = append(datas, entry(next+i))
		}
		if err := w.WriteBatch(next, datas); err != nil {
			t.Fatal(err)
		}
		next += n
	}
	if err := w.TruncateFront(40); err != nil {
		t.Fatal(err)
	}
	if err := w.TruncateBack(280); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return 40, 280
}

type reader interface {
	Read(uint64) ([]byte, error)
	FirstIndex() (uint64, error)
	LastIndex() (uint64, error)
	Close() error
}

func checkRead(t *testing.T, r reader, first, last uint64) {
	t.Helper()
	f, err1 := r.FirstIndex()
	l, err2 := r.LastIndex()
	if err := errors.Join(err1, err2); err != nil || f != first || l != last {
		t.Fatalf("range %d..%d (%v), want %d..%d", f, l, err, first, last)
	}
	for i := first; i <= last; i++ {
		got, err := r.Read(i)
		if err != nil || !bytes.Equal(got, entry(i)) {
			t.Fatalf("entry %d: %q, %v", i, got, err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFormatCompatibility writes the same workload with the fork and with
// tidwall/wal v1.2.1: the files are byte-identical, and each library reads
// (and appends to) what the other wrote.
func TestFormatCompatibility(t *testing.T) {
	forkDir, upDir := t.TempDir(), t.TempDir()
	l, err := Open(forkDir, &Options{SegmentSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	first, last := workload(t, forkW{l})
	u, err := upstream.Open(upDir, &upstream.Options{SegmentSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	workload(t, upW{u})

	fa, fb := fileSet(t, forkDir), fileSet(t, upDir)
	if len(fa) < 5 {
		t.Fatalf("only %d segment files; the workload should roll more", len(fa))
	}
	for name, b := range fb {
		if !bytes.Equal(fa[name], b) {
			t.Errorf("file %s differs: fork %d bytes, tidwall/wal %d bytes", name, len(fa[name]), len(b))
		}
	}
	if len(fa) != len(fb) {
		t.Errorf("fork wrote %d files, tidwall/wal %d", len(fa), len(fb))
	}

	// Fork writes, tidwall/wal reads.
	u, err = upstream.Open(forkDir, &upstream.Options{SegmentSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, u, first, last)
	// tidwall/wal writes, fork reads, appends, and tidwall/wal reads again.
	l, err = Open(upDir, &Options{SegmentSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	for i := last + 1; i <= last+30; i++ {
		b.Write(i, entry(i))
	}
	if err := l.WriteBatch(&b); err != nil {
		t.Fatal(err)
	}
	checkRead(t, l, first, last+30)
	u, err = upstream.Open(upDir, &upstream.Options{SegmentSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, u, first, last+30)
}

// TestInterruptedTruncateCompat: a START file left by tidwall/wal (as if it
// crashed mid-TruncateFront) is finished by the fork's Open.
func TestInterruptedTruncateCompat(t *testing.T) {
	fs := vfs.NewMem()
	l, err := Open("/w", &Options{FS: fs, SegmentSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	for i := uint64(1); i <= 50; i++ {
		b.Write(i, entry(i))
	}
	if err := l.WriteBatch(&b); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Simulate: START written for index 20, old files not yet removed.
	l, err = Open("/w", &Options{FS: fs, SegmentSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.loadSegment(20)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.atomicWrite(l.join(segmentName(20)+".START"), s.pieces(nil, s.epos[20-s.index].pos, s.size())); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open("/w", &Options{FS: fs, SegmentSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, l, 20, 50)
}

// TestConcurrentReads reads sealed segments from many goroutines with a
// one-segment cache: with -race this is tidwall/wal#34.
func TestConcurrentReads(t *testing.T) {
	l, err := Open(t.TempDir(), &Options{SegmentSize: 256, SegmentCacheSize: 1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var b Batch
	for i := uint64(1); i <= 400; i++ {
		b.Write(i, entry(i))
	}
	if err := l.WriteBatch(&b); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for k := range 2000 {
				i := uint64((k*37+g*101)%400 + 1)
				got, err := l.Read(i)
				if err != nil || !bytes.Equal(got, entry(i)) {
					t.Errorf("read %d: %q, %v", i, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestReadsWhileTailBuffersRecycle reads old entries from many goroutines
// while a writer appends and cycles segments, with a one-segment cache:
// the buffer of each segment the cache evicts becomes a later tail's, so
// a reader still reading from it would see new entries (and -race would
// see the writer). Every read must return its own entry.
func TestReadsWhileTailBuffersRecycle(t *testing.T) {
	l, err := Open(t.TempDir(), &Options{SegmentSize: 512, SegmentCacheSize: 1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const total = 3000
	var written atomic.Uint64
	var wg sync.WaitGroup
	wg.Go(func() { writeAll(t, l, total, 7, entry, &written) })
	for g := range 4 {
		wg.Go(func() {
			for k := 0; written.Load() < total; k++ {
				last := written.Load()
				if last == 0 {
					continue
				}
				i := uint64((k*131+g*17))%last + 1
				got, err := l.Read(i)
				if err != nil || !bytes.Equal(got, entry(i)) {
					t.Errorf("read %d (of %d written): %q, %v", i, last, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(l.segments) < 3 {
		t.Fatalf("only %d segments: nothing was evicted and recycled", len(l.segments))
	}
	checkRead(t, l, 1, total)
}

// writeAll writes entries 1..total of entry to l, a batch of every entries
// at a time, and stores the last index written in written after each
// batch: the writer of the tests that read while it writes.
func writeAll(t *testing.T, l *Log, total, every uint64, entry func(uint64) []byte, written *atomic.Uint64) {
	var b Batch
	for i := uint64(1); i <= total; i++ {
		b.Write(i, entry(i))
		if i%every == 0 || i == total {
			if err := l.WriteBatch(&b); err != nil {
				t.Error(err)
				return
			}
			written.Store(i)
		}
	}
}

// TestFailStop: after a failed fsync every write is refused with
// ErrFailed and the cause, reads of earlier entries work, Close does not
// fsync again, and a reopened log holds exactly what was acknowledged.
func TestFailStop(t *testing.T) {
	for _, op := range []errorfs.OpKind{errorfs.OpFileSync, errorfs.OpFileWrite, errorfs.OpCreate, errorfs.OpOpenDir} {
		t.Run(fmt.Sprint(op), func(t *testing.T) {
			mem := vfs.NewMem()
			var armed bool
			syncs := 0
			inj := errorfs.InjectorFunc(func(o errorfs.Op) error {
				if armed && o.Kind == op {
					return syscall.ENOSPC
				}
				return nil
			})
			l, err := Open("/w", &Options{FS: errorfs.Wrap(mem, inj), SegmentSize: 128,
				OnSync: func(string, time.Duration) { syncs++ }})
			if err != nil {
				t.Fatal(err)
			}
			var b Batch
			next := uint64(1)
			write := func() error {
				b.Clear()
				for range 3 {
					b.Write(next, entry(next))
					next++
				}
				err := l.WriteBatch(&b)
				if err != nil {
					next -= 3
				}
				return err
			}
			for range 5 {
				if err := write(); err != nil {
					t.Fatal(err)
				}
			}
			if syncs < 6 {
				t.Fatalf("OnSync called %d times for 5 batches and a new log", syncs)
			}
			acked := next - 1
			armed = true
			var failErr error
			for range 10 { // a cycle (create, dir sync) comes within a few batches
				if failErr = write(); failErr != nil {
					break
				}
				acked = next - 1
			}
			if !errors.Is(failErr, ErrFailed) || !errors.Is(failErr, syscall.ENOSPC) {
				t.Fatalf("write: %v, want ErrFailed and ENOSPC", failErr)
			}
			armed = false
			if err := write(); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("write after failure: %v, want ErrFailed and ENOSPC", err)
			}
			if err := l.TruncateFront(2); !errors.Is(err, ErrFailed) {
				t.Fatalf("truncate after failure: %v", err)
			}
			for i := uint64(1); i <= acked; i++ {
				if got, err := l.Read(i); err != nil || !bytes.Equal(got, entry(i)) {
					t.Fatalf("read %d after failure: %q, %v", i, got, err)
				}
			}
			_ = l.Close()
			l, err = Open("/w", &Options{FS: mem, SegmentSize: 128})
			if err != nil {
				t.Fatal(err)
			}
			last, _ := l.LastIndex()
			if last < acked {
				t.Fatalf("reopened log ends at %d, %d were acknowledged", last, acked)
			}
			checkRead(t, l, 1, last)
		})
	}
}

// TestReadDuringFsync: while a WriteBatch's fsync is in flight, reads of
// earlier entries answer (they do not wait for the disk), and the batch
// is acknowledged once the fsync ends.
func TestReadDuringFsync(t *testing.T) {
	mem := vfs.NewMem()
	var armed sync.Mutex // held: the next fsync blocks until released
	inSync := make(chan struct{}, 1)
	blocking := false
	var bmu sync.Mutex // guards blocking
	inj := errorfs.InjectorFunc(func(o errorfs.Op) error {
		bmu.Lock()
		b := blocking
		bmu.Unlock()
		if b && o.Kind == errorfs.OpFileSync {
			inSync <- struct{}{}
			armed.Lock() // wait for the test to release the fsync
			armed.Unlock()
		}
		return nil
	})
	l, err := Open("/w", &Options{FS: errorfs.Wrap(mem, inj)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var b Batch
	for i := uint64(1); i <= 10; i++ {
		b.Write(i, entry(i))
	}
	if err := l.WriteBatch(&b); err != nil {
		t.Fatal(err)
	}

	armed.Lock()
	var once sync.Once
	release := func() { once.Do(armed.Unlock) }
	defer release() // a failure below must not leave the writer stuck
	bmu.Lock()
	blocking = true
	bmu.Unlock()
	written := make(chan error, 1)
	go func() {
		var b Batch
		b.Write(11, entry(11))
		written <- l.WriteBatch(&b)
	}()
	<-inSync // the fsync of entry 11 is in flight
	bmu.Lock()
	blocking = false
	bmu.Unlock()
	read := make(chan error, 1)
	go func() {
		for i := uint64(1); i <= 10; i++ {
			got, err := l.Read(i)
			if err == nil && !bytes.Equal(got, entry(i)) {
				err = fmt.Errorf("read %d: %q", i, got)
			}
			if err != nil {
				read <- err
				return
			}
		}
		read <- nil
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-written:
		t.Fatalf("WriteBatch returned (%v) while its fsync was held", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Read waited for the fsync in flight")
	}
	select {
	case err := <-written:
		t.Fatalf("WriteBatch returned (%v) before its fsync ended", err)
	default:
	}
	release()
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if got, err := l.Read(11); err != nil || !bytes.Equal(got, entry(11)) {
		t.Fatalf("read 11: %q, %v", got, err)
	}
}

// BenchmarkWriteBatchLargeEntries appends 1.7 MB entries (a 10,000-row
// backfill chunk, a part of a big transaction) to 16 MiB segments without
// fsync: what the tail segment's in-memory buffer costs per entry.
func BenchmarkWriteBatchLargeEntries(b *testing.B) {
	l, err := Open(b.TempDir(), &Options{NoSync: true, SegmentSize: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	entry := make([]byte, 1700<<10)
	var batch Batch
	b.SetBytes(int64(len(entry)))
	b.ReportAllocs()
	for i := uint64(1); b.Loop(); i++ {
		batch.Write(i, entry)
		if err := l.WriteBatch(&batch); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTailKeepsBlocks: the tail segment holds what was written to it in
// blocks that never move (nothing written is copied again as the segment
// grows, and a fresh log does not take a segment's worth for its first
// entry), entries that span blocks (headers included) read back whole
// from the tail, the cache and the file, and the blocks of an evicted
// segment serve the next tail.
func TestTailKeepsBlocks(t *testing.T) {
	const seg = 4 << 20
	dir := filepath.Join(t.TempDir(), "w")
	l, err := Open(dir, &Options{SegmentSize: seg, SegmentCacheSize: 1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	l.bigEntry = math.MaxInt // every entry through the blocks (TestBigEntries: the others)
	// Sizes that put entry boundaries and headers across block bounds.
	sizes := []int{10, tailBlock - 12, 300, tailBlock + 5, 1, 2*tailBlock + 7, 70, tailBlock/2 - 3}
	entry := func(i uint64) []byte {
		return bytes.Repeat([]byte{byte(i), byte(i >> 8), 'x'}, sizes[int(i)%len(sizes)]/3+1)
	}
	var b Batch
	b.Write(1, entry(1))
	if err := l.WriteBatch(&b); err != nil {
		t.Fatal(err)
	}
	if s := l.segments[0]; len(s.blocks) != 1 || cap(s.blocks[0]) != tailBlock {
		t.Fatalf("after one small entry the tail holds %d blocks, want 1 of %d bytes", len(s.blocks), tailBlock)
	}
	first := &l.segments[0].blocks[0][:1][0]
	var sealed []*byte // first bytes of the first segment's blocks
	idx := uint64(2)
	for len(l.segments) < 4 {
		if len(l.segments) == 1 {
			if p := &l.segments[0].blocks[0][:1][0]; p != first {
				t.Fatalf("entry %d: the tail's first block moved", idx)
			}
		}
		// two entries per batch: one write covers several blocks
		b.Write(idx, entry(idx))
		b.Write(idx+1, entry(idx+1))
		idx += 2
		if err := l.WriteBatch(&b); err != nil {
			t.Fatal(err)
		}
		if blocks := l.segments[0].blocks; blocks != nil {
			sealed = sealed[:0]
			for _, blk := range blocks {
				sealed = append(sealed, &blk[:1][0])
			}
		}
		tail := l.segments[len(l.segments)-1]
		if want := (tail.size() + tailBlock - 1) / tailBlock; len(tail.blocks) != want {
			t.Fatalf("tail of %d bytes in %d blocks, want %d", tail.size(), len(tail.blocks), want)
		}
	}
	// The third segment started after the first was evicted from the
	// one-segment cache: it writes into the first's blocks.
	b.Write(idx, entry(idx))
	idx++
	if err := l.WriteBatch(&b); err != nil {
		t.Fatal(err)
	}
	if p := &l.segments[2].blocks[0][:1][0]; !slices.Contains(sealed, p) {
		t.Fatal("the tail after an eviction took a new block, not one of the evicted segment's")
	}
	check := func(l *Log, when string) {
		t.Helper()
		for i := uint64(1); i < idx; i++ {
			got, err := l.Read(i)
			if err != nil {
				t.Fatalf("%s: read %d: %v", when, i, err)
			}
			if !bytes.Equal(got, entry(i)) {
				t.Fatalf("%s: entry %d: %d bytes differ from the %d written", when, i, len(got), len(entry(i)))
			}
		}
	}
	check(l, "open")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, &Options{SegmentSize: seg, SegmentCacheSize: 1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	l.bigEntry = math.MaxInt
	check(l, "reopened")
	// Appending after a reopen adds blocks after the tail read from its file.
	b.Write(idx, entry(idx))
	idx++
	if err := l.WriteBatch(&b); err != nil {
		t.Fatal(err)
	}
	check(l, "appended after reopen")
}
