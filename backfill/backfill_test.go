package backfill

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, pgtest.Options{})) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// running is a Manager whose Run goroutine is going.
type running struct {
	*Manager
	stop func()
}

// allTables is the publication startManager uses unless told otherwise,
// created FOR ALL TABLES when missing.
const allTables = "pgq_all"

// startManager opens a Manager on dir whose chunks no ingest ever takes
// (nothing reads the slot): every high watermark times out. Its
// publication is allTables unless mod sets another.
func startManager(t *testing.T, db *pgtest.DB, dir string, fs vfs.FS, mod func(*Options)) *running {
	t.Helper()
	o := Options{PGURL: db.URL, Dir: dir, FS: fs, Registry: ingest.NewBackfills(), Durable: func() pgq.LSN { return 0 },
		Publication: allTables, Logger: quiet(), RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	if o.Publication == allTables {
		db.Exec(t, `DO $$ BEGIN
			IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = '`+allTables+`') THEN
				CREATE PUBLICATION `+allTables+` FOR ALL TABLES;
			END IF; END $$`)
	}
	m, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	r := &running{Manager: m}
	var stopped atomic.Bool
	r.stop = func() {
		if stopped.Swap(true) {
			return
		}
		cancel()
		<-done
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	t.Cleanup(r.stop)
	// Start needs Run's context.
	waitUntil(t, "Run", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.ctx != nil
	})
	return r
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRedoLimitFails: when the high watermark never comes back (here no
// ingest reads the slot at all, as when ingest is stuck behind large
// transactions), the chunk is read again MaxRedos times and the backfill
// then fails with ErrRedoLimit and a message that says why, instead of
// retrying forever.
func TestRedoLimitFails(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE t (id int PRIMARY KEY, v text)`, `INSERT INTO t SELECT g, 'v' FROM generate_series(1, 50) g`)
	r := startManager(t, db, t.TempDir(), nil, func(o *Options) { o.HighTimeout, o.MaxRedos = 20*time.Millisecond, 3 })
	// One range: the limit counts one range's reads of its chunk (with
	// several, each range redoes its own until the first fails them all).
	st, err := r.Start(t.Context(), Request{Tables: []string{"t"}, ChunkSize: 10, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the backfill to fail", func() bool { s, _ := r.Get(st.ID); return s.State != StateRunning })
	s, _ := r.Get(st.ID)
	if s.State != StateFailed || s.Error == nil || s.Redone != 3 || s.Chunks != 0 || s.Rows != 0 {
		t.Fatalf("status %+v", s)
	}
	for _, want := range []string{"too many retries", "public.t", "read 3 times", "did not reach the high watermark"} {
		if !strings.Contains(*s.Error, want) {
			t.Errorf("error %q lacks %q", *s.Error, want)
		}
	}
	if n := r.o.Registry.OpenChunks(); n != 0 {
		t.Fatalf("%d chunks left registered", n)
	}
}

// faults fails write-side operations of the store (writes, syncs,
// creates) with err while on.
type faults struct {
	on   atomic.Bool
	err  error
	hits atomic.Int64
}

func (f *faults) String() string { return "fail writes, syncs and creates" }

func (f *faults) MaybeError(op errorfs.Op) error {
	if !f.on.Load() {
		return nil
	}
	switch op.Kind {
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo,
		errorfs.OpCreate, errorfs.OpFilePreallocate:
		f.hits.Add(1)
		return f.err
	}
	return nil
}

// TestStoreFailingDisk: a disk that fails the store's writes (EIO, then
// ENOSPC) makes every write of the store fail with ErrStoreFailed (an
// api.ErrUnavailable: the API answers 503) instead of succeeding silently
// or exiting; Pebble's Fatalf marks it failed too and never exits. Once
// the disk works again the next write reopens the store and stores every
// status again, so what was refused is not lost: a restart sees it.
func TestStoreFailingDisk(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE t (id int PRIMARY KEY)`, `INSERT INTO t SELECT generate_series(1, 20)`)
	dir := t.TempDir()
	inj := &faults{}
	fs := errorfs.Wrap(vfs.Default, inj)
	// No ingest: chunks never complete; the backfills stay running.
	hold := func(o *Options) { o.HighTimeout, o.MaxRedos = time.Hour, 1000 }
	r := startManager(t, db, dir, fs, hold)
	a, err := r.Start(t.Context(), Request{Tables: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{a.ID: StateCanceled}
	for _, e := range []error{syscall.EIO, syscall.ENOSPC} {
		inj.err = e
		inj.on.Store(true)
		_, err = r.Start(t.Context(), Request{Tables: []string{"t"}})
		if !errors.Is(err, ErrStoreFailed) || !errors.Is(err, api.ErrUnavailable) || !errors.Is(err, e) {
			t.Fatalf("Start on a failing disk (%v) = %v, want ErrStoreFailed wrapping it", e, err)
		}
		// Still failed (the disk fails the probe): refused again. The
		// cancel takes effect in memory; the store gets it once healed.
		if e == syscall.EIO {
			if _, err := r.Cancel(a.ID); !errors.Is(err, ErrStoreFailed) {
				t.Fatalf("Cancel on a failing disk = %v", err)
			}
		}
		inj.on.Store(false)
		// The disk works again: the next write heals the store.
		b, err := r.Start(t.Context(), Request{Tables: []string{"t"}})
		if err != nil {
			t.Fatalf("Start after the disk recovered: %v", err)
		}
		want[b.ID] = StateRunning
	}
	if inj.hits.Load() == 0 {
		t.Fatal("no fault was injected")
	}
	// Pebble's Fatalf (how it reports a failed commit) marks the store
	// failed and returns; the next write reopens it.
	storeLogger{r.store}.Fatalf("pebble: fatal commit error: %v", "boom")
	if err := r.store.err(); !errors.Is(err, ErrStoreFailed) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("after Fatalf: %v", err)
	}
	c, err := r.Start(t.Context(), Request{Tables: []string{"t"}})
	if err != nil {
		t.Fatalf("Start after Fatalf: %v", err)
	}
	want[c.ID] = StateRunning
	r.stop()

	// A restart sees what the failed writes refused: a canceled in
	// memory during the failure, the others stored after each heal.
	r2 := startManager(t, db, dir, nil, hold)
	got := map[string]string{}
	for _, s := range r2.List() {
		got[s.ID] = s.State
	}
	if len(got) != len(want) || len(want) != 4 {
		t.Fatalf("after restart %v, want %v", got, want)
	}
	for id, st := range want {
		if got[id] != st {
			t.Fatalf("after restart %v, want %v", got, want)
		}
	}
}
