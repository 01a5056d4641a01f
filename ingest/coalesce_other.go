//go:build !unix

package ingest

import "net"

// lowWaterSetter: coalescing needs SO_RCVLOWAT, a Unix socket option.
func lowWaterSetter(net.Conn) func(bytes int) error { return nil }
