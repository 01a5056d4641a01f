package index

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/syncbuf"
	"github.com/pgq-dev/pgq/journal"
)

// injector fails the operations of kinds ops on files whose name ends in
// suffix with err while it is on, counting what it failed.
type injector struct {
	on     atomic.Bool
	ops    map[errorfs.OpKind]bool
	suffix string
	err    error
	hits   atomic.Int64
}

func (in *injector) String() string {
	return fmt.Sprintf("fail %v on *%s with %v", in.ops, in.suffix, in.err)
}

func (in *injector) MaybeError(op errorfs.Op) error {
	if !in.on.Load() || !in.ops[op.Kind] || !strings.HasSuffix(op.Path, in.suffix) {
		return nil
	}
	in.hits.Add(1)
	return in.err
}

var (
	writeOps = map[errorfs.OpKind]bool{errorfs.OpFileWrite: true, errorfs.OpFileWriteAt: true, errorfs.OpFilePreallocate: true}
	syncOps  = map[errorfs.OpKind]bool{errorfs.OpFileSync: true, errorfs.OpFileSyncData: true, errorfs.OpFileSyncTo: true}
)

// walFaults fails writes or syncs of Pebble's WAL (*.log) with err.
func walFaults(ops map[errorfs.OpKind]bool, err error) *injector {
	return &injector{ops: ops, suffix: ".log", err: err}
}

// openFaulty opens an index in a temp dir whose file operations go through
// inj.
func openFaulty(t *testing.T, inj errorfs.Injector) (*Index, string) {
	t.Helper()
	dir := t.TempDir()
	ix, err := Open(Options{Dir: dir, Logger: quiet(), FS: errorfs.Wrap(vfs.Default, inj)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	return ix, dir
}

// testJournal is a real journal in a temp dir (no fsync: speed).
func testJournal(t *testing.T) *journal.Journal {
	t.Helper()
	j, err := journal.Open(journal.Options{Dir: t.TempDir(), NoSync: true, Logger: quiet(), SegmentSize: 64 << 10})
	if err != nil {
		t.Fatalf("journal.Open: %v", err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j
}

var jcols = []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "v", TypeOID: 25}}

// appendTxs journals n transactions after the journal's last one and
// returns them as records (offsets and stored sizes set by the journal).
func appendTxs(t *testing.T, j *journal.Journal, n int) []*journal.Record {
	t.Helper()
	base := int(j.LastOffset())
	batch := make([]*pgq.Transaction, n)
	for k := range batch {
		i := base + k + 1
		tx := &pgq.Transaction{
			Xid:        uint32(1000 + i),
			CommitLSN:  pgq.LSN(i*100 + 50),
			EndLSN:     pgq.LSN(i*100 + 99),
			CommitTime: t0.Add(time.Duration(i) * time.Millisecond),
			Final:      true,
		}
		for c := range i%3 + 1 {
			tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: jcols,
				New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte(fmt.Sprint(c))}, {Kind: pgq.ValueText, Data: []byte(strings.Repeat("x", i%40))}}})
		}
		batch[k] = tx
	}
	recs := journal.Records(batch)
	if err := j.AppendRecords(recs); err != nil {
		t.Fatalf("journal append: %v", err)
	}
	return recs
}

// indexTxs is the sidecar's after-append hook.
func indexTxs(ix *Index, batch []*journal.Record) error {
	es := make([]Entry, len(batch))
	for i, tx := range batch {
		es[i] = EntryOf(tx.Tx, tx.Bytes, tx.ChangeCount())
	}
	return ix.Add(es)
}

