package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/httpapi/apitest"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// clock is a settable clock for lease expiry.
type clock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *clock) Now() time.Time {
	if c == nil {
		return time.Now() // a nil clock follows the wall clock
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// server is an in-process pgq API over a real journal and index (no
// PostgreSQL): what the client talks to.
type server struct {
	t       testing.TB
	dir     string
	addr    string
	clock   *clock
	j       *journal.Journal
	ix      *index.Index
	m       *consumers.Manager
	srv     *http.Server
	lastEnd pgq.LSN
}

func startServer(t testing.TB, dir, addr string, clk *clock) *server {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	j, err := journal.Open(journal.Options{Dir: dir + "/journal", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(index.Options{Dir: dir + "/index", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m, err := consumers.NewManager(consumers.ManagerOptions{Journal: j, Index: ix, Logger: log, Now: clk.Now, LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mux, err := httpapi.New(httpapi.Options{Groups: m})
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	for i := 0; ; i++ { // the old listener's port may take a moment to free
		ln, err = net.Listen("tcp", addr)
		if err == nil || i == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, dir: dir, addr: ln.Addr().String(), clock: clk, j: j, ix: ix, m: m,
		srv: &http.Server{Handler: apitest.Validator(t)(mux)}, lastEnd: j.LastEndLSN()}
	go func() { _ = s.srv.Serve(ln) }()
	return s
}

func (s *server) stop() {
	_ = s.m.Close()
	_ = s.srv.Close()
	_ = s.ix.Close()
	_ = s.j.Close()
}

// append journals n one-row transactions (ids continue from the journal).
func (s *server) append(n int) { s.appendKeyed(n, 0) }

// appendKeyed is append with row ids cycling through keys distinct values
// (0: every id distinct).
func (s *server) appendKeyed(n, keys int) {
	s.t.Helper()
	cols := []pgq.Column{{Name: "id", TypeOID: 20, Key: true}}
	batch := make([]*pgq.Transaction, n)
	for i := range batch {
		s.lastEnd += 100
		id := strconv.Itoa(int(s.j.LastOffset()) + i + 1)
		if keys > 0 {
			id = strconv.Itoa((int(s.j.LastOffset()) + i) % keys)
		}
		batch[i] = &pgq.Transaction{Xid: uint32(s.lastEnd), CommitLSN: s.lastEnd - 10, EndLSN: s.lastEnd, CommitTime: time.Now().UTC().Truncate(time.Microsecond), Final: true,
			Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: cols, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte(id)}}}}}
	}
	recs := journal.Records(batch)
	if err := s.j.AppendRecords(recs); err != nil {
		s.t.Fatal(err)
	}
	entries := make([]index.Entry, n)
	for i, r := range recs {
		entries[i] = index.EntryOf(r.Tx, r.Bytes, r.ChangeCount())
	}
	if err := s.ix.Add(entries); err != nil {
		s.t.Fatal(err)
	}
}

func dial(t *testing.T, addr string) *client.Client {
	t.Helper()
	c, err := client.New(addr, client.Options{Retry: client.RetryOptions{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConsumeRidesThroughRestart: Consume runs while the server stops
// (nothing listens for a while) and starts again on the same address over
// the same data. Every transaction is handled, none skipped, in order
// (redeliveries of uncommitted ones are allowed).
func TestConsumeRidesThroughRestart(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{now: time.Now()}
	s := startServer(t, dir, "127.0.0.1:0", clk)
	addr := s.addr
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	s.append(50)
	cs, err := c.Consumer("g", client.ConsumerOptions{Member: "m1", Wait: 100 * time.Millisecond, Max: 7})
	if err != nil {
		t.Fatal(err)
	}
	const total = 150
	var mu sync.Mutex
	var seen []pgq.Offset
	done := make(chan error, 1)
	cctx, stop := context.WithCancel(ctx)
	go func() {
		done <- cs.Consume(cctx, func(_ context.Context, tx *pgq.Transaction) error {
			mu.Lock()
			seen = append(seen, tx.Offset)
			mu.Unlock()
			return nil
		})
	}()
	maxSeen := func() pgq.Offset {
		mu.Lock()
		defer mu.Unlock()
		var m pgq.Offset
		for _, o := range seen {
			m = max(m, o)
		}
		return m
	}
	waitUntil(t, "first batch", func() bool { return maxSeen() >= 20 })
	s.stop()
	time.Sleep(300 * time.Millisecond) // pgq is down: the consumer retries
	s = startServer(t, dir, addr, clk)
	s.append(50)
	waitUntil(t, "after restart", func() bool { return maxSeen() >= 100 })
	s.stop()
	s = startServer(t, dir, addr, clk)
	defer s.stop()
	s.append(50)
	waitUntil(t, "everything", func() bool { return maxSeen() >= total })
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var hi pgq.Offset
	for i, o := range seen {
		if o > hi+1 {
			t.Fatalf("delivery %d skipped from %d to %d", i, hi, o)
		}
		hi = max(hi, o)
	}
	if hi != total {
		t.Fatalf("highest offset handled %d, want %d", hi, total)
	}
}

// TestStandbyTakesOver: a second member waits while the first holds the
// group, and takes over when the first's lease expires (fake clock) or it
// releases. The first member's late commit is fenced.
func TestStandbyTakesOver(t *testing.T) {
	clk := &clock{now: time.Now()}
	s := startServer(t, t.TempDir(), "127.0.0.1:0", clk)
	defer s.stop()
	c := dial(t, s.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	s.append(10)
	a, _ := c.Consumer("g", client.ConsumerOptions{Member: "a", Wait: 50 * time.Millisecond, LeaseTTL: 2 * time.Second})
	b, _ := c.Consumer("g", client.ConsumerOptions{Member: "b", Wait: 50 * time.Millisecond, LeaseTTL: 2 * time.Second})
	tx, err := a.Next(ctx)
	if err != nil || tx.Offset != 1 {
		t.Fatalf("a.Next: %v %v", tx, err)
	}
	// b is a standby: it waits instead of failing.
	got := make(chan *pgq.Transaction, 1)
	go func() {
		tx, err := b.Next(ctx)
		if err != nil {
			t.Errorf("b.Next: %v", err)
		}
		got <- tx
	}()
	select {
	case tx := <-got:
		t.Fatalf("standby got %d while a holds the lease", tx.Offset)
	case <-time.After(300 * time.Millisecond):
	}
	clk.Advance(3 * time.Second) // a dies: its lease expires
	select {
	case tx := <-got:
		if tx == nil || tx.Offset != 1 {
			t.Fatalf("standby took over at %v, want offset 1 (a never committed)", tx)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("standby did not take over after the lease expired")
	}
	// a comes back: its commit is fenced, and it redelivers.
	if err := a.Commit(ctx); !errors.Is(err, client.ErrRedeliver) || !errors.Is(err, api.ErrFenced) {
		t.Fatalf("stale commit: %v, want ErrRedeliver wrapping fenced", err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatalf("new holder's commit: %v", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// b released: a (standby again) takes over at once, after b's commit.
	tx, err = a.Next(ctx)
	if err != nil || tx.Offset != 2 {
		t.Fatalf("a after b released: %v %v, want offset 2", tx, err)
	}
}

// TestFetchFailsFastWhenAsked keeps the old behaviour for FailFast.
func TestFetchFailsFastWhenAsked(t *testing.T) {
	clk := &clock{now: time.Now()}
	s := startServer(t, t.TempDir(), "127.0.0.1:0", clk)
	defer s.stop()
	c := dial(t, s.addr)
	ctx := context.Background()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	s.append(1)
	a, _ := c.Consumer("g", client.ConsumerOptions{Member: "a", Wait: 50 * time.Millisecond})
	if _, err := a.Next(ctx); err != nil {
		t.Fatal(err)
	}
	b, _ := c.Consumer("g", client.ConsumerOptions{Member: "b", Wait: 50 * time.Millisecond, FailFast: true})
	if _, err := b.Next(ctx); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("fail-fast standby: %v, want conflict", err)
	}
}

// TestGiveUp: with Retry.GiveUp a call against a dead address returns the
// network error after about that long.
func TestGiveUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := client.New(addr, client.Options{Retry: client.RetryOptions{Min: 10 * time.Millisecond, Max: 20 * time.Millisecond, GiveUp: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Groups(context.Background())
	if err == nil || !client.IsTransient(err) || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("Groups against a dead address: %v after %s", err, time.Since(start))
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStaleCommitAfterResetIsFenced: a member's commit of records fetched
// before a reset is fenced, even after the same member fetched again (its
// lease generation ended), never accepted or refused as invalid_commit.
func TestStaleCommitAfterResetIsFenced(t *testing.T) {
	clk := &clock{now: time.Now()}
	s := startServer(t, t.TempDir(), "127.0.0.1:0", clk)
	defer s.stop()
	c := dial(t, s.addr)
	ctx := context.Background()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	s.append(5)
	old, err := c.Fetch(ctx, "g", client.FetchRequest{Member: "m", Max: 5})
	if err != nil || len(old.Transactions) != 5 || old.Generation == 0 {
		t.Fatalf("fetch: %+v %v", old, err)
	}
	if _, err := c.ResetGroup(ctx, "g", "earliest", false); err != nil {
		t.Fatal(err)
	}
	fresh, err := c.Fetch(ctx, "g", client.FetchRequest{Member: "m", Max: 5})
	if err != nil || fresh.Generation == old.Generation {
		t.Fatalf("fetch after reset: gen %d (old %d) %v", fresh.Generation, old.Generation, err)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.Commit(ctx, "g", "m", 5, old.Generation); !errors.Is(err, api.ErrFenced) {
			t.Fatalf("stale commit: %v, want fenced", err)
		}
	}
	if cr, err := c.Commit(ctx, "g", "m", 5, fresh.Generation); err != nil || cr.CommittedOffset != 5 {
		t.Fatalf("commit under the new lease: %+v %v", cr, err)
	}
}

// TestDeprecatedCursorNames: the deprecated Committed and
// PreviousCommitted of FetchResult, CommitResult and ResetResult (kept
// one release, not on the wire) are filled from CommittedOffset and
// PreviousCommittedOffset, in both the msgpack and the JSON client.
func TestDeprecatedCursorNames(t *testing.T) {
	s := startServer(t, t.TempDir(), "127.0.0.1:0", &clock{now: time.Now()})
	defer s.stop()
	ctx := context.Background()
	mp := dial(t, s.addr)
	if _, err := mp.CreateGroup(ctx, api.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	s.append(5)
	first, err := mp.Fetch(ctx, "g", client.FetchRequest{Member: "m", Max: 3})
	if err != nil || len(first.Transactions) != 3 {
		t.Fatalf("fetch: %+v %v", first, err)
	}
	done := first.NextOffset - 1
	cr, err := mp.Commit(ctx, "g", "m", done, first.Generation)
	if err != nil || cr.CommittedOffset != done || cr.Committed != done { //nolint:staticcheck // checks the deprecated copy
		t.Fatalf("commit %d: %+v %v", done, cr, err)
	}
	more, err := mp.Fetch(ctx, "g", client.FetchRequest{Member: "m", Max: 2})
	if err != nil || len(more.Transactions) != 2 || more.CommittedOffset != done || more.Committed != done { //nolint:staticcheck // checks the deprecated copy
		t.Fatalf("fetch after commit %d: %+v %v", done, more, err)
	}
	js, err := client.New(s.addr, client.Options{JSON: true, Retry: client.RetryOptions{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*client.Client{"msgpack": mp, "json": js} {
		rr, err := c.ResetGroup(ctx, "g", "earliest", true)
		if err != nil || rr.PreviousCommittedOffset != done || rr.CommittedOffset >= done || rr.NextOffset != rr.CommittedOffset+1 {
			t.Fatalf("%s: dry-run reset: %+v %v", name, rr, err)
		}
		if rr.PreviousCommitted != rr.PreviousCommittedOffset || rr.Committed != rr.CommittedOffset { //nolint:staticcheck // checks the deprecated copies
			t.Fatalf("%s: deprecated copies %d %d, want %d %d", name, rr.PreviousCommitted, rr.Committed, rr.PreviousCommittedOffset, rr.CommittedOffset) //nolint:staticcheck
		}
	}
}

// TestRestartedMemberIsRedelivered: a consumer process that dies after a
// fetch and comes back with the same member id gets what it had not
// committed again (a new session restarts delivery at the cursor), and
// an answer lost on the way is delivered again (From).
func TestRestartedMemberIsRedelivered(t *testing.T) {
	clk := &clock{now: time.Now()}
	s := startServer(t, t.TempDir(), "127.0.0.1:0", clk)
	defer s.stop()
	c := dial(t, s.addr)
	ctx := context.Background()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	s.append(10)
	first, _ := c.Consumer("g", client.ConsumerOptions{Member: "w", Max: 3, Wait: 50 * time.Millisecond})
	for i := 1; i <= 3; i++ {
		tx, err := first.Next(ctx)
		if err != nil || tx.Offset != pgq.Offset(i) {
			t.Fatalf("first: %v %v", tx, err)
		}
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if tx, err := first.Next(ctx); err != nil || tx.Offset != 4 { // fetches 4..6, handles 4, then "dies"
		t.Fatalf("first: %v %v", tx, err)
	}
	again, _ := c.Consumer("g", client.ConsumerOptions{Member: "w", Max: 3, Wait: 50 * time.Millisecond})
	tx, err := again.Next(ctx)
	if err != nil || tx.Offset != 4 {
		t.Fatalf("restarted member got %v %v, want offset 4 (fetched, never committed)", tx, err)
	}
	// The dead incarnation's commit is fenced.
	if err := first.Commit(ctx); !errors.Is(err, api.ErrFenced) {
		t.Fatalf("the dead incarnation's commit: %v, want fenced", err)
	}

	// A lost answer: fetch 7..9 by hand and drop the response; the next
	// fetch that says From 7 gets them again.
	res, err := c.Fetch(ctx, "g", client.FetchRequest{Member: "w", Max: 3, Session: "s3"})
	if err != nil || len(res.Transactions) == 0 || res.Transactions[0].Offset != 4 {
		t.Fatalf("fetch as a new session: %+v %v", res, err)
	}
	lost, err := c.Fetch(ctx, "g", client.FetchRequest{Member: "w", Max: 3, Session: "s3", From: res.NextOffset})
	if err != nil || len(lost.Transactions) == 0 {
		t.Fatalf("fetch: %+v %v", lost, err)
	}
	retry, err := c.Fetch(ctx, "g", client.FetchRequest{Member: "w", Max: 3, Session: "s3", From: res.NextOffset})
	if err != nil || len(retry.Transactions) == 0 || retry.Transactions[0].Offset != lost.Transactions[0].Offset {
		t.Fatalf("after a lost answer got %+v %v, want offset %d again", retry, err, lost.Transactions[0].Offset)
	}
}

// TestCommitMark: a consumer fetches on past a mark and commits exactly
// the mark; a mark taken under a lease that was lost since is fenced
// (ErrRedeliver), even after the member fetched under a new lease.
func TestCommitMark(t *testing.T) {
	clk := &clock{now: time.Now()}
	s := startServer(t, t.TempDir(), "127.0.0.1:0", clk)
	defer s.stop()
	c := dial(t, s.addr)
	ctx := context.Background()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	s.append(9)
	cs, _ := c.Consumer("g", client.ConsumerOptions{Member: "w", Max: 3, Wait: 50 * time.Millisecond})
	next := func(want pgq.Offset) {
		t.Helper()
		if tx, err := cs.Next(ctx); err != nil || tx.Offset != want {
			t.Fatalf("next: %v %v, want offset %d", tx, err, want)
		}
	}
	committed := func() pgq.Offset {
		t.Helper()
		gi, err := c.Group(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		return gi.CommittedOffset
	}
	for i := pgq.Offset(1); i <= 3; i++ {
		next(i)
	}
	m := cs.Mark()
	if m.Offset() != 3 {
		t.Fatalf("mark %d, want 3", m.Offset())
	}
	for i := pgq.Offset(4); i <= 6; i++ {
		next(i)
	}
	if err := cs.CommitMark(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got != 3 {
		t.Fatalf("committed %d after CommitMark(3), want 3", got)
	}
	if err := cs.CommitMark(ctx, m); err != nil { // at the cursor: a no-op
		t.Fatal(err)
	}
	if err := cs.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got != 6 {
		t.Fatalf("committed %d after Commit, want 6", got)
	}
	next(7)
	stale := cs.Mark()
	if _, err := c.ResetGroup(ctx, "g", "earliest", false); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Poll(ctx, 0); err != nil { // a new lease for the same member
		t.Fatal(err)
	}
	if err := cs.CommitMark(ctx, stale); !errors.Is(err, client.ErrRedeliver) || !errors.Is(err, api.ErrFenced) {
		t.Fatalf("commit of a mark of a lost lease: %v, want ErrRedeliver and fenced", err)
	}
	if got := committed(); got != 0 {
		t.Fatalf("committed %d after the reset and a fenced commit, want 0", got)
	}
}

// TestConsumeCommitDoesNotHoldBackDelivery: while the commit of a handled
// batch is held on its way to pgq (a proxy in front of the server blocks
// it), Consume's next fetch still delivers the next transaction; once the
// commit goes through, everything handled ends up committed.
func TestConsumeCommitDoesNotHoldBackDelivery(t *testing.T) {
	s := startServer(t, t.TempDir(), "127.0.0.1:0", nil)
	defer s.stop()
	target, err := url.Parse("http://" + s.addr)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	release := make(chan struct{})
	commits := make(chan struct{}, 16)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/commit") {
			commits <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock() // before proxy.Close, which waits for held requests

	ctx := t.Context()
	c := dial(t, proxy.Listener.Addr().String())
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	cs, err := c.Consumer("g", client.ConsumerOptions{Member: "m", Wait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.append(1)
	handled := make(chan pgq.Offset, 16)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cs.Consume(cctx, func(_ context.Context, tx *pgq.Transaction) error {
			handled <- tx.Offset
			return nil
		})
	}()
	if off := <-handled; off != 1 {
		t.Fatalf("first transaction at offset %d", off)
	}
	<-commits // the commit of offset 1 is held at the proxy
	s.append(1)
	select {
	case off := <-handled:
		if off != 2 {
			t.Fatalf("second transaction at offset %d", off)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the next transaction was not delivered while the previous batch's commit was held")
	}
	unblock()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume: %v", err)
	}
	gi, err := c.Group(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if gi.CommittedOffset != 2 {
		t.Fatalf("committed offset %d after Consume returned, want 2", gi.CommittedOffset)
	}
}

// TestRefusedCommitRefetchesFromCursor: a commit refused after a pgq
// restart (the mark was taken before it; the restarted pgq has delivered
// less since) drops the buffer, and the next fetch starts at the group's
// cursor: the dropped transactions come again instead of being skipped.
func TestRefusedCommitRefetchesFromCursor(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "127.0.0.1:0", nil)
	addr := s.addr
	c := dial(t, addr)
	ctx := t.Context()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	s.append(9)
	cs, err := c.Consumer("g", client.ConsumerOptions{Member: "m1", Wait: 100 * time.Millisecond, Max: 3})
	if err != nil {
		t.Fatal(err)
	}
	next := func() pgq.Offset {
		t.Helper()
		tx, err := cs.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tx.Offset
	}
	for want := pgq.Offset(1); want <= 6; want++ {
		if got := next(); got != want {
			t.Fatalf("offset %d, want %d", got, want)
		}
	}
	mark := cs.Mark() // 6, nothing committed
	s.stop()
	s = startServer(t, dir, addr, nil)
	defer s.stop()
	// The restarted pgq redelivers from the cursor: 1..3 are buffered and
	// it has delivered up to 3 only.
	if got := next(); got != 1 {
		t.Fatalf("first offset after the restart %d, want 1 (redelivery from the cursor)", got)
	}
	// Refused: its lease generation ended with the restart (ErrFenced),
	// and offset 6 is beyond what was delivered since.
	if err := cs.CommitMark(ctx, mark); !errors.Is(err, client.ErrRedeliver) {
		t.Fatalf("commit of offset 6 with 3 delivered: %v, want ErrRedeliver", err)
	}
	if n := cs.Buffered(); n != 0 {
		t.Fatalf("%d transactions still buffered after a refused commit", n)
	}
	// The dropped 2 and 3 come again: the fetch starts at the cursor.
	for want := pgq.Offset(1); want <= 9; want++ {
		if got := next(); got != want {
			t.Fatalf("after the refused commit: offset %d, want %d", got, want)
		}
	}
}
