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

// decodeFetch reads a msgpack fetch response (wireFetch). Each transaction
// gets its own copy of its record body, so keeping one does not keep the
// whole response alive.
func decodeFetch(data []byte) (*FetchResult, error) {
	res := &FetchResult{}
	err := decodeMap(data, func(r *msgp.Reader, key []byte) (err error) {
		switch string(key) {
		case "transactions":
			res.Transactions, err = transactions(r)
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
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
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

// transactions reads the array of [offset, record body].
func transactions(r *msgp.Reader) ([]*pgq.Transaction, error) {
	n := r.ArrayOrNil()
	if r.Err != nil || n == 0 {
		return nil, r.Err
	}
	bd := bodyDecoders.Get().(*record.BodyDecoder)
	defer bodyDecoders.Put(bd)
	txs := make([]*pgq.Transaction, n)
	all := make([]pgq.Transaction, n) // one allocation for the structs
	for i := range n {
		if k := r.ArrayLen(); r.Err == nil && k != 2 {
			r.Fail("transaction %d: want [offset, record], got %d elements", i, k)
		}
		off := r.Uint(math.MaxUint64, "offset")
		if c, ok := r.Peek(); ok && c == 0xc0 {
			r.Fail("transaction %d: empty record", i)
		}
		body := r.Skip()
		if r.Err != nil {
			return nil, r.Err
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
