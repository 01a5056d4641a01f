package journal

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/pgq-dev/pgq"
)

// BenchmarkReaderNext measures in-process replay: Reader.Next over records
// of 3 changes each (the consumer hot path of journal.Reader).
func BenchmarkReaderNext(b *testing.B) {
	j, err := Open(Options{Dir: b.TempDir(), NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	const records = 10_000
	batch := make([]*pgq.Transaction, 0, 1000)
	for i := range records {
		batch = append(batch, mkTx(i+1, 3))
		if len(batch) == cap(batch) {
			if err := j.Append(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.ReportAllocs()
	r := j.NewReader(0)
	n := 0
	for b.Loop() {
		tx, err := r.Next()
		if errors.Is(err, io.EOF) {
			r = j.NewReader(0)
			tx, err = r.Next()
		}
		if err != nil {
			b.Fatal(err)
		}
		n += len(tx.Changes)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "changes/s")
}

// BenchmarkReaderNextBig is BenchmarkReaderNext over big records (300
// KiB, bigTx: internal/wal keeps them only in the segment files and
// reads them with a pread), 8 a segment, the tail's and the cached
// segment's: a consumer catching up on a backfill's chunk records.
func BenchmarkReaderNextBig(b *testing.B) {
	j, err := Open(Options{Dir: b.TempDir(), NoSync: true, SegmentSize: 8 * 300 << 10, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	const records = 12 // a sealed segment, half a tail
	for i := range records {
		if err := j.Append([]*pgq.Transaction{bigTx(i + 1)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetBytes(300 << 10)
	r := j.NewReader(0)
	for b.Loop() {
		_, err := r.Next()
		if errors.Is(err, io.EOF) {
			r = j.NewReader(0)
			_, err = r.Next()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
