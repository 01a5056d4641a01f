//go:build !unix

package server

// openFileLimit is unknown here: no clamp.
func openFileLimit() uint64 { return 0 }
