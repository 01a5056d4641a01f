package ingest_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/server"
)

// TestBackfillChunkRecordRarePaths: a chunk reaches ingest only as its
// record (Chunk.SetRecord), which ingest decodes into rows only when it
// must, and each path journals exactly the right rows. Chunks of 50 rows
// under a 4 KiB MaxRecordBytes: rows 1-50 and 101-150 are wide (a chunk's
// record over the limit), rows 151-250 narrow. The first two chunks' reads
// wait on a lock after their snapshot while a row of each is updated, so
// the update commits in the chunk's window: chunk 1 (wide) drops row 5
// and journals the rest in parts, chunk 2 (narrow) drops row 60 and
// journals the rest as one record encoded anew, chunk 3 (wide, nothing
// dropped) journals every row in parts, chunks 4 and 5 their records as
// read. Every other row is journaled once as a read with the value the
// table had, rows 5 and 60 only as their updates, and no chunk is read
// again: whichever way a chunk was journaled, the next commit knows it
// inspected it (a record it did not see marks every open window dirty).
func TestBackfillChunkRecordRarePaths(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE bf (id int PRIMARY KEY, v text, n int)`, `CREATE TABLE bf_marker (id text PRIMARY KEY)`,
		`INSERT INTO bf SELECT g, CASE WHEN (g - 1) / 50 IN (0, 2) THEN repeat('w', 200) ELSE 'narrow' END || g, g FROM generate_series(1, 250) g`)
	before := tableRows(t, db, "public.bf", []string{"id"})
	dir := t.TempDir()
	r := startSidecar(t, db, dir, func(o *server.Options) { o.Ingest.MaxRecordBytes = ingest.MinMaxRecordBytes })
	r.waitStreaming(t)

	// Two sessions take turns holding the lock each chunk's read takes
	// (shared) in its where: PostgreSQL grants a lock in the order it
	// was asked for, so the second session's exclusive request, queued
	// behind chunk 1's read, gets the lock before chunk 2's read asks.
	locker := func() *pgx.Conn {
		c, err := pgx.Connect(t.Context(), db.URL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	exec := func(c *pgx.Conn, sql string) {
		if _, err := c.Exec(t.Context(), sql); err != nil {
			t.Error(err)
		}
	}
	waiting := func(what string, n int) {
		waitFor(t, 30*time.Second, what, func() bool {
			var got int
			db.QueryRow(t, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4243 AND NOT granted
				AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, &got)
			return got == n
		})
	}
	first, second := locker(), locker()
	exec(first, `SELECT pg_advisory_lock(4243)`)
	st := startBackfill(t, r, map[string]any{"tables": []string{"bf"}, "chunk_size": 50, "parallelism": 1,
		"where": "(SELECT true FROM pg_advisory_xact_lock_shared(4243))"})
	waiting("chunk 1's read waiting for the lock", 1)
	db.Exec(t, `UPDATE bf SET v = 'changed', n = -5 WHERE id = 5`)
	locked := make(chan struct{})
	go func() {
		defer close(locked)
		exec(second, `SELECT pg_advisory_lock(4243)`)
	}()
	waiting("the second session queued behind chunk 1's read", 2)
	exec(first, `SELECT pg_advisory_unlock(4243)`)
	<-locked
	waiting("chunk 2's read waiting for the lock", 1)
	db.Exec(t, `UPDATE bf SET v = 'changed', n = -60 WHERE id = 60`)
	exec(second, `SELECT pg_advisory_unlock(4243)`)
	fin := waitBackfill(t, r, st.ID, "done", 60*time.Second)
	if fin.Rows != 250 || fin.Dropped != 2 || fin.Chunks != 5 || fin.Redone != 0 {
		t.Fatalf("backfill %+v: want 250 rows read in 5 chunks, none again, rows 5 and 60 dropped", fin)
	}
	checkConverged(t, db, r.Dir, map[string][]string{"public.bf": {"id"}})

	reads := map[string]int{}
	parts := map[pgq.LSN]int{} // parts of a chunk's record, by its commit LSN
	for _, tx := range records(t, r.Dir) {
		for _, c := range tx.Changes {
			if c.Op != pgq.OpRead {
				continue
			}
			if tx.Backfill != st.ID {
				t.Fatalf("a read in a record of backfill %q", tx.Backfill)
			}
			id := string(c.New[0].Data)
			reads[id]++
			want := before[id]
			if got := fmt.Sprint(map[string]string{"id": id, "v": string(c.New[1].Data), "n": string(c.New[2].Data)}); got != fmt.Sprint(want) {
				t.Errorf("row %s journaled as %s, want %v", id, got, want)
			}
			parts[tx.CommitLSN] = max(parts[tx.CommitLSN], int(tx.Part)+1)
		}
	}
	for id := 1; id <= 250; id++ {
		want := 1
		if id == 5 || id == 60 {
			want = 0
		}
		if n := reads[strconv.Itoa(id)]; n != want {
			t.Errorf("row %d journaled as a read %d times, want %d", id, n, want)
		}
	}
	// Three chunks within the limit (one record each), two over it.
	var counts []int
	for _, n := range parts {
		counts = append(counts, n)
	}
	if split := len(counts) - countOf(counts, 1); len(counts) != 5 || split != 2 {
		t.Errorf("chunk records in %v parts: want 5 chunks, 2 of them in parts", counts)
	}
}

// countOf is how many of xs are x.
func countOf(xs []int, x int) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}
