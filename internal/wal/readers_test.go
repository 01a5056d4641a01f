package wal

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// countFS counts the files opened through it (opens) and those open now
// (open): the seam the log's every file goes through.
type countFS struct {
	vfs.FS
	opens, open atomic.Int64
}

func (fs *countFS) track(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	fs.opens.Add(1)
	fs.open.Add(1)
	return &countFile{File: f, fs: fs}, nil
}

func (fs *countFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.track(fs.FS.Create(name, c))
}

func (fs *countFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.track(fs.FS.Open(name, opts...))
}

func (fs *countFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.track(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs *countFS) OpenDir(name string) (vfs.File, error) { return fs.track(fs.FS.OpenDir(name)) }

func (fs *countFS) Unwrap() vfs.FS { return fs.FS }

type countFile struct {
	vfs.File
	fs     *countFS
	closed atomic.Bool
}

func (f *countFile) Close() error {
	if !f.closed.Swap(true) {
		f.fs.open.Add(-1)
	}
	return f.File.Close()
}

// isBig reports whether bigMix(i) is kept only in the file.
func isBig(i uint64) bool { return len(bigMix(i)) >= bigEntry }

// readBigOnly reads the big entries of from..to (each read goes to the
// file) and checks them.
func readBigOnly(t *testing.T, l *Log, from, to uint64, when string) {
	t.Helper()
	for i := from; i <= to; i++ {
		if isBig(i) {
			readBig(t, l, i, i, when)
		}
	}
}

// TestBigEntryReaders: the reads of a segment's big entries share one
// handle, opened by the first and kept while the segment keeps its big
// entries: reading them again opens no file. The handles are closed when
// the cache evicts their segment, by TruncateFront (retention) and
// TruncateBack, and by Close, after which no file of the log is open.
func TestBigEntryReaders(t *testing.T) {
	fs := &countFS{FS: vfs.Default}
	l, err := Open(filepath.Join(t.TempDir(), "w"), &Options{FS: fs, SegmentSize: bigSeg, SegmentCacheSize: 1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	want := func(n int64, when string) {
		t.Helper()
		if got := fs.open.Load(); got != n {
			t.Fatalf("%s: %d files open, want %d", when, got, n)
		}
	}
	var b Batch
	for i := uint64(1); i <= 25; i++ { // sealed 1..9, 10..19 (cached), tail 20..25
		b.Write(i, bigMix(i))
	}
	if err := l.WriteBatch(&b); err != nil {
		t.Fatal(err)
	}
	want(1, "written") // the tail's file
	readBigOnly(t, l, 10, 25, "cached and tail")
	want(3, "read the cached segment's and the tail's big entries")
	opens := fs.opens.Load()
	readBigOnly(t, l, 10, 25, "again")
	if n := fs.opens.Load() - opens; n != 0 {
		t.Fatalf("reading the big entries again opened %d files", n)
	}
	readBig(t, l, 1, 1, "evicting the cached segment") // loads 1..9 whole
	want(2, "the cache evicted the segment of 10..19")

	if err := l.TruncateFront(12); err != nil { // removes 1..9, rewrites 10..19
		t.Fatal(err)
	}
	want(1, "TruncateFront")
	readBig(t, l, 12, 25, "after TruncateFront")
	want(2, "read the tail's big entries again")

	if err := l.TruncateBack(23); err != nil { // rewrites the tail
		t.Fatal(err)
	}
	want(1, "TruncateBack")
	b.Clear()
	for i := uint64(24); i <= 45; i++ { // seals 20..29 and 30..39
		b.Write(i, bigMix(i))
	}
	if err := l.WriteBatch(&b); err != nil {
		t.Fatal(err)
	}
	readBig(t, l, 12, 45, "after TruncateBack and more writes")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	want(0, "Close")
}

// TestBigEntryReadersConcurrent: readers of random entries, big ones
// through the segments' shared handles, beside a writer that cycles
// segments and a retention that truncates the front: with -race, every
// read returns its entry or ErrNotFound for a removed one, and after
// Close no file is open.
func TestBigEntryReadersConcurrent(t *testing.T) {
	total := uint64(60)
	if raceEnabled {
		total = 40
	}
	want := make([][]byte, total+1)
	for i := range want {
		want[i] = bigMix(uint64(i))
	}
	fs := &countFS{FS: vfs.Default}
	l, err := Open(filepath.Join(t.TempDir(), "w"), &Options{FS: fs, SegmentSize: bigSeg, SegmentCacheSize: 1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var written atomic.Uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		writeAll(t, l, total, 3, func(i uint64) []byte { return want[i] }, &written)
	})
	wg.Go(func() { // retention: a cut every few segments' worth
		for cut := uint64(8); cut < total; cut += 13 {
			for written.Load() < cut+5 {
				if t.Failed() {
					return
				}
				runtime.Gosched()
			}
			if err := l.TruncateFront(cut); err != nil {
				t.Errorf("TruncateFront(%d): %v", cut, err)
				return
			}
		}
	})
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			for written.Load() < total && !t.Failed() {
				last := written.Load()
				if last == 0 {
					continue
				}
				i := 1 + uint64(rng.IntN(int(last)))
				got, err := l.Read(i)
				if errors.Is(err, ErrNotFound) {
					continue // truncated
				}
				if err != nil || string(got) != string(want[i]) {
					t.Errorf("read %d (of %d written): %d bytes, %v", i, last, len(got), err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fs.open.Load(); n != 0 {
		t.Fatalf("%d files open after Close", n)
	}
}
