//go:build !linux

package vfsutil

import (
	"errors"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// DropCache is a no-op where pgq does not advise the kernel about its
// page cache (see the Linux version).
func DropCache(vfs.File) error { return nil }

// CachedPages is not implemented here.
func CachedPages(string) (cached, pages int, err error) {
	return 0, 0, errors.ErrUnsupported
}
