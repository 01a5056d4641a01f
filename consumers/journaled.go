package consumers

import (
	"sync/atomic"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// The bytes journaled up to each recent record, for a woken fetch's
// skip-ahead (wakeStart): the bytes of the records it starts after
// count towards MaxBytes as a collect over them would have counted them.
//
// Manager.Appended takes in each durable batch in offset order;
// journaledBytes keeps, for the last journaledRing offsets, the running
// total of their stored sizes in a ring indexed by offset, so memory
// does not grow with the journal (512 KiB). One writer (the committer's
// hook), any number of readers (fetches), no lock: a slot is stored
// before the newest offset that covers it, and a reader checks after
// reading that its slots were not overwritten meanwhile.

// journaledRing is how many offsets the ring covers: at 1,000
// transactions a second, a minute; wakeStart needs fewer than scanLimit.
const journaledRing = 1 << 16

type journaledBytes struct {
	// first is the first offset of the dense run recorded (0: none yet);
	// last the newest.
	first, last atomic.Uint64
	// cum[off % journaledRing] is the stored bytes of the records
	// first..off; total is that of last (the writer's alone).
	cum   [journaledRing]atomic.Int64
	total int64
}

// note takes in the records of batch (dense, in offset order) with
// their stored sizes: entries[i]'s Bytes when it is batch[i]'s index
// entry (the size collect counts for a record it passes over), else the
// record's.
func (jb *journaledBytes) note(batch []*journal.Record, entries []index.Entry) {
	for i, r := range batch {
		off := uint64(r.Tx.Offset)
		size := r.Bytes
		if i < len(entries) && entries[i].Offset == r.Tx.Offset {
			size = entries[i].Bytes
		}
		if l := jb.last.Load(); l != 0 && off != l+1 {
			jb.first.Store(0) // not dense (not with the committer's hook): start over
		}
		jb.total += int64(size)
		jb.cum[off%journaledRing].Store(jb.total)
		jb.first.CompareAndSwap(0, off)
		jb.last.Store(off) // after the slot: a reader that sees it sees the slot
	}
}

// between returns the stored bytes of the records from..to, when the
// ring holds them all.
func (jb *journaledBytes) between(from, to pgq.Offset) (int64, bool) {
	a, b := uint64(from)-1, uint64(to) // cum(b) - cum(a)
	first, last := jb.first.Load(), jb.last.Load()
	if first == 0 || from == 0 || a < first || b > last || b < a || last-a >= journaledRing {
		return 0, false
	}
	n := jb.cum[b%journaledRing].Load() - jb.cum[a%journaledRing].Load()
	if jb.last.Load()-a >= journaledRing || jb.first.Load() != first {
		return 0, false // overwritten or restarted while read
	}
	return n, true
}