// matchesJournal asserts that the index is fresh and answers every lookup
// as the journal does.
func matchesJournal(t *testing.T, ix *Index, j *journal.Journal) {
	t.Helper()
	if err := ix.Err(); err != nil {
		t.Fatalf("index not fresh: %v (%+v)", err, ix.Stats())
	}
	first, last := j.FirstOffset(), j.LastOffset()
	if ix.LastOffset() != last {
		t.Fatalf("LastOffset = %d, journal's %d", ix.LastOffset(), last)
	}
	if got, err := ix.FirstOffset(); err != nil || got != first {
		t.Fatalf("FirstOffset = %d, %v; journal's %d", got, err, first)
	}
	var sum int64
	for off := first; off <= last; off++ {
		tx, size, err := j.ReadSized(off)
		if err != nil {
			t.Fatal(err)
		}
		want := EntryOf(tx, size, len(tx.Changes))
		if got, err := ix.EntryAt(off); err != nil || got != want {
			t.Fatalf("EntryAt(%d) = %+v, %v; journal has %+v", off, got, err, want)
		}
		if o, err := ix.SeekLSN(tx.CommitLSN); err != nil || o != off {
			t.Fatalf("SeekLSN(%s) = %d, %v; want %d", tx.CommitLSN, o, err, off)
		}
		if o, err := ix.SeekTime(tx.CommitTime); err != nil || o != off {
			t.Fatalf("SeekTime = %d, %v; want %d", o, err, off)
		}
		sum += int64(want.Bytes)
		if got, err := ix.BytesBetween(first, off); err != nil || got != sum {
			t.Fatalf("BytesBetween(%d,%d) = %d, %v; want %d", first, off, got, err, sum)
		}
	}
	if _, err := ix.SeekLSN(pgq.LSN(1 << 60)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SeekLSN past the end = %v, want ErrNotFound", err)
	}
}

// wantStaleLookups asserts that every lookup past the last indexed offset
// fails with ErrStale instead of answering.
func wantStaleLookups(t *testing.T, ix *Index, j *journal.Journal) {
	t.Helper()
	last := j.LastOffset()
	if ix.LastOffset() >= last {
		t.Fatalf("test needs the journal (%d) ahead of the index (%d)", last, ix.LastOffset())
	}
	tx, err := j.Read(last)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.SeekLSN(tx.CommitLSN); !errors.Is(err, ErrStale) {
		t.Errorf("SeekLSN of an unindexed record = %v, want ErrStale", err)
	}
	if _, err := ix.SeekTime(tx.CommitTime); !errors.Is(err, ErrStale) {
		t.Errorf("SeekTime of an unindexed record = %v, want ErrStale", err)
	}
	if _, err := ix.EntryAt(last); !errors.Is(err, ErrStale) {
		t.Errorf("EntryAt(%d) = %v, want ErrStale", last, err)
	}
	if _, err := ix.BytesBetween(j.FirstOffset(), last); !errors.Is(err, ErrStale) {
		t.Errorf("BytesBetween(.., %d) = %v, want ErrStale", last, err)
	}
	if err := ix.Err(); !errors.Is(err, ErrStale) {
		t.Errorf("Err() = %v, want ErrStale", err)
	}
}

