package wal

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkTailAppend fills three 64 MiB tail segments with 1.2 MB
// entries (a backfill chunk's record), each segment's buffers recycled
// as the cache evicts the one before the last, as a journal's writes do:
// "blocks" is the tail as kept for small entries (tail.go), "doubling"
// the buffer it replaced (doubling from 1 MiB to a segment and a quarter,
// a spare taken over from the evicted segment), kept here as the
// reference. "log-blocks" and "log-file" write the same entries through
// a Log to its files (no fsync, one cached segment as the journal has),
// the first copying them into the blocks and writing from there (as
// every entry was before bigEntry), the second writing them from the
// batch and keeping them only in the file (entries of bigEntry bytes or
// more). Run them in one process and compare: go test -run '^$' -bench
// TailAppend -benchtime 20x ./internal/wal.
func BenchmarkTailAppend(b *testing.B) {
	const seg = 64 << 20
	entry := make([]byte, 1200_000)
	for i := range entry {
		entry[i] = byte(i)
	}
	var hdr [binary.MaxVarintLen64]byte
	b.Run("blocks", func(b *testing.B) {
		b.SetBytes(3 * seg)
		for b.Loop() {
			l := &Log{opts: Options{SegmentSize: seg}}
			var cached *segment
			for range 3 {
				s := &segment{}
				for s.size() < seg {
					s.appendBytes(l, hdr[:binary.PutUvarint(hdr[:], uint64(len(entry)))])
					s.appendBytes(l, entry)
				}
				if cached != nil {
					l.recycle(cached.blocks)
				}
				cached = s
			}
		}
	})
	for _, mode := range []struct {
		name string
		big  int
	}{{"log-blocks", math.MaxInt}, {"log-file", bigEntry}} {
		b.Run(mode.name, func(b *testing.B) {
			b.SetBytes(3 * seg)
			dir := filepath.Join(b.TempDir(), "w")
			for b.Loop() {
				l, err := Open(dir, &Options{SegmentSize: seg, SegmentCacheSize: 1, NoSync: true})
				if err != nil {
					b.Fatal(err)
				}
				l.bigEntry = mode.big
				var batch Batch
				for i := uint64(1); len(l.segments) <= 3; i++ {
					batch.WriteRef(i, entry)
					if err := l.WriteBatch(&batch); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer() // a segment's worth per iteration stays on the disk otherwise
				if err := errors.Join(l.Close(), os.RemoveAll(dir)); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
	b.Run("doubling", func(b *testing.B) {
		b.SetBytes(3 * seg)
		for b.Loop() {
			var spare, cached []byte
			for range 3 {
				var buf []byte
				for len(buf) < seg {
					if need := len(entry) + len(hdr); cap(buf)-len(buf) < need {
						buf, spare = doublingGrow(buf, spare, need, seg)
					}
					buf = binary.AppendUvarint(buf, uint64(len(entry)))
					buf = append(buf, entry...)
				}
				if cached != nil {
					spare = cached[:0]
				}
				cached = buf
			}
		}
	})
}

// doublingGrow is the tail's growth before blocks (growTail), the
// reference of BenchmarkTailAppend.
func doublingGrow(buf, spare []byte, n, segSize int) (out, spareOut []byte) {
	if len(buf) == 0 && cap(spare) >= max(segSize, n) {
		return spare, nil
	}
	c := max(2*cap(buf), 1<<20)
	if c >= segSize {
		c = segSize + segSize/4
	}
	nb := make([]byte, len(buf), max(c, len(buf)+n))
	copy(nb, buf)
	return nb, spare
}

// BenchmarkReadBig reads entries of 300 KiB, which the log keeps only in
// its files (bigEntry), round-robin: "tail" those of the tail segment,
// "sealed" those of the sealed segment in the cache (the journal's one),
// as a consumer catching up on a backfill's chunk records reads them. A
// read is one pread of the entry into the slice it returns. Compare
// builds in one run, alternating: go test -c, then -test.bench ReadBig
// -test.count 1 of each binary in turn.
func BenchmarkReadBig(b *testing.B) {
	const size, perSeg = 300 << 10, 10
	entry := make([]byte, size)
	for i := range entry {
		entry[i] = byte(i)
	}
	l, err := Open(filepath.Join(b.TempDir(), "w"), &Options{SegmentSize: perSeg * size, SegmentCacheSize: 1, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var batch Batch
	for i := uint64(1); i <= perSeg+perSeg/2; i++ { // a sealed segment, half a tail
		batch.WriteRef(i, entry)
	}
	if err := l.WriteBatch(&batch); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		first, n uint64
	}{{"tail", perSeg + 1, perSeg / 2}, {"sealed", 1, perSeg}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			i := uint64(0)
			for b.Loop() {
				data, err := l.Read(c.first + i%c.n)
				if err != nil || len(data) != size {
					b.Fatalf("read: %d bytes, %v", len(data), err)
				}
				i++
			}
		})
	}
}
