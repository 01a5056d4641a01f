package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident is how many of path's pages are in the page cache (mincore of
// a mapping of the file).
func resident(t *testing.T, path string) (in, all int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(os.NewSyscallError("mincore", errno))
	}
	for _, v := range vec {
		if v&1 != 0 {
			in++
		}
	}
	return in, len(vec)
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
