//go:build unix

package ingest

import (
	"net"
	"syscall"
)

// lowWaterSetter returns a function setting SO_RCVLOWAT on conn's socket
// (under TLS, the socket below it), nil when conn has none.
func lowWaterSetter(conn net.Conn) func(bytes int) error {
	if tc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn = tc.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func(bytes int) error {
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, bytes)
		}); err != nil {
			return err
		}
		return serr
	}
}
