package ingest_test

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/syncbuf"
	"github.com/pgq-dev/pgq/server"
)

// TestWatermarkSpoofed: messages with the watermark prefix that pgq did
// not write (a role without privileges: watermark-only transactions with
// valid-looking low and high watermarks, one with a key that is not the
// process's, malformed content, a non-transactional one; before and while
// a backfill runs) are journaled as message changes, not hidden, each with
// a WARN; the backfill still converges and none of pgq's own watermarks
// reaches the journal.
func TestWatermarkSpoofed(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE wm (id int PRIMARY KEY, v text)`, `CREATE TABLE bf_marker (id text PRIMARY KEY)`, `INSERT INTO wm SELECT g, md5(g::text) FROM generate_series(1, 3000) g`, `ANALYZE wm`)
	_, url := spoofRole(t, db)
	var logs syncbuf.Buffer
	dir := t.TempDir()
	r := startSidecar(t, db, dir, func(o *server.Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	r.waitStreaming(t)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	sent := map[string]bool{} // transactional spoofs' contents
	spoof := func(round int) {
		t.Helper()
		contents := []string{
			fmt.Sprintf(`{"id":"bf1.000000000000.%d","kind":"low"}`, round),
			fmt.Sprintf(`{"id":"bf1.000000000000.%d","kind":"high","xmin":1,"xmax":2}`, round),
			fmt.Sprintf(`{"id":"bf1.000000000000.%d","key":"00000000000000000000000000000000","kind":"low"}`, round),
			fmt.Sprintf(`not json %d`, round),
		}
		for _, content := range contents {
			if _, err := conn.Exec(t.Context(), `SELECT pg_logical_emit_message(true, 'pgq.wm', $1)`, content); err != nil {
				t.Fatal(err)
			}
			sent[content] = true
		}
		if _, err := conn.Exec(t.Context(), `SELECT pg_logical_emit_message(false, 'pgq.wm', $1)`, fmt.Sprintf(`{"id":"nt%d","kind":"low"}`, round)); err != nil {
			t.Fatal(err)
		}
	}
	spoof(0) // no backfill: no chunk, no watch
	st := startBackfill(t, r, map[string]any{"tables": []string{"public.wm"}, "chunk_size": 50})
	rounds := 1
	for ; rounds < 200 && getBackfill(t, r, st.ID).State == "running"; rounds++ {
		spoof(rounds)
	}
	st = waitBackfill(t, r, st.ID, "done", 120*time.Second)
	syncJournal(t, db, dir)
	// The replica of the journal without the spoofs (applyJournal refuses
	// a journaled watermark) is the table.
	var txs []*pgq.Transaction
	for _, tx := range records(t, dir) {
		tx.Changes = slices.DeleteFunc(tx.Changes, func(c pgq.Change) bool { return c.Op == pgq.OpMessage })
		txs = append(txs, tx)
	}
	want, got := tableRows(t, db, "public.wm", []string{"id"}), applyJournal(t, txs, map[string][]string{"public.wm": {"id"}})["public.wm"]
	if len(want) != 3000 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replica of %d rows differs from the table's %d", len(got), len(want))
	}
	if st.Chunks < 3 || rounds < 3 {
		t.Fatalf("backfill of %d chunks, %d spoof rounds: not interleaved", st.Chunks, rounds)
	}
	// Nothing writes the table: no chunk has a reason to be read again
	// (a non-transactional message used to count as an uninspected
	// transaction and dirty every open window).
	if st.Redone != 0 {
		t.Fatalf("%d chunks read again; the spoofs touch no rows", st.Redone)
	}

	journaled, standalone := 0, 0
	for _, ch := range changesOf(t, records(t, dir)) {
		if ch["op"] != "message" || ch["prefix"] != "pgq.wm" {
			continue
		}
		content := ch["content"].(string)
		switch {
		case ch["transactional"] == false && strings.HasPrefix(content, `{"id":"nt`):
			standalone++
		case sent[content]:
			journaled++
		default:
			t.Fatalf("a watermark that is not a spoof was journaled: %v", ch)
		}
	}
	if journaled != len(sent) || standalone != rounds {
		t.Fatalf("journaled %d of %d spoofed watermark-only transactions, %d of %d non-transactional", journaled, len(sent), standalone, rounds)
	}
	l := logs.String()
	if n := strings.Count(l, "journaling a message with pgq's watermark prefix as a message change"); n != len(sent) {
		t.Fatalf("%d WARNs for %d spoofs", n, len(sent))
	}
	if n := strings.Count(l, "journaling a non-transactional message with one of pgq's prefixes"); n != rounds {
		t.Fatalf("%d WARNs for %d non-transactional spoofs", n, rounds)
	}
}
