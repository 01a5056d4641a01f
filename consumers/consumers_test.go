package consumers_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/server"
)

func TestStartPositions(t *testing.T) {
	e := start(t, nil)
	ctx := ctxT(t)
	first := e.Insert(t, 1)
	time.Sleep(20 * time.Millisecond)
	mid := e.Insert(t, 1)
	last := e.Insert(t, 1)
	midTx, err := serverparts.Of(e.S).Journal.Read(mid)
	if err != nil {
		t.Fatal(err)
	}
	jfirst := serverparts.Of(e.S).Journal.FirstOffset()
	cases := []struct {
		from string
		want pgq.Offset // first delivered offset; 0: nothing
	}{
		{"earliest", jfirst},
		{"latest", 0},
		{fmt.Sprintf("offset:%d", first), first},
		{"lsn:" + midTx.CommitLSN.String(), mid},
		{"time:" + midTx.CommitTime.Format(time.RFC3339Nano), mid},
	}
	for i, c := range cases {
		name := fmt.Sprintf("g%d", i)
		if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: name, From: c.from}); err != nil {
			t.Fatalf("create from %s: %v", c.from, err)
		}
		res := fetch(t, e, name, "m", 100, 0)
		if c.want == 0 {
			if len(res.Transactions) != 0 || res.NextOffset != last+1 {
				t.Errorf("%s: got %v next %d, want nothing, next %d", c.from, offsets(res.Transactions), res.NextOffset, last+1)
			}
			continue
		}
		if len(res.Transactions) == 0 || res.Transactions[0].Offset != c.want || res.NextOffset != last+1 {
			t.Errorf("%s: got %v next %d, want from %d next %d", c.from, offsets(res.Transactions), res.NextOffset, c.want, last+1)
		}
	}
	// latest then sees new transactions only.
	n := e.Insert(t, 1)
	if res := fetch(t, e, "g1", "m", 100, 0); !slices.Equal(offsets(res.Transactions), []pgq.Offset{n}) {
		t.Errorf("latest after insert: %v, want [%d]", offsets(res.Transactions), n)
	}
	// offset out of range and future positions.
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "bad", From: fmt.Sprintf("offset:%d", n+5)}); !errors.Is(err, consumers.ErrOutOfRange) {
		t.Errorf("offset past end: %v, want out_of_range", err)
	}
	gi, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "future", From: "time:2999-01-01T00:00:00Z"})
	if err != nil || gi.CommittedOffset != n {
		t.Errorf("future time: %+v %v, want committed %d", gi, err, n)
	}
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "g0"}); !errors.Is(err, consumers.ErrExists) {
		t.Errorf("duplicate: %v", err)
	}
}

func TestFilters(t *testing.T) {
	e := start(t, nil)
	ctx := ctxT(t)
	for _, g := range []consumers.CreateRequest{
		{Name: "only_u", From: "latest", Tables: []string{"public.u"}},
		{Name: "glob_deletes", From: "latest", Tables: []string{"public.*"}, Ops: []string{"delete"}},
	} {
		if _, err := e.C.CreateGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	before := serverparts.Of(e.S).Journal.LastOffset()
	e.DB.Exec(t, "INSERT INTO t (v) VALUES ('a')", "INSERT INTO u VALUES (1)", "DELETE FROM t", "INSERT INTO t (v) VALUES ('b')")
	last := e.WaitLast(t, before+4)
	res := fetch(t, e, "only_u", "m", 100, 0)
	if got := offsets(res.Transactions); !slices.Equal(got, []pgq.Offset{before + 2}) || res.NextOffset != last+1 {
		t.Fatalf("only_u: %v next %d", got, res.NextOffset)
	}
	if ch := res.Transactions[0].Changes; len(ch) != 1 || ch[0].Table != "u" {
		t.Fatalf("only_u changes: %+v", ch)
	}
	res = fetch(t, e, "glob_deletes", "m", 100, 0)
	if got := offsets(res.Transactions); !slices.Equal(got, []pgq.Offset{before + 3}) || res.Transactions[0].Changes[0].Op != pgq.OpDelete {
		t.Fatalf("glob_deletes: %v", got)
	}
	// Filtered-out records advance the cursor on commit.
	if _, err := e.C.Commit(ctx, "only_u", "m", res.NextOffset-1, 0); err != nil {
		t.Fatal(err)
	}
	gi, _ := e.C.Group(ctx, "only_u")
	if gi.CommittedOffset != last || gi.Lag.Records != 0 {
		t.Fatalf("only_u after commit: %+v", gi)
	}
	// Bad filters.
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "x", Tables: []string{"[bad"}}); !errors.Is(err, consumers.ErrBadRequest) {
		t.Errorf("bad glob: %v", err)
	}
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "x", Ops: []string{"upsert"}}); !errors.Is(err, consumers.ErrBadRequest) {
		t.Errorf("bad op: %v", err)
	}
}

