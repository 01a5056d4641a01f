package pgq

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestLSNString checks the hand-written hex against fmt's, PostgreSQL's
// form, and that ParseLSN reads it back.
func TestLSNString(t *testing.T) {
	vals := []LSN{0, 1, 0xF, 0x10, 0x16_B374D848, 0xFFFFFFFF_FFFFFFFF, 0x1_00000000}
	for range 1000 {
		vals = append(vals, LSN(rand.Uint64()>>rand.IntN(64)))
	}
	for _, l := range vals {
		want := fmt.Sprintf("%X/%X", uint32(l>>32), uint32(l))
		if got := l.String(); got != want {
			t.Fatalf("LSN(%#x).String() = %q, want %q", uint64(l), got, want)
		}
		if got := string(l.Append([]byte("x"))); got != "x"+want {
			t.Fatalf("Append = %q", got)
		}
		back, err := ParseLSN(want)
		if err != nil || back != l {
			t.Fatalf("ParseLSN(%q) = %v, %v", want, back, err)
		}
	}
}
