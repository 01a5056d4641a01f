package consumers

import (
	"context"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

// SharedRecord is a shared group's message in the records form (the Go
// client's, api.MediaRecords): its place, delivery and ack id, and its
// change as a record body of its own.
type SharedRecord struct {
	Offset   pgq.Offset
	Index    int
	Delivery int
	AckID    string
	// Body is a record body (record.Version 1 layout) holding the
	// message's transaction header (xid, LSNs, commit time, origin, part,
	// backfill) and its one change, with the change's ordinal in the
	// whole transaction, so that it decodes alone into a typed change.
	Body []byte
}

// FetchSharedRecords is FetchShared with each message's change as a
// record body (SharedRecord) instead of JSON.
func (m *Manager) FetchSharedRecords(ctx context.Context, name string, req FetchRequest) ([]SharedRecord, error) {
	var out []SharedRecord
	err := m.fetchShared(ctx, name, req, func(off pgq.Offset, tx *pgq.Transaction, idx, delivery int, ackID string) {
		out = append(out, SharedRecord{Offset: off, Index: idx, Delivery: delivery, AckID: ackID, Body: oneChangeBody(tx, idx)})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// oneChangeBody encodes change idx of tx alone, under tx's header and
// with its ordinal, as a record body (without the record's version and
// checksum: the answer's own framing replaces them).
func oneChangeBody(tx *pgq.Transaction, idx int) []byte {
	one := *tx
	one.Changes = tx.Changes[idx : idx+1]
	one.FirstOrdinal, one.Ordinals = tx.Ordinal(idx), nil
	return record.Append(nil, &one)[record.HeaderSize:]
}