func TestLongPollWakeup(t *testing.T) {
	e := start(t, nil)
	ctx := ctxT(t)
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "g", From: "latest"}); err != nil {
		t.Fatal(err)
	}
	type out struct {
		res *client.FetchResult
		err error
		at  time.Time
	}
	ch := make(chan out, 1)
	go func() {
		res, err := e.C.Fetch(ctx, "g", client.FetchRequest{Member: "m", Wait: 20 * time.Second})
		ch <- out{res, err, time.Now()}
	}()
	select {
	case o := <-ch:
		t.Fatalf("fetch returned before any insert: %+v %v", o.res, o.err)
	case <-time.After(500 * time.Millisecond):
	}
	t0 := time.Now()
	e.DB.Exec(t, "INSERT INTO t (v) VALUES ('wake')")
	o := <-ch
	if o.err != nil || len(o.res.Transactions) != 1 {
		t.Fatalf("woken fetch: %+v %v", o.res, o.err)
	}
	if d := o.at.Sub(t0); d > 5*time.Second {
		t.Fatalf("fetch woke %s after the insert", d)
	}
	// An empty wait returns at once; a short wait returns empty after it.
	t1 := time.Now()
	res := fetch(t, e, "g", "m", 10, 300*time.Millisecond)
	if len(res.Transactions) != 0 || time.Since(t1) < 250*time.Millisecond {
		t.Fatalf("empty fetch: %+v after %s", res, time.Since(t1))
	}
}

func TestRedeliveryLeaseFencing(t *testing.T) {
	e := start(t, func(o *server.Options) { o.Consumers.LeaseTTL = 500 * time.Millisecond })
	ctx := ctxT(t)
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "g", From: "latest"}); err != nil {
		t.Fatal(err)
	}
	last := e.Insert(t, 3)
	a := fetch(t, e, "g", "A", 100, 0)
	if len(a.Transactions) != 3 {
		t.Fatalf("A got %v", offsets(a.Transactions))
	}
	// B conflicts while A's lease lives.
	if _, err := e.C.Fetch(ctx, "g", client.FetchRequest{Member: "B", FailFast: true}); !errors.Is(err, consumers.ErrConflict) {
		t.Fatalf("B fail-fast: %v, want conflict", err)
	}
	// Commit rules for A.
	if _, err := e.C.Commit(ctx, "g", "A", last+1, 0); !errors.Is(err, consumers.ErrInvalidCommit) {
		t.Fatalf("commit beyond delivered: %v", err)
	}
	if _, err := e.C.Commit(ctx, "g", "A", last-2, 0); err != nil {
		t.Fatalf("commit first: %v", err)
	}
	if _, err := e.C.Commit(ctx, "g", "A", last-3, 0); !errors.Is(err, consumers.ErrInvalidCommit) {
		t.Fatalf("commit backwards: %v", err)
	}
	// A "dies" (no more commits). B waits for the lease and gets the
	// uncommitted transactions again.
	t0 := time.Now()
	b, err := e.C.Fetch(ctx, "g", client.FetchRequest{Member: "B", Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("B waiting fetch: %v", err)
	}
	if got := offsets(b.Transactions); !slices.Equal(got, []pgq.Offset{last - 1, last}) {
		t.Fatalf("B redelivery %v, want [%d %d] (waited %s)", got, last-1, last, time.Since(t0))
	}
	// A is fenced.
	if _, err := e.C.Commit(ctx, "g", "A", last, 0); !errors.Is(err, consumers.ErrFenced) {
		t.Fatalf("fenced A commit: %v", err)
	}
	if _, err := e.C.Commit(ctx, "g", "B", last, 0); err != nil {
		t.Fatal(err)
	}
	// Release lets A in at once, after B's commit: nothing redelivered.
	if err := e.C.Release(ctx, "g", "B"); err != nil {
		t.Fatal(err)
	}
	if r := fetch(t, e, "g", "A", 100, 0); len(r.Transactions) != 0 || r.CommittedOffset != last {
		t.Fatalf("after release: %+v", r)
	}
	// An expired lease fences even without a takeover.
	time.Sleep(700 * time.Millisecond)
	if err := e.C.Heartbeat(ctx, "g", "A", 0); !errors.Is(err, consumers.ErrFenced) {
		t.Fatalf("heartbeat after expiry: %v", err)
	}
}

