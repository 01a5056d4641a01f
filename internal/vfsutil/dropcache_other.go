//go:build !linux

package vfsutil

import "github.com/cockroachdb/pebble/v2/vfs"

// DropCache is a no-op where pgq does not advise the kernel about its
// page cache (see the Linux version).
func DropCache(vfs.File) error { return nil }