// TestFaultWALWriteDuringAdd: writes of the WAL fail (an I/O error, then
// ENOSPC) under a stream of Adds. Add is not fsynced, so the Add whose
// block hits the error may return nil, but from then on the index is failed
// and stale: Adds and group writes return errors, lookups past the last
// indexed offset return ErrStale. With the fault gone, Heal reopens Pebble
// and catches up, and every lookup matches the journal, also after a
// reopen.
func TestFaultWALWriteDuringAdd(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"EIO", errorfs.ErrInjected},
		{"ENOSPC", syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inj := walFaults(writeOps, tc.err)
			ix, dir := openFaulty(t, inj)
			j := testJournal(t)
			ctx := context.Background()
			for range 3 {
				if err := indexTxs(ix, appendTxs(t, j, 10)); err != nil {
					t.Fatal(err)
				}
			}
			matchesJournal(t, ix, j)

			inj.on.Store(true)
			var addErr error
			for i := 0; i < 500 && addErr == nil; i++ {
				addErr = indexTxs(ix, appendTxs(t, j, 20))
				if addErr == nil && ix.Stats().Failed {
					// The failure came in the background (the flusher
					// writes a full block): the next Add is refused.
					addErr = indexTxs(ix, appendTxs(t, j, 5))
					if addErr == nil {
						t.Fatal("Add after the index failed returned nil")
					}
				}
			}
			if addErr == nil || inj.hits.Load() == 0 {
				t.Fatalf("no Add failed (injected %d errors)", inj.hits.Load())
			}
			if !errors.Is(addErr, ErrStale) && !errors.Is(addErr, ErrFailed) {
				t.Fatalf("failed Add = %v, want ErrStale or ErrFailed", addErr)
			}
			st := ix.Stats()
			if !st.Stale || !st.Failed || st.Failures == 0 || !errors.Is(st.LastError, tc.err) {
				t.Fatalf("Stats after the fault = %+v", st)
			}
			if err := ix.Err(); !errors.Is(err, ErrFailed) || !errors.Is(err, tc.err) {
				t.Fatalf("Err() = %v, want ErrFailed wrapping %v", err, tc.err)
			}
			// The journal goes on; the index refuses until healed.
			if err := indexTxs(ix, appendTxs(t, j, 7)); !errors.Is(err, ErrStale) {
				t.Fatalf("Add while stale = %v, want ErrStale", err)
			}
			wantStaleLookups(t, ix, j)
			hits := inj.hits.Load()
			if err := ix.PutGroup("g", []byte("v")); !errors.Is(err, ErrFailed) {
				t.Fatalf("PutGroup on a failed index = %v, want ErrFailed", err)
			}
			if err := ix.TruncateFront(2); !errors.Is(err, ErrFailed) {
				t.Fatalf("TruncateFront on a failed index = %v, want ErrFailed", err)
			}
			if inj.hits.Load() != hits {
				t.Fatal("a write reached Pebble after it failed")
			}

			inj.on.Store(false)
			if err := ix.Heal(ctx, j); err != nil {
				t.Fatalf("Heal: %v", err)
			}
			matchesJournal(t, ix, j)
			if st := ix.Stats(); st.Heals != 1 || st.Failed || st.Stale {
				t.Fatalf("Stats after Heal = %+v", st)
			}
			// Business as usual: Add, group writes.
			if err := indexTxs(ix, appendTxs(t, j, 10)); err != nil {
				t.Fatalf("Add after Heal: %v", err)
			}
			if err := ix.PutGroup("g", []byte("v")); err != nil {
				t.Fatalf("PutGroup after Heal: %v", err)
			}
			matchesJournal(t, ix, j)

			// Reopen + CatchUp (start-up) is consistent too.
			if err := ix.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			ix2 := open(t, dir)
			defer ix2.Close()
			if err := ix2.CatchUp(ctx, j); err != nil {
				t.Fatal(err)
			}
			matchesJournal(t, ix2, j)
			if v, err := ix2.GetGroup("g"); err != nil || string(v) != "v" {
				t.Fatalf("group after reopen = %q, %v", v, err)
			}
		})
	}
}

