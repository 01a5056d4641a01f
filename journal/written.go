package journal

import (
	"sync/atomic"
	"time"

	"github.com/pgq-dev/pgq"
)

// When the recent records were written, and their stored sizes
// (WrittenAt, StoredBytes).
//
// Append records, for the last writtenRing offsets, the time the batch's
// fsync returned and the running total of the records' stored sizes, in
// rings indexed by offset (1 MiB: memory does not grow with the
// journal), before it publishes the batch: a reader that sees an offset
// (LastOffset, Changed) finds its slots. One writer (under appendMu), any
// number of readers, no lock: an offset's slots are stored before the
// newest offset that covers them, and StoredBytes checks after reading
// that its slots were not overwritten meanwhile.

// writtenRing is how many offsets WrittenAt and StoredBytes know: at
// 1,000 records a second, a minute.
const writtenRing = 1 << 16

type writtenTimes struct {
	// base is the origin of the times: monotonic, so a wall clock step
	// does not skew an age.
	base time.Time
	// first is the first offset of the run of dense offsets recorded (0:
	// none); last the newest.
	first, last atomic.Uint64
	// at[off % writtenRing] is when off was written, in nanoseconds since
	// base.
	at [writtenRing]atomic.Int64
	// cum[off % writtenRing] is the stored bytes of the records written
	// up to off; total that of last (the writer's alone).
	cum   [writtenRing]atomic.Int64
	total int64
}

func newWrittenTimes() *writtenTimes { return &writtenTimes{base: time.Now()} }

// note records that batch (dense offsets, Tx.Offset and Bytes set) was
// written now.
func (wt *writtenTimes) note(batch []*Record) {
	if len(batch) == 0 {
		return
	}
	now := int64(time.Since(wt.base))
	from := uint64(batch[0].Tx.Offset)
	if l := wt.last.Load(); l != 0 && from != l+1 {
		wt.first.Store(0) // not after the last one (a truncation): start over
	}
	for _, r := range batch {
		off := uint64(r.Tx.Offset)
		wt.total += int64(r.Bytes)
		wt.at[off%writtenRing].Store(now)
		wt.cum[off%writtenRing].Store(wt.total)
	}
	wt.first.CompareAndSwap(0, from)
	wt.last.Store(uint64(batch[len(batch)-1].Tx.Offset))
}

// WrittenAt returns when the record at off was written (its batch's
// fsync returned), for the records this Journal appended since it was
// opened; false for others. For a record older than the last 65,536 it
// returns the time of the oldest one it still knows, which is later:
// an age computed from it is a lower bound.
func (j *Journal) WrittenAt(off pgq.Offset) (time.Time, bool) {
	wt := j.written
	o := uint64(off)
	first, last := wt.first.Load(), wt.last.Load()
	if first == 0 || o < first || o > last {
		return time.Time{}, false
	}
	if oldest := last - min(last-first, writtenRing-1); o < oldest {
		o = oldest
	}
	// A slot overwritten meanwhile holds a later time: still a lower
	// bound of off's age.
	return wt.base.Add(time.Duration(wt.at[o%writtenRing].Load())), true
}

// StoredBytes returns the stored size of the records from..to (each
// Record.Bytes, the size the index's entries carry), when this Journal
// appended them and all since from-1 since it was opened, within the
// last 65,536 records; false otherwise.
func (j *Journal) StoredBytes(from, to pgq.Offset) (int64, bool) {
	wt := j.written
	a, b := uint64(from)-1, uint64(to) // cum(b) - cum(a)
	first, last := wt.first.Load(), wt.last.Load()
	if first == 0 || from == 0 || a < first || b > last || b < a || last-a >= writtenRing {
		return 0, false
	}
	n := wt.cum[b%writtenRing].Load() - wt.cum[a%writtenRing].Load()
	if wt.last.Load()-a >= writtenRing || wt.first.Load() != first {
		return 0, false // overwritten or restarted while read
	}
	return n, true
}
