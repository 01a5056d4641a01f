package index

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
)

// BenchmarkLookups measures the index's reads over 100,000 entries (random
// targets): SeekLSN, SeekTime, EntryAt and BytesBetween.
//
//	go test -run '^$' -bench Lookups -benchmem ./index
func BenchmarkLookups(b *testing.B) {
	const n = 100_000
	ix, err := Open(Options{Dir: b.TempDir(), Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	for from := pgq.Offset(1); from <= n; from += 1000 {
		if err := ix.Add(entries(from, 1000)); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() pgq.Offset { return pgq.Offset(1 + rng.IntN(n)) }
	b.Run("SeekLSN", func(b *testing.B) {
		for b.Loop() {
			off := pick()
			if got, err := ix.SeekLSN(pgq.LSN(100*off - 1)); err != nil || got != off {
				b.Fatalf("SeekLSN = %d, %v; want %d", got, err, off)
			}
		}
	})
	b.Run("SeekTime", func(b *testing.B) {
		for b.Loop() {
			off := pick()
			if got, err := ix.SeekTime(t0.Add(time.Duration(off) * time.Second)); err != nil || got != off {
				b.Fatalf("SeekTime = %d, %v; want %d", got, err, off)
			}
		}
	})
	b.Run("EntryAt", func(b *testing.B) {
		for b.Loop() {
			off := pick()
			if e, err := ix.EntryAt(off); err != nil || e.Offset != off {
				b.Fatalf("EntryAt = %+v, %v; want %d", e, err, off)
			}
		}
	})
	b.Run("BytesBetween", func(b *testing.B) {
		for b.Loop() {
			x, y := pick(), pick()
			if _, err := ix.BytesBetween(min(x, y), max(x, y)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
