package consumers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
)

// TestGroupBounds: lease_ttl (fetch, commit, heartbeat and the Manager's
// default), max_ack_pending and the number of table patterns are refused
// beyond their bounds with bad_request, at the bound accepted; a nak's
// negative delay is refused and changes nothing.
func TestGroupBounds(t *testing.T) {
	e := newSharedEnv(t, 0)
	e.add([]pgq.Change{row("t", 1)}, []pgq.Change{row("t", 2)})
	ctx := context.Background()
	bad := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrBadRequest) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line of bad_request", what, err)
		}
	}
	pats := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("public.t%d", i)
		}
		out[n-1] = "public.t"
		return out
	}
	_, err := e.m.Create(ctx, CreateRequest{Name: "many", From: "earliest", Tables: pats(MaxTablePatterns + 1)})
	bad("1001 table patterns", err)
	_, err = e.m.Create(ctx, CreateRequest{Name: "s", Mode: modeShared, MaxAckPending: MaxAckPendingLimit + 1})
	bad("max_ack_pending over the bound", err)
	if _, err := e.m.Create(ctx, CreateRequest{Name: "ex", From: "earliest", Tables: pats(MaxTablePatterns)}); err != nil {
		t.Fatalf("1000 table patterns: %v", err)
	}
	e.create(CreateRequest{MaxAckPending: MaxAckPendingLimit})

	for _, ttl := range []time.Duration{MaxLeaseTTL + time.Nanosecond, 100000 * time.Hour, -time.Second} {
		_, err := e.m.Fetch(ctx, "ex", FetchRequest{Member: "a", LeaseTTL: ttl})
		bad(fmt.Sprintf("fetch with lease_ttl %s", ttl), err)
	}
	res, err := e.m.Fetch(ctx, "ex", FetchRequest{Member: "a", LeaseTTL: MaxLeaseTTL})
	if err != nil || len(res.Transactions) != 2 {
		t.Fatalf("fetch with lease_ttl at the bound: %v %+v", err, res)
	}
	if exp := res.LeaseExpires.Sub(e.clock.Now()); exp != MaxLeaseTTL {
		t.Fatalf("lease of %s, want %s", exp, MaxLeaseTTL)
	}
	_, err = e.m.Commit(ctx, "ex", "a", 2, 2*time.Hour)
	bad("commit with lease_ttl 2h", err)
	_, err = e.m.Heartbeat(ctx, "ex", "a", 2*time.Hour)
	bad("heartbeat with lease_ttl 2h", err)
	if gi, _ := e.m.Info(ctx, "ex"); gi.CommittedOffset != 0 {
		t.Fatalf("a refused commit moved the cursor to %d", gi.CommittedOffset)
	}
	if _, err := e.m.Commit(ctx, "ex", "a", 2, time.Minute); err != nil {
		t.Fatal(err)
	}

	msgs := e.fetch(1)
	_, err = e.m.Nak(ctx, "jobs", full(msgs), -time.Second)
	bad("nak with a negative delay", err)
	if si := e.info(); si.InFlight != 1 {
		t.Fatalf("a refused nak changed the group: %+v", si)
	}

	_, err = NewManager(ManagerOptions{Journal: e.j, Index: e.ix, LeaseTTL: 2 * time.Hour})
	if err == nil {
		t.Fatal("NewManager with a 2h lease TTL: accepted")
	}
}

// TestGroupsStoredBeyondBoundsKeepWorking: groups written before the
// bounds (max_ack_pending, table patterns, a lease expiring in ten years)
// load and work as they are after a restart.
func TestGroupsStoredBeyondBoundsKeepWorking(t *testing.T) {
	e := newSharedEnv(t, 0)
	for i := range 5 {
		e.add([]pgq.Change{row("t", i)}, []pgq.Change{row("u", i)})
	}
	ctx := context.Background()
	e.create(CreateRequest{})
	if _, err := e.m.Create(ctx, CreateRequest{Name: "ex", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	many := make([]string, 3*MaxTablePatterns)
	for i := range many {
		many[i] = fmt.Sprintf("other.t%d", i)
	}
	many[len(many)-1] = "public.t"
	e.store("jobs", func(st *groupState) { st.Shared.MaxAckPending = 3 * MaxAckPendingLimit })
	e.store("ex", func(st *groupState) {
		st.Filter.Tables = many
		st.Member, st.LeaseExpiry = "old", e.clock.Now().Add(10*365*24*time.Hour).UnixMicro()
	})
	e.restart()

	if si := e.info(); si.MaxAckPending != 3*MaxAckPendingLimit {
		t.Fatalf("stored max_ack_pending: %d", si.MaxAckPending)
	}
	if msgs := e.fetch(100); len(msgs) != 10 {
		t.Fatalf("shared fetch: %d messages, want 10", len(msgs))
	}
	gi, err := e.m.Info(ctx, "ex")
	if err != nil || len(gi.Tables) != len(many) || gi.Member != "old" {
		t.Fatalf("stored exclusive group: %v %d patterns, member %q", err, len(gi.Tables), gi.Member)
	}
	if _, err := e.m.Fetch(ctx, "ex", FetchRequest{Member: "new", FailFast: true}); !errors.Is(err, ErrConflict) {
		t.Fatalf("another member while the stored lease lives: %v", err)
	}
	res, err := e.m.Fetch(ctx, "ex", FetchRequest{Member: "old"})
	if err != nil || len(res.Transactions) != 5 {
		t.Fatalf("fetch by the stored lease holder: %v %+v", err, res)
	}
	for _, tx := range res.Transactions {
		if tx.Changes[0].Table != "t" {
			t.Fatalf("the stored filter let through %s", tx.Changes[0].Table)
		}
	}
	if _, err := e.m.Commit(ctx, "ex", "old", res.NextOffset-1, 0); err != nil {
		t.Fatalf("commit by the stored lease holder: %v", err)
	}
}

// store changes group name's stored state as a version without the
// bounds could have written it.
func (e *sharedEnv) store(name string, change func(*groupState)) {
	e.t.Helper()
	g := e.m.lookup(name)
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	change(&g.st)
	if err := e.m.persist(g); err != nil {
		e.t.Fatal(err)
	}
}
