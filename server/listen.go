package server

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/pgq-dev/pgq/opterr"
)

// ListenError is an address of Options that cannot be listened on (in
// use, not this host's, a privileged port): Option names the field in
// opterr's terms, "server.Options.Listen" or "server.Options.ProbeListen",
// so that a program names its own setting the way it names every other
// option (pgq's CLI: by its table of flags).
type ListenError struct {
	Option opterr.Option // the Options field
	Addr   string        // its value
	Err    error         // net.Listen's error
}

func (e *ListenError) Error() string {
	return fmt.Sprintf("listen on %s (%s): %v", e.Addr, e.Option, e.Reason())
}

func (e *ListenError) Unwrap() error { return e.Err }

// Reason is why the address cannot be listened on, without the address
// net.Listen repeats: "address already in use".
func (e *ListenError) Reason() error {
	var op *net.OpError
	if errors.As(e.Err, &op) && op.Err != nil {
		var sys *os.SyscallError
		if errors.As(op.Err, &sys) {
			return sys.Err
		}
		return op.Err
	}
	return e.Err
}
