package bridge

import "github.com/pgq-dev/pgq"

// partCounter counts ordinals across the parts of a multi-part
// transaction for records journaled before the ordinals were recorded
// (record's eleventh body element): such a later part decodes with
// ordinals from 0 again, so its changes would reuse the ids of part 0's.
// A part's ordinals are always above the previous part's; a later part
// whose first ordinal is not is numbered on from the previous part's last
// ordinal + 1 (which for an unfiltered group is exactly the change's
// ordinal in the whole transaction: the number of changes before it).
// It needs the earlier parts: the bridge commits only at a transaction's
// end, so a restart reads every transaction from its first part. A group
// cursor left inside such a transaction by something else (an older
// bridge) cannot be counted from: fix reports it (unknown).
type partCounter struct {
	xid  uint32
	lsn  pgq.LSN
	part uint32
	next uint32 // the ordinal after the last change of the last part
	ok   bool
}

// fix returns tx, or a shallow copy with its ordinals moved on, and
// reports unknown when tx is a later part in the old layout whose
// earlier parts were not seen.
func (pc *partCounter) fix(tx *pgq.Transaction) (_ *pgq.Transaction, unknown bool) {
	same := pc.ok && pc.xid == tx.Xid && pc.lsn == tx.CommitLSN && tx.Backfill == "" && tx.Part > pc.part
	out := tx
	switch {
	case len(tx.Changes) == 0:
	case tx.Part == 0 || tx.Backfill != "":
	case same && tx.Ordinal(0) < pc.next:
		cp := *tx
		if tx.Ordinals != nil {
			cp.Ordinals = make([]uint32, len(tx.Ordinals))
			for i, o := range tx.Ordinals {
				cp.Ordinals[i] = o + pc.next
			}
			cp.FirstOrdinal = cp.Ordinals[0]
		} else {
			cp.FirstOrdinal = tx.FirstOrdinal + pc.next
		}
		out = &cp
	case !same && tx.FirstOrdinal == 0 && tx.Ordinals == nil:
		unknown = true
	}
	pc.xid, pc.lsn, pc.part, pc.ok = tx.Xid, tx.CommitLSN, tx.Part, true
	if n := len(out.Changes); n > 0 {
		pc.next = out.Ordinal(n-1) + 1
	} else if tx.Part == 0 {
		pc.next = 0
	}
	return out, unknown
}
