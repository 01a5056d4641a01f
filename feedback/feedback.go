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
	t.confirmed = max(t.confirmed, c)
	return t.confirmed
}
