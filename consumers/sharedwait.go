package consumers

import (
	"sync"

	"github.com/pgq-dev/pgq"
)

// Wake-ups of a shared group's members, one at a time.
//
// The members of a shared group long-poll one queue: whatever a new batch
// brings, one member's step takes it (up to its Max), and every other
// member's step finds nothing. Waiting on the journal's Changed, every
// append woke every waiting member (a hundred members of a group under a
// thousand transactions a second made a hundred thousand wake-ups a
// second, each taking the group's lock to find nothing: a thundering herd
// that took the CPU the journal and the other readers needed). With
// ManagerOptions.WakeFromAppends, the members wait in a queue per group
// instead (sharedWaits): Appended wakes the oldest waiter of each group
// with waiters, and a member whose step delivered something wakes the
// next one (wakeNextShared), which finds what the first left (beyond its
// Max) or nothing and stops the chain. So a batch costs one or two
// members' steps, not one per member.
//
// No batch is missed: a member registers with seen, the journal's last
// offset when its step last looked, and does not wait when the journal
// has grown past it (the records are readable before Appended runs, so
// a batch is either seen by the registration or wakes a waiter that is
// already queued). A woken member that leaves without a step (its
// context ended, the Manager closed) hands its wake to the next waiter.
// A settle (an ack or nack that may set a key or a place in flight free,
// a requeue of parked messages, a reset) wakes one waiter the same way
// (wakeSharedLocked) instead of closing the notify channel every member
// waited on; a member registers with gen, the group's count of those
// wake-ups before its step, and does not wait when it moved. A message
// that becomes visible or expires with the clock keeps the step's next
// time, as before.

// sharedWaiter is one shared member's long poll in its group's queue.
type sharedWaiter struct {
	ch   chan struct{} // closed on wake
	woke bool          // guarded by sharedWaits.mu
}

// sharedWaits is the queues of waiting shared members, by group.
type sharedWaits struct {
	mu sync.Mutex
	// byGroup holds each group's waiters, oldest first; a group without
	// waiters has no entry, so Appended costs what the groups with
	// waiters count.
	byGroup map[*group][]*sharedWaiter
}

// closedCh is a channel that is always closed: a wait that must not wait.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// waitShared queues a member of shared group g whose step looked at the
// journal up to seen after gen settle wake-ups (group.shWakes), and returns the channel to wait on and the release
// to call when done waiting (whether it ran a step after: stepped).
func (m *Manager) waitShared(g *group, seen pgq.Offset, gen uint64) (<-chan struct{}, func(stepped bool)) {
	sw := &m.sw
	sw.mu.Lock()
	if m.j.LastOffset() > seen || g.shWakes.Load() != gen {
		sw.mu.Unlock()
		return closedCh, func(bool) {}
	}
	w := &sharedWaiter{ch: make(chan struct{})}
	if sw.byGroup == nil {
		sw.byGroup = map[*group][]*sharedWaiter{}
	}
	sw.byGroup[g] = append(sw.byGroup[g], w)
	sw.mu.Unlock()
	return w.ch, func(stepped bool) {
		sw.mu.Lock()
		defer sw.mu.Unlock()
		if w.woke {
			if !stepped {
				sw.wakeLocked(g) // hand the wake on
			}
			return
		}
		q := sw.byGroup[g]
		for i, x := range q {
			if x == w {
				q = append(q[:i], q[i+1:]...)
				break
			}
		}
		sw.setLocked(g, q)
	}
}

// setLocked stores g's queue, dropping the entry when it is empty.
func (sw *sharedWaits) setLocked(g *group, q []*sharedWaiter) {
	if len(q) == 0 {
		delete(sw.byGroup, g)
		return
	}
	sw.byGroup[g] = q
}

// wakeLocked wakes g's oldest waiter, if any.
func (sw *sharedWaits) wakeLocked(g *group) {
	q := sw.byGroup[g]
	if len(q) == 0 {
		return
	}
	w := q[0]
	q[0] = nil
	sw.setLocked(g, q[1:])
	w.woke = true
	close(w.ch)
}

// wakeNextShared wakes the next waiting member of g: called after a step
// delivered something, so that what it left is taken.
func (m *Manager) wakeNextShared(g *group) {
	m.sw.mu.Lock()
	m.sw.wakeLocked(g)
	m.sw.mu.Unlock()
}

// wakeSharedOnAppend wakes the oldest waiting member of each shared group
// with waiters: a batch was appended (Appended).
func (m *Manager) wakeSharedOnAppend() {
	sw := &m.sw
	sw.mu.Lock()
	for g := range sw.byGroup {
		sw.wakeLocked(g)
	}
	sw.mu.Unlock()
}

// wakeSharedLocked tells g's members that a message may be deliverable
// without an append (a settle, a requeue, a reset): the notify channel
// of a Manager without WakeFromAppends, one waiter of the queue with it.
// Called with g.mu held (sw.mu is taken after g.mu, never before).
func (m *Manager) wakeSharedLocked(g *group) {
	g.sh.wake()
	g.shWakes.Add(1)
	m.wakeNextShared(g)
}