// TestFaultWALSyncDuringGroupWrites: an fsync of the WAL fails under
// PutGroup. That call returns an error wrapping ErrFailed (Pebble reports
// it through Fatalf, which must neither exit nor let the call succeed);
// later group writes and Adds are refused without reaching Pebble. A Heal
// with the fault gone reopens Pebble: every group written before the fault
// is there, and writes work again, also across a reopen.
func TestFaultWALSyncDuringGroupWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"EIO", errorfs.ErrInjected},
		{"ENOSPC", syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inj := walFaults(syncOps, tc.err)
			ix, dir := openFaulty(t, inj)
			j := testJournal(t)
			ctx := context.Background()
			if err := indexTxs(ix, appendTxs(t, j, 10)); err != nil {
				t.Fatal(err)
			}
			for _, g := range []string{"a", "b"} {
				if err := ix.PutGroup(g, []byte(g+"1")); err != nil {
					t.Fatal(err)
				}
			}

			inj.on.Store(true)
			if err := ix.PutGroup("a", []byte("a2")); !errors.Is(err, ErrFailed) || !errors.Is(err, tc.err) {
				t.Fatalf("PutGroup with a failing fsync = %v, want ErrFailed wrapping %v", err, tc.err)
			}
			hits := inj.hits.Load()
			if err := ix.DeleteGroup("b"); !errors.Is(err, ErrFailed) {
				t.Fatalf("DeleteGroup on a failed index = %v, want ErrFailed", err)
			}
			if err := ix.PutGroup("c", []byte("c1")); !errors.Is(err, ErrFailed) {
				t.Fatalf("PutGroup on a failed index = %v, want ErrFailed", err)
			}
			if err := indexTxs(ix, appendTxs(t, j, 5)); !errors.Is(err, ErrStale) {
				t.Fatalf("Add on a failed index = %v, want ErrStale", err)
			}
			if inj.hits.Load() != hits {
				t.Fatal("a write reached Pebble after it failed")
			}
			wantStaleLookups(t, ix, j)
			// Group reads still answer.
			if v, err := ix.GetGroup("b"); err != nil || string(v) != "b1" {
				t.Fatalf("GetGroup(b) on a failed index = %q, %v", v, err)
			}

			// While WAL fsyncs fail a Heal may succeed (derived writes are
			// not fsynced), but a group write fails again, and never
			// silently.
			if err := ix.Heal(ctx, j); err == nil {
				if err := ix.PutGroup("c", []byte("c1")); !errors.Is(err, ErrFailed) {
					t.Fatalf("PutGroup with fsync failing after a heal = %v, want ErrFailed", err)
				}
			}
			inj.on.Store(false)
			if err := ix.Heal(ctx, j); err != nil {
				t.Fatalf("Heal: %v", err)
			}
			matchesJournal(t, ix, j)
			gs, err := ix.Groups()
			if err != nil {
				t.Fatal(err)
			}
			if string(gs["b"]) != "b1" || (string(gs["a"]) != "a1" && string(gs["a"]) != "a2") {
				t.Fatalf("groups after Heal = %q", gs)
			}
			if err := ix.PutGroup("c", []byte("c1")); err != nil {
				t.Fatalf("PutGroup after Heal: %v", err)
			}
			if err := ix.DeleteGroup("b"); err != nil {
				t.Fatalf("DeleteGroup after Heal: %v", err)
			}
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
			ix2 := open(t, dir)
			defer ix2.Close()
			gs, err = ix2.Groups()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := gs["b"]; ok || string(gs["c"]) != "c1" || len(gs) != 2 {
				t.Fatalf("groups after reopen = %q, want a and c", gs)
			}
		})
	}
}

