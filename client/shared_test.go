package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
)

// consumeUntil runs sc.Consume until done() holds.
func consumeUntil(sc *client.SharedConsumer, handler func(context.Context, client.Message) error, done func() bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- sc.Consume(ctx, handler) }()
	for !done() {
		select {
		case err := <-errc:
			return fmt.Errorf("consume returned early: %w", err)
		case <-ctx.Done():
			return errors.New("timed out")
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		return fmt.Errorf("consume: %w", err)
	}
	return nil
}

// Over HTTP: handlers run in parallel on different keys, one at a time
// and in commit order on one key; an error naks (redelivered), Term
// parks; parked messages are listed, requeued and acked.
func TestSharedConsume(t *testing.T) {
	s := startServer(t, t.TempDir(), "127.0.0.1:0", nil)
	defer s.stop()
	s.append(40)
	c, err := client.New(s.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, g := range []api.CreateRequest{{Name: "byrow"}, {Name: "bytable", Key: "table"}} {
		g.Mode, g.From = "shared", "earliest"
		gi, err := c.CreateGroup(ctx, g)
		if err != nil || gi.Mode != "shared" || gi.Shared == nil {
			t.Fatalf("create: %+v, %v", gi, err)
		}
	}

	// Distinct rows: in parallel; offset 5 fails once, offset 7 is termed.
	sc, err := c.SharedConsumer("byrow", client.SharedConsumerOptions{Member: "a", Concurrency: 4, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex // guards acked, running, peak
		acked   = map[pgq.Offset]bool{}
		running int
		peak    int
		failed  atomic.Bool
	)
	err = consumeUntil(sc, func(ctx context.Context, m client.Message) error {
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		running--
		switch {
		case m.Offset == 5 && !failed.Swap(true):
			return errors.New("first try fails")
		case m.Offset == 7:
			return client.Term(errors.New("poison"))
		}
		acked[m.Offset] = true
		return nil
	}, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) == 39 })
	if err != nil {
		t.Fatal(err)
	}
	if peak < 2 {
		t.Fatalf("peak concurrency %d: distinct keys were not handled in parallel", peak)
	}
	parked, err := c.Parked(ctx, "byrow")
	if err != nil || len(parked) != 1 || parked[0].Offset != 7 || parked[0].Reason != "term" {
		t.Fatalf("parked: %+v, %v", parked, err)
	}
	gi, err := c.Group(ctx, "byrow")
	if err != nil || gi.CommittedOffset != 40 || gi.Shared.Parked != 1 || gi.Shared.Redeliveries != 1 {
		t.Fatalf("info: %+v %+v, %v", gi, gi.Shared, err)
	}
	if n, err := c.Requeue(ctx, "byrow", true); n != 1 || err != nil {
		t.Fatalf("requeue: %d, %v", n, err)
	}
	msgs, err := c.FetchMessages(ctx, "byrow", client.FetchRequest{Member: "b", Max: 10, Wait: time.Second})
	if err != nil || len(msgs) != 1 || msgs[0].Offset != 7 || msgs[0].Delivery != 1 {
		t.Fatalf("requeued fetch: %+v, %v", msgs, err)
	}
	if n, err := c.Ack(ctx, "byrow", msgs[0].AckID); n != 1 || err != nil {
		t.Fatalf("ack: %d, %v", n, err)
	}
	unknown := "99.0.1." + strings.Split(msgs[0].AckID, ".")[3]
	if _, err := c.Ack(ctx, "byrow", unknown); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown ack id: %v", err)
	}

	// One key (the table) across two consumers: serial, in commit order.
	var (
		order    []pgq.Offset
		inFlight atomic.Int32
		overlap  atomic.Bool
	)
	handler := func(ctx context.Context, m client.Message) error {
		if inFlight.Add(1) > 1 {
			overlap.Store(true)
		}
		time.Sleep(time.Millisecond)
		inFlight.Add(-1)
		mu.Lock()
		order = append(order, m.Offset)
		mu.Unlock()
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, member := range []string{"x", "y"} {
		sc, err := c.SharedConsumer("bytable", client.SharedConsumerOptions{Member: member, Concurrency: 3, Wait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- consumeUntil(sc, handler, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) >= 40 })
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if overlap.Load() {
		t.Fatal("two messages of one key were handled at once")
	}
	for i, off := range order {
		if off != pgq.Offset(i+1) {
			t.Fatalf("order: %v", order)
		}
	}
}

// The raw HTTP form of a shared fetch: JSON, and the same maps in msgpack;
// exclusive calls on a shared group are bad_request.
func TestSharedWire(t *testing.T) {
	s := startServer(t, t.TempDir(), "127.0.0.1:0", nil)
	defer s.stop()
	s.append(1)
	c, err := client.New(s.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "jobs", Mode: "shared", From: "earliest", AckWait: api.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	post := func(path, accept, body string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.addr+"/v1/groups/jobs"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, b := post("/fetch", "application/json", `{"member":"m","max":5}`)
	var doc struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || resp.StatusCode != 200 || len(doc.Messages) != 1 {
		t.Fatalf("fetch: %d %s %v", resp.StatusCode, b, err)
	}
	m := doc.Messages[0]
	for _, k := range []string{"offset", "xid", "commit_lsn", "commit_time", "index", "change", "delivery", "ack_id"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("message lacks %q: %s", k, b)
		}
	}
	if ch, ok := m["change"].(map[string]any); !ok || ch["op"] != "insert" || ch["table"] != "t" {
		t.Fatalf("change: %s", b)
	}
	// Nak it back, fetch it again in msgpack.
	resp, b = post("/nak", "application/json", `{"ack_ids":["`+m["ack_id"].(string)+`"]}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"count":1`) {
		t.Fatalf("nak: %d %s", resp.StatusCode, b)
	}
	resp, b = post("/fetch", api.MediaMsgpack, `{"member":"m"}`)
	var mp map[string][]map[string]any
	if err := msgpack.Unmarshal(b, &mp); err != nil || resp.Header.Get("Content-Type") != api.MediaMsgpack || len(mp["messages"]) != 1 {
		t.Fatalf("msgpack fetch: %v %q", err, b)
	}
	if d := fmt.Sprint(mp["messages"][0]["delivery"]); d != "2" {
		t.Fatalf("msgpack delivery: %#v", mp["messages"][0]["delivery"])
	}
	if _, ok := mp["messages"][0]["change"].(map[string]any); !ok {
		t.Fatalf("msgpack change is not a map: %#v", mp["messages"][0]["change"])
	}
	// The records form (the Go client's): [offset, index, delivery,
	// ack_id, record body] under "messages", with its own Content-Type.
	resp, b = post("/nak", "application/json", `{"ack_ids":["`+fmt.Sprint(mp["messages"][0]["ack_id"])+`"]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("nak: %d %s", resp.StatusCode, b)
	}
	resp, b = post("/fetch", api.MediaRecords, `{"member":"m"}`)
	var rec map[string][][]any
	if err := msgpack.Unmarshal(b, &rec); err != nil || resp.Header.Get("Content-Type") != api.MediaRecords || len(rec["messages"]) != 1 || len(rec["messages"][0]) != 5 {
		t.Fatalf("records fetch: %v %s %q", err, resp.Header.Get("Content-Type"), b)
	}
	if m := rec["messages"][0]; fmt.Sprint(m[0], m[1], m[2]) != "1 0 3" {
		t.Fatalf("records fetch: offset, index, delivery %v", m[:3])
	}
	for path, body := range map[string]string{"/commit": `{"member":"m","offset":0}`, "/heartbeat": `{"member":"m"}`, "/release": `{"member":"m"}`} {
		resp, b = post(path, "application/json", body)
		if resp.StatusCode != 400 || !strings.Contains(string(b), "shared group") {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
	resp, b = post("/ack", "application/json", `{"ack_ids":["1.0.1"],"all":true}`)
	if resp.StatusCode != 400 {
		t.Fatalf("ack with all: %d %s", resp.StatusCode, b)
	}
}

// A member that fetched and died (never acks) loses its messages to
// another after the ack wait; pgq restarts under a running Consume, which
// rides through and gets what was not acked again. Every message is
// handled, and handled by the end.
func TestSharedCrashAndRestart(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{now: time.Now()}
	s := startServer(t, dir, "127.0.0.1:0", clk)
	addr := s.addr
	c := dial(t, addr)
	ctx := context.Background()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "jobs", Mode: "shared", From: "earliest", AckWait: api.Duration(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	s.append(30)
	// The member that dies: fetches 5 and never settles them.
	dead, err := c.FetchMessages(ctx, "jobs", client.FetchRequest{Member: "dead", Max: 5})
	if err != nil || len(dead) != 5 {
		t.Fatalf("fetch: %v, %v", dead, err)
	}
	sc, err := c.SharedConsumer("jobs", client.SharedConsumerOptions{Member: "live", Concurrency: 4, Wait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex // guards handled
		handled = map[pgq.Offset]int{}
	)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(handled) }
	// While gated, the live member's handlers block: it holds at most
	// Concurrency + Prefetch (8) messages, so of 20 new ones the dead
	// member is sure to get some.
	var gated atomic.Bool
	gate := make(chan struct{})
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- sc.Consume(cctx, func(hctx context.Context, m client.Message) error {
			if gated.Load() {
				select { // hold the live member so the dead one gets some
				case <-gate:
				case <-hctx.Done():
					return hctx.Err()
				}
			}
			mu.Lock()
			handled[m.Offset]++
			mu.Unlock()
			return nil
		})
	}()
	waitUntil(t, "the live member's share", func() bool { return count() >= 25 })
	if count() != 25 {
		t.Fatalf("handled %d before the ack wait ended, want 25", count())
	}
	// Acks go out in batches after the handlers: the clock moves only
	// once all 25 are acked, or their ack wait would end too (under -race
	// the acks can lag behind the handlers).
	waitUntil(t, "the live member's acks", func() bool {
		gi, err := c.Group(ctx, "jobs")
		return err == nil && gi.Shared.InFlight == 5
	})
	clk.Advance(10 * time.Second) // the dead member's ack wait ends
	waitUntil(t, "the dead member's share", func() bool { return count() >= 30 })

	// A restart with messages in flight.
	msgs, err := c.FetchMessages(ctx, "jobs", client.FetchRequest{Member: "dead"})
	if err != nil || len(msgs) != 0 {
		t.Fatalf("nothing left: %v, %v", msgs, err)
	}
	gated.Store(true)
	s.append(20)
	held, err := c.FetchMessages(ctx, "jobs", client.FetchRequest{Member: "dead", Max: 3, Wait: time.Second})
	if err != nil || len(held) == 0 {
		t.Fatalf("fetch before restart: %v, %v", held, err)
	}
	close(gate)
	if gi, err := c.Group(ctx, "jobs"); err != nil || gi.Shared.Redeliveries != 5 {
		t.Fatalf("redeliveries before the restart: %+v, %v", gi.Shared, err)
	}
	s.stop()
	time.Sleep(200 * time.Millisecond) // pgq is down: Consume retries
	s = startServer(t, dir, addr, clk)
	defer s.stop()
	// A message handled before the restart and acked after it (its ack is
	// a conflict) is delivered again: wait for the group, not the handler.
	waitUntil(t, "everything after the restart", func() bool {
		gi, err := c.Group(ctx, "jobs")
		return count() >= 50 && err == nil && gi.CommittedOffset == 50 && gi.Shared.InFlight == 0 && gi.Shared.Pending == 0
	})
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume: %v", err)
	}
	gi, err := c.Group(ctx, "jobs")
	if err != nil || gi.CommittedOffset != 50 || gi.Shared.InFlight != 0 {
		t.Fatalf("info: %+v %+v, %v", gi, gi.Shared, err)
	}
	if _, err := c.Ack(ctx, "jobs", held[0].AckID); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("ack of the previous run: %v", err)
	}
}

// Messages yields every message once, settled by the caller; one left
// unacked comes again after its ack wait; the loop ends with ctx's error.
func TestSharedMessages(t *testing.T) {
	clk := &clock{now: time.Now()}
	s := startServer(t, t.TempDir(), "127.0.0.1:0", clk)
	defer s.stop()
	s.append(20)
	c := dial(t, s.addr)
	ctx := context.Background()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "jobs", Mode: "shared", From: "earliest", AckWait: api.Duration(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	sc, err := c.SharedConsumer("jobs", client.SharedConsumerOptions{Member: "m", Prefetch: 7, Wait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var got []pgq.Offset
	for m, err := range sc.Messages(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.Offset)
		if m.Offset != 3 {
			if err := sc.Ack(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		if len(got) == 20 {
			break
		}
	}
	for i, off := range got {
		if off != pgq.Offset(i+1) {
			t.Fatalf("offsets: %v", got)
		}
	}
	clk.Advance(10 * time.Second) // offset 3's ack wait ends
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var again []client.Message
	var last error
	for m, err := range sc.Messages(cctx) {
		if err != nil {
			last = err
			continue
		}
		again = append(again, m)
		if err := sc.Ack(ctx, m); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	if len(again) != 1 || again[0].Offset != 3 || again[0].Delivery != 2 || !errors.Is(last, context.Canceled) {
		t.Fatalf("after the ack wait: %+v, last error %v", again, last)
	}
	gi, err := c.Group(ctx, "jobs")
	if err != nil || gi.CommittedOffset != 20 || gi.Shared.InFlight != 0 {
		t.Fatalf("info: %+v, %v", gi, err)
	}
	// The deprecated Committed is filled for one release.
	if gi.Committed != gi.CommittedOffset { //nolint:staticcheck // checks the deprecated copy
		t.Fatalf("deprecated Committed %d, CommittedOffset %d", gi.Committed, gi.CommittedOffset) //nolint:staticcheck
	}
}

// A member that stops gives back what it fetched ahead and never handled:
// another member gets those messages at once (the ack wait is a minute),
// with the next delivery count, and not parked although max_deliver is 1.
// A released delivery's ack id is over (conflict).
func TestSharedConsumeReleasesUnhandled(t *testing.T) {
	s := startServer(t, t.TempDir(), "127.0.0.1:0", nil)
	defer s.stop()
	s.append(60)
	c := dial(t, s.addr)
	ctx := context.Background()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "rel", Mode: "shared", From: "earliest",
		AckWait: api.Duration(time.Minute), MaxDeliver: 1}); err != nil {
		t.Fatal(err)
	}
	a, err := c.SharedConsumer("rel", client.SharedConsumerOptions{Member: "a", Prefetch: 50, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex // guards handled
		handled = map[pgq.Offset]bool{}
	)
	err = consumeUntil(a, func(ctx context.Context, m client.Message) error {
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		handled[m.Offset] = true
		return nil
	}, func() bool { mu.Lock(); defer mu.Unlock(); return len(handled) >= 3 })
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	n := len(handled)
	mu.Unlock()
	gi, err := c.Group(ctx, "rel")
	if err != nil || gi.Shared.InFlight != 0 || gi.Shared.Parked != 0 {
		t.Fatalf("after a stopped: %+v, %v (want nothing in flight, nothing parked)", gi.Shared, err)
	}
	start := time.Now()
	var got []client.Message
	for len(got) < 60-n && time.Since(start) < 5*time.Second {
		msgs, err := c.FetchShared(ctx, "rel", client.FetchRequest{Member: "b", Max: 100, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, msgs...)
	}
	if len(got) != 60-n {
		t.Fatalf("b got %d messages within %s, want the %d a did not handle", len(got), time.Since(start), 60-n)
	}
	redelivered := 0
	for _, m := range got {
		if handled[m.Offset] {
			t.Fatalf("offset %d was handled and acked by a, and delivered again", m.Offset)
		}
		switch m.Delivery {
		case 1:
		case 2:
			redelivered++
		default:
			t.Fatalf("offset %d: delivery %d", m.Offset, m.Delivery)
		}
	}
	if redelivered == 0 {
		t.Fatal("no message came back from a's prefetch: nothing was released")
	}
	// By hand: a released delivery is over; the next one is acked.
	if _, err := c.NakUnhandled(ctx, "rel", got[0].AckID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ack(ctx, "rel", got[0].AckID); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("ack of a released delivery: %v, want conflict", err)
	}
	again, err := c.FetchShared(ctx, "rel", client.FetchRequest{Member: "c", Max: 1, Wait: time.Second})
	if err != nil || len(again) != 1 || again[0].Offset != got[0].Offset || again[0].Delivery != got[0].Delivery+1 {
		t.Fatalf("after a release: %+v, %v", again, err)
	}
	if _, err := c.Nak(ctx, "rel", 0, again[0].AckID); err != nil {
		t.Fatal(err)
	}
	if gi, err := c.Group(ctx, "rel"); err != nil || gi.Shared.Parked != 1 {
		t.Fatalf("a nak past max_deliver parks (a release did not): %+v, %v", gi.Shared, err)
	}
	// Malformed: unhandled with a delay, or on another call.
	for path, body := range map[string]string{
		"nak":  `{"ack_ids":["` + got[1].AckID + `"],"unhandled":true,"delay":"5s"}`,
		"ack":  `{"ack_ids":["` + got[1].AckID + `"],"unhandled":true}`,
		"term": `{"ack_ids":["` + got[1].AckID + `"],"unhandled":true}`,
	} {
		resp, err := http.Post("http://"+s.addr+"/v1/groups/rel/"+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "bad_request") {
			t.Fatalf("%s %s: %d %s", path, body, resp.StatusCode, b)
		}
	}
}
