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
	return fmt.Sprintf("%X/%X", uint32(l>>32), uint32(l))
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
func (l LSN) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

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
