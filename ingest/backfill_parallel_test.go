package ingest_test

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// getRanges is a backfill's full status, ranges included.
func getRanges(t *testing.T, addr, id string) api.Backfill {
	t.Helper()
	code, b := bfCallAddr(t, addr, "GET", "/v1/backfills/"+id, nil)
	var st api.Backfill
	if code != http.StatusOK || json.Unmarshal(b, &st) != nil {
		t.Fatalf("GET backfill: %d %s", code, b)
	}
	return st
}

// deref is *p, or "-" for nil.
func deref(p *string) string {
	if p == nil {
		return "-"
	}
	return *p
}

// readsJournaled counts the read changes of backfill id in dir's journal.
func readsJournaled(t *testing.T, dir, id string) int {
	t.Helper()
	n := 0
	for _, tx := range records(t, dir) {
		for _, c := range tx.Changes {
			if c.Op == pgq.OpRead {
				if tx.Backfill != id {
					t.Fatalf("read change in a record of backfill %q, want %q", tx.Backfill, id)
				}
				n++
			}
		}
	}
	return n
}

// checkRanges checks a finished backfill's ranges: want of them, each
// done, their rows adding up to the backfill's.
func checkRanges(t *testing.T, st api.Backfill, want int) {
	t.Helper()
	if st.Parallelism != want || len(st.Ranges) != want {
		t.Fatalf("parallelism %d, %d ranges, want %d: %+v", st.Parallelism, len(st.Ranges), want, st)
	}
	var rows int64
	for i, r := range st.Ranges {
		if !r.Done || (i == 0) != (r.After == nil) || (i == want-1) != (r.UpTo == nil) {
			t.Fatalf("range %d: %+v", i, r)
		}
		if i > 0 && *r.After != *st.Ranges[i-1].UpTo {
			t.Fatalf("range %d starts after %s, range %d ends at %s", i, *r.After, i-1, *st.Ranges[i-1].UpTo)
		}
		rows += r.Rows
	}
	if rows != st.Rows {
		t.Fatalf("ranges read %d rows, the backfill %d", rows, st.Rows)
	}
}

// killableBackfill makes table bf (20,000 rows) in a fresh database,
// starts the real pgq binary on a fresh data dir, and random DML on bf
// (workload, seed); stopDML ends the DML and waits for it (once; also at
// the test's end).
func killableBackfill(t *testing.T, seed uint64) (db *pgtest.DB, dir string, cmd *exec.Cmd, addr string, stopDML func()) {
	t.Helper()
	db = pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE bf (id int PRIMARY KEY, v text, n int)`, `CREATE TABLE bf_marker (id text PRIMARY KEY)`,
		`INSERT INTO bf SELECT g, md5(g::text), g FROM generate_series(1, 20000) g`, `ANALYZE bf`)
	dir = t.TempDir()
	cmd, addr = pgqRun(t, db, dir)
	stop := make(chan struct{})
	_, done := workload(t, db, seed, 25000, nil, stop)
	stopDML = sync.OnceFunc(func() {
		close(stop)
		<-done
	})
	t.Cleanup(stopDML)
	return db, dir, cmd, addr, stopDML
}

// killRestart kills pgq (SIGKILL) once the backfill seen (its state and
// rows) is mid-way through bf, and starts pgq again on dir; it returns
// the new API address.
func killRestart(t *testing.T, cmd *exec.Cmd, db *pgtest.DB, dir, state string, rows int64, seen any) string {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if state != "running" || rows >= 20000 {
		t.Fatalf("the kill was not mid-backfill: %+v", seen)
	}
	_, addr := pgqRun(t, db, dir)
	return addr
}

// TestBackfillParallelRangesUnderDML reads an integer-keyed table in 4
// key ranges at once while random inserts, updates (key changes too) and
// deletes run on it, and a text-keyed table in 3 ranges from its pg_stats
// histogram: a consumer applying the journal ends with exactly both
// tables' rows, each range read to its end, their rows adding up.
func TestBackfillParallelRangesUnderDML(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE bf (id int PRIMARY KEY, v text, n int)`, `CREATE TABLE bf_marker (id text PRIMARY KEY)`,
		`INSERT INTO bf SELECT g, md5(g::text), g FROM generate_series(1, 4000) g`, `ANALYZE bf`,
		`CREATE TABLE bft (k text PRIMARY KEY, n int)`,
		`INSERT INTO bft SELECT 'k' || md5(g::text), g FROM generate_series(1, 3000) g`, `ANALYZE bft`)
	dir := t.TempDir()
	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	addr := r.S.Addr()
	stop := make(chan struct{})
	ops, done := workload(t, db, 21, 6000, nil, stop)
	time.Sleep(100 * time.Millisecond)
	// max_rate (all ranges together) keeps the backfill long enough for
	// hundreds of concurrent operations.
	st := startBackfill(t, r, map[string]any{"tables": []string{"public.bf"}, "chunk_size": 97, "max_rate": 2000, "parallelism": 4})
	sbt := startBackfill(t, r, map[string]any{"tables": []string{"public.bft"}, "chunk_size": 101, "parallelism": 3})
	fin := waitBackfill(t, r, st.ID, "done", 120*time.Second)
	waitBackfill(t, r, sbt.ID, "done", 120*time.Second)
	time.Sleep(100 * time.Millisecond)
	close(stop)
	<-done
	if *ops < 300 {
		t.Fatalf("only %d concurrent operations", *ops)
	}
	full := getRanges(t, addr, st.ID)
	t.Logf("backfill %+v; %d concurrent operations", full, *ops)
	checkRanges(t, full, 4)
	fullt := getRanges(t, addr, sbt.ID)
	checkRanges(t, fullt, 3)
	if fullt.Rows != 3000 {
		t.Fatalf("text-keyed table: %d rows read, want 3000", fullt.Rows)
	}
	checkConverged(t, db, r.Dir, map[string][]string{"public.bf": {"id"}, "public.bft": {"k"}})
	reads := 0
	for _, tx := range records(t, dir) {
		for _, c := range tx.Changes {
			if c.Op == pgq.OpRead && c.Table == "bf" {
				reads++
			}
		}
	}
	if int64(reads) != fin.Rows-fin.Dropped {
		t.Fatalf("%d read changes of bf journaled; status %+v", reads, fin)
	}
}

