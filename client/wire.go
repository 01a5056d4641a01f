package client

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

// The client reads a fetch response in the records form (see
// api.MediaRecords: a msgpack map whose transactions are [offset, record
// body]) with the small reader below instead of reflection: the records are decoded straight
// from the response with record.DecodeBody, after one cheap walk to find
// each record's end, instead of msgpack.Decoder.DecodeRaw (which walks and
// copies the record byte by byte) followed by the decode.

// errWire is wrapped by every malformed-response error.
var errWire = errors.New("malformed msgpack response")

// wire is a bounds-checked msgpack reader over one response.
type wire struct {
	b []byte
	p int
}

func (r *wire) fail(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", errWire, r.p, fmt.Sprintf(format, args...))
}

// need reports whether n more bytes are available.
func (r *wire) need(n uint64) bool { return n <= uint64(len(r.b)-r.p) }

// be reads an n-byte big-endian unsigned integer (the caller checked need).
func (r *wire) be(n int) uint64 {
	var v uint64
	for _, c := range r.b[r.p : r.p+n] {
		v = v<<8 | uint64(c)
	}
	r.p += n
	return v
}

// header reads the code of a map or an array and returns its length.
func (r *wire) header(fix, b16, b32 byte, what string) (int, error) {
	if !r.need(1) {
		return 0, r.fail("want %s, got end", what)
	}
	c := r.b[r.p]
	r.p++
	var n uint64
	switch {
	case c&0xf0 == fix:
		n = uint64(c & 0x0f)
	case c == b16 && r.need(2):
		n = r.be(2)
	case c == b32 && r.need(4):
		n = r.be(4)
	case c == 0xc0: // nil: empty
	default:
		return 0, r.fail("want %s, got 0x%02x", what, c)
	}
	if !r.need(n) { // every element takes at least one byte
		return 0, r.fail("%s of %d elements in %d bytes", what, n, len(r.b)-r.p)
	}
	return int(n), nil
}

func (r *wire) mapLen() (int, error)   { return r.header(0x80, 0xde, 0xdf, "map") }
func (r *wire) arrayLen() (int, error) { return r.header(0x90, 0xdc, 0xdd, "array") }

// str reads a str and returns it as a sub-slice.
func (r *wire) str() ([]byte, error) {
	if !r.need(1) {
		return nil, r.fail("want str, got end")
	}
	c := r.b[r.p]
	r.p++
	var n uint64
	switch {
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == 0xd9 && r.need(1):
		n = r.be(1)
	case c == 0xda && r.need(2):
		n = r.be(2)
	case c == 0xdb && r.need(4):
		n = r.be(4)
	default:
		return nil, r.fail("want str, got 0x%02x", c)
	}
	if !r.need(n) {
		return nil, r.fail("str of %d bytes in %d bytes", n, len(r.b)-r.p)
	}
	s := r.b[r.p : r.p+int(n)]
	r.p += int(n)
	return s, nil
}

// uint reads a non-negative integer of any msgpack width.
func (r *wire) uint() (uint64, error) {
	if !r.need(1) {
		return 0, r.fail("want integer, got end")
	}
	c := r.b[r.p]
	r.p++
	var v uint64
	switch {
	case c < 0x80:
		return uint64(c), nil
	case (c == 0xcc || c == 0xd0) && r.need(1):
		v = r.be(1)
		if c == 0xd0 && v >= 0x80 {
			return 0, r.fail("negative integer")
		}
	case (c == 0xcd || c == 0xd1) && r.need(2):
		v = r.be(2)
		if c == 0xd1 && v >= 0x8000 {
			return 0, r.fail("negative integer")
		}
	case (c == 0xce || c == 0xd2) && r.need(4):
		v = r.be(4)
		if c == 0xd2 && v >= 0x8000_0000 {
			return 0, r.fail("negative integer")
		}
	case (c == 0xcf || c == 0xd3) && r.need(8):
		v = r.be(8)
		if c == 0xd3 && v > math.MaxInt64 {
			return 0, r.fail("negative integer")
		}
	default:
		return 0, r.fail("want integer, got 0x%02x", c)
	}
	return v, nil
}

// skip steps over one value of any type and returns it as a sub-slice.
func (r *wire) skip() ([]byte, error) {
	start := r.p
	for pending := uint64(1); pending > 0; pending-- {
		if !r.need(1) {
			return nil, r.fail("value: unexpected end")
		}
		c := r.b[r.p]
		r.p++
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
			var err error
			size, add, err = r.sized(c)
			if err != nil {
				return nil, err
			}
		}
		if !r.need(size) {
			return nil, r.fail("value of %d bytes in %d bytes", size, len(r.b)-r.p)
		}
		r.p += int(size)
		// Each pending value takes at least one byte.
		if add > uint64(len(r.b)-r.p) {
			return nil, r.fail("container of %d elements in %d bytes", add, len(r.b)-r.p)
		}
		pending += add
	}
	return r.b[start:r.p], nil
}

