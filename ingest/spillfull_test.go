package ingest_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/server"
)

// fullSpillDisk starts a sidecar whose spill directory fails every write
// with ENOSPC while *full is set (the storage seam: Options.FS).
func fullSpillDisk(t *testing.T, db *pgtest.DB, full *atomic.Bool, mod func(*server.Options)) *running {
	t.Helper()
	dir := t.TempDir()
	spill := filepath.Join(dir, "spill")
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt || op.Kind == errorfs.OpCreate) &&
			strings.HasPrefix(op.Path, spill) {
			return syscall.ENOSPC
		}
		return nil
	}))
	return startSidecar(t, db, dir, func(o *server.Options) {
		o.FS = fs
		o.Ingest.MaxRecordBytes = 64 << 10
		if mod != nil {
			mod(o)
		}
	})
}

// readyz answers GET /readyz: the status code and the reason.
func readyz(t *testing.T, r *running) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.S.Addr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// bigTx is one transaction of ~1.4 MB: PostgreSQL streams it in progress
// (logical_decoding_work_mem is 64kB here), so pgq spills it.
func bigTx(t *testing.T, db *pgtest.DB) {
	t.Helper()
	db.Exec(t, "BEGIN",
		fmt.Sprintf("INSERT INTO sf SELECT g, repeat('x', 200) FROM generate_series(%d, %d) g", 1, 3000),
		fmt.Sprintf("INSERT INTO sf SELECT g, repeat('x', 200) FROM generate_series(%d, %d) g", 3001, 6000),
		"COMMIT")
}

// spillShown waits until status and /readyz report the full spill disk.
func spillShown(t *testing.T, r *running) {
	t.Helper()
	waitFor(t, 30*time.Second, "the spill error in the status", func() bool {
		e, _ := r.status(t)["spill_error"].(string)
		return strings.Contains(e, "no space left on device")
	})
	code, why := readyz(t, r)
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(why, "spill directory not writable: ") || !strings.Contains(why, "no space left on device") {
		t.Fatalf("/readyz on a full spill disk: %d %q", code, why)
	}
}

// TestSpillDiskFullGivesUp: a full spill directory fails every session at
// the same transaction, however far each streams. The waits between
// reconnects grow, status and /readyz say the spill disk is full, and
// --reconnect-give-up ends Run with the ENOSPC error (before, each session
// that had started streaming reset the backoff and the give-up clock: a
// reconnect every 250-500 ms, forever). The slot, which streamed, stays.
func TestSpillDiskFullGivesUp(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE sf (id int PRIMARY KEY, pad text)`)
	var full atomic.Bool
	full.Store(true)
	const giveUp = 4 * time.Second
	r := fullSpillDisk(t, db, &full, func(o *server.Options) {
		o.Ingest.ReconnectMin, o.Ingest.ReconnectMax, o.Ingest.ReconnectGiveUp = 100*time.Millisecond, 10*time.Second, giveUp
	})
	r.waitStreaming(t)
	began := time.Now()
	bigTx(t, db)
	spillShown(t, r)
	err := r.runErr(t)
	if !errors.Is(err, ingest.ErrSpill) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "gave up reconnecting") {
		t.Fatalf("Run on a full spill disk: %v, want giving up with ENOSPC", err)
	}
	if d := time.Since(began); d < giveUp {
		t.Fatalf("gave up after %s, before --reconnect-give-up %s", d, giveUp)
	}
	// Doubling from 100 ms, jittered to at least half: 50+100+200+400+800+1600
	// ms pass within 7 waits; a reset after every streamed session would
	// take about 4s/(0.1s+session) ≈ 15-25. One legitimate reset can come
	// on a busy machine: a session that covered WAL the cluster wrote
	// meanwhile (checkpoints, other databases) made progress (seen once
	// under -race in make test: 4 waits, a reset, 5 waits: 10).
	if n := counter(t, r, "pgq_reconnects_total"); n < 2 || n > 12 {
		t.Fatalf("%v reconnects in %s of failures, want 2-12 (a growing backoff)", n, giveUp)
	}
	if ok, _ := slotExists(t, db, slotName("pgq", db)); !ok {
		t.Fatal("the slot that streamed was dropped")
	}
	if len(records(t, r.Dir)) != 0 {
		t.Fatal("the transaction that could not be spilled was journaled")
	}
}

// TestSpillDiskFullRecovers: space comes back while pgq retries: the
// transaction is journaled exactly once and complete, and the spill error
// leaves status and /readyz.
func TestSpillDiskFullRecovers(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE sf (id int PRIMARY KEY, pad text)`)
	var full atomic.Bool
	full.Store(true)
	r := fullSpillDisk(t, db, &full, nil)
	r.waitStreaming(t)
	bigTx(t, db)
	spillShown(t, r)
	full.Store(false)
	waitJournaled(t, r.Dir, 6000)
	ids := idValues(t, records(t, r.Dir))
	if len(ids) != 6000 {
		t.Fatalf("journal has %d rows, want 6000", len(ids))
	}
	for i, id := range ids {
		if id != float64(i+1) {
			t.Fatalf("row %d of the journal is id %v", i+1, id)
		}
	}
	waitFor(t, 20*time.Second, "ready again", func() bool {
		code, _ := readyz(t, r)
		return code == http.StatusOK
	})
	if e := r.status(t)["spill_error"]; e != nil {
		t.Fatalf("spill_error after recovery: %v", e)
	}
}

// counter reads a counter of the sidecar's registry.
func counter(t *testing.T, r *running, name string) float64 {
	t.Helper()
	mfs, err := serverparts.Of(r.S).Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestGiveUpAfterHealthySessions: --reconnect-give-up counts only failures
// without progress. A session that journaled a transaction, or streamed
// idle for longer than --reconnect-max, starts the count afresh: a drop
// long after an earlier one reconnects instead of giving up at once.
func TestGiveUpAfterHealthySessions(t *testing.T) {
	c := pgtest.Shared(t)
	for _, tc := range []struct {
		name    string
		journal bool
	}{{"journaled", true}, {"idle", false}} {
		t.Run(tc.name, func(t *testing.T) {
			db := c.NewDB(t)
			db.Exec(t, `CREATE TABLE hs (id int PRIMARY KEY)`)
			slot := slotName("pgq", db)
			r := startSidecar(t, db, t.TempDir(), func(o *server.Options) {
				o.Ingest.ReconnectMin, o.Ingest.ReconnectMax, o.Ingest.ReconnectGiveUp = 100*time.Millisecond, time.Second, 2*time.Second
			})
			r.waitStreaming(t)
			for i := 1; i <= 3; i++ {
				waitSlotActive(t, db, slot)
				if tc.journal {
					db.Exec(t, fmt.Sprintf(`INSERT INTO hs VALUES (%d)`, i))
					waitJournaled(t, r.Dir, i)
				}
				time.Sleep(3 * time.Second) // longer than the give-up
				db.Exec(t, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '`+slot+`'`)
				select {
				case err := <-r.done:
					r.cancel()
					r.cancel = nil
					t.Fatalf("drop %d after a healthy session: Run gave up: %v", i, err)
				case <-time.After(500 * time.Millisecond):
				}
			}
			waitSlotActive(t, db, slot)
			if n := counter(t, r, "pgq_reconnects_total"); n < 3 {
				t.Fatalf("%v reconnects after 3 drops", n)
			}
		})
	}
}
