package consumers

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
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
// journaled bytes without decoding and re-encoding them. It holds every
// delivered record in memory: an answer written as it is read uses
// FetchStream.
func (m *Manager) FetchRecords(ctx context.Context, name string, req FetchRequest, decode bool) (*RecordBatch, error) {
	s, err := m.FetchStream(ctx, name, req, decode)
	if err != nil {
		return nil, err
	}
	res := &RecordBatch{NextOffset: s.NextOffset, Committed: s.Committed, LastOffset: s.LastOffset, LeaseExpires: s.LeaseExpires,
		Generation: s.Generation, Records: make([]FetchedRecord, 0, s.Len)}
	for r, err := range s.Records() {
		if err != nil {
			return nil, err
		}
		res.Records = append(res.Records, r)
	}
	return res, nil
}

// RecordStream is an exclusive fetch's answer whose records are read from
// the journal as Records yields them, so that writing it holds one record
// (one journal part) at a time, whatever the size of the transactions.
// The records are chosen, checked (each record's checksum; a filtered
// group's records decoded) and marked delivered before FetchStream
// returns: what is cheap to check is checked before an answer starts.
type RecordStream struct {
	// NextOffset, Committed, LastOffset, LeaseExpires and Generation are
	// RecordBatch's.
	NextOffset, Committed, LastOffset pgq.Offset
	LeaseExpires                      time.Time
	Generation                        uint64
	// Len is the number of records Records yields when no read fails
	// (the count a msgpack array needs before its elements).
	Len int

	m      *Manager
	g      *group
	b      *fetchBatch
	decode bool
}

// FetchStream is FetchRecords whose records are read one at a time by
// the returned stream's Records: the long poll, the lease and the choice
// of records happen here, the reading of the records' contents there.
func (m *Manager) FetchStream(ctx context.Context, name string, req FetchRequest, decode bool) (*RecordStream, error) {
	b, err := m.fetch(ctx, name, req)
	if err != nil {
		return nil, err
	}
	return &RecordStream{NextOffset: b.next, Committed: b.committed, LastOffset: b.last, LeaseExpires: b.leaseExpires,
		Generation: b.gen, Len: len(b.recs), m: m, g: b.g, b: b, decode: decode}, nil
}

// Records yields the stream's records in order, each read from the
// journal when its turn comes: decoded and filtered (FetchedRecord.Tx)
// when the stream decodes, else as its record body. A record is not
// reused after the next one is read. A read that fails (the record was
// removed by retention, or is corrupt although it was checked before)
// yields its error once and ends the sequence: the answer being written
// is then incomplete and must be abandoned, never ended as if whole.
// Such a failure is logged with its offset and counted in
// pgq_fetch_aborted_total. Records may be ranged over once.
func (s *RecordStream) Records() iter.Seq2[FetchedRecord, error] {
	return func(yield func(FetchedRecord, error) bool) {
		for _, p := range s.b.recs {
			r, err := s.read(p.off)
			if err != nil {
				s.m.fetchAborted.WithLabelValues(s.g.name).Inc()
				s.m.o.Logger.Error("consumers: fetch answer abandoned: a record could not be read after the answer started",
					"group", s.g.name, "offset", uint64(p.off), "error", err)
				yield(FetchedRecord{}, err)
				return
			}
			if !yield(r, nil) {
				return
			}
			if p.final { // written: the transaction is handed out
				s.m.observeJournalDelivery(p.off)
			}
		}
	}
}

// read reads the record at off as Records yields it.
func (s *RecordStream) read(off pgq.Offset) (FetchedRecord, error) {
	raw, err := s.m.readJournaled(s.g, off)
	if err != nil {
		return FetchedRecord{}, err
	}
	f := &s.b.filter
	if f.IsZero() && !s.decode {
		if err := record.Check(raw); err != nil {
			return FetchedRecord{}, fmt.Errorf("consumers: fetch %q: offset %d: %w", s.g.name, off, err)
		}
		return FetchedRecord{Offset: off, Body: raw[record.HeaderSize:]}, nil
	}
	tx, err := decodeRecord(s.g, off, raw)
	if err != nil {
		return FetchedRecord{}, err
	}
	ft := f.Apply(tx)
	switch {
	case ft == nil:
		return FetchedRecord{}, fmt.Errorf("consumers: fetch %q: offset %d: the record no longer passes the group's filter", s.g.name, off)
	case s.decode:
		return FetchedRecord{Offset: off, Tx: ft}, nil
	case ft == tx: // unchanged by the filter: spliced verbatim
		return FetchedRecord{Offset: off, Body: raw[record.HeaderSize:]}, nil
	}
	return FetchedRecord{Offset: off, Body: record.Append(nil, ft)[record.HeaderSize:]}, nil
}

// IsShared reports whether the group name exists and is a shared group.
func (m *Manager) IsShared(name string) bool {
	g := m.lookup(name)
	return g != nil && g.exclusive() != nil
}
