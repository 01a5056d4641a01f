package journal

import "github.com/pgq-dev/pgq"

// Record is one record as the journal appends it: a transaction (or one
// part of one), either to be encoded by Append or already encoded by its
// producer, and, once appended, its size in the journal.
type Record struct {
	// Tx carries the record's header fields (xid, LSNs, commit time,
	// part, final, origin, backfill) and, unless Encoded is set, its
	// changes. Append sets Tx.Offset.
	Tx *pgq.Transaction
	// Encoded, when not nil, is the record already encoded (a spilled
	// chunk restamped with record.Restamp): Append writes it as is and
	// Tx.Changes may be nil. EncodedChanges is its number of changes.
	// The buffer is handed over: Append compacts it in place (Encoded
	// then holds the stored form) and writes it without a copy.
	Encoded        []byte
	EncodedChanges int
	// ReadsSchema and ReadsTable, when ReadsTable is set with Encoded,
	// say every change of Encoded reads that one table (a backfill
	// chunk's record, record.ReadsEncoder): the index takes the record's
	// subjects from them (index.EntryOfReads) instead of walking every
	// change of a record of thousands of rows.
	ReadsSchema, ReadsTable string
	// Bytes is the record's encoded size; Append sets it.
	Bytes int
}

// ChangeCount is the number of changes the record carries, in Tx.Changes
// or in Encoded.
func (r *Record) ChangeCount() int {
	if r.Encoded != nil {
		return r.EncodedChanges
	}
	return len(r.Tx.Changes)
}

// Records wraps transactions as records to be encoded by Append.
func Records(txs []*pgq.Transaction) []*Record {
	recs := make([]*Record, len(txs))
	for i, tx := range txs {
		recs[i] = &Record{Tx: tx}
	}
	return recs
}
