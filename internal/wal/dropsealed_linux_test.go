package wal

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pgq-dev/pgq/internal/vfsutil"
)

// resident is how many of path's pages are in the page cache.
func resident(t *testing.T, path string) (in, all int) {
	t.Helper()
	in, all, err := vfsutil.CachedPages(path)
	if err != nil {
		t.Fatal(err)
	}
	return in, all
}

// TestDropSealed: with DropSealed, a segment's pages leave the page cache
// when a cycle seals it, and the entries still read back (from the file:
// the first segment is evicted from the one-segment cache); the tail
// segment's stay. Without it, the sealed segment stays cached.
func TestDropSealed(t *testing.T) {
	for _, drop := range []bool{true, false} {
		t.Run(fmt.Sprintf("drop=%v", drop), func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(dir, &Options{SegmentSize: 1 << 20, SegmentCacheSize: 1, DropSealed: drop})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			entry := func(i uint64) []byte {
				b := make([]byte, 100<<10) // small entries and big ones (bigEntry)
				if i%3 == 0 {
					b = make([]byte, 300<<10)
				}
				for k := range b {
					b[k] = byte(i + uint64(k)/4096)
				}
				return b
			}
			const n = 40 // more than three segments
			for i := uint64(1); i <= n; i++ {
				if err := l.Write(i, entry(i)); err != nil {
					t.Fatal(err)
				}
			}
			if len(l.segments) < 3 {
				t.Fatalf("%d segments, want at least 3", len(l.segments))
			}
			for k, s := range l.segments {
				in, all := resident(t, s.path)
				tail := k == len(l.segments)-1
				switch {
				case tail && in == 0:
					t.Errorf("tail segment %s: none of its %d pages cached, want them cached", filepath.Base(s.path), all)
				case !tail && drop && in > 0:
					t.Errorf("sealed segment %s: %d of %d pages still cached after the seal", filepath.Base(s.path), in, all)
				case !tail && !drop && in == 0:
					t.Errorf("sealed segment %s: none of its %d pages cached without DropSealed", filepath.Base(s.path), all)
				}
			}
			for i := uint64(1); i <= n; i++ {
				got, err := l.Read(i)
				if err != nil {
					t.Fatal(err)
				}
				if want := entry(i); string(got) != string(want) {
					t.Fatalf("entry %d reads back wrong (%d bytes, want %d)", i, len(got), len(want))
				}
			}
		})
	}
}
