package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/internal/msgp"
	"github.com/pgq-dev/pgq/record"
)

// Message is one change delivered by a shared group, decoded as the
// transactions of an exclusive group are: Change is the same *pgq.Change,
// so Values, Scan and any function of a *Change decode both modes alike
// (moving a group from exclusive to shared changes how work is settled,
// not how it is read).
type Message struct {
	// Offset is the journal record holding the change, Index the change's
	// position in that record after the group's filter.
	Offset pgq.Offset
	Index  int
	// Xid, CommitLSN, EndLSN and CommitTime are those of the change's
	// transaction (CommitTime in UTC, microseconds).
	Xid        uint32
	CommitLSN  pgq.LSN
	EndLSN     pgq.LSN
	CommitTime time.Time
	// Ordinal is the change's position in its whole transaction: with
	// CommitLSN it names the change the same way in every journal (an
	// idempotency key that survives a new data dir).
	Ordinal uint32
	// Change is the change, typed: column names and type OIDs travel
	// with it.
	Change *pgq.Change
	// Delivery counts from 1; AckID names this delivery (Ack, Nak, Term).
	Delivery int
	AckID    string
}

// FetchShared is one long-poll fetch of a shared group (Member, Max and
// Wait of req are used), decoded: the typed counterpart of Fetch. It asks
// for the records form (api.MediaRecords) and does not retry. A pgq too
// old to answer it so gets an error; FetchMessages still works there.
func (c *Client) FetchShared(ctx context.Context, group string, req FetchRequest) ([]Message, error) {
	body := api.FetchBody{Member: req.Member, Max: req.Max, Wait: api.Duration(req.Wait)}
	data, mp, err := c.roundTrip(ctx, http.MethodPost, groupPath(group)+"/fetch", api.MediaRecords, body)
	if err != nil {
		return nil, err
	}
	if !mp {
		return nil, fmt.Errorf("client: fetch %q: the server did not answer with records", group)
	}
	msgs, err := decodeMessages(data)
	if errors.Is(err, errOldServer) {
		return nil, fmt.Errorf("client: fetch %q: %w", group, err)
	}
	if err != nil {
		return nil, fmt.Errorf("client: fetch %q: decode response: %w", group, err)
	}
	return msgs, nil
}

// errOldServer: a pgq older than the records form of a shared fetch
// answers the msgpack maps of its JSON instead.
var errOldServer = errors.New("pgq answered a shared fetch with maps, not records: it is older than typed shared messages (upgrade it, or use FetchMessages)")

// decodeMessages reads the records form of a shared fetch: a map whose
// "messages" is an array of [offset, index, delivery, ack_id, record
// body], each body a record holding the message's change alone (with its
// transaction's header and the change's ordinal). Unknown keys are
// skipped, so the server may add some.
func decodeMessages(data []byte) ([]Message, error) {
	var out []Message
	err := decodeMap(data, func(r *msgp.Reader, key []byte) (err error) {
		if string(key) == "messages" {
			out, err = messages(r)
		} else {
			r.Skip()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// messages reads the array of [offset, index, delivery, ack_id, body].
func messages(r *msgp.Reader) ([]Message, error) {
	n := r.ArrayOrNil()
	if r.Err != nil || n == 0 {
		return nil, r.Err
	}
	bd := bodyDecoders.Get().(*record.BodyDecoder)
	defer bodyDecoders.Put(bd)
	out := make([]Message, n)
	txs := make([]pgq.Transaction, n) // one allocation for the decoded records
	for i := range n {
		if c, ok := r.Peek(); ok && (c&0xf0 == 0x80 || c == 0xde || c == 0xdf) {
			return nil, errOldServer
		}
		if k := r.ArrayLen(); r.Err == nil && k != 5 {
			r.Fail("message %d: want [offset, index, delivery, ack_id, record], got %d elements", i, k)
		}
		m := &out[i]
		m.Offset = pgq.Offset(r.Uint(math.MaxUint64, "offset"))
		m.Index = int(r.Uint(math.MaxInt32, "index"))
		m.Delivery = int(r.Uint(math.MaxInt32, "delivery"))
		m.AckID = string(r.Bytes())
		if c, ok := r.Peek(); ok && c == 0xc0 {
			r.Fail("message %d: empty record", i)
		}
		body := r.Skip()
		if r.Err != nil {
			return nil, r.Err
		}
		tx := &txs[i]
		if err := bd.Decode(append([]byte(nil), body...), tx); err != nil {
			return nil, fmt.Errorf("message %d (offset %d): %w", i, m.Offset, err)
		}
		if len(tx.Changes) != 1 {
			return nil, fmt.Errorf("%w: message %d (offset %d): record holds %d changes, want 1", errWire, i, m.Offset, len(tx.Changes))
		}
		m.Xid, m.CommitLSN, m.EndLSN, m.CommitTime = tx.Xid, tx.CommitLSN, tx.EndLSN, tx.CommitTime
		m.Ordinal = tx.Ordinal(0)
		m.Change = &tx.Changes[0]
	}
	return out, nil
}
