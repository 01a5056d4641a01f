package msgp

import (
	"errors"
	"fmt"
	"math"
)

// ErrMalformed is wrapped by a Reader's errors when Wrap is nil.
var ErrMalformed = errors.New("malformed msgpack")

// Reader reads msgpack elements from B starting at P.
type Reader struct {
	B []byte
	P int
	// Err is the first error, nil while every read succeeded.
	Err error
	// Wrap is the sentinel every error wraps (nil: ErrMalformed).
	Wrap error
}

// Fail records a malformed element at the current position, unless an
// error is already recorded.
func (r *Reader) Fail(format string, args ...any) {
	if r.Err != nil {
		return
	}
	w := r.Wrap
	if w == nil {
		w = ErrMalformed
	}
	r.Err = fmt.Errorf("%w: at byte %d: %s", w, r.P, fmt.Sprintf(format, args...))
}

// Left is the number of unread bytes.
func (r *Reader) Left() int { return len(r.B) - r.P }

// Take returns the next n bytes as a sub-slice (capacity capped, so an
// append to it cannot overwrite what follows).
func (r *Reader) Take(n int) []byte {
	if r.Err != nil {
		return nil
	}
	if n < 0 || n > len(r.B)-r.P {
		r.Fail("need %d bytes, have %d", n, len(r.B)-r.P)
		return nil
	}
	s := r.B[r.P : r.P+n : r.P+n]
	r.P += n
	return s
}

// Byte reads one raw byte.
func (r *Reader) Byte() byte {
	s := r.Take(1)
	if s == nil {
		return 0
	}
	return s[0]
}

// Peek returns the next byte without reading it; false at the end or
// after an error.
func (r *Reader) Peek() (byte, bool) {
	if r.Err != nil || r.P >= len(r.B) {
		return 0, false
	}
	return r.B[r.P], true
}

// BE reads an n-byte big-endian unsigned integer.
func (r *Reader) BE(n int) uint64 {
	s := r.Take(n)
	var v uint64
	for _, c := range s {
		v = v<<8 | uint64(c)
	}
	return v
}

// header reads the code of an array (or map) and checks that its n
// elements can fit in the remaining bytes (each takes at least one byte;
// per is 2 for a map's keys and values).
func (r *Reader) header(fix, b16, b32 byte, per uint64, what string, nilOK bool) int {
	c := r.Byte()
	var n uint64
	switch {
	case r.Err != nil:
		return 0
	case c&0xf0 == fix:
		n = uint64(c & 0x0f)
	case c == b16:
		n = r.BE(2)
	case c == b32:
		n = r.BE(4)
	case c == 0xc0 && nilOK:
		return 0
	default:
		r.Fail("want %s, got 0x%02x", what, c)
		return 0
	}
	if r.Err == nil && n*per > uint64(len(r.B)-r.P) {
		r.Fail("%s of %d elements in %d bytes", what, n, len(r.B)-r.P)
		return 0
	}
	return int(n)
}

// ArrayLen reads an array header and returns its length.
func (r *Reader) ArrayLen() int { return r.header(0x90, 0xdc, 0xdd, 1, "array", false) }

// ArrayOrNil reads an array header, or nil as an empty array (how a nil
// slice is encoded).
func (r *Reader) ArrayOrNil() int { return r.header(0x90, 0xdc, 0xdd, 1, "array", true) }

// MapLen reads a map header (nil: empty) and returns its number of pairs.
func (r *Reader) MapLen() int { return r.header(0x80, 0xde, 0xdf, 2, "map", true) }

// ExpectArray reads an array header that must have n elements.
func (r *Reader) ExpectArray(n int, what string) {
	if got := r.ArrayLen(); r.Err == nil && got != n {
		r.Fail("%s: want %d elements, got %d", what, n, got)
	}
}

// Int64 reads an integer of any msgpack width that fits an int64.
func (r *Reader) Int64() int64 {
	c := r.Byte()
	switch {
	case r.Err != nil:
		return 0
	case c < 0x80:
		return int64(c)
	case c >= 0xe0:
		return int64(int8(c))
	}
	switch c {
	case 0xcc:
		return int64(r.BE(1))
	case 0xcd:
		return int64(r.BE(2))
	case 0xce:
		return int64(r.BE(4))
	case 0xcf:
		v := r.BE(8)
		if v > math.MaxInt64 {
			r.Fail("integer %d overflows int64", v)
			return 0
		}
		return int64(v)
	case 0xd0:
		return int64(int8(r.BE(1)))
	case 0xd1:
		return int64(int16(r.BE(2)))
	case 0xd2:
		return int64(int32(r.BE(4)))
	case 0xd3:
		return int64(r.BE(8))
	}
	r.Fail("want integer, got 0x%02x", c)
	return 0
}

// Uint reads a non-negative integer of any width up to max; what names it
// in errors.
func (r *Reader) Uint(max uint64, what string) uint64 {
	c, _ := r.Peek()
	var v uint64
	if c == 0xcf {
		r.P++
		v = r.BE(8)
	} else {
		i := r.Int64()
		if r.Err != nil {
			return 0
		}
		if i < 0 {
			r.Fail("%s: negative %d", what, i)
			return 0
		}
		v = uint64(i)
	}
	if r.Err == nil && v > max {
		r.Fail("%s: %d out of range", what, v)
		return 0
	}
	return v
}

