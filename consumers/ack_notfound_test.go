package consumers

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/pgq-dev/pgq"
)

// TestSharedAckNeverDelivered: an ack id that names no delivery made is
// not_found, on an offset already read too: a change index the record
// does not have, a record the group's filter leaves empty, a delivery
// number the message never reached, a message read but never delivered.
// A retried ack of an acked message stays a no-op, and a settle with one
// such id changes nothing.
func TestSharedAckNeverDelivered(t *testing.T) {
	e := newSharedEnv(t, 0)
	e.add([]pgq.Change{row("t", 1)}, []pgq.Change{row("u", 1)}, []pgq.Change{row("t", 3)}, []pgq.Change{row("t", 3)})
	e.create(CreateRequest{Tables: []string{"public.t"}})
	ctx := context.Background()
	msgs := e.fetch(10)
	if got := ids(msgs); fmt.Sprint(got) != "[1.0.1 3.0.1]" {
		t.Fatalf("fetch: %v (4.0 waits for its key)", got)
	}
	n, err := e.m.Ack(ctx, "jobs", []string{msgs[0].AckID})
	mustCount(t, n, err, 1)
	n, err = e.m.Ack(ctx, "jobs", []string{msgs[0].AckID})
	mustCount(t, n, err, 0) // a retried ack
	for _, short := range []string{
		"1.5.1", // offset 1 holds one change
		"2.0.1", // offset 2 holds only a change of u: filtered out
		"3.0.2", // 3.0 is at its first delivery
		"4.0.1", // read, waits for its key: never delivered
		"9.0.1", // not read yet
	} {
		for _, settle := range []struct {
			name string
			f    func([]string) (int, error)
		}{
			{"ack", func(ids []string) (int, error) { return e.m.Ack(ctx, "jobs", ids) }},
			{"nak", func(ids []string) (int, error) { return e.m.Nak(ctx, "jobs", ids, 0) }},
			{"term", func(ids []string) (int, error) { return e.m.Term(ctx, "jobs", ids) }},
		} {
			// With a valid id beside it: that one must stay in flight.
			n, err := settle.f(append([]string{msgs[1].AckID}, e.id(short)...))
			if !errors.Is(err, ErrNotFound) || n != 0 {
				t.Errorf("%s of never-delivered %s: %d, %v; want not_found", settle.name, short, n, err)
			}
		}
	}
	if si := e.info(); si.InFlight != 1 || si.Parked != 0 {
		t.Fatalf("a refused settle changed the group: %+v", si)
	}
	n, err = e.m.Ack(ctx, "jobs", []string{msgs[1].AckID})
	mustCount(t, n, err, 1)
}