// TestBackfillParallelSIGKILLResume kills the real pgq binary (SIGKILL)
// while it reads a table in 3 key ranges under random DML, and starts it
// again on the same data dir: every range resumes after its own last
// stored chunk (none of the progress it reported is lost, no range starts
// over), the backfill finishes, the journal converges on the table, and
// at most the chunks in flight at the kill (two per range) were journaled
// twice.
func TestBackfillParallelSIGKILLResume(t *testing.T) {
	db, dir, cmd, addr, stopDML := killableBackfill(t, 12)
	const chunk, par = 50, 3
	st := startBackfillAddr(t, addr, map[string]any{"tables": []string{"bf"}, "chunk_size": chunk, "parallelism": par})
	var seen api.Backfill
	waitFor(t, 60*time.Second, "some chunks in every range", func() bool {
		seen = getRanges(t, addr, st.ID)
		if len(seen.Ranges) != par {
			return false
		}
		for _, r := range seen.Ranges {
			if r.Rows < 5*chunk {
				return false
			}
		}
		return true
	})
	addr = killRestart(t, cmd, db, dir, seen.State, seen.Rows, seen)
	mid := getRanges(t, addr, st.ID)
	if mid.State != "running" || len(mid.Ranges) != par {
		t.Fatalf("after the kill: %+v", mid)
	}
	for i, r := range mid.Ranges {
		s := seen.Ranges[i]
		if r.Rows < s.Rows || deref(r.After)+":"+deref(r.UpTo) != deref(s.After)+":"+deref(s.UpTo) || (!r.Done && r.LastKey["id"] == "") {
			t.Fatalf("range %d after the kill: %+v, seen before %+v", i, r, s)
		}
	}
	fin := waitBackfillAddr(t, addr, st.ID, "done", 120*time.Second)
	stopDML()
	full := getRanges(t, addr, st.ID)
	checkRanges(t, full, par)
	if fin.Chunks <= mid.Chunks {
		t.Fatalf("resumed: %+v after %+v", fin, mid)
	}
	checkConverged(t, db, dir, map[string][]string{"public.bf": {"id"}})
	// Journaled: the rows of every completed chunk, plus at most the
	// chunks in flight at the kill, again.
	reads := readsJournaled(t, dir, st.ID)
	if want := fin.Rows - fin.Dropped; int64(reads) < want || int64(reads) > want+2*par*chunk {
		t.Fatalf("%d read changes journaled; want %d plus at most %d journaled again", reads, want, 2*par*chunk)
	}
}