// Bool reads a bool.
func (r *Reader) Bool() bool {
	switch c := r.Byte(); {
	case r.Err != nil:
		return false
	case c == 0xc3:
		return true
	case c == 0xc2:
		return false
	default:
		r.Fail("want bool, got 0x%02x", c)
		return false
	}
}

// Bytes reads a str or a bin (interchangeable here) and returns it as a
// sub-slice.
func (r *Reader) Bytes() []byte {
	c := r.Byte()
	var n uint64
	switch {
	case r.Err != nil:
		return nil
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		n = r.BE(1)
	case c == 0xda || c == 0xc5:
		n = r.BE(2)
	case c == 0xdb || c == 0xc6:
		n = r.BE(4)
	default:
		r.Fail("want str or bin, got 0x%02x", c)
		return nil
	}
	if r.Err != nil {
		return nil
	}
	if n > uint64(len(r.B)-r.P) {
		r.Fail("string of %d bytes in %d bytes", n, len(r.B)-r.P)
		return nil
	}
	return r.Take(int(n))
}

// Str reads a str or bin as a string.
func (r *Reader) Str() string { return string(r.Bytes()) }

// IsNil reads a nil and reports true, or reads nothing and reports false.
func (r *Reader) IsNil() bool {
	if c, ok := r.Peek(); ok && c == 0xc0 {
		r.P++
		return true
	}
	return false
}

// Skip steps over one value of any type and returns it as a sub-slice.
func (r *Reader) Skip() []byte {
	start := r.P
	for pending := uint64(1); pending > 0 && r.Err == nil; pending-- {
		c := r.Byte()
		if r.Err != nil {
			break
		}
		var size, add uint64 // bytes of payload to skip; values to add
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c <= 0x8f:
			add = 2 * uint64(c&0x0f)
		case c <= 0x9f:
			add = uint64(c & 0x0f)
		case c <= 0xbf:
			size = uint64(c & 0x1f)
		default:
			size, add = r.sized(c)
		}
		if r.Err != nil {
			break
		}
		if size > uint64(len(r.B)-r.P) {
			r.Fail("value of %d bytes in %d bytes", size, len(r.B)-r.P)
			break
		}
		r.P += int(size)
		// Each pending value takes at least one byte.
		if add > uint64(len(r.B)-r.P) {
			r.Fail("container of %d elements in %d bytes", add, len(r.B)-r.P)
			break
		}
		pending += add
	}
	if r.Err != nil {
		return nil
	}
	return r.B[start:r.P:r.P]
}

// sized reads the length fields after code c (0xc4..0xdf) and returns the
// payload size and, for containers, the number of values inside.
func (r *Reader) sized(c byte) (size, add uint64) {
	sh, ok := shapeOf(c)
	if !ok {
		r.Fail("invalid code 0x%02x", c)
		return 0, 0
	}
	return sh.sized(r.BE(sh.lenBytes))
}

// shape is what follows a code of 0xc4..0xdf: lenBytes of big-endian
// length (0: none), then a payload of fixed bytes (no length), of the
// length plus extra bytes (str, bin, ext), or per*length values
// (arrays, maps).
type shape struct {
	lenBytes          int
	fixed, extra, per uint64
}

// sized returns the payload size and the number of values inside from
// the length read (0 when lenBytes is 0).
func (s shape) sized(length uint64) (size, add uint64) {
	switch {
	case s.per > 0:
		return 0, s.per * length
	case s.lenBytes > 0:
		return length + s.extra, 0
	}
	return s.fixed, 0
}

// shapeOf describes code c (0xc4..0xdf); false: an invalid code.
func shapeOf(c byte) (shape, bool) {
	switch c {
	case 0xc4, 0xd9: // bin8, str8
		return shape{lenBytes: 1}, true
	case 0xc5, 0xda:
		return shape{lenBytes: 2}, true
	case 0xc6, 0xdb:
		return shape{lenBytes: 4}, true
	case 0xc7, 0xc8, 0xc9: // ext8/16/32: length, then the type byte
		return shape{lenBytes: 1 << (c - 0xc7), extra: 1}, true
	case 0xca, 0xce, 0xd2:
		return shape{fixed: 4}, true
	case 0xcb, 0xcf, 0xd3:
		return shape{fixed: 8}, true
	case 0xcc, 0xd0:
		return shape{fixed: 1}, true
	case 0xcd, 0xd1:
		return shape{fixed: 2}, true
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1/2/4/8/16 plus the type byte
		return shape{fixed: 1 + 1<<(c-0xd4)}, true
	case 0xdc:
		return shape{lenBytes: 2, per: 1}, true
	case 0xdd:
		return shape{lenBytes: 4, per: 1}, true
	case 0xde:
		return shape{lenBytes: 2, per: 2}, true
	case 0xdf:
		return shape{lenBytes: 4, per: 2}, true
	}
	return shape{}, false
}
