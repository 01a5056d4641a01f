package consumers

import (
	"context"
	"time"

	"github.com/pgq-dev/pgq"
)

// RecordBatch is what FetchRecords delivered: the fields of FetchResult,
// the lease generation, and each record either decoded or as its record
// body.
type RecordBatch struct {
	Records []FetchedRecord
	// NextOffset, Committed, LastOffset and LeaseExpires are FetchResult's.
	NextOffset, Committed, LastOffset pgq.Offset
	LeaseExpires                      time.Time
	// Generation is the lease generation the records were delivered
	// under: a commit carrying it is fenced once the lease ends.
	Generation uint64
}

// FetchedRecord is one delivered record.
type FetchedRecord struct {
	Offset pgq.Offset
	// Tx is the (filtered) transaction; set when FetchRecords decoded.
	Tx *pgq.Transaction
	// Body is the msgpack record body (record.Version): the journaled
	// bytes after the header when the record passes the group's filter
	// unchanged, else a fresh encoding; set when FetchRecords did not
	// decode.
	Body []byte
}

// FetchRecords is Fetch for an encoder of the wire: with decode every
// record comes as a transaction (FetchedRecord.Tx); without, as its record
// body (FetchedRecord.Body), so that a records response splices the
// journaled bytes without decoding and re-encoding them.
func (m *Manager) FetchRecords(ctx context.Context, name string, req FetchRequest, decode bool) (*RecordBatch, error) {
	b, err := m.fetch(ctx, name, req, decode)
	if err != nil {
		return nil, err
	}
	res := &RecordBatch{NextOffset: b.next, Committed: b.committed, LastOffset: b.last, LeaseExpires: b.leaseExpires, Generation: b.gen,
		Records: make([]FetchedRecord, len(b.recs))}
	for i := range b.recs {
		r := &b.recs[i]
		res.Records[i].Offset = r.off
		if decode {
			res.Records[i].Tx = r.tx
		} else {
			res.Records[i].Body = r.body()
		}
	}
	return res, nil
}

// IsShared reports whether the group name exists and is a shared group.
func (m *Manager) IsShared(name string) bool {
	g := m.lookup(name)
	return g != nil && g.exclusive() != nil
}
