package client

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/msgp"
	"github.com/pgq-dev/pgq/record"
)

// The client reads a fetch response in the records form (see
// api.MediaRecords: a msgpack map whose transactions are [offset, record
// body]) with pgq's one msgpack reader (internal/msgp), the one the record
// codec uses, instead of reflection: the records are decoded straight
// from the response with a record.BodyDecoder, after one cheap walk to
// find each record's end, instead of msgpack.Decoder.DecodeRaw (which
// walks and copies the record byte by byte) followed by the decode.

// errWire is wrapped by every malformed-response error.
var errWire = errors.New("malformed msgpack response")

// decodeFetch reads a whole msgpack fetch response (wireFetch) as
// FetchStream reads one from the network.
func decodeFetch(data []byte) (*FetchResult, error) {
	s, err := newFetchStream("", io.NopCloser(bytes.NewReader(data)))
	if err != nil {
		return nil, err
	}
	return s.collect()
}

// field reads the value of key, one of the answer's fields other than
// transactions (unknown keys are skipped), into res.
func (res *FetchResult) field(r *msgp.Reader, key string) (err error) {
	switch key {
	case "next_offset":
		res.NextOffset = pgq.Offset(r.Uint(math.MaxUint64, "next_offset"))
	case "committed_offset":
		res.CommittedOffset = pgq.Offset(r.Uint(math.MaxUint64, "committed_offset"))
		res.Committed = res.CommittedOffset //nolint:staticcheck // filled for one release, see FetchResult
	case "last_offset":
		res.LastOffset = pgq.Offset(r.Uint(math.MaxUint64, "last_offset"))
	case "lease_expires":
		res.LeaseExpires, err = readTime(r)
	case "generation":
		res.Generation = r.Uint(math.MaxUint64, "generation")
	default:
		r.Skip()
	}
	if err == nil {
		err = r.Err
	}
	return err
}

// decodeMap reads a response that is one msgpack map, calling field for
// each key with r at the key's value; field reads the value (or skips
// it) and returns the error of a value it decoded itself. One place
// holds what every response shares: an error names the key it came
// from, and bytes after the map are an error (a truncated or doubled
// response must not pass as a whole one). Errors wrap errWire.
func decodeMap(data []byte, field func(r *msgp.Reader, key []byte) error) error {
	r := &msgp.Reader{B: data, Wrap: errWire}
	n := r.MapLen()
	for i := 0; i < n && r.Err == nil; i++ {
		key := r.Bytes()
		if r.Err != nil {
			break
		}
		err := field(r, key)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	if r.Err == nil && r.Left() != 0 {
		r.Fail("%d trailing bytes", r.Left())
	}
	return r.Err
}

// readTime reads a msgpack timestamp (or nil) as UTC.
func readTime(r *msgp.Reader) (time.Time, error) {
	raw := r.Skip()
	if r.Err != nil {
		return time.Time{}, r.Err
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

// decodeTx reads transaction i of an answer, [offset, record body],
// into tx. tx gets its own copy of the body, so keeping it does not keep
// the buffer it was read from.
func decodeTx(r *msgp.Reader, i int, bd *record.BodyDecoder, tx *pgq.Transaction) error {
	if k := r.ArrayLen(); r.Err == nil && k != 2 {
		r.Fail("transaction %d: want [offset, record], got %d elements", i, k)
	}
	off := r.Uint(math.MaxUint64, "offset")
	if c, ok := r.Peek(); ok && c == 0xc0 {
		r.Fail("transaction %d: empty record", i)
	}
	body := r.Skip()
	if r.Err == nil && r.Left() != 0 {
		r.Fail("transaction %d: %d bytes after the record", i, r.Left())
	}
	if r.Err != nil {
		return fmt.Errorf("transactions: %w", r.Err)
	}
	tx.Offset = pgq.Offset(off)
	if err := bd.Decode(append([]byte(nil), body...), tx); err != nil {
		return fmt.Errorf("%w: transaction at offset %d: %w", errWire, off, err)
	}
	return nil
}