func TestConsumerLibraryAtLeastOnce(t *testing.T) {
	e := start(t, nil)
	ctx := ctxT(t)
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "g", From: "latest"}); err != nil {
		t.Fatal(err)
	}
	last := e.Insert(t, 5)
	c1, _ := e.C.Consumer("g", client.ConsumerOptions{Wait: time.Second})
	var seen []pgq.Offset
	boom := errors.New("boom")
	err := c1.Consume(ctx, func(ctx context.Context, tx *pgq.Transaction) error {
		if len(seen) == 3 {
			return boom
		}
		seen = append(seen, tx.Offset)
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Consume: %v", err)
	}
	if err := c1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	gi, _ := e.C.Group(ctx, "g")
	if gi.CommittedOffset != seen[2] {
		t.Fatalf("committed %d, want %d", gi.CommittedOffset, seen[2])
	}
	c2, _ := e.C.Consumer("g", client.ConsumerOptions{Wait: time.Second})
	var again []pgq.Offset
	for tx, err := range c2.Messages(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, tx.Offset)
		v, _, _ := tx.Changes[0].Get("v", false)
		if v.Kind != pgq.ValueText {
			t.Fatalf("value kind %c", v.Kind)
		}
		if tx.Offset == last {
			break
		}
	}
	if !slices.Equal(again, []pgq.Offset{last - 1, last}) {
		t.Fatalf("redelivered %v", again)
	}
	if err := c2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestResetDryRun(t *testing.T) {
	e := start(t, nil)
	ctx := ctxT(t)
	last := e.Insert(t, 3)
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "g", From: "latest"}); err != nil {
		t.Fatal(err)
	}
	rr, err := e.C.ResetGroup(ctx, "g", fmt.Sprintf("offset:%d", last-1), true)
	if err != nil || !rr.DryRun || rr.NextOffset != last-1 || rr.PreviousCommittedOffset != last || rr.Lag.Records != 2 {
		t.Fatalf("dry run: %+v %v", rr, err)
	}
	if gi, _ := e.C.Group(ctx, "g"); gi.CommittedOffset != last {
		t.Fatalf("dry run moved the group: %+v", gi)
	}
	if _, err := e.C.ResetGroup(ctx, "g", fmt.Sprintf("offset:%d", last-1), false); err != nil {
		t.Fatal(err)
	}
	if r := fetch(t, e, "g", "m", 10, 0); !slices.Equal(offsets(r.Transactions), []pgq.Offset{last - 1, last}) {
		t.Fatalf("after reset: %v", offsets(r.Transactions))
	}
	// Reset fences the current member.
	if _, err := e.C.ResetGroup(ctx, "g", "latest", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.C.Commit(ctx, "g", "m", last, 0); !errors.Is(err, consumers.ErrFenced) {
		t.Fatalf("commit after reset: %v", err)
	}
	if _, err := e.C.ResetGroup(ctx, "g", "bogus", true); !errors.Is(err, consumers.ErrBadPosition) {
		t.Fatalf("bad position: %v", err)
	}
	if _, err := e.C.ResetGroup(ctx, "nope", "latest", true); !errors.Is(err, consumers.ErrNotFound) {
		t.Fatalf("missing group: %v", err)
	}
}

func TestLag(t *testing.T) {
	e := start(t, nil)
	ctx := ctxT(t)
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "g", From: "latest"}); err != nil {
		t.Fatal(err)
	}
	last := e.Insert(t, 4)
	time.Sleep(200 * time.Millisecond)
	gi, err := e.C.Group(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	want, err := serverparts.Of(e.S).Index.BytesBetween(last-3, last)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := serverparts.Of(e.S).Journal.Read(last - 3)
	if gi.Lag.Records != 4 || gi.Lag.Bytes != want || gi.Lag.Bytes <= 0 {
		t.Fatalf("lag %+v, want 4 records, %d bytes", gi.Lag, want)
	}
	if s := time.Since(first.CommitTime).Seconds(); gi.Lag.Seconds < 0.15 || gi.Lag.Seconds > s+1 {
		t.Fatalf("lag seconds %f, want about %f", gi.Lag.Seconds, s)
	}
	code, body := e.call(t, "GET", "/v1/status", "")
	if code != 200 || !strings.Contains(string(body), `"groups":{"g":{`) || !strings.Contains(string(body), `"records":4`) {
		t.Fatalf("status: %d %s", code, body)
	}
	code, body = e.call(t, "GET", "/metrics", "")
	if code != 200 || !strings.Contains(string(body), `pgq_group_lag_records{group="g"} 4`) || !strings.Contains(string(body), fmt.Sprintf(`pgq_group_lag_bytes{group="g"} %d`, want)) {
		t.Fatalf("metrics lack the lag gauges")
	}
	r := fetch(t, e, "g", "m", 100, 0)
	if _, err := e.C.Commit(ctx, "g", "m", r.NextOffset-1, 0); err != nil {
		t.Fatal(err)
	}
	if gi, _ := e.C.Group(ctx, "g"); gi.Lag != (consumers.Lag{}) {
		t.Fatalf("caught-up lag %+v", gi.Lag)
	}
}
