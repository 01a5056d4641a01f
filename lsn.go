package pgq

import (
	"fmt"
	"strconv"
	"strings"
)

// LSN is a PostgreSQL WAL position.
type LSN uint64

// String renders the LSN as PostgreSQL does: "X/Y" in upper-case hex.
func (l LSN) String() string {
	var buf [17]byte
	return string(l.Append(buf[:0]))
}

// Append appends String's form to b without allocating (the bridge
// renders one per message id and payload).
func (l LSN) Append(b []byte) []byte {
	b = appendHexUpper(b, uint32(l>>32))
	b = append(b, '/')
	return appendHexUpper(b, uint32(l))
}

func appendHexUpper(b []byte, v uint32) []byte {
	const digits = "0123456789ABCDEF"
	var buf [8]byte
	i := len(buf)
	for {
		i--
		buf[i] = digits[v&0xF]
		v >>= 4
		if v == 0 {
			break
		}
	}
	return append(b, buf[i:]...)
}

// ParseLSN parses PostgreSQL's "X/Y" form.
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok || hi == "" || lo == "" {
		return 0, fmt.Errorf("pgq: invalid LSN %q: want X/Y", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("pgq: invalid LSN %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("pgq: invalid LSN %q: %w", s, err)
	}
	return LSN(h<<32 | l), nil
}

// MarshalText renders the LSN as "X/Y" so JSON carries it as a string.
func (l LSN) MarshalText() ([]byte, error) { return l.Append(nil), nil }

// UnmarshalText parses "X/Y".
func (l *LSN) UnmarshalText(b []byte) error {
	v, err := ParseLSN(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Offset is a journal position. Offsets are dense and start at 1; 0 means
// "none".
type Offset uint64
