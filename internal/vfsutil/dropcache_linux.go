//go:build linux

package vfsutil

import (
	"os"

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
