package msgp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"testing"
	"time"
)

// ReadValue copies from a stream exactly the value Skip steps over, and
// every cut inside a value is io.ErrUnexpectedEOF, never a whole value.
func TestReadValue(t *testing.T) {
	v := []any{
		map[string]any{"x": []any{1, "two", 3.5, float32(1.5), nil, true, []byte{1, 2}}, "t": time.Unix(1, 2)},
		int64(-70000), uint64(math.MaxUint64), make([]int, 20), string(make([]byte, 40)), make([]byte, 3<<20),
	}
	b := append(enc(t, v), enc(t, 7)...)
	br := bufio.NewReaderSize(bytes.NewReader(b), 16)
	got, err := ReadValue(br, nil, nil)
	if err != nil || !bytes.Equal(got, b[:len(b)-1]) {
		t.Fatalf("ReadValue: %d of %d bytes, %v", len(got), len(b)-1, err)
	}
	if got, err = ReadValue(br, got[:0], nil); err != nil || !bytes.Equal(got, []byte{7}) {
		t.Fatalf("second value: %x, %v", got, err)
	}
	if _, err = ReadValue(br, nil, nil); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
	for _, n := range []int{1, 2, 5, 30, len(b) / 2, len(b) - 2} {
		if _, err := ReadValue(bufio.NewReader(bytes.NewReader(b[:n])), nil, nil); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut at %d of %d bytes: %v, want io.ErrUnexpectedEOF", n, len(b), err)
		}
	}
	if _, err := ReadValue(bufio.NewReader(bytes.NewReader([]byte{0xc1})), nil, nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("invalid code: %v", err)
	}
	for _, h := range [][]byte{{0x93}, {0xdc, 0, 3}, {0xdd, 0, 0, 0, 3}} {
		if n, err := ReadArrayLen(bufio.NewReader(bytes.NewReader(h)), nil); n != 3 || err != nil {
			t.Errorf("ReadArrayLen(%x) = %d, %v", h, n, err)
		}
	}
	if _, err := ReadMapLen(bufio.NewReader(bytes.NewReader([]byte{0xde, 0})), nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut map header: %v", err)
	}
}

func FuzzReadValue(f *testing.F) {
	f.Add([]byte{0x92, 0xa1, 'x', 0xc0})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := Reader{B: b}
		raw := r.Skip()
		got, err := ReadValue(bufio.NewReader(bytes.NewReader(b)), nil, nil)
		if r.Err == nil && (err != nil || !bytes.Equal(got, raw)) {
			t.Fatalf("Skip took %d bytes, ReadValue %d (%v)", len(raw), len(got), err)
		}
		if r.Err != nil && err == nil {
			t.Fatalf("Skip failed (%v), ReadValue read %d bytes", r.Err, len(got))
		}
	})
}
