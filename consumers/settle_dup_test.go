package consumers

import (
	"context"
	"testing"

	"github.com/pgq-dev/pgq"
)

// TestSharedRepeatedAckIDs: a settle naming one message several times (the
// same id repeated, or spelled with leading zeros) settles it once: the
// count is true and in_flight never goes below the messages really in
// flight, so max_ack_pending still holds afterwards, also across a
// restart.
func TestSharedRepeatedAckIDs(t *testing.T) {
	e := newSharedEnv(t, 0)
	for i := range 6 {
		e.add([]pgq.Change{row("t", i)})
	}
	e.create(CreateRequest{MaxAckPending: 2, MaxDeliver: 10})
	ctx := context.Background()
	msgs := e.fetch(10)
	if len(msgs) != 2 {
		t.Fatalf("fetch under max_ack_pending 2: %v", ids(msgs))
	}
	a := msgs[0].AckID
	n, err := e.m.Nak(ctx, "jobs", []string{a, a, a}, 0)
	mustCount(t, n, err, 1)
	if si := e.info(); si.InFlight != 1 {
		t.Fatalf("in_flight after a nak naming one message 3 times: %d, want 1", si.InFlight)
	}
	// max_ack_pending 2 with one in flight: one more, not three.
	if got := e.fetch(10); len(got) != 1 {
		t.Fatalf("fetch after the nak: %v, want one message (max_ack_pending 2)", ids(got))
	}

	msgs = e.fetch(10) // nothing: two in flight
	if len(msgs) != 0 {
		t.Fatalf("fetch at max_ack_pending: %v", ids(msgs))
	}
	inFlight := e.inFlightIDs()
	if len(inFlight) != 2 {
		t.Fatalf("in flight: %v", inFlight)
	}
	b, c := inFlight[0], inFlight[1]
	// The same id twice, and spelled with a leading zero: one message each.
	n, err = e.m.Ack(ctx, "jobs", []string{b, b, "0" + b})
	mustCount(t, n, err, 1)
	n, err = e.m.InProgress(ctx, "jobs", []string{c, c})
	mustCount(t, n, err, 1)
	n, err = e.m.Term(ctx, "jobs", []string{c, c})
	mustCount(t, n, err, 1)
	si := e.info()
	if si.InFlight != 0 || si.Parked != 1 {
		t.Fatalf("after ack and term with repeated ids: %+v", si)
	}
	p, err := e.m.Parked(ctx, "jobs")
	if err != nil || len(p) != 1 {
		t.Fatalf("parked: %+v %v", p, err)
	}
	n, err = e.m.Requeue(ctx, "jobs", []string{p[0].AckID, p[0].AckID}, false)
	mustCount(t, n, err, 1)

	e.restart()
	got := e.fetch(10)
	if len(got) != 2 {
		t.Fatalf("after restart, fetch under max_ack_pending 2: %v", ids(got))
	}
	n, err = e.m.Nak(ctx, "jobs", []string{got[0].AckID, got[0].AckID}, 0)
	mustCount(t, n, err, 1)
	if si := e.info(); si.InFlight != 1 {
		t.Fatalf("in_flight after restart and a repeated nak: %d", si.InFlight)
	}
}

// inFlightIDs returns the ack ids of the messages in flight, in order.
func (e *sharedEnv) inFlightIDs() []string {
	g := e.m.lookup("jobs")
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, m := range g.sh.ordered() {
		if !m.done && m.inFlight {
			out = append(out, formatAckID(m.id, m.delivery, g.sh.epoch))
		}
	}
	return out
}
