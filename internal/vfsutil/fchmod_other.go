//go:build !unix

package vfsutil

import "os"

// fchmod is a no-op where files have no Unix modes.
func fchmod(uintptr, os.FileMode) error { return nil }
