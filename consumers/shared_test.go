package consumers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// fakeClock is a settable clock for ack wait and backoff.
type fakeClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// sharedEnv is a Manager over a real journal and index, without
// PostgreSQL.
type sharedEnv struct {
	t       *testing.T
	dir     string
	clock   *fakeClock
	j       *journal.Journal
	ix      *index.Index
	m       *Manager
	lastEnd pgq.LSN
}

func newSharedEnv(t *testing.T, segSize int) *sharedEnv {
	e := &sharedEnv{t: t, dir: t.TempDir(), clock: &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
	e.open(segSize)
	t.Cleanup(e.close)
	return e
}

func (e *sharedEnv) open(segSize int) {
	e.t.Helper()
	log := slog.New(slog.DiscardHandler)
	var err error
	if e.j, err = journal.Open(journal.Options{Dir: e.dir + "/journal", Logger: log, SegmentSize: segSize}); err != nil {
		e.t.Fatal(err)
	}
	if e.ix, err = index.Open(index.Options{Dir: e.dir + "/index", Logger: log}); err != nil {
		e.t.Fatal(err)
	}
	if e.m, err = NewManager(ManagerOptions{Journal: e.j, Index: e.ix, Logger: log, Now: e.clock.Now}); err != nil {
		e.t.Fatal(err)
	}
	e.lastEnd = e.j.LastEndLSN()
}

func (e *sharedEnv) close() {
	if e.m == nil {
		return
	}
	_ = e.m.Close()
	_ = e.ix.Close()
	_ = e.j.Close()
	e.m = nil
}

func (e *sharedEnv) restart() {
	e.close()
	e.open(0)
}

// row is an insert into public.<table> with key id.
func row(table string, id int) pgq.Change {
	return pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: table,
		Columns: []pgq.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "v", TypeOID: 25}},
		New:     []pgq.Value{{Kind: pgq.ValueText, Data: []byte(strconv.Itoa(id))}, {Kind: pgq.ValueText, Data: []byte("x")}}}
}

// add journals one transaction per change list.
func (e *sharedEnv) add(txs ...[]pgq.Change) {
	e.t.Helper()
	batch := make([]*pgq.Transaction, len(txs))
	for i, ch := range txs {
		e.lastEnd += 100
		batch[i] = &pgq.Transaction{Xid: uint32(e.lastEnd), CommitLSN: e.lastEnd - 10, EndLSN: e.lastEnd, CommitTime: e.clock.Now(), Final: true, Changes: ch}
	}
	recs := journal.Records(batch)
	if err := e.j.AppendRecords(recs); err != nil {
		e.t.Fatal(err)
	}
	entries := make([]index.Entry, len(batch))
	for i, r := range recs {
		entries[i] = index.EntryOf(r.Tx, r.Bytes, r.ChangeCount())
	}
	if err := e.ix.Add(entries); err != nil {
		e.t.Fatal(err)
	}
}

func (e *sharedEnv) create(req CreateRequest) {
	e.t.Helper()
	req.Mode, req.From = modeShared, "earliest"
	if req.Name == "" {
		req.Name = "jobs"
	}
	if _, err := e.m.Create(context.Background(), req); err != nil {
		e.t.Fatal(err)
	}
}

func (e *sharedEnv) fetch(max int) []SharedMessage {
	e.t.Helper()
	msgs, err := e.m.FetchShared(context.Background(), "jobs", FetchRequest{Member: "m", Max: max})
	if err != nil {
		e.t.Fatal(err)
	}
	return msgs
}

func (e *sharedEnv) info() *api.SharedInfo {
	e.t.Helper()
	gi, err := e.m.Info(context.Background(), "jobs")
	if err != nil {
		e.t.Fatal(err)
	}
	return gi.Shared
}

// ids returns the ack ids of msgs without their run epoch.
func ids(msgs []SharedMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		p := strings.Split(m.AckID, ".")
		out[i] = strings.Join(p[:3], ".")
	}
	return out
}

// full returns the ack ids of msgs.
func full(msgs []SharedMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.AckID
	}
	return out
}

// id completes "<offset>.<index>.<delivery>" with the group's run epoch.
func (e *sharedEnv) id(short string) []string {
	g := e.m.lookup("jobs")
	g.mu.Lock()
	defer g.mu.Unlock()
	return []string{short + "." + g.sh.epoch}
}

func mustCount(t *testing.T, n int, err error, want int) {
	t.Helper()
	if err != nil || n != want {
		t.Fatalf("got %d, %v; want %d", n, err, want)
	}
}

