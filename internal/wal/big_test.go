package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	upstream "github.com/tidwall/wal"
)

// bigSizes puts entries written to the file only (bigEntry and more, up
// to two blocks) between small ones, and one a byte below the threshold.
var bigSizes = []int{100, 3000, bigEntry, 200 << 10, 1_200_000, 70, bigEntry - 1, 300 << 10, 5, 2*tailBlock + 3}

// bigPattern is the bytes entries of bigMix are cut from: made once, so
// that making an entry is one copy (byte loops are slow under -race).
var bigPattern = sync.OnceValue(func() []byte {
	b := make([]byte, 2*tailBlock+3+1<<16)
	rand.NewChaCha8([32]byte{'p', 'g', 'q'}).Read(b)
	return b
})

// bigMix returns entry i of the big-entry tests: its size from bigSizes,
// its bytes depending on i (cut from bigPattern at a place of its own,
// its index in the first bytes), so that a read of another entry or of
// the wrong bytes shows.
func bigMix(i uint64) []byte {
	n := bigSizes[int(i)%len(bigSizes)]
	off := int(i*7919) % (1 << 16)
	b := append([]byte(nil), bigPattern()[off:off+n]...)
	copy(b, binary.LittleEndian.AppendUint64(nil, i))
	return b
}

// bigSeg is the segment size of the big-entry tests: entries 1..9 fill
// the first segment, 10..19 the second, 20..29 the third.
const bigSeg = 3 << 20

// bigWriter writes the same batches to the fork and to tidwall/wal
// v1.2.1, for the files to be compared.
type bigWriter struct {
	t    *testing.T
	l    *Log
	up   *upstream.Log
	next uint64
}

