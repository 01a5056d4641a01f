package consumers

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// syncGate holds every fsync of the index while armed: the first one
// signals entered, and all wait until release.
type syncGate struct {
	armed   atomic.Bool
	once    sync.Once
	entered chan struct{}
	release chan struct{}
	opened  sync.Once
}

// open disarms the gate and lets every held fsync go.
func (g *syncGate) open() {
	g.armed.Store(false)
	g.opened.Do(func() { close(g.release) })
}

func newSyncGate() *syncGate {
	return &syncGate{entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *syncGate) MaybeError(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
	default:
		return nil
	}
	if !g.armed.Load() {
		return nil
	}
	g.once.Do(func() { close(g.entered) })
	<-g.release
	return nil
}

func (g *syncGate) String() string { return "sync gate" }

// gatedManager is a Manager over a small journal and an index whose fsyncs
// go through gate.
func gatedManager(t *testing.T, gate *syncGate) *Manager {
	t.Helper()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var batch []*pgq.Transaction
	for i := range 5 {
		batch = append(batch, &pgq.Transaction{Xid: uint32(i + 1), CommitLSN: pgq.LSN(100 * (i + 1)), EndLSN: pgq.LSN(100*(i+1) + 10),
			CommitTime: base.Add(time.Duration(i) * time.Second), Final: true,
			Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: "t"}}})
	}
	m, _ := managerOver(t, journal.Options{NoSync: true}, index.Options{FS: errorfs.Wrap(vfs.Default, gate)}, ManagerOptions{},
		func(j *journal.Journal) error { return j.Append(batch) })
	t.Cleanup(gate.open) // runs first: a failed test must not hang in Close
	return m
}

// within runs f and fails the test if it does not return within d.
func within(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		t.Fatalf("%s blocked for %v behind a group create/delete's fsync", what, d)
	}
}