// Different keys go out in parallel; the same key one at a time, in
// commit order.
func TestSharedKeysParallelAndSerial(t *testing.T) {
	e := newSharedEnv(t, 0)
	e.add([]pgq.Change{row("t", 1), row("t", 2), row("t", 3)}, []pgq.Change{row("t", 1)}, []pgq.Change{row("u", 1)})
	e.create(CreateRequest{})
	msgs := e.fetch(10)
	if got := ids(msgs); fmt.Sprint(got) != "[1.0.1 1.1.1 1.2.1 3.0.1]" {
		t.Fatalf("first fetch: %v (want t:1, t:2, t:3 and u:1; t:1 at offset 2 waits)", got)
	}
	if msgs[0].Tx == nil || msgs[0].Offset != 1 || msgs[0].Delivery != 1 {
		t.Fatalf("message: %+v", msgs[0])
	}
	if got := e.fetch(10); len(got) != 0 {
		t.Fatalf("second fetch: %v (t:1 is in flight)", ids(got))
	}
	n, err := e.m.Ack(context.Background(), "jobs", e.id("1.0.1"))
	mustCount(t, n, err, 1)
	if got := ids(e.fetch(10)); fmt.Sprint(got) != "[2.0.1]" {
		t.Fatalf("after ack: %v", got)
	}
	// key none: everything at once.
	e2 := newSharedEnv(t, 0)
	e2.add([]pgq.Change{row("t", 1)}, []pgq.Change{row("t", 1)})
	e2.create(CreateRequest{Key: "none"})
	if got := e2.fetch(10); len(got) != 2 {
		t.Fatalf("key none: %v", ids(got))
	}
	// key table: one per table.
	e3 := newSharedEnv(t, 0)
	e3.add([]pgq.Change{row("t", 1), row("t", 2), row("u", 3)})
	e3.create(CreateRequest{Key: "table"})
	if got := ids(e3.fetch(10)); fmt.Sprint(got) != "[1.0.1 1.2.1]" {
		t.Fatalf("key table: %v", got)
	}
}

// A truncate waits for every earlier message of its tables and holds
// back later ones.
func TestSharedTruncateOrders(t *testing.T) {
	e := newSharedEnv(t, 0)
	e.add([]pgq.Change{row("t", 1), row("u", 1)},
		[]pgq.Change{{Op: pgq.OpTruncate, Tables: []string{"public.t"}}},
		[]pgq.Change{row("t", 2), row("u", 2)})
	e.create(CreateRequest{})
	if got := ids(e.fetch(10)); fmt.Sprint(got) != "[1.0.1 1.1.1 3.1.1]" {
		t.Fatalf("first: %v", got)
	}
	n, err := e.m.Ack(context.Background(), "jobs", e.id("1.0.1"))
	mustCount(t, n, err, 1)
	if got := ids(e.fetch(10)); fmt.Sprint(got) != "[2.0.1]" {
		t.Fatalf("truncate: %v", got)
	}
	n, err = e.m.Ack(context.Background(), "jobs", e.id("2.0.1"))
	mustCount(t, n, err, 1)
	if got := ids(e.fetch(10)); fmt.Sprint(got) != "[3.0.1]" {
		t.Fatalf("after truncate: %v", got)
	}
}

