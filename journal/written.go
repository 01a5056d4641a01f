package journal

import (
	"sync/atomic"
	"time"

	"github.com/pgq-dev/pgq"
)

// When the recent records were written (WrittenAt).
//
// Append records, for the last writtenRing offsets, the time the batch's
// fsync returned, in a ring indexed by offset (512 KiB: memory does not
// grow with the journal), before it publishes the batch: a reader that
// sees an offset (LastOffset, Changed) finds its time. One writer (under
// appendMu), any number of readers, no lock: an offset's slot is stored
// before the newest offset that covers it.

// writtenRing is how many offsets WrittenAt knows: at 1,000 records a
// second, a minute.
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
}

func newWrittenTimes() *writtenTimes { return &writtenTimes{base: time.Now()} }

// note records that the offsets from..to were written now.
func (wt *writtenTimes) note(from, to pgq.Offset) {
	if to < from {
		return
	}
	now := int64(time.Since(wt.base))
	if l := wt.last.Load(); l != 0 && uint64(from) != l+1 {
		wt.first.Store(0) // not after the last one (a truncation): start over
	}
	lo := uint64(from)
	if uint64(to)-lo >= writtenRing {
		lo = uint64(to) - writtenRing + 1
	}
	for off := lo; off <= uint64(to); off++ {
		wt.at[off%writtenRing].Store(now)
	}
	wt.first.CompareAndSwap(0, uint64(from))
	wt.last.Store(uint64(to))
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