// openBig opens a fork's log in dir with opts and a tidwall/wal log in
// upDir, both to write from entry 1.
func openBig(t *testing.T, dir, upDir string, opts *Options) *bigWriter {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	up, err := upstream.Open(upDir, &upstream.Options{SegmentSize: opts.SegmentSize, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return &bigWriter{t: t, l: l, up: up, next: 1}
}

// write adds entries next..next+n-1 to both logs, every other one by
// reference.
func (w *bigWriter) write(n int) {
	w.t.Helper()
	var b Batch
	var ub upstream.Batch
	for i := w.next; i < w.next+uint64(n); i++ {
		if i%2 == 0 {
			b.WriteRef(i, bigMix(i))
		} else {
			b.Write(i, bigMix(i))
		}
		ub.Write(i, bigMix(i))
	}
	if err := w.l.WriteBatch(&b); err != nil {
		w.t.Fatal(err)
	}
	if err := w.up.WriteBatch(&ub); err != nil {
		w.t.Fatal(err)
	}
	w.next += uint64(n)
}

// readBig reads entries from..to of l and compares them with bigMix.
func readBig(t *testing.T, l *Log, from, to uint64, when string) {
	t.Helper()
	for i := from; i <= to; i++ {
		got, err := l.Read(i)
		if err != nil {
			t.Fatalf("%s: read %d: %v", when, i, err)
		}
		if !bytes.Equal(got, bigMix(i)) {
			t.Fatalf("%s: entry %d: %d bytes differ from the %d written", when, i, len(got), len(bigMix(i)))
		}
	}
}

// encLen returns the bytes an entry of n bytes takes in a segment file.
func encLen(n int) int { return len(binary.AppendUvarint(nil, uint64(n))) + n }

// sameFiles fails unless dirs a and b hold the same files, byte for byte.
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	fa, fb := fileSet(t, a), fileSet(t, b)
	for name, data := range fb {
		if !bytes.Equal(fa[name], data) {
			t.Errorf("file %s differs: fork %d bytes, tidwall/wal %d bytes", name, len(fa[name]), len(data))
		}
	}
	if len(fa) != len(fb) {
		t.Errorf("fork wrote %d files, tidwall/wal %d", len(fa), len(fb))
	}
}

type sealInfo struct {
	path string
	size int64
	crc  uint32
}

// checkSeals compares what OnSeal received with each sealed file's bytes.
func checkSeals(t *testing.T, seals []sealInfo) {
	t.Helper()
	for _, s := range seals {
		data, err := os.ReadFile(s.path)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != s.size || crc32.Checksum(data, castagnoli) != s.crc {
			t.Fatalf("OnSeal(%s) got %d bytes, CRC %08x; the file has %d, %08x",
				filepath.Base(s.path), s.size, s.crc, len(data), crc32.Checksum(data, castagnoli))
		}
	}
}

// TestBigEntries writes small and big entries mixed, across segment
// cycles, with fsync: the tail keeps only the small ones in memory, every
// entry reads back from the tail, from the sealed segment the cache holds
// (its big entries still in the file only) and from evicted segments
// loaded again, before and after a reopen and after appending to the
// reopened tail; OnSeal gets each sealed file's length and CRC32C; and
// the files are byte-identical to tidwall/wal's for the same batches.
func TestBigEntries(t *testing.T) {
	dir, upDir := filepath.Join(t.TempDir(), "w"), t.TempDir()
	var seals []sealInfo
	opts := &Options{SegmentSize: bigSeg, SegmentCacheSize: 1, OnSeal: func(p string, n int64, crc uint32) error {
		seals = append(seals, sealInfo{p, n, crc})
		return nil
	}}
	w := openBig(t, dir, upDir, opts)
	l, up := w.l, w.up
	var err error
	cachedGaps := 0
	for w.next <= 45 {
		w.write(1 + int(w.next%3))
		// The tail holds its small entries only.
		tail := l.segments[len(l.segments)-1]
		small := 0
		for i := tail.index; i < w.next; i++ {
			if n := len(bigMix(i)); n < bigEntry {
				small += encLen(n)
			}
		}
		if tail.memSize() != small {
			t.Fatalf("after entry %d the tail keeps %d bytes in memory, its small entries take %d", w.next-1, tail.memSize(), small)
		}
		// The tail and the sealed segment the cache holds, as written.
		from := tail.index
		if k := len(l.segments); k > 1 {
			if prev := l.segments[k-2]; len(prev.gaps) > 0 {
				cachedGaps++
				from = prev.index
			}
		}
		readBig(t, l, from, w.next-1, "tail and cached segment")
	}
	if cachedGaps == 0 || len(l.segments) < 5 {
		t.Fatalf("%d segments, %d reads of a cached sealed segment with big entries: the test covers less than it says", len(l.segments), cachedGaps)
	}
	readBig(t, l, 1, w.next-1, "written") // evicted segments load from their files
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	w.l = l
	readBig(t, l, 1, w.next-1, "reopened")
	// Appending to the tail read from its file, to beyond two more seals:
	// its checksum starts from the bytes read.
	segs := len(l.segments)
	for len(l.segments) < segs+2 {
		w.write(2)
	}
	readBig(t, l, 1, w.next-1, "appended after reopen")
	if err := errors.Join(l.Close(), up.Close()); err != nil {
		t.Fatal(err)
	}
	if len(seals) != len(l.segments)-1 {
		t.Fatalf("OnSeal called %d times for %d sealed segments", len(seals), len(l.segments)-1)
	}
	checkSeals(t, seals)
	sameFiles(t, dir, upDir)
}

// TestBigEntryTruncate cuts logs of small and big entries before, at and
// after big entries, in the tail and in the cached sealed segment that
// still has its big entries in the file only: what is kept reads back
// (the truncation's new files take the big entries from the file),
// appending goes on, a reopen reads the same, and the files are
// tidwall/wal's for the same operations.
func TestBigEntryTruncate(t *testing.T) {
	// Entries 1..25: segments 1..9, 10..19 (cached after the cycle) and
	// the tail 20..25, big ones at 22 and 24 (12, 14, 17, 19 before).
	cases := []struct {
		name  string
		front bool
		at    uint64
	}{
		{"back/tail after big", false, 22},
		{"back/tail before big", false, 21},
		{"back/tail small after big", false, 24},
		{"back/sealed after big", false, 17},
		{"back/sealed at big", false, 12},
		{"front/tail at big", true, 22},
		{"front/tail after big", true, 23},
		{"front/sealed at big", true, 14},
		{"front/sealed before big", true, 13},
	}
	if raceEnabled {
		// Nothing runs concurrently here, and -race makes copying the
		// entries slow: one case in the tail, one in the cached segment.
		cases = append(cases[:1:1], cases[3])
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, upDir := filepath.Join(t.TempDir(), "w"), t.TempDir()
			opts := &Options{SegmentSize: bigSeg, SegmentCacheSize: 1}
			w := openBig(t, dir, upDir, opts)
			l, up := w.l, w.up
			var err error
			for w.next <= 25 {
				w.write(min(3, 26-int(w.next)))
			}
			if n := len(l.segments); n != 3 || l.segments[1].gaps == nil {
				t.Fatalf("%d segments, the second with gaps %v: not the layout the cases name", n, l.segments[1].gaps)
			}
			first, last := uint64(1), uint64(25)
			if c.front {
				err, first = l.TruncateFront(c.at), c.at
				if uerr := up.TruncateFront(c.at); uerr != nil {
					t.Fatal(uerr)
				}
			} else {
				err, last = l.TruncateBack(c.at), c.at
				if uerr := up.TruncateBack(c.at); uerr != nil {
					t.Fatal(uerr)
				}
				w.next = c.at + 1
			}
			if err != nil {
				t.Fatal(err)
			}
			readBig(t, l, first, last, "truncated")
			if _, err := l.Read(first - 1); !errors.Is(err, ErrNotFound) {
				t.Fatalf("read %d before the first: %v", first-1, err)
			}
			if _, err := l.Read(last + 1); !errors.Is(err, ErrNotFound) {
				t.Fatalf("read %d after the last: %v", last+1, err)
			}
			_, size := l.Tail()
			if fi, err := os.Stat(l.segments[len(l.segments)-1].path); err != nil || fi.Size() != size {
				t.Fatalf("Tail says %d bytes, the file %v (%v)", size, fi, err)
			}
			w.write(3)
			readBig(t, l, first, w.next-1, "appended after the truncation")
			if err := errors.Join(l.Close(), up.Close()); err != nil {
				t.Fatal(err)
			}
			if l, err = Open(dir, opts); err != nil {
				t.Fatal(err)
			}
			readBig(t, l, first, w.next-1, "reopened")
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			sameFiles(t, dir, upDir)
		})
	}
}

