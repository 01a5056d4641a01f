//go:build linux

package vfsutil

import (
	"os"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// DropCache advises the kernel that f's cached pages will not be needed
// again soon (POSIX_FADV_DONTNEED over the whole file): its clean pages
// leave the page cache at once, dirty ones once written back. Call it
// after f's fsync. It is advice: nothing is lost when the kernel ignores
// it, and a file without a descriptor (vfs.MemFS) gives ErrNoDescriptor.
func DropCache(f vfs.File) error {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return ErrNoDescriptor
	}
	return os.NewSyscallError("fadvise", unix.Fadvise(int(fd), 0, 0, unix.FADV_DONTNEED))
}

// CachedPages reports how many of the pages of the file at path are in
// the page cache (mincore of a read-only mapping), and how many it has:
// what DropCache's tests check, and a diagnostic.
func CachedPages(path string) (cached, pages int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0, 0, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, 0, os.NewSyscallError("mmap", err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, 0, os.NewSyscallError("mincore", errno)
	}
	for _, v := range vec {
		cached += int(v & 1)
	}
	return cached, len(vec), nil
}