// TestFaultTruncateFront: WAL writes fail under a stream of TruncateFront
// calls (retention). A call returns an error (the one whose write failed
// may return nil: derived writes are not fsynced) and the index is stale;
// after a Heal it matches the journal truncated the same way.
func TestFaultTruncateFront(t *testing.T) {
	inj := walFaults(writeOps, errorfs.ErrInjected)
	ix, _ := openFaulty(t, inj)
	j := testJournal(t)
	for range 40 {
		if err := indexTxs(ix, appendTxs(t, j, 50)); err != nil {
			t.Fatal(err)
		}
	}
	inj.on.Store(true)
	var err error
	off := pgq.Offset(1)
	for i := 0; i < 20000 && err == nil; i++ {
		off = pgq.Offset(2 + i%1500)
		err = ix.TruncateFront(off)
	}
	if err == nil || !errors.Is(err, ErrFailed) {
		t.Fatalf("TruncateFront with failing WAL writes = %v, want ErrFailed", err)
	}
	if st := ix.Stats(); !st.Stale || !st.Failed {
		t.Fatalf("Stats = %+v", st)
	}
	if err := j.TruncateFront(off); err != nil {
		t.Fatal(err)
	}
	appendTxs(t, j, 3)
	wantStaleLookups(t, ix, j)
	inj.on.Store(false)
	if err := ix.Heal(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	matchesJournal(t, ix, j)
}

// TestFatalfNeverExits: Pebble's fatal report marks the index failed and
// returns (the test process lives on); Heal recovers.
func TestFatalfNeverExits(t *testing.T) {
	ix := openTemp(t)
	j := testJournal(t)
	if err := indexTxs(ix, appendTxs(t, j, 5)); err != nil {
		t.Fatal(err)
	}
	pebbleLogger{ix}.Fatalf("pebble: fatal commit error: %v", "boom")
	if err := ix.PutGroup("g", nil); !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("PutGroup after Fatalf = %v, want ErrFailed naming the cause", err)
	}
	appendTxs(t, j, 5)
	wantStaleLookups(t, ix, j)
	if err := ix.Heal(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	matchesJournal(t, ix, j)
	if err := ix.PutGroup("g", nil); err != nil {
		t.Fatal(err)
	}
}

// TestCrashKeepsSyncedGroups: on a crash (a clone of a MemFS with only
// synced data, or some unsynced data too) every group whose PutGroup or
// DeleteGroup returned nil is as written, and the derived entries after
// CatchUp match the journal.
func TestCrashKeepsSyncedGroups(t *testing.T) {
	for _, pct := range []int{0, 50, 100} {
		t.Run(fmt.Sprintf("unsynced%d", pct), func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			ix, err := Open(Options{Dir: "/ix", Logger: quiet(), FS: mem})
			if err != nil {
				t.Fatal(err)
			}
			j := testJournal(t)
			want := map[string]string{}
			for i := range 30 {
				if err := indexTxs(ix, appendTxs(t, j, 10)); err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("g%d", i%7)
				val := fmt.Sprintf("v%d", i)
				if i%5 == 4 {
					if err := ix.DeleteGroup(name); err != nil {
						t.Fatal(err)
					}
					delete(want, name)
					continue
				}
				if err := ix.PutGroup(name, []byte(val)); err != nil {
					t.Fatal(err)
				}
				want[name] = val
			}
			crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(1, uint64(pct)))})
			_ = ix.Close()

			ix2, err := Open(Options{Dir: "/ix", Logger: quiet(), FS: crashed})
			if err != nil {
				t.Fatalf("Open after crash: %v", err)
			}
			defer ix2.Close()
			gs, err := ix2.Groups()
			if err != nil {
				t.Fatal(err)
			}
			if len(gs) != len(want) {
				t.Fatalf("groups after crash = %q, want %q", gs, want)
			}
			for name, v := range want {
				if string(gs[name]) != v {
					t.Fatalf("group %s after crash = %q, want %q", name, gs[name], v)
				}
			}
			if ix2.LastOffset() > j.LastOffset() {
				t.Fatalf("LastOffset after crash %d > journal's %d", ix2.LastOffset(), j.LastOffset())
			}
			if err := ix2.CatchUp(context.Background(), j); err != nil {
				t.Fatal(err)
			}
			matchesJournal(t, ix2, j)
		})
	}
}

