package client

import (
	"fmt"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

// wireFetch is the msgpack form of a fetch response (the fast Go path):
// each transaction is [offset, record body], the body exactly as journaled
// (see record.Version), decoded with record.BodyDecoder.
type wireFetch struct {
	Transactions []wireTx `msgpack:"transactions"`
	NextOffset   uint64   `msgpack:"next_offset"`
	Committed    uint64   `msgpack:"committed_offset"`
	LastOffset   uint64   `msgpack:"last_offset"`
	// LeaseExpires is a msgpack timestamp.
	LeaseExpires time.Time `msgpack:"lease_expires"`
	Generation   uint64    `msgpack:"generation"`
}

type wireTx struct {
	_msgpack struct{} `msgpack:",as_array"`
	Offset   uint64
	Body     msgpack.RawMessage
}

// bodyDecoders keep the relations (column names) decoded by earlier
// fetches.
var bodyDecoders = sync.Pool{New: func() any { return new(record.BodyDecoder) }}

// decodeFetch reads a msgpack fetch response. The envelope is read by the
// msgpack library; record bodies by pgq's record decoder, so there is one
// hand-written msgpack reader in pgq (the record codec's).
func decodeFetch(data []byte) (*FetchResult, error) {
	var wf wireFetch
	if err := msgpack.Unmarshal(data, &wf); err != nil {
		return nil, err
	}
	res := &FetchResult{
		NextOffset: pgq.Offset(wf.NextOffset), Committed: pgq.Offset(wf.Committed), LastOffset: pgq.Offset(wf.LastOffset),
		LeaseExpires: wf.LeaseExpires.UTC(), Generation: wf.Generation,
	}
	if len(wf.Transactions) == 0 {
		return res, nil
	}
	bd := bodyDecoders.Get().(*record.BodyDecoder)
	defer bodyDecoders.Put(bd)
	all := make([]pgq.Transaction, len(wf.Transactions)) // one allocation for the structs
	res.Transactions = make([]*pgq.Transaction, len(wf.Transactions))
	for i, wt := range wf.Transactions {
		if len(wt.Body) == 0 || wt.Body[0] == 0xc0 {
			return nil, fmt.Errorf("transaction %d: empty record", i)
		}
		tx := &all[i]
		tx.Offset = pgq.Offset(wt.Offset)
		// RawMessage is already a copy of the response's bytes.
		if err := bd.Decode(wt.Body, tx); err != nil {
			return nil, fmt.Errorf("transaction at offset %d: %w", wt.Offset, err)
		}
		res.Transactions[i] = tx
	}
	return res, nil
}
