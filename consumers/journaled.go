package consumers

import (
	"sync/atomic"
	"time"

	"github.com/pgq-dev/pgq"
)

// When each recent record was journaled, for
// pgq_journal_to_delivery_seconds.
//
// Manager.Appended runs at each batch's fsync (the server calls it from
// the committer's after-append hook), so the time it runs is when the
// batch's records became durable: "journaled". journaledTimes keeps that
// time for the last journaledRing offsets in a ring indexed by offset,
// so memory does not grow with the journal (512 KiB), and a delivery
// looks its record up with two atomic loads and no lock: one writer (the
// committer's hook, batch after batch, in offset order) and any number of
// readers (fetches).
//
// A record older than the ring (journaled by this process more than
// journaledRing records ago) is observed with the age of the oldest time
// the ring still holds: a lower bound, never a smaller figure than the
// truth. Records journaled before the process started, or by a writer
// that does not call Appended, are not observed.

// journaledRing is how many offsets the ring covers: at 1,000
// transactions a second, a minute.
const journaledRing = 1 << 16

type journaledTimes struct {
	// base is the origin of the times: monotonic, so a wall clock step
	// does not skew a figure.
	base time.Time
	// first is the first offset recorded (0: none yet); last the newest.
	first, last atomic.Uint64
	// at[off % journaledRing] is when off was journaled, in nanoseconds
	// since base.
	at [journaledRing]atomic.Int64
}

func newJournaledTimes() *journaledTimes { return &journaledTimes{base: time.Now()} }

// note records that the offsets from..to were journaled now.
func (jt *journaledTimes) note(from, to pgq.Offset) {
	if to < from {
		return
	}
	now := int64(time.Since(jt.base))
	if uint64(to-from) >= journaledRing {
		from = to - journaledRing + 1
	}
	for off := from; off <= to; off++ {
		jt.at[uint64(off)%journaledRing].Store(now)
	}
	jt.first.CompareAndSwap(0, uint64(from))
	jt.last.Store(uint64(to)) // after the times: a reader that sees it sees them
}

// age returns how long ago off was journaled (a lower bound when off is
// older than the ring); false when not known.
func (jt *journaledTimes) age(off pgq.Offset, now time.Time) (time.Duration, bool) {
	o := uint64(off)
	first, last := jt.first.Load(), jt.last.Load()
	if first == 0 || o < first || o > last {
		return 0, false
	}
	oldest := max(first, last-min(last, journaledRing-1))
	if o < oldest {
		o = oldest // overwritten: the oldest time kept bounds it from below
	}
	// A slot overwritten meanwhile holds a later time: still a lower
	// bound of off's age.
	t := jt.at[o%journaledRing].Load()
	return now.Sub(jt.base) - time.Duration(t), true
}