// TestStaleAfterGapAndHealer: a batch the index never saw (its Add was
// lost) makes the next Add fail with ErrGap; the index is stale, lookups
// say so, and RunHealer, woken by the failure, heals it from the journal
// while the journal keeps growing.
func TestStaleAfterGapAndHealer(t *testing.T) {
	var logs syncbuf.Buffer
	ix, err := Open(Options{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	j := testJournal(t)
	if err := indexTxs(ix, appendTxs(t, j, 10)); err != nil {
		t.Fatal(err)
	}
	appendTxs(t, j, 10) // never indexed
	if err := indexTxs(ix, appendTxs(t, j, 10)); !errors.Is(err, ErrGap) {
		t.Fatalf("Add after a lost batch = %v, want ErrGap", err)
	}
	wantStaleLookups(t, ix, j)
	if st := ix.Stats(); !st.Stale || st.Failed || st.FailedAdds != 1 || !errors.Is(st.LastError, ErrGap) || st.StaleSince.IsZero() {
		t.Fatalf("Stats = %+v", st)
	}
	if err := indexTxs(ix, appendTxs(t, j, 10)); !errors.Is(err, ErrStale) {
		t.Fatalf("Add while stale = %v, want ErrStale", err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "stale") {
		t.Fatalf("no warning when the index went stale:\n%s", logs.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ix.RunHealer(ctx, j, time.Hour) // only the wake-up can heal in time
	}()
	// The journal's committer keeps appending and calling Add meanwhile.
	deadline := time.Now().Add(10 * time.Second)
	for ix.Stats().Stale {
		if time.Now().After(deadline) {
			t.Fatalf("not healed: %+v", ix.Stats())
		}
		_ = indexTxs(ix, appendTxs(t, j, 3))
		time.Sleep(5 * time.Millisecond)
	}
	if err := indexTxs(ix, appendTxs(t, j, 3)); err != nil {
		t.Fatalf("Add after heal: %v", err)
	}
	matchesJournal(t, ix, j)
	if !strings.Contains(logs.String(), "level=INFO msg=\"index: healed") {
		t.Fatalf("no info line on healing:\n%s", logs.String())
	}

	// A second episode is healed by the same healer.
	appendTxs(t, j, 4)
	if err := indexTxs(ix, appendTxs(t, j, 4)); !errors.Is(err, ErrGap) {
		t.Fatalf("second gap = %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ix.Stats().Stale; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("second episode not healed: %+v", ix.Stats())
		}
	}
	matchesJournal(t, ix, j)
	if st := ix.Stats(); st.Heals != 2 || st.FailedAdds != 2 {
		t.Fatalf("Stats = %+v", st)
	}
	cancel()
	<-done
}

// TestHealerRetriesUntilDiskRecovers: while fsyncs keep failing, RunHealer's
// heals fail and it retries with backoff; once the disk recovers it heals.
func TestHealerRetriesUntilDiskRecovers(t *testing.T) {
	inj := &injector{ops: syncOps, suffix: "", err: errorfs.ErrInjected}
	ix, _ := openFaulty(t, inj)
	j := testJournal(t)
	if err := indexTxs(ix, appendTxs(t, j, 10)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ix.RunHealer(ctx, j, 10*time.Millisecond)
	}()
	inj.on.Store(true)
	if err := ix.PutGroup("g", []byte("x")); !errors.Is(err, ErrFailed) {
		t.Fatalf("PutGroup = %v, want ErrFailed", err)
	}
	appendTxs(t, j, 10)
	for deadline := time.Now().Add(10 * time.Second); ix.Stats().FailedHeals < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("healer did not retry: %+v", ix.Stats())
		}
	}
	if !ix.Stats().Stale {
		t.Fatal("healed while fsync fails")
	}
	inj.on.Store(false)
	for deadline := time.Now().Add(10 * time.Second); ix.Stats().Stale; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not healed after the disk recovered: %+v", ix.Stats())
		}
	}
	matchesJournal(t, ix, j)
	if err := ix.PutGroup("g", []byte("y")); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
}

// TestOnSyncAndSlowSync: every fsync of the index reaches OnSync, and one
// slower than SlowSync is logged as a warning.
func TestOnSyncAndSlowSync(t *testing.T) {
	var logs syncbuf.Buffer
	var n atomic.Int64
	slow := &injector{ops: syncOps, suffix: ".log", err: nil}
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if slow.on.Load() && syncOps[op.Kind] {
			time.Sleep(300 * time.Millisecond)
		}
		return nil
	}))
	ix, err := Open(Options{
		Dir: t.TempDir(), FS: fs, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnSync: func(d time.Duration) { n.Add(1) }, SlowSync: 250 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	before := n.Load()
	if err := ix.PutGroup("g", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if n.Load() == before {
		t.Fatal("PutGroup's fsync did not reach OnSync")
	}
	slow.on.Store(true)
	if err := ix.PutGroup("g", []byte("w")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"index: slow fsync\"") || !strings.Contains(logs.String(), ".log ") {
		t.Fatalf("no slow-fsync warning:\n%s", logs.String())
	}
	if err := (Options{Dir: "x", SlowSync: -1}).Validate(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Validate(SlowSync<0) = %v", err)
	}
}