// sized reads the length fields after code c (0xc4..0xdf) and returns the
// payload size and, for containers, the number of values inside.
func (r *wire) sized(c byte) (size, add uint64, err error) {
	lenOf := func(n int) (uint64, error) {
		if !r.need(uint64(n)) {
			return 0, r.fail("length: unexpected end")
		}
		return r.be(n), nil
	}
	switch c {
	case 0xc4, 0xd9: // bin8, str8
		size, err = lenOf(1)
	case 0xc5, 0xda:
		size, err = lenOf(2)
	case 0xc6, 0xdb:
		size, err = lenOf(4)
	case 0xc7, 0xc8, 0xc9: // ext8/16/32: length, then the type byte
		size, err = lenOf(1 << (c - 0xc7))
		size++
	case 0xca:
		size = 4
	case 0xcb:
		size = 8
	case 0xcc, 0xd0:
		size = 1
	case 0xcd, 0xd1:
		size = 2
	case 0xce, 0xd2:
		size = 4
	case 0xcf, 0xd3:
		size = 8
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1/2/4/8/16 plus the type byte
		size = 1 + 1<<(c-0xd4)
	case 0xdc:
		add, err = lenOf(2)
	case 0xdd:
		add, err = lenOf(4)
	case 0xde:
		add, err = lenOf(2)
		add *= 2
	case 0xdf:
		add, err = lenOf(4)
		add *= 2
	default:
		err = r.fail("invalid code 0x%02x", c)
	}
	return size, add, err
}

// decodeFetch reads a msgpack fetch response (wireFetch). Each transaction
// gets its own copy of its record body, so keeping one does not keep the
// whole response alive.
func decodeFetch(data []byte) (*FetchResult, error) {
	r := &wire{b: data}
	n, err := r.mapLen()
	if err != nil {
		return nil, err
	}
	res := &FetchResult{}
	for range n {
		key, err := r.str()
		if err != nil {
			return nil, err
		}
		switch string(key) {
		case "transactions":
			res.Transactions, err = r.transactions()
		case "next_offset":
			var v uint64
			v, err = r.uint()
			res.NextOffset = pgq.Offset(v)
		case "committed_offset":
			var v uint64
			v, err = r.uint()
			res.Committed = pgq.Offset(v)
		case "last_offset":
			var v uint64
			v, err = r.uint()
			res.LastOffset = pgq.Offset(v)
		case "lease_expires":
			res.LeaseExpires, err = r.time()
		case "generation":
			res.Generation, err = r.uint()
		default:
			_, err = r.skip()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	if r.p != len(r.b) {
		return nil, r.fail("%d trailing bytes", len(r.b)-r.p)
	}
	return res, nil
}

// time reads a msgpack timestamp (or nil) as UTC.
func (r *wire) time() (time.Time, error) {
	raw, err := r.skip()
	if err != nil {
		return time.Time{}, err
	}
	// The common 8-byte form (0xd7 -1 nsec<<34|sec) without reflection.
	if len(raw) == 10 && raw[0] == 0xd7 && raw[1] == 0xff {
		v := binary.BigEndian.Uint64(raw[2:])
		return time.Unix(int64(v&(1<<34-1)), int64(v>>34)).UTC(), nil
	}
	var t time.Time
	if err := msgpack.Unmarshal(raw, &t); err != nil {
		return time.Time{}, fmt.Errorf("%w: timestamp: %v", errWire, err)
	}
	return t.UTC(), nil
}

// bodyDecoders keep the relations (column names) decoded by earlier
// fetches.
var bodyDecoders = sync.Pool{New: func() any { return new(record.BodyDecoder) }}

// transactions reads the array of [offset, record body].
func (r *wire) transactions() ([]*pgq.Transaction, error) {
	n, err := r.arrayLen()
	if err != nil || n == 0 {
		return nil, err
	}
	bd := bodyDecoders.Get().(*record.BodyDecoder)
	defer bodyDecoders.Put(bd)
	txs := make([]*pgq.Transaction, n)
	all := make([]pgq.Transaction, n) // one allocation for the structs
	for i := range n {
		if k, err := r.arrayLen(); err != nil || k != 2 {
			if err == nil {
				err = r.fail("transaction %d: want [offset, record], got %d elements", i, k)
			}
			return nil, err
		}
		off, err := r.uint()
		if err != nil {
			return nil, err
		}
		if r.need(1) && r.b[r.p] == 0xc0 {
			return nil, r.fail("transaction %d: empty record", i)
		}
		body, err := r.skip()
		if err != nil {
			return nil, err
		}
		tx := &all[i]
		tx.Offset = pgq.Offset(off)
		if err := bd.Decode(append([]byte(nil), body...), tx); err != nil {
			return nil, fmt.Errorf("transaction at offset %d: %w", off, err)
		}
		txs[i] = tx
	}
	return txs, nil
}
