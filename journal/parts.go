package journal

import (
	"fmt"

	"github.com/pgq-dev/pgq"
)

// A transaction larger than ingest's record size limit is stored as
// consecutive records (parts) with the same xid, commit LSN, end LSN and
// commit time, Part 0..n-1, Final on the last. Nothing else is written
// between two parts of one transaction, so the parts of an unfinished
// transaction can only sit at the tail of the journal.

// cutUnfinished runs at Open, after the log is open and j.first/j.last are
// set: while the last record is a non-final part, it truncates the log back
// to just before part 0 of that transaction. Such a tail is what a crash in
// the middle of journaling a multi-part transaction leaves behind; the
// transaction was never confirmed to PostgreSQL (confirmation waits for the
// final part), so the server sends it again and it is journaled again,
// completely. It returns the last record left (nil when the journal is
// empty). The cut is logged at warning level.
func (j *Journal) cutUnfinished(last *pgq.Transaction) (*pgq.Transaction, error) {
	for last != nil && !last.Final {
		p0 := j.partZero(last)
		to := p0 - 1
		if err := j.truncateBack(to); err != nil {
			return nil, err
		}
		j.log.Warn("journal: cut an unfinished multi-part transaction off the tail",
			"dir", j.dir, "xid", last.Xid, "end_lsn", last.EndLSN,
			"first_cut_offset", p0, "records_cut", int64(last.Offset-p0)+1)
		if j.last == 0 {
			return nil, nil
		}
		tx, err := j.Read(j.last)
		if err != nil {
			return nil, err
		}
		last = tx
	}
	return last, nil
}

// partZero returns the offset of part 0 of the transaction whose part last
// is (or the journal's first offset when part 0 is gone). Parts are
// consecutive, so it is normally last.Offset - last.Part; the records are
// checked and, should they disagree, walked back one by one.
func (j *Journal) partZero(last *pgq.Transaction) pgq.Offset {
	same := func(tx *pgq.Transaction) bool {
		return tx.Xid == last.Xid && tx.EndLSN == last.EndLSN && tx.CommitLSN == last.CommitLSN && !tx.Final
	}
	if pgq.Offset(last.Part) < last.Offset {
		off := last.Offset - pgq.Offset(last.Part)
		if off >= j.first {
			if tx, err := j.Read(off); err == nil && tx.Part == 0 && same(tx) {
				return off
			}
		}
	}
	off := last.Offset
	for off > j.first {
		tx, err := j.Read(off - 1)
		if err != nil || !same(tx) {
			break
		}
		off--
		if tx.Part == 0 {
			break
		}
	}
	return off
}

// truncateBack removes the records after off (off = first-1 empties the
// journal; the next Append continues at off+1). It is only used at Open.
func (j *Journal) truncateBack(off pgq.Offset) error {
	// The marker first: a crash during the cut never leaves it past the end.
	if err := j.mark.lower(off); err != nil {
		return fmt.Errorf("journal: truncate back to %d: %w", off, err)
	}
	// wal's truncate fsyncs the new tail and the directory.
	if err := j.w.TruncateBack(uint64(off)); err != nil {
		return fmt.Errorf("journal: truncate back to %d: %w", off, err)
	}
	if off < j.first {
		j.first, j.last = 0, 0
	} else {
		j.last = off
	}
	return nil
}

// lastFinalEndLSN returns the EndLSN of the last final record of batch, or
// 0 when batch holds none.
func lastFinalEndLSN(batch []*Record) pgq.LSN {
	for i := len(batch) - 1; i >= 0; i-- {
		if batch[i].Tx.Final {
			return batch[i].Tx.EndLSN
		}
	}
	return 0
}