// Several members at once: never two messages of a key in flight, each
// key's messages in commit order, every message acked exactly once, with
// random naks on the way.
func TestSharedConcurrentMembersPerKeyOrder(t *testing.T) {
	e := newSharedEnv(t, 0)
	const keys, perKey = 10, 30
	var txs [][]pgq.Change
	for i := range keys * perKey {
		txs = append(txs, []pgq.Change{row("t", i%keys)})
	}
	e.add(txs...)
	e.create(CreateRequest{MaxAckPending: 50})
	var (
		mu       sync.Mutex // guards inFlight, seen, acked
		inFlight = map[string]bool{}
		seen     = map[string][]pgq.Offset{}
		acked    = map[pgq.Offset]int{}
		wg       sync.WaitGroup
		errs     = make(chan error, 8)
	)
	ctx := context.Background()
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				mu.Lock()
				done := len(acked) == keys*perKey
				mu.Unlock()
				if done {
					return
				}
				msgs, err := e.m.FetchShared(ctx, "jobs", FetchRequest{Member: "w" + strconv.Itoa(w), Max: 3, Wait: 20 * time.Millisecond})
				if err != nil {
					errs <- err
					return
				}
				for _, msg := range msgs {
					key := fmt.Sprint((msg.Offset - 1) % keys) // row id of offset o is (o-1) % keys
					mu.Lock()
					if inFlight[key] {
						mu.Unlock()
						errs <- fmt.Errorf("key %s: two messages in flight", key)
						return
					}
					inFlight[key] = true
					mu.Unlock()
					time.Sleep(time.Duration(rnd.IntN(200)) * time.Microsecond)
					nak := rnd.IntN(5) == 0 && msg.Delivery < 3
					mu.Lock()
					inFlight[key] = false
					if !nak {
						seen[key] = append(seen[key], msg.Offset)
						acked[msg.Offset]++
					}
					mu.Unlock()
					if nak {
						_, err = e.m.Nak(ctx, "jobs", []string{msg.AckID}, 0)
					} else {
						_, err = e.m.Ack(ctx, "jobs", []string{msg.AckID})
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for key, offs := range seen {
		for i := 1; i < len(offs); i++ {
			if offs[i] <= offs[i-1] {
				t.Fatalf("key %s out of order: %v", key, offs)
			}
		}
	}
	for off, n := range acked {
		if n != 1 {
			t.Fatalf("offset %d acked %d times", off, n)
		}
	}
	gi, _ := e.m.Info(ctx, "jobs")
	if gi.CommittedOffset != keys*perKey || gi.Shared.InFlight != 0 || gi.Shared.Pending != 0 || gi.Lag.Records != 0 {
		t.Fatalf("info: committed %d, %+v, lag %+v", gi.CommittedOffset, gi.Shared, gi.Lag)
	}
}

// Not acked within ack_wait: redelivered with delivery 2; the old ack id
// is refused and changes nothing.
func TestSharedAckWaitRedelivery(t *testing.T) {
	e := newSharedEnv(t, 0)
	e.add([]pgq.Change{row("t", 1)})
	e.create(CreateRequest{AckWait: api.Duration(10 * time.Second)})
	first := e.fetch(1)
	e.clock.Advance(9 * time.Second)
	if got := e.fetch(1); len(got) != 0 {
		t.Fatalf("redelivered before ack_wait: %v", ids(got))
	}
	// In progress: the ack wait restarts.
	n, err := e.m.InProgress(context.Background(), "jobs", full(first))
	mustCount(t, n, err, 1)
	e.clock.Advance(9 * time.Second)
	if got := e.fetch(1); len(got) != 0 {
		t.Fatalf("redelivered while in progress: %v", ids(got))
	}
	e.clock.Advance(time.Second)
	second := e.fetch(1)
	if len(second) != 1 || second[0].Delivery != 2 || ids(second)[0] != "1.0.2" {
		t.Fatalf("redelivery: %+v", second)
	}
	if _, err := e.m.Ack(context.Background(), "jobs", full(first)); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale ack: %v, want ErrConflict", err)
	}
	if _, err := e.m.Ack(context.Background(), "jobs", e.id("9.0.1")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown ack: %v, want ErrNotFound", err)
	}
	if _, err := e.m.Ack(context.Background(), "jobs", []string{"x"}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("bad ack id: %v", err)
	}
	n, err = e.m.Ack(context.Background(), "jobs", full(second))
	mustCount(t, n, err, 1)
	// A retried ack is harmless.
	n, err = e.m.Ack(context.Background(), "jobs", full(second))
	mustCount(t, n, err, 0)
	if si := e.info(); si.Redeliveries != 1 || si.InFlight != 0 {
		t.Fatalf("info: %+v", si)
	}
}

// Nak with a delay, and without one: the backoff steps.
func TestSharedNakDelayAndBackoff(t *testing.T) {
	e := newSharedEnv(t, 0)
	e.add([]pgq.Change{row("t", 1)})
	e.create(CreateRequest{Backoff: []api.Duration{api.Duration(time.Second), api.Duration(5 * time.Second)}, MaxDeliver: 10})
	ctx := context.Background()
	nak := func(delay time.Duration) {
		t.Helper()
		msgs := e.fetch(1)
		if len(msgs) != 1 {
			t.Fatalf("nothing to nak")
		}
		n, err := e.m.Nak(ctx, "jobs", full(msgs), delay)
		mustCount(t, n, err, 1)
	}
	waitFor := func(d time.Duration) {
		t.Helper()
		e.clock.Advance(d - time.Millisecond)
		if got := e.fetch(1); len(got) != 0 {
			t.Fatalf("visible before %s: %v", d, ids(got))
		}
		e.clock.Advance(time.Millisecond)
	}
	nak(7 * time.Second)
	waitFor(7 * time.Second)
	nak(0) // delivery 2: backoff[1]
	waitFor(5 * time.Second)
	nak(0) // delivery 3: the last step repeats
	waitFor(5 * time.Second)
	if got := e.fetch(1); len(got) != 1 || got[0].Delivery != 4 {
		t.Fatalf("after backoff: %+v", got)
	}
}

// max_deliver parks; parked messages survive a restart, are listed,
// requeued (delivery restarts) and acked; drop forgets them; retention
// keeps their records.
func TestSharedParkRequeueDrop(t *testing.T) {
	e := newSharedEnv(t, 0)
	e.add([]pgq.Change{row("t", 1)}, []pgq.Change{row("t", 2)}, []pgq.Change{row("t", 3)})
	e.create(CreateRequest{MaxDeliver: 2, AckWait: api.Duration(time.Second)})
	ctx := context.Background()
	msgs := e.fetch(10)
	if len(msgs) != 3 {
		t.Fatalf("fetch: %v", ids(msgs))
	}
	// offset 1: nak twice → parked; offset 2: termed; offset 3: acked.
	if n, err := e.m.Nak(ctx, "jobs", e.id("1.0.1"), 0); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	n, err := e.m.Term(ctx, "jobs", e.id("2.0.1"))
	mustCount(t, n, err, 1)
	n, err = e.m.Ack(ctx, "jobs", e.id("3.0.1"))
	mustCount(t, n, err, 1)
	if got := ids(e.fetch(10)); fmt.Sprint(got) != "[1.0.2]" {
		t.Fatalf("redelivery: %v", got)
	}
	e.clock.Advance(time.Second) // ack wait ends on the last delivery: parked
	if got := e.fetch(10); len(got) != 0 {
		t.Fatalf("parked message delivered: %v", ids(got))
	}
	gi, _ := e.m.Info(ctx, "jobs")
	if gi.CommittedOffset != 3 || gi.Shared.Parked != 2 {
		t.Fatalf("info: committed %d %+v", gi.CommittedOffset, gi.Shared)
	}
	if c, _ := e.m.MinCursor(); c != 0 {
		t.Fatalf("MinCursor %d: retention would drop parked records", c)
	}
	if _, err := e.m.Ack(ctx, "jobs", e.id("2.0.1")); !errors.Is(err, ErrConflict) {
		t.Fatalf("ack of a parked message: %v", err)
	}

	e.restart()
	parked, err := e.m.Parked(ctx, "jobs")
	if err != nil || len(parked) != 2 || parked[0].Offset != 1 || parked[0].Delivery != 2 || parked[1].Reason != "term" {
		t.Fatalf("parked after restart: %+v, %v", parked, err)
	}
	if got := e.fetch(10); len(got) != 0 {
		t.Fatalf("after restart: %v", ids(got))
	}
	n, err = e.m.Requeue(ctx, "jobs", []string{parked[0].AckID}, false)
	mustCount(t, n, err, 1)
	got := e.fetch(10)
	if fmt.Sprint(ids(got)) != "[1.0.1]" {
		t.Fatalf("requeued: %v", ids(got))
	}
	// A requeued message not acked yet survives a restart too, with its
	// delivery count.
	e.restart()
	got = e.fetch(10)
	if fmt.Sprint(ids(got)) != "[1.0.2]" {
		t.Fatalf("requeued after restart: %v", ids(got))
	}
	n, err = e.m.Ack(ctx, "jobs", full(got))
	mustCount(t, n, err, 1)
	if c, _ := e.m.MinCursor(); c != 1 {
		t.Fatalf("MinCursor %d, want 1 (offset 2 is parked)", c)
	}
	if _, err := e.m.Drop(ctx, "jobs", []string{"1.0.1"}, false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("drop of a message not parked: %v", err)
	}
	n, err = e.m.Drop(ctx, "jobs", nil, true)
	mustCount(t, n, err, 1)
	if c, _ := e.m.MinCursor(); c != 3 {
		t.Fatalf("MinCursor %d, want 3", c)
	}
	e.restart()
	if si := e.info(); si.Parked != 0 {
		t.Fatalf("after drop and restart: %+v", si)
	}
}

// A restart redelivers what was in flight, with its delivery count, and
// nothing acked (above the low-water mark included).
func TestSharedRestartRedelivers(t *testing.T) {
	e := newSharedEnv(t, 0)
	e.add([]pgq.Change{row("t", 1)}, []pgq.Change{row("t", 2)}, []pgq.Change{row("t", 3)}, []pgq.Change{row("t", 4)})
	e.create(CreateRequest{})
	ctx := context.Background()
	msgs := e.fetch(10)
	n, err := e.m.Ack(ctx, "jobs", []string{msgs[0].AckID, msgs[2].AckID})
	mustCount(t, n, err, 2)
	e.restart()
	gi, _ := e.m.Info(ctx, "jobs")
	if gi.CommittedOffset != 1 {
		t.Fatalf("low-water after restart: %d", gi.CommittedOffset)
	}
	// Offset 3 was acked above the low-water mark: not delivered again;
	// 2 and 4 were in flight: delivered again, as their second delivery.
	again := e.fetch(10)
	if got := ids(again); fmt.Sprint(got) != "[2.0.2 4.0.2]" {
		t.Fatalf("after restart: %v", got)
	}
	// The same delivery number of the previous run is refused.
	if _, err := e.m.Ack(ctx, "jobs", []string{msgs[1].AckID}); !errors.Is(err, ErrConflict) {
		t.Fatalf("ack id of the previous run: %v", err)
	}
	if _, err := e.m.Ack(ctx, "jobs", []string{"2.0.1"}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("ack id without its run: %v", err)
	}
	n, err = e.m.Ack(ctx, "jobs", full(again))
	mustCount(t, n, err, 2)
	gi, _ = e.m.Info(ctx, "jobs")
	if gi.CommittedOffset != 4 {
		t.Fatalf("low-water at the end: %d", gi.CommittedOffset)
	}
	e.restart()
	if got := e.fetch(10); len(got) != 0 {
		t.Fatalf("after the last restart: %v", ids(got))
	}
}

// Retention never drops a record holding an unacked message.
func TestSharedRetentionKeepsUnacked(t *testing.T) {
	e := newSharedEnv(t, 512)
	for i := range 40 {
		e.add([]pgq.Change{row("t", i)})
	}
	e.create(CreateRequest{MaxAckPending: 100})
	ctx := context.Background()
	msgs := e.fetch(100)
	var rest []string
	for _, m := range msgs[1:] {
		rest = append(rest, m.AckID)
	}
	n, err := e.m.Ack(ctx, "jobs", rest)
	mustCount(t, n, err, 39)
	if _, err := e.m.Retain(ctx, RetentionOptions{}); err != nil {
		t.Fatal(err)
	}
	if first := e.j.FirstOffset(); first != 1 {
		t.Fatalf("retention dropped offset 1 (unacked): first %d", first)
	}
	n, err = e.m.Ack(ctx, "jobs", []string{msgs[0].AckID})
	mustCount(t, n, err, 1)
	if _, err := e.m.Retain(ctx, RetentionOptions{}); err != nil {
		t.Fatal(err)
	}
	if first := e.j.FirstOffset(); first <= 1 {
		t.Fatalf("retention kept acked records: first %d", first)
	}
}

// Exclusive and shared operations refuse the other kind of group; bad
// configurations are refused.
func TestSharedModeChecks(t *testing.T) {
	e := newSharedEnv(t, 0)
	e.add([]pgq.Change{row("t", 1)})
	e.create(CreateRequest{})
	ctx := context.Background()
	if _, err := e.m.Create(ctx, CreateRequest{Name: "ex", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Fetch(ctx, "jobs", FetchRequest{Member: "m"}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("exclusive fetch of a shared group: %v", err)
	}
	if _, err := e.m.Commit(ctx, "jobs", "m", 1, 0); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("commit of a shared group: %v", err)
	}
	if _, err := e.m.FetchShared(ctx, "ex", FetchRequest{Member: "m"}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("shared fetch of an exclusive group: %v", err)
	}
	if _, err := e.m.Ack(ctx, "ex", []string{"1.0.1.x"}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("ack on an exclusive group: %v", err)
	}
	res, err := e.m.Fetch(ctx, "ex", FetchRequest{Member: "m"})
	if err != nil || len(res.Transactions) != 1 {
		t.Fatalf("exclusive fetch: %v, %v", res, err)
	}
	for _, req := range []CreateRequest{
		{Name: "b1", Mode: "fanout"},
		{Name: "b2", Key: "pk"},
		{Name: "b3", Mode: modeShared, Key: "row"},
		{Name: "b4", Mode: modeShared, MaxDeliver: -1},
	} {
		if _, err := e.m.Create(ctx, req); !errors.Is(err, ErrBadRequest) {
			t.Fatalf("create %+v: %v", req, err)
		}
	}
	gi, _ := e.m.Info(ctx, "ex")
	if gi.Mode != "exclusive" || gi.Shared != nil {
		t.Fatalf("exclusive info: %+v", gi)
	}
}

// BenchmarkSharedFetchAck: 8 members fetch batches of 100 messages over
// 1000 keys and ack each batch (Manager calls, no HTTP).
func BenchmarkSharedFetchAck(b *testing.B) {
	e := &sharedEnv{dir: b.TempDir(), clock: &fakeClock{now: time.Now()}}
	log := slog.New(slog.DiscardHandler)
	var err error
	if e.j, err = journal.Open(journal.Options{Dir: e.dir + "/journal", Logger: log}); err != nil {
		b.Fatal(err)
	}
	if e.ix, err = index.Open(index.Options{Dir: e.dir + "/index", Logger: log}); err != nil {
		b.Fatal(err)
	}
	if e.m, err = NewManager(ManagerOptions{Journal: e.j, Index: e.ix, Logger: log, Now: e.clock.Now}); err != nil {
		b.Fatal(err)
	}
	defer e.close()
	n := max(b.N, 1000)
	batch := make([]*pgq.Transaction, 0, 1000)
	var end pgq.LSN
	for i := range n {
		end += 100
		batch = append(batch, &pgq.Transaction{Xid: uint32(i), CommitLSN: end - 10, EndLSN: end, CommitTime: time.Now().UTC(), Final: true, Changes: []pgq.Change{row("t", i%1000)}})
		if len(batch) == cap(batch) || i == n-1 {
			if err := e.j.Append(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	ctx := context.Background()
	if _, err := e.m.Create(ctx, CreateRequest{Name: "jobs", Mode: modeShared, From: "earliest", MaxAckPending: 2000}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var (
		wg   sync.WaitGroup
		done sync.Map
		cnt  = make(chan int, 1024)
	)
	total := 0
	stop := make(chan struct{})
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				msgs, err := e.m.FetchShared(ctx, "jobs", FetchRequest{Member: "w" + strconv.Itoa(w), Max: 100, Wait: 10 * time.Millisecond})
				if err != nil || len(msgs) == 0 {
					continue
				}
				if _, err := e.m.Ack(ctx, "jobs", full(msgs)); err != nil {
					b.Error(err)
					return
				}
				for _, m := range msgs {
					done.Store(m.Offset, true)
				}
				cnt <- len(msgs)
			}
		}()
	}
	for total < n {
		total += <-cnt
	}
	close(stop)
	go func() {
		for range cnt {
		}
	}()
	wg.Wait()
	close(cnt)
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
}

// A parked message whose record a size cap dropped is still listed (and
// can be dropped) but not requeued.
func TestSharedParkedRecordCapped(t *testing.T) {
	e := newSharedEnv(t, 512)
	for i := range 40 {
		e.add([]pgq.Change{row("t", i)})
	}
	e.create(CreateRequest{MaxAckPending: 100})
	ctx := context.Background()
	msgs := e.fetch(100)
	n, err := e.m.Term(ctx, "jobs", full(msgs[:1]))
	mustCount(t, n, err, 1)
	n, err = e.m.Ack(ctx, "jobs", full(msgs[1:]))
	mustCount(t, n, err, 39)
	if _, err := e.m.Retain(ctx, RetentionOptions{MaxBytes: 1}); err != nil {
		t.Fatal(err)
	}
	if e.j.FirstOffset() <= 1 {
		t.Fatalf("the cap dropped nothing")
	}
	parked, err := e.m.Parked(ctx, "jobs")
	if err != nil || len(parked) != 1 || !strings.Contains(parked[0].Reason, "removed by retention") {
		t.Fatalf("parked: %+v, %v", parked, err)
	}
	if _, err := e.m.Requeue(ctx, "jobs", nil, true); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("requeue of a dropped record: %v", err)
	}
	n, err = e.m.Drop(ctx, "jobs", []string{parked[0].AckID}, false)
	mustCount(t, n, err, 1)
}

// Random acks, naks and terms by several members, with a restart in the
// middle and the parked messages requeued until none is left: per run, a
// key never has two messages in flight and goes in commit order; in the
// end every message is acked and the low-water mark is at the end.
func TestSharedRandomSettleAcrossRestart(t *testing.T) {
	e := newSharedEnv(t, 0)
	const keys, perKey = 7, 20
	var txs [][]pgq.Change
	for i := range keys * perKey {
		txs = append(txs, []pgq.Change{row("t", i%keys)})
	}
	e.add(txs...)
	e.create(CreateRequest{MaxDeliver: 3, Backoff: []api.Duration{0}})
	ctx := context.Background()
	acked := map[pgq.Offset]bool{}
	run := func(rounds int, seed uint64) {
		t.Helper()
		var (
			mu       sync.Mutex // guards inFlight, last, acked
			inFlight = map[pgq.Offset]bool{}
			last     = map[pgq.Offset]pgq.Offset{} // key → last offset delivered in this run
			wg       sync.WaitGroup
			errs     = make(chan error, 4)
		)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rnd := rand.New(rand.NewPCG(seed, uint64(w)))
				for range rounds {
					msgs, err := e.m.FetchShared(ctx, "jobs", FetchRequest{Member: "w", Max: 2})
					if err != nil {
						errs <- err
						return
					}
					for _, msg := range msgs {
						key := (msg.Offset - 1) % keys
						mu.Lock()
						if inFlight[key] {
							mu.Unlock()
							errs <- fmt.Errorf("key %d: two in flight", key)
							return
						}
						if msg.Offset < last[key] {
							mu.Unlock()
							errs <- fmt.Errorf("key %d: offset %d after %d", key, msg.Offset, last[key])
							return
						}
						inFlight[key], last[key] = true, msg.Offset
						mu.Unlock()
						var n int
						r := rnd.IntN(10)
						mu.Lock()
						inFlight[key] = false
						mu.Unlock()
						switch {
						case r < 6:
							n, err = e.m.Ack(ctx, "jobs", []string{msg.AckID})
							if err == nil && n == 1 {
								mu.Lock()
								acked[msg.Offset] = true
								mu.Unlock()
							}
						case r < 9:
							_, err = e.m.Nak(ctx, "jobs", []string{msg.AckID}, 0)
						default:
							_, err = e.m.Term(ctx, "jobs", []string{msg.AckID})
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	run(20, 1)
	e.restart()
	for i := 0; len(acked) < keys*perKey; i++ {
		if i == 50 {
			t.Fatalf("acked %d of %d", len(acked), keys*perKey)
		}
		run(30, uint64(i+2))
		if _, err := e.m.Requeue(ctx, "jobs", nil, true); err != nil && !errors.Is(err, ErrBadRequest) {
			t.Fatal(err)
		}
	}
	gi, _ := e.m.Info(ctx, "jobs")
	if gi.CommittedOffset != keys*perKey || gi.Shared.Parked != 0 {
		t.Fatalf("end: committed %d %+v", gi.CommittedOffset, gi.Shared)
	}
}

// crash reopens the journal, index and Manager without Manager.Close:
// only what the calls wrote before they answered is there.
func (e *sharedEnv) crash() {
	_ = e.ix.Close()
	_ = e.j.Close()
	e.m = nil
	e.open(0)
}

// Acks above the low-water mark, nak delays, delivery counts and parks
// survive a crash; a reset drops the acks and counts, not the parks.
func TestSharedStateAcrossCrash(t *testing.T) {
	e := newSharedEnv(t, 0)
	e.add([]pgq.Change{row("t", 1)}, []pgq.Change{row("t", 2)}, []pgq.Change{row("t", 3)}, []pgq.Change{row("t", 4)})
	e.create(CreateRequest{})
	ctx := context.Background()
	msgs := e.fetch(10)
	n, err := e.m.Nak(ctx, "jobs", full(msgs[:1]), time.Hour)
	mustCount(t, n, err, 1)
	n, err = e.m.Ack(ctx, "jobs", full(msgs[2:3]))
	mustCount(t, n, err, 1)
	n, err = e.m.Term(ctx, "jobs", full(msgs[3:4]))
	mustCount(t, n, err, 1)
	// Offset 2 stays in flight: its count went with the writes above.
	e.crash()
	got := e.fetch(10)
	if fmt.Sprint(ids(got)) != "[2.0.2]" {
		t.Fatalf("after the crash: %v (want only the message in flight, as its 2nd delivery)", ids(got))
	}
	if si := e.info(); si.Parked != 1 || si.Pending != 1 || si.InFlight != 1 {
		t.Fatalf("after the crash: %+v", si)
	}
	n, err = e.m.Ack(ctx, "jobs", full(got))
	mustCount(t, n, err, 1)
	e.clock.Advance(time.Hour) // the nak delay ends
	if got := ids(e.fetch(10)); fmt.Sprint(got) != "[1.0.2]" {
		t.Fatalf("after the nak delay: %v", got)
	}
	if _, err := e.m.Reset(ctx, "jobs", "earliest", false); err != nil {
		t.Fatal(err)
	}
	again := e.fetch(10)
	if got := ids(again); fmt.Sprint(got) != "[1.0.1 2.0.1 3.0.1]" {
		t.Fatalf("after the reset: %v", got)
	}
	e.restart()
	again = e.fetch(10)
	if got := ids(again); fmt.Sprint(got) != "[1.0.2 2.0.2 3.0.2]" {
		t.Fatalf("after the reset and a restart: %v", got)
	}
	n, err = e.m.Ack(ctx, "jobs", full(again))
	mustCount(t, n, err, 3)
	e.crash()
	gi, _ := e.m.Info(ctx, "jobs")
	if gi.CommittedOffset != 4 || gi.Shared.Parked != 1 {
		t.Fatalf("end: committed %d %+v", gi.CommittedOffset, gi.Shared)
	}
	var left []string
	if err := e.ix.GroupEntries("jobs", func(k, v []byte) error {
		left = append(left, string(k[:1]))
		return nil
	}); err != nil || fmt.Sprint(left) != "[p]" {
		t.Fatalf("entries left: %v, %v (want the parked one only)", left, err)
	}
}

// A parked list in the group's value (as an earlier version stored it) is
// read and moved into entries.
func TestSharedLegacyParkedList(t *testing.T) {
	e := newSharedEnv(t, 0)
	e.add([]pgq.Change{row("t", 1)}, []pgq.Change{row("t", 2)})
	e.create(CreateRequest{})
	raw, err := e.ix.GetGroup("jobs")
	if err != nil {
		t.Fatal(err)
	}
	var st groupState
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	st.Cursor, st.Parked = 2, []parkedRecord{{Offset: 1, Index: 0, Delivery: 3, Parked: 1, Reason: "old"}}
	if raw, err = json.Marshal(&st); err != nil {
		t.Fatal(err)
	}
	e.close()
	ix, err := index.Open(index.Options{Dir: e.dir + "/index", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.PutGroup("jobs", raw); err != nil {
		t.Fatal(err)
	}
	_ = ix.Close()
	e.open(0)
	e.restart() // Close writes the move
	raw, _ = e.ix.GetGroup("jobs")
	parked, err := e.m.Parked(context.Background(), "jobs")
	if err != nil || len(parked) != 1 || parked[0].Reason != "old" || parked[0].Delivery != 3 || strings.Contains(string(raw), `"parked"`) {
		t.Fatalf("parked: %+v, %v; value %s", parked, err, raw)
	}
}

// A release (a nak of unhandled messages) makes them visible at once,
// whatever the backoff, never parks them (max_deliver 1 here), spends
// their delivery number (the old ack id conflicts) and is durable.
func TestSharedReleaseUnhandled(t *testing.T) {
	e := newSharedEnv(t, 0)
	e.add([]pgq.Change{row("t", 1)}, []pgq.Change{row("t", 2)})
	e.create(CreateRequest{MaxDeliver: 1, Backoff: []api.Duration{api.Duration(time.Hour)}})
	ctx := context.Background()
	msgs := e.fetch(10)
	if fmt.Sprint(ids(msgs)) != "[1.0.1 2.0.1]" {
		t.Fatalf("first fetch: %v", ids(msgs))
	}
	n, err := e.m.ReleaseUnhandled(ctx, "jobs", full(msgs))
	mustCount(t, n, err, 2)
	if si := e.info(); si.InFlight != 0 || si.Parked != 0 {
		t.Fatalf("after the release: %+v", si)
	}
	if _, err := e.m.Ack(ctx, "jobs", full(msgs[:1])); !errors.Is(err, ErrConflict) {
		t.Fatalf("ack of a released delivery: %v", err)
	}
	again := e.fetch(10)
	if fmt.Sprint(ids(again)) != "[1.0.2 2.0.2]" {
		t.Fatalf("after the release: %v", ids(again))
	}
	n, err = e.m.ReleaseUnhandled(ctx, "jobs", full(again[1:]))
	mustCount(t, n, err, 1)
	e.restart()
	// 1 was in flight (delivery 2), 2 released after its delivery 2: both
	// come back as delivery 3.
	if got := ids(e.fetch(10)); fmt.Sprint(got) != "[1.0.3 2.0.3]" {
		t.Fatalf("after restart: %v", got)
	}
}
