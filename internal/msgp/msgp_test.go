package msgp

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

func enc(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The reader reads back what the msgpack library writes, in every width.
func TestReadsLibraryEncoding(t *testing.T) {
	for _, v := range []int64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, -1, -32, -33, -128, -129, -32768, -32769, math.MinInt32 - 1, math.MinInt64} {
		r := Reader{B: enc(t, v)}
		if got := r.Int64(); got != v || r.Err != nil || r.Left() != 0 {
			t.Errorf("Int64(%d) = %d, %v", v, got, r.Err)
		}
	}
	r := Reader{B: enc(t, uint64(math.MaxUint64))}
	if got := r.Uint(math.MaxUint64, "u"); got != math.MaxUint64 || r.Err != nil {
		t.Errorf("Uint(max) = %d, %v", got, r.Err)
	}
	for _, s := range []string{"", "a", string(make([]byte, 31)), string(make([]byte, 32)), string(make([]byte, 300)), string(make([]byte, 70000))} {
		r := Reader{B: enc(t, s)}
		if got := r.Str(); got != s || r.Err != nil {
			t.Errorf("Str(len %d): len %d, %v", len(s), len(got), r.Err)
		}
		r = Reader{B: enc(t, []byte(s))}
		if got := r.Bytes(); string(got) != s || r.Err != nil {
			t.Errorf("Bytes(bin len %d): len %d, %v", len(s), len(got), r.Err)
		}
	}
	for _, n := range []int{0, 15, 16, 70000} {
		r := Reader{B: enc(t, make([]bool, n))}
		if got := r.ArrayLen(); got != n || r.Err != nil {
			t.Errorf("ArrayLen(%d) = %d, %v", n, got, r.Err)
		}
		for range n {
			if r.Bool() || r.Err != nil {
				t.Fatalf("bool: %v", r.Err)
			}
		}
	}
	m := map[string]int{"a": 1, "b": 2}
	r = Reader{B: enc(t, m)}
	if n := r.MapLen(); n != 2 || r.Err != nil {
		t.Errorf("MapLen = %d, %v", n, r.Err)
	}
	r = Reader{B: enc(t, []int(nil))}
	if n := r.ArrayOrNil(); n != 0 || r.Err != nil || r.Left() != 0 {
		t.Errorf("ArrayOrNil(nil) = %d, %v", n, r.Err)
	}
}

// Skip steps over any value, nested ones and extensions included.
func TestSkip(t *testing.T) {
	v := []any{
		map[string]any{"x": []any{1, "two", 3.5, float32(1.5), nil, true, []byte{1, 2}}, "t": time.Unix(1, 2)},
		int64(-70000), uint64(math.MaxUint64), make([]int, 20), string(make([]byte, 40)),
	}
	b := append(enc(t, v), 0x01)
	r := Reader{B: b}
	got := r.Skip()
	if r.Err != nil || len(got) != len(b)-1 || r.Left() != 1 {
		t.Fatalf("Skip: %d of %d bytes, %v", len(got), len(b), r.Err)
	}
}

// Errors are sticky, wrap the caller's sentinel and never panic on
// truncated input.
func TestErrors(t *testing.T) {
	sentinel := errors.New("bad thing")
	r := Reader{B: enc(t, "str"), Wrap: sentinel}
	if r.Int64(); !errors.Is(r.Err, sentinel) {
		t.Fatalf("want the sentinel, got %v", r.Err)
	}
	first := r.Err
	r.Fail("second")
	if r.Str() != "" || r.Err != first {
		t.Fatalf("error not sticky: %v", r.Err)
	}
	r = Reader{B: enc(t, -1)}
	if r.Uint(10, "n"); !errors.Is(r.Err, ErrMalformed) {
		t.Fatalf("negative as uint: %v", r.Err)
	}
	r = Reader{B: enc(t, 11)}
	if r.Uint(10, "n"); r.Err == nil {
		t.Fatal("out of range: no error")
	}
	r = Reader{B: []byte{0xdd, 0, 0, 0, 9}} // array of 9 in 0 bytes
	if r.ArrayLen(); r.Err == nil {
		t.Fatal("oversized array: no error")
	}
	r = Reader{B: []byte{0xc0}}
	if r.ArrayLen(); r.Err == nil {
		t.Fatal("nil as ArrayLen: no error")
	}
	full := enc(t, []any{"abc", 1, map[string]any{"k": []int{1, 2}}})
	for n := range len(full) {
		r := Reader{B: full[:n]}
		r.Skip()
		if r.Err == nil {
			t.Fatalf("Skip of %d of %d bytes: no error", n, len(full))
		}
	}
}

func FuzzSkip(f *testing.F) {
	f.Add([]byte{0x92, 0xa1, 'x', 0xc0})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := Reader{B: b}
		raw := r.Skip()
		if r.Err == nil && len(raw) != r.P {
			t.Fatalf("skipped %d bytes, at %d", len(raw), r.P)
		}
	})
}