// TestBigEntryWriteFault fails, in turn, each file write of a batch of a
// small, a big and a small entry (the small one before, the big one's
// header, its data, the small one after): the log fails (ErrFailed and
// the cause, later writes refused), every entry written before reads
// back, big ones included, the batch's entries are not found, and the
// file holds nothing past the failed write.
func TestBigEntryWriteFault(t *testing.T) {
	for k := 1; k <= 4; k++ {
		t.Run(fmt.Sprintf("write%d", k), func(t *testing.T) {
			mem := vfs.NewMem()
			var armed bool
			writes := 0
			inj := errorfs.InjectorFunc(func(o errorfs.Op) error {
				if armed && o.Kind == errorfs.OpFileWrite {
					if writes++; writes == k {
						return syscall.ENOSPC
					}
				}
				return nil
			})
			l, err := Open("/w", &Options{FS: errorfs.Wrap(mem, inj), SegmentSize: bigSeg})
			if err != nil {
				t.Fatal(err)
			}
			var b Batch
			for i := uint64(1); i <= 5; i++ { // a big one (2) and small ones
				b.Write(i, bigMix(i))
			}
			if err := l.WriteBatch(&b); err != nil {
				t.Fatal(err)
			}
			_, acked := l.Tail()
			armed = true
			b.Write(6, bigMix(10)) // small
			b.WriteRef(7, bigMix(12))
			b.Write(8, bigMix(11))
			err = l.WriteBatch(&b)
			armed = false
			if writes < k {
				t.Fatalf("the batch made %d writes, not %d", writes, k)
			}
			if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("write: %v, want ErrFailed and ENOSPC", err)
			}
			b.Clear()
			b.Write(6, bigMix(10))
			if err := l.WriteBatch(&b); !errors.Is(err, ErrFailed) {
				t.Fatalf("write after failure: %v", err)
			}
			readBig(t, l, 1, 5, "after the failure")
			for i := uint64(6); i <= 8; i++ {
				if _, err := l.Read(i); !errors.Is(err, ErrNotFound) {
					t.Fatalf("read %d of the failed batch: %v", i, err)
				}
			}
			_ = l.Close()
			fi, err := mem.Stat("/w/" + segmentName(1))
			if err != nil {
				t.Fatal(err)
			}
			// What reached the file: the entries before, then the failed
			// batch's writes up to the failed one.
			want := acked
			for _, n := range []int{encLen(len(bigMix(10))), encLen(len(bigMix(12))) - len(bigMix(12)), len(bigMix(12))}[:k-1] {
				want += int64(n)
			}
			if fi.Size() != want {
				t.Fatalf("the file has %d bytes, want %d (acknowledged %d and %d writes)", fi.Size(), want, acked, k-1)
			}
		})
	}
}

