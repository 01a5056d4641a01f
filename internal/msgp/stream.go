package msgp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Reading from a stream: an answer read as it arrives (the Go client's
// fetch) is taken one value at a time from a bufio.Reader, each value
// copied whole into a buffer the caller then reads with a Reader.

// readChunk bounds how much a value's payload grows the buffer ahead of
// the bytes that arrived, so a bogus length in a cut or corrupt stream
// fails at the stream's end instead of allocating it.
const readChunk = 1 << 20

// ReadValue appends the next value of br (of any type, containers with
// everything inside) to dst. At the stream's end before the value it
// returns io.EOF; inside it, io.ErrUnexpectedEOF. Malformed input is an
// error wrapping wrap (nil: ErrMalformed); a read error is returned as
// it came (io.ErrUnexpectedEOF for an early end).
func ReadValue(br *bufio.Reader, dst []byte, wrap error) ([]byte, error) {
	first := true
	for pending := uint64(1); pending > 0; pending-- {
		c, err := br.ReadByte()
		if err != nil {
			if first && errors.Is(err, io.EOF) {
				return dst, io.EOF
			}
			return dst, noEOF(err)
		}
		first = false
		dst = append(dst, c)
		var size, add uint64
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c <= 0x8f:
			add = 2 * uint64(c&0x0f)
		case c <= 0x9f:
			add = uint64(c & 0x0f)
		case c <= 0xbf:
			size = uint64(c & 0x1f)
		default:
			sh, ok := shapeOf(c)
			if !ok {
				return dst, malformed(wrap, "invalid code 0x%02x", c)
			}
			var length uint64
			if dst, length, err = readBE(br, dst, sh.lenBytes); err != nil {
				return dst, err
			}
			size, add = sh.sized(length)
		}
		if dst, err = readN(br, dst, size); err != nil {
			return dst, err
		}
		pending += add
	}
	return dst, nil
}

// ReadArrayLen reads an array header (nil: empty) from br and returns
// its length; io.EOF at the stream's end.
func ReadArrayLen(br *bufio.Reader, wrap error) (int, error) {
	return readHeader(br, 0x90, 0xdc, 0xdd, "array", wrap)
}

// ReadMapLen reads a map header (nil: empty) from br and returns its
// number of pairs; io.EOF at the stream's end.
func ReadMapLen(br *bufio.Reader, wrap error) (int, error) {
	return readHeader(br, 0x80, 0xde, 0xdf, "map", wrap)
}

func readHeader(br *bufio.Reader, fix, b16, b32 byte, what string, wrap error) (int, error) {
	c, err := br.ReadByte()
	if err != nil {
		return 0, err
	}
	var n uint64
	var scratch [4]byte
	switch {
	case c&0xf0 == fix:
		return int(c & 0x0f), nil
	case c == 0xc0:
		return 0, nil
	case c == b16:
		_, n, err = readBE(br, scratch[:0], 2)
	case c == b32:
		_, n, err = readBE(br, scratch[:0], 4)
	default:
		return 0, malformed(wrap, "want %s, got 0x%02x", what, c)
	}
	return int(n), err
}

// readBE appends n bytes of br to dst and returns them as a big-endian
// integer.
func readBE(br *bufio.Reader, dst []byte, n int) ([]byte, uint64, error) {
	start := len(dst)
	dst, err := readN(br, dst, uint64(n))
	var v uint64
	for _, c := range dst[start:] {
		v = v<<8 | uint64(c)
	}
	return dst, v, err
}

// readN appends the next n bytes of br to dst, growing dst at most
// readChunk ahead of what arrived.
func readN(br *bufio.Reader, dst []byte, n uint64) ([]byte, error) {
	for n > 0 {
		k := int(min(n, readChunk))
		dst = slices.Grow(dst, k)
		got, err := io.ReadFull(br, dst[len(dst):len(dst)+k])
		dst = dst[:len(dst)+got]
		if err != nil {
			return dst, noEOF(err)
		}
		n -= uint64(k)
	}
	return dst, nil
}

// noEOF turns an end of stream inside a value into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func malformed(wrap error, format string, args ...any) error {
	if wrap == nil {
		wrap = ErrMalformed
	}
	return fmt.Errorf("%w: %s", wrap, fmt.Sprintf(format, args...))
}
