package feedback

import (
	"sync"

	"github.com/pgq-dev/pgq"
)

// Tracker computes the confirmable LSN. The zero value is not usable; call
// NewTracker.
type Tracker struct {
	mu sync.Mutex // guards every field below
	// durable is the end LSN of the newest fsynced record.
	durable pgq.LSN
	// submitted is the end LSN of the newest transaction handed to the
	// journal; it is durable once durable >= submitted.
	submitted pgq.LSN
	// completed is the end LSN of the newest fully received transaction,
	// whether it produced a record or not.
	completed pgq.LSN
	// walEnd is the server's WAL end from the latest keepalive.
	walEnd pgq.LSN
	// inTx is true between Begin and Commit of a transaction.
	inTx bool
	// openStreams counts streamed (in-progress) transactions not yet
	// committed or aborted.
	openStreams int
	// confirmed is the highest value Confirmable returned.
	confirmed pgq.LSN
	// hold, when set, returns the hold floor (see SetHold); slotAt is the
	// slot's confirmed_flush_lsn when the session started.
	hold   func() (pgq.LSN, bool)
	slotAt pgq.LSN
}

// NewTracker starts from the journal's durable end LSN (0 for an empty
// journal).
func NewTracker(durableEnd pgq.LSN) *Tracker {
	return &Tracker{durable: durableEnd, submitted: durableEnd, completed: durableEnd, confirmed: durableEnd}
}

// Begin notes that a transaction's messages are arriving.
func (t *Tracker) Begin() {
	t.mu.Lock()
	t.inTx = true
	t.mu.Unlock()
}

// Submitted notes that the transaction ending at end was handed to the
// journal (not yet durable).
func (t *Tracker) Submitted(end pgq.LSN) {
	t.mu.Lock()
	t.inTx = false
	t.submitted = max(t.submitted, end)
	t.completed = max(t.completed, end)
	t.mu.Unlock()
}

// Skipped notes a transaction that completed without a journal record: it
// published nothing, or the journal already holds it.
func (t *Tracker) Skipped(end pgq.LSN) {
	t.mu.Lock()
	t.inTx = false
	t.completed = max(t.completed, end)
	t.mu.Unlock()
}

// Durable notes that every record through the one ending at end is fsynced.
func (t *Tracker) Durable(end pgq.LSN) {
	t.mu.Lock()
	t.durable = max(t.durable, end)
	t.mu.Unlock()
}

// ServerWALEnd notes the server's WAL end from a keepalive.
func (t *Tracker) ServerWALEnd(walEnd pgq.LSN) {
	t.mu.Lock()
	t.walEnd = max(t.walEnd, walEnd)
	t.mu.Unlock()
}

// StreamStarted and StreamEnded count streamed transactions in progress.
func (t *Tracker) StreamStarted() {
	t.mu.Lock()
	t.openStreams++
	t.mu.Unlock()
}

// StreamEnded notes that a streamed transaction committed or aborted.
func (t *Tracker) StreamEnded() {
	t.mu.Lock()
	if t.openStreams > 0 {
		t.openStreams--
	}
	t.mu.Unlock()
}

// Reset forgets the per-connection state (an open transaction, open
// streams) after a reconnect; durable and confirmed positions stay.
func (t *Tracker) Reset() {
	t.mu.Lock()
	t.inTx = false
	t.openStreams = 0
	t.walEnd = 0
	t.completed = max(t.completed, t.durable)
	t.mu.Unlock()
}

// SetHold makes every later Confirmable stop at the hold floor: hold
// returns it (ok false: no group holds the slot now), and is called with
// the Tracker's lock held, so it must be cheap and must not call back. It
// also takes back a start position past the floor that nothing confirmed
// yet (a restart over a journal whose coverage is past a holding group),
// but never below the slot's own position (SlotAt): a slot cannot be
// confirmed backwards.
func (t *Tracker) SetHold(hold func() (floor pgq.LSN, ok bool)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hold = hold
	if f, ok := t.floor(); ok {
		t.confirmed = min(t.confirmed, f)
	}
}

// SlotAt notes the slot's confirmed_flush_lsn as a session starts:
// PostgreSQL is there already, so no hold floor keeps the result below
// it.
func (t *Tracker) SlotAt(lsn pgq.LSN) {
	t.mu.Lock()
	t.slotAt = max(t.slotAt, lsn)
	t.mu.Unlock()
}

// floor is the hold floor, raised to the slot's position; t.mu is held.
func (t *Tracker) floor() (pgq.LSN, bool) {
	if t.hold == nil {
		return 0, false
	}
	f, ok := t.hold()
	return max(f, t.slotAt), ok
}

// Confirmable returns the LSN that may be sent as write, flush and apply.
func (t *Tracker) Confirmable() pgq.LSN {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.durable
	if t.durable >= t.submitted {
		c = max(c, t.completed)
		if !t.inTx && t.openStreams == 0 {
			c = max(c, t.walEnd)
		}
	}
	// Every branch, the idle advance included, stops at the floor.
	if f, ok := t.floor(); ok {
		c = min(c, f)
	}
	t.confirmed = max(t.confirmed, c)
	return t.confirmed
}