// TestBigEntryReadFault fails the file reads of big entries, in the tail
// and in the cached sealed segment: Read returns the error (nothing
// panics), small entries still read from memory, and once the fault is
// gone the same entries read back. A sealed file cut short under the log
// makes the read of its big entry fail too.
func TestBigEntryReadFault(t *testing.T) {
	var armed atomic.Bool
	inj := errorfs.InjectorFunc(func(o errorfs.Op) error {
		if armed.Load() && o.Kind == errorfs.OpFileReadAt {
			return syscall.EIO
		}
		return nil
	})
	dir := filepath.Join(t.TempDir(), "w")
	l, err := Open(dir, &Options{FS: errorfs.Wrap(vfs.Default, inj), SegmentSize: bigSeg, SegmentCacheSize: 1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var b Batch
	for i := uint64(1); i <= 14; i++ { // sealed 1..9 (cached), tail 10..14
		b.Write(i, bigMix(i))
	}
	if err := l.WriteBatch(&b); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	for _, i := range []uint64{2, 4, 12, 14} {
		if got, err := l.Read(i); !errors.Is(err, syscall.EIO) || got != nil {
			t.Fatalf("read of big entry %d with failing reads: %d bytes, %v", i, len(got), err)
		}
	}
	readBig(t, l, 10, 11, "small tail entries with failing reads")
	readBig(t, l, 5, 6, "small cached entries with failing reads")
	armed.Store(false)
	readBig(t, l, 1, 14, "after the fault")
	// Entry 7 (300 KiB, file only) ends the first segment's third
	// megabyte: cut the file inside it.
	if err := os.Truncate(l.segments[0].path, int64(l.segments[0].epos[6].end)-1000); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Read(7); !errors.Is(err, io.ErrUnexpectedEOF) || got != nil {
		t.Fatalf("read of a big entry cut short in its file: %d bytes, %v", len(got), err)
	}
}

// TestBigEntriesConcurrentReads reads entries, big ones from the file,
// from many goroutines while a writer appends small and big entries and
// cycles segments (one cached): with -race, and every read returns its
// own entry.
func TestBigEntriesConcurrentReads(t *testing.T) {
	total := uint64(60)
	if raceEnabled {
		total = 40 // still five segments
	}
	want := make([][]byte, total+1)
	for i := range want {
		want[i] = bigMix(uint64(i))
	}
	l, err := Open(t.TempDir(), &Options{SegmentSize: bigSeg, SegmentCacheSize: 1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var written atomic.Uint64
	var wg sync.WaitGroup
	wg.Go(func() { writeAll(t, l, total, 3, func(i uint64) []byte { return want[i] }, &written) })
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for written.Load() < total {
				last := written.Load()
				if last == 0 {
					continue
				}
				// Mostly the newest entries: the tail's.
				i := last - min(last-1, uint64(rng.IntN(12)))
				if rng.IntN(4) == 0 {
					i = 1 + uint64(rng.IntN(int(last)))
				}
				got, err := l.Read(i)
				if err != nil || !bytes.Equal(got, want[i]) {
					t.Errorf("read %d (of %d written): %d bytes, %v", i, last, len(got), err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(l.segments) < 4 {
		t.Fatalf("only %d segments", len(l.segments))
	}
	readBig(t, l, 1, total, "written")
}
