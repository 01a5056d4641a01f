//go:build unix

package vfsutil

import (
	"os"
	"syscall"
)

// fchmod sets the mode of the open file fd.
func fchmod(fd uintptr, mode os.FileMode) error {
	return os.NewSyscallError("fchmod", syscall.Fchmod(int(fd), uint32(mode.Perm())))
}