// TestGroupLookupsNotBlockedByCreateOrDeleteSync: while a Create (then a
// Delete) waits for its index fsync, lookups of other groups (Info, List,
// Lags, MinCursor, Resolve, a fetch renewing a lease) proceed; a second
// Create of the same name waits for the first and then fails with
// ErrExists, and a Delete is serialized with the Create.
func TestGroupLookupsNotBlockedByCreateOrDeleteSync(t *testing.T) {
	gate := newSyncGate()
	m := gatedManager(t, gate)
	ctx := context.Background()
	if _, err := m.Create(ctx, CreateRequest{Name: "a", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Fetch(ctx, "a", FetchRequest{Member: "m1", Max: 1}); err != nil {
		t.Fatal(err)
	}

	gate.armed.Store(true)
	created := make(chan error, 1)
	go func() {
		_, err := m.Create(ctx, CreateRequest{Name: "b", From: "lsn:0/1F4"})
		created <- err
	}()
	select {
	case <-gate.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("Create never reached the index fsync")
	}
	again := make(chan error, 1)
	go func() {
		_, err := m.Create(ctx, CreateRequest{Name: "b"})
		again <- err
	}()
	// A Delete of the name waits for the Create (m.ddl), then finds it.
	deleted := make(chan error, 1)
	go func() { deleted <- m.Delete(ctx, "b") }()

	const d = 2 * time.Second
	within(t, d, "Info", func() error { _, err := m.Info(ctx, "a"); return err })
	within(t, d, "List", func() error {
		if n := len(m.List(ctx)); n != 1 {
			t.Errorf("List during the create: %d groups, want 1 (b not published before it is on disk)", n)
		}
		return nil
	})
	within(t, d, "Lags", func() error { _ = m.Lags(); return nil })
	within(t, d, "MinCursor", func() error { _, _ = m.MinCursor(); return nil })
	within(t, d, "Resolve", func() error { _, err := m.Resolve(Position{Kind: PosLSN, LSN: 300}); return err })
	within(t, d, "Fetch (lease renewal)", func() error {
		_, err := m.Fetch(ctx, "a", FetchRequest{Member: "m1", Max: 1})
		return err
	})
	within(t, d, "Info of the group being created", func() error {
		if _, err := m.Info(ctx, "b"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Info(b) during its create = %v, want ErrNotFound", err)
		}
		return nil
	})
	select {
	case err := <-created:
		t.Fatalf("Create returned (%v) before its fsync", err)
	case err := <-again:
		t.Fatalf("second Create of the name returned (%v) during the first", err)
	case err := <-deleted:
		t.Fatalf("Delete of the name returned (%v) during its Create", err)
	default:
	}

	gate.open()
	if err := <-created; err != nil {
		t.Fatalf("Create: %v", err)
	}
	// The second Create and the Delete ran after the first Create, in
	// either order: the Create fails with ErrExists if it ran first, or
	// succeeds after the Delete.
	errAgain, errDel := <-again, <-deleted
	if errDel != nil {
		t.Fatalf("Delete after Create: %v", errDel)
	}
	if errAgain != nil && !errors.Is(errAgain, ErrExists) {
		t.Fatalf("second Create = %v, want nil or ErrExists", errAgain)
	}
	_, errInfo := m.Info(ctx, "b")
	if (errAgain == nil) != (errInfo == nil) {
		t.Fatalf("second Create %v, but Info(b) %v", errAgain, errInfo)
	}

	// A Delete's fsync does not block lookups either.
	gate2 := newSyncGate()
	m2 := gatedManager(t, gate2)
	for _, n := range []string{"a", "b"} {
		if _, err := m2.Create(ctx, CreateRequest{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	gate2.armed.Store(true)
	go func() { deleted <- m2.Delete(ctx, "b") }()
	select {
	case <-gate2.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("Delete never reached the index fsync")
	}
	within(t, d, "Info during a delete", func() error { _, err := m2.Info(ctx, "a"); return err })
	within(t, d, "List during a delete", func() error { _ = m2.List(ctx); return nil })
	gate2.open()
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Info(ctx, "b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Info after Delete = %v, want ErrNotFound", err)
	}
}

// TestResolveWhileIndexStale: an lsn:/time: position the stale index cannot
// answer fails with ErrUnavailable instead of resolving to the wrong
// offset, and lag says the index is stale.
func TestResolveWhileIndexStale(t *testing.T) {
	m := gatedManager(t, newSyncGate())
	ctx := context.Background()
	if _, err := m.Create(ctx, CreateRequest{Name: "a", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	// Journal 5 more records the index never sees, then one whose Add
	// fails with a gap: the index goes stale.
	base := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	mk := func(i int) *pgq.Transaction {
		return &pgq.Transaction{Xid: uint32(i), CommitLSN: pgq.LSN(100 * i), EndLSN: pgq.LSN(100*i + 10), CommitTime: base.Add(time.Duration(i) * time.Second),
			Final: true, Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: "t"}}}
	}
	var lost []*pgq.Transaction
	for i := 6; i <= 10; i++ {
		lost = append(lost, mk(i))
	}
	if err := m.j.Append(lost); err != nil {
		t.Fatal(err)
	}
	tx := mk(11)
	if err := m.j.Append([]*pgq.Transaction{tx}); err != nil {
		t.Fatal(err)
	}
	if err := m.ix.Add([]index.Entry{index.EntryOf(tx, 1, len(tx.Changes))}); !errors.Is(err, index.ErrGap) {
		t.Fatalf("Add over the gap = %v", err)
	}
	for _, p := range []string{"lsn:0/3E8", "time:" + base.Add(8*time.Second).Format(time.RFC3339)} {
		pos, err := ParsePosition(p)
		if err != nil {
			t.Fatal(err)
		}
		if off, err := m.Resolve(pos); !errors.Is(err, ErrUnavailable) || !errors.Is(err, index.ErrStale) {
			t.Fatalf("Resolve(%s) on a stale index = %d, %v; want ErrUnavailable", p, off, err)
		}
	}
	gi, err := m.Info(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if !gi.Lag.IndexStale || gi.Lag.Records != 11 {
		t.Fatalf("lag on a stale index = %+v", gi.Lag)
	}
	if err := m.ix.Heal(ctx, m.j); err != nil {
		t.Fatal(err)
	}
	pos, _ := ParsePosition("lsn:0/3E8")
	if off, err := m.Resolve(pos); err != nil || off != 10 {
		t.Fatalf("Resolve(lsn:0/3E8) after heal = %d, %v; want 10", off, err)
	}
	if gi, _ := m.Info(ctx, "a"); gi.Lag.IndexStale {
		t.Fatalf("lag after heal = %+v", gi.Lag)
	}
}
