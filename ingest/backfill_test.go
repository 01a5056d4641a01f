package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/server"
)

// bfStatus is the part of a backfill's JSON the tests look at.
type bfStatus struct {
	ID           string            `json:"id"`
	State        string            `json:"state"`
	Table        string            `json:"table"`
	Rows         int64             `json:"rows"`
	RowsEstimate int64             `json:"rows_estimate"`
	Chunks       int64             `json:"chunks"`
	Redone       int64             `json:"redone"`
	Dropped      int64             `json:"dropped"`
	LastKey      map[string]string `json:"last_key"`
	Error        *string           `json:"error"`
	MaxRate      float64           `json:"max_rate"`
}

func bfCall(t *testing.T, r *running, method, path string, body any) (int, []byte) {
	t.Helper()
	return bfCallAddr(t, r.S.Addr(), method, path, body)
}

func bfCallAddr(t *testing.T, addr, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, "http://"+addr+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

func startBackfill(t *testing.T, r *running, req map[string]any) bfStatus {
	t.Helper()
	return startBackfillAddr(t, r.S.Addr(), req)
}

func startBackfillAddr(t *testing.T, addr string, req map[string]any) bfStatus {
	t.Helper()
	code, b := bfCallAddr(t, addr, "POST", "/v1/backfills", req)
	if code != http.StatusCreated {
		t.Fatalf("POST /v1/backfills: %d %s", code, b)
	}
	var st bfStatus
	if err := json.Unmarshal(b, &st); err != nil || st.ID == "" {
		t.Fatalf("backfill: %s (%v)", b, err)
	}
	return st
}

func getBackfill(t *testing.T, r *running, id string) bfStatus {
	t.Helper()
	return getBackfillAddr(t, r.S.Addr(), id)
}

func getBackfillAddr(t *testing.T, addr, id string) bfStatus {
	t.Helper()
	code, b := bfCallAddr(t, addr, "GET", "/v1/backfills/"+id, nil)
	if code != http.StatusOK {
		t.Fatalf("GET backfill: %d %s", code, b)
	}
	var st bfStatus
	_ = json.Unmarshal(b, &st)
	return st
}

func waitBackfill(t *testing.T, r *running, id, state string, timeout time.Duration) bfStatus {
	t.Helper()
	return waitBackfillAddr(t, r.S.Addr(), id, state, timeout)
}

func waitBackfillAddr(t *testing.T, addr, id, state string, timeout time.Duration) bfStatus {
	t.Helper()
	var st bfStatus
	waitFor(t, timeout, "backfill "+id+" "+state, func() bool {
		st = getBackfillAddr(t, addr, id)
		if st.State == "failed" && state != "failed" {
			t.Fatalf("backfill failed: %v", *st.Error)
		}
		return st.State == state
	})
	return st
}

// replica applies the journal as a consumer would: insert, update and read
// upsert by key, delete deletes, truncate clears. Rows are column → text.
type replica map[string]map[string]map[string]string // table → key → row

func applyJournal(t *testing.T, txs []*pgq.Transaction, keys map[string][]string) replica {
	t.Helper()
	rep := replica{}
	keyOf := func(c *pgq.Change, vals []pgq.Value) string {
		var parts []string
		for _, k := range keys[c.Schema+"."+c.Table] {
			v, _, ok := func() (pgq.Value, pgq.Column, bool) {
				cc := *c
				cc.New = vals
				return cc.Get(k, false)
			}()
			if !ok {
				t.Fatalf("change without key %s: %s", k, format.AppendChangeJSON(nil, c))
			}
			parts = append(parts, string(v.Data))
		}
		return strings.Join(parts, "\x00")
	}
	for _, tx := range txs {
		for i := range tx.Changes {
			c := &tx.Changes[i]
			qt := c.Schema + "." + c.Table
			switch c.Op {
			case pgq.OpInsert, pgq.OpUpdate, pgq.OpRead:
				if keys[qt] == nil {
					continue
				}
				if rep[qt] == nil {
					rep[qt] = map[string]map[string]string{}
				}
				if c.Op == pgq.OpUpdate && c.Old != nil {
					delete(rep[qt], keyOf(c, c.Old))
				}
				row := map[string]string{}
				for j, col := range c.Columns {
					if c.New[j].Kind == pgq.ValueNull {
						row[col.Name] = "<null>"
					} else {
						row[col.Name] = string(c.New[j].Data)
					}
				}
				rep[qt][keyOf(c, c.New)] = row
			case pgq.OpDelete:
				if keys[qt] != nil {
					delete(rep[qt], keyOf(c, c.Old))
				}
			case pgq.OpTruncate:
				for _, tb := range c.Tables {
					delete(rep, tb)
				}
			case pgq.OpMessage:
				if c.Prefix == "pgq.wm" {
					t.Fatalf("a watermark was journaled: %s", format.AppendChangeJSON(nil, c))
				}
			}
		}
	}
	return rep
}

// tableRows reads a table as column → text rows keyed like applyJournal.
func tableRows(t *testing.T, db *pgtest.DB, qt string, keys []string) map[string]map[string]string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), "SELECT * FROM "+qt, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for rows.Next() {
		row := map[string]string{}
		for i, fd := range rows.FieldDescriptions() {
			v := rows.RawValues()[i]
			if v == nil {
				row[fd.Name] = "<null>"
			} else {
				row[fd.Name] = string(v)
			}
		}
		var parts []string
		for _, k := range keys {
			parts = append(parts, row[k])
		}
		out[strings.Join(parts, "\x00")] = row
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// syncJournal inserts a marker and waits until the journal has it, so
// everything committed before is journaled.
func syncJournal(t *testing.T, db *pgtest.DB, dir string) {
	t.Helper()
	marker := fmt.Sprintf("m%d", time.Now().UnixNano())
	db.Exec(t, `INSERT INTO bf_marker VALUES ('`+marker+`')`)
	deadline := time.Now().Add(50 * time.Second)
	waitFor(t, 60*time.Second, "marker in journal", func() bool {
		txs := records(t, dir)
		if time.Now().After(deadline) && len(txs) > 0 {
			t.Logf("last record %s", appendJSON(txs[len(txs)-1]))
			deadline = deadline.Add(time.Hour)
		}
		for i := len(txs) - 1; i >= 0 && i >= len(txs)-50; i-- {
			for _, c := range txs[i].Changes {
				if c.Table == "bf_marker" && len(c.New) > 0 && string(c.New[0].Data) == marker {
					return true
				}
			}
		}
		return false
	})
}

func checkConverged(t *testing.T, db *pgtest.DB, dir string, keys map[string][]string) replica {
	t.Helper()
	syncJournal(t, db, dir)
	rep := applyJournal(t, records(t, dir), keys)
	for qt, k := range keys {
		want := tableRows(t, db, qt, k)
		got := rep[qt]
		if len(got) != len(want) {
			t.Errorf("%s: replica has %d rows, table %d", qt, len(got), len(want))
		}
		bad := 0
		for key, row := range want {
			g, ok := got[key]
			if !ok || fmt.Sprint(g) != fmt.Sprint(row) {
				if bad++; bad <= 5 {
					t.Errorf("%s key %q: replica %v, table %v", qt, key, g, row)
				}
			}
		}
		for key, g := range got {
			if _, ok := want[key]; !ok {
				if bad++; bad <= 5 {
					t.Errorf("%s key %q: replica has %v, not in the table", qt, key, g)
				}
			}
		}
	}
	return rep
}

// workload runs random inserts, updates and deletes on bf(id int, v text,
// n int) until stop is closed; with a truncate channel, also one TRUNCATE
// after 300 operations, once that channel is closed.
func workload(t *testing.T, db *pgtest.DB, seed uint64, maxID int, truncate <-chan struct{}, stop <-chan struct{}) (ops *int, done <-chan struct{}) {
	conn, err := pgx.Connect(t.Context(), db.URL)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, seed*7+1))
	n := 0
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		defer func() {
			if conn != nil {
				conn.Close(context.Background())
			}
		}()
		ctx := context.Background()
		truncated := truncate == nil
		for {
			select {
			case <-stop:
				return
			default:
			}
			var err error
			id := rng.IntN(maxID) + 1
			switch p := rng.IntN(100); {
			case !truncated && n > 300 && closed(truncate):
				_, err = conn.Exec(ctx, `TRUNCATE bf`)
				truncated = true
			case p < 35:
				_, err = conn.Exec(ctx, `INSERT INTO bf VALUES ($1, md5(random()::text), $2) ON CONFLICT (id) DO UPDATE SET v = excluded.v, n = excluded.n`, id, rng.IntN(1000))
			case p < 65:
				_, err = conn.Exec(ctx, `UPDATE bf SET v = md5(random()::text), n = n + 1 WHERE id = $1`, id)
			case p < 75:
				_, err = conn.Exec(ctx, `UPDATE bf SET id = $2 WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM bf WHERE id = $2)`, id, rng.IntN(maxID)+1)
			case p < 92:
				_, err = conn.Exec(ctx, `DELETE FROM bf WHERE id = $1`, id)
			default:
				err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, `UPDATE bf SET n = n + 1 WHERE id BETWEEN $1 AND $1 + 20`, id); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, `DELETE FROM bf WHERE id = $1`, id+21)
					return err
				})
			}
			var pgErr *pgconn.PgError
			if err != nil && !errors.As(err, &pgErr) && conn.IsClosed() {
				// The server restarted (TestBackfillServerRestart): the
				// operation may or may not have committed; the table is
				// the truth either way. Reconnect and go on.
				conn.Close(ctx)
				if conn, err = reconnect(ctx, db.URL, stop); err != nil {
					select {
					case <-stop:
					default:
						t.Errorf("workload: %v", err)
					}
					return
				}
				continue
			}
			if err != nil && !strings.Contains(err.Error(), "duplicate key") && (pgErr == nil || pgErr.Code[:2] != "57") {
				t.Errorf("workload: %v", err)
				return
			}
			n++
		}
	}()
	return &n, ch
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// reconnect connects to url, retrying for up to a minute while the
// server restarts; nil, nil once stop is closed.
func reconnect(ctx context.Context, url string, stop <-chan struct{}) (*pgx.Conn, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			return conn, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("reconnect: %w", err)
		}
		select {
		case <-stop:
			return nil, errors.New("stopped while reconnecting")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestBackfillConvergesUnderDML is the correctness property: with random
// inserts, updates (key changes too), deletes and a truncate running during
// the whole backfill, a consumer applying the journal from earliest ends
// with exactly the table's rows.
func TestBackfillConvergesUnderDML(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			c := pgtest.Shared(t)
			db := c.NewDB(t)
			const maxID = 6000
			// Rows that predate the slot: only the backfill carries them.
			db.Exec(t, `CREATE TABLE bf (id int PRIMARY KEY, v text, n int)`, `CREATE TABLE bf_marker (id text PRIMARY KEY)`,
				`INSERT INTO bf SELECT g, md5(g::text), g FROM generate_series(1, 4000) g`, `ANALYZE bf`)
			dir := t.TempDir()
			r := startSidecar(t, db, dir, nil)
			r.waitStreaming(t)
			stop := make(chan struct{})
			// Seed 2 truncates the table once the backfill read a few
			// chunks: in the middle of it, whatever the machine's load.
			var truncate chan struct{}
			if seed == 2 {
				truncate = make(chan struct{})
			}
			ops, done := workload(t, db, seed, maxID, truncate, stop)
			time.Sleep(100 * time.Millisecond)
			// max_rate holds the backfill to at least 2s, so the workload
			// overlaps it with hundreds of operations however fast this
			// machine reads 4,000 rows (unpaced, a loaded machine saw 293).
			st := startBackfill(t, r, map[string]any{"tables": []string{"public.bf"}, "chunk_size": 97, "max_rate": 2000})
			if truncate != nil {
				waitFor(t, 60*time.Second, "three chunks", func() bool { return getBackfill(t, r, st.ID).Chunks >= 3 })
				close(truncate)
			}
			// Seed 2's workload truncates the table early, which resets
			// pg_class.reltuples: its estimate is whatever it is by then.
			if st.State != "running" || (seed != 2 && st.RowsEstimate != 4000) {
				t.Fatalf("started: %+v", st)
			}
			st = waitBackfill(t, r, st.ID, "done", 120*time.Second)
			time.Sleep(100 * time.Millisecond)
			close(stop)
			<-done
			t.Logf("backfill %+v; %d concurrent operations", st, *ops)
			if *ops < 300 {
				t.Fatalf("only %d concurrent operations", *ops)
			}
			checkConverged(t, db, r.Dir, map[string][]string{"public.bf": {"id"}})
			var reads, backfillRecs int
			for _, tx := range records(t, dir) {
				if tx.Backfill != "" {
					backfillRecs++
					if tx.Backfill != st.ID {
						t.Fatalf("record backfill %q", tx.Backfill)
					}
				}
				for _, c := range tx.Changes {
					if c.Op == pgq.OpRead {
						reads++
						if tx.Backfill == "" {
							t.Fatal("read change in a record without backfill")
						}
					}
				}
			}
			if reads == 0 || int64(reads) != st.Rows-st.Dropped {
				t.Fatalf("%d read changes in %d records; status %+v", reads, backfillRecs, st)
			}
		})
	}
}

// TestBackfillKeysWhereTablesEmpty: composite and text keys, a unique index
// as key, --where, two tables in one backfill, an empty table, a table
// without a key (clear error), an unknown table and a bad predicate.
func TestBackfillKeysWhereTablesEmpty(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE bf_marker (id text PRIMARY KEY)`,
		`CREATE TABLE comp (a int, b text, v jsonb, PRIMARY KEY (b, a))`,
		`INSERT INTO comp SELECT g % 7, 'k' || (g / 7) || E'\'"x', jsonb_build_object('g', g) FROM generate_series(1, 500) g`,
		`CREATE TABLE txt (name text PRIMARY KEY, ok bool, amount numeric(10,2))`,
		`INSERT INTO txt SELECT 'n' || g, g % 2 = 0, g / 3.0 FROM generate_series(1, 300) g`,
		`CREATE TABLE uq (id bigint NOT NULL UNIQUE, v text)`,
		`ALTER TABLE uq REPLICA IDENTITY FULL`,
		`INSERT INTO uq SELECT g, 'v' || g FROM generate_series(1, 50) g`,
		`CREATE TABLE empty_t (id int PRIMARY KEY)`,
		`CREATE TABLE nokey (id int, v text)`,
		`INSERT INTO nokey VALUES (1, 'x')`)
	dir := t.TempDir()
	r := startSidecar(t, db, dir, func(o *server.Options) { o.Ingest.SkipTablesWithoutKey = true })
	r.waitStreaming(t)

	for _, tc := range []struct {
		req  map[string]any
		code int
		msg  string
	}{
		{map[string]any{"tables": []string{"public.nokey"}}, 400, "no primary key or usable unique index"},
		{map[string]any{"tables": []string{"public.missing"}}, 404, "does not exist"},
		{map[string]any{"tables": []string{"txt"}, "where": "no_such_col > 1"}, 400, "no_such_col"},
		{map[string]any{"tables": []string{}}, 400, "table"},
	} {
		code, b := bfCall(t, r, "POST", "/v1/backfills", tc.req)
		if code != tc.code || !strings.Contains(string(b), tc.msg) || !strings.Contains(string(b), `"code"`) {
			t.Errorf("%v: %d %s", tc.req, code, b)
		}
	}

	st := startBackfill(t, r, map[string]any{"tables": []string{"public.comp", "txt", "public.empty_t", "uq"}, "chunk_size": 64})
	db.Exec(t, `UPDATE comp SET v = '{"changed":true}' WHERE a = 3`, `DELETE FROM txt WHERE name = 'n7'`, `INSERT INTO empty_t VALUES (1)`)
	st = waitBackfill(t, r, st.ID, "done", 60*time.Second)
	if st.Rows < 500+299+50 {
		t.Fatalf("status %+v", st)
	}
	checkConverged(t, db, r.Dir, map[string][]string{"public.comp": {"b", "a"}, "public.txt": {"name"}, "public.empty_t": {"id"}, "public.uq": {"id"}})

	// --where: only the selected rows are read.
	w := startBackfill(t, r, map[string]any{"tables": []string{"public.txt"}, "where": "ok AND amount < 20"})
	w = waitBackfill(t, r, w.ID, "done", 30*time.Second)
	var want int64
	db.QueryRow(t, `SELECT count(*) FROM txt WHERE ok AND amount < 20`, &want)
	n := 0
	for _, tx := range records(t, dir) {
		if tx.Backfill == w.ID {
			n += len(tx.Changes)
		}
	}
	if w.Rows != want || int64(n) != want {
		t.Fatalf("--where: status rows %d, journaled %d, want %d", w.Rows, n, want)
	}
	// Rendering of read changes: as an insert, op read.
	for _, m := range dumpLines(t, records(t, dir)) {
		if m["backfill"] == st.ID {
			ch := m["changes"].([]any)[0].(map[string]any)
			if ch["op"] != "read" || ch["new"] == nil || ch["old"] != nil {
				t.Fatalf("read change: %v", ch)
			}
			break
		}
	}
	code, b := bfCall(t, r, "GET", "/v1/backfills", nil)
	var list []bfStatus
	if code != 200 || json.Unmarshal(b, &list) != nil || len(list) != 2 || list[0].ID != st.ID {
		t.Fatalf("list: %d %s", code, b)
	}
	if code, b := bfCall(t, r, "GET", "/v1/backfills/nope", nil); code != 404 || !strings.Contains(string(b), "not_found") {
		t.Fatalf("unknown id: %d %s", code, b)
	}
}

// TestBackfillInvisibleCommits: a transaction whose commit is in the WAL,
// and so in the journal, but which new snapshots do not see yet (held
// between its commit record and leaving the proc array by a synchronous
// standby that never answers) must not let a chunk's read put its row's
// older value after its change in the journal. Held before the backfill
// starts, the backfill waits for it; held in the middle (committed after
// the table's watch began, before the read of its chunk's window), the
// chunk drops its key. Without either, the replica ends with 'old'.
func TestBackfillInvisibleCommits(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE bf (id int PRIMARY KEY, v text, n int)`, `CREATE TABLE bf_marker (id text PRIMARY KEY)`,
		`INSERT INTO bf SELECT g, 'old', g FROM generate_series(1, 2000) g`)
	dir := t.TempDir()
	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)

	// ghost makes commits with synchronous_commit on wait for a standby
	// that does not exist (the cluster's default is off, so nothing else
	// waits); turning it off releases them.
	ghost := func(on bool) {
		set := `ALTER SYSTEM RESET synchronous_standby_names`
		want := ""
		if on {
			set, want = `ALTER SYSTEM SET synchronous_standby_names = 'pgq_ghost'`, "pgq_ghost"
		}
		db.Exec(t, set, `SELECT pg_reload_conf()`)
		waitFor(t, 10*time.Second, "synchronous_standby_names reloaded", func() bool {
			var v string
			db.QueryRow(t, `SHOW synchronous_standby_names`, &v)
			return v == want
		})
		time.Sleep(200 * time.Millisecond) // the checkpointer publishes it to the walsenders' shared state
	}
	ghost(true)
	t.Cleanup(func() { ghost(false) })

	// hold commits UPDATE bf SET v = 'new' WHERE id = id with synchronous
	// commit and returns once the update is journaled and still invisible.
	hold := func(id int) (release func()) {
		t.Helper()
		conn, err := pgx.Connect(t.Context(), db.URL)
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		if err := conn.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(t.Context(), `SET synchronous_commit = on`); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = conn.Exec(context.Background(), `UPDATE bf SET v = 'new' WHERE id = $1`, id)
		}()
		waitFor(t, 30*time.Second, fmt.Sprintf("update of %d journaled", id), func() bool {
			for _, tx := range records(t, dir) {
				for _, ch := range tx.Changes {
					if ch.Op == pgq.OpUpdate && ch.Table == "bf" && string(ch.New[0].Data) == fmt.Sprint(id) {
						return true
					}
				}
			}
			return false
		})
		var v string
		db.QueryRow(t, fmt.Sprintf(`SELECT v FROM bf WHERE id = %d`, id), &v)
		if v != "old" {
			t.Fatalf("the update of %d is visible already (v %q): the synchronous standby did not hold it", id, v)
		}
		return func() {
			db.Exec(t, fmt.Sprintf(`SELECT pg_cancel_backend(%d)`, pid))
			<-done
			conn.Close(context.Background())
		}
	}

	// Before the start: the backfill reads nothing until it is visible.
	release := hold(3)
	// One range: the test follows its last key. Paced at ten chunks a
	// second: unpaced, a range reads ahead while its chunks are journaled
	// and could finish its 40 chunks before the test takes the lock below.
	st := startBackfill(t, r, map[string]any{"tables": []string{"bf"}, "chunk_size": 50, "parallelism": 1, "max_rate": 500,
		"where": "(SELECT true FROM pg_advisory_xact_lock_shared(4242))"})
	time.Sleep(time.Second)
	if s := getBackfill(t, r, st.ID); s.State != "running" || s.Rows != 0 {
		t.Fatalf("the backfill read rows while a committed update was invisible: %+v", s)
	}
	release()
	waitFor(t, 30*time.Second, "two chunks", func() bool { return getBackfill(t, r, st.ID).Chunks >= 2 })

	// In the middle: stop the reads (the predicate takes a shared lock the
	// test now holds exclusively), commit the held update, let reads go on.
	lock, err := pgx.Connect(t.Context(), db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close(context.Background())
	if _, err := lock.Exec(t.Context(), `SELECT pg_advisory_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	release = hold(1990)
	if s := getBackfill(t, r, st.ID); s.State != "running" || atoi(s.LastKey["id"]) >= 1990 {
		t.Fatalf("the backfill went past the held row: %+v", s)
	}
	if _, err := lock.Exec(t.Context(), `SELECT pg_advisory_unlock(4242)`); err != nil {
		t.Fatal(err)
	}
	fin := waitBackfill(t, r, st.ID, "done", 60*time.Second)
	release()
	if fin.Rows != 2000 || fin.Dropped < 1 {
		t.Fatalf("backfill %+v: want 2000 rows read, the held row dropped", fin)
	}
	rep := checkConverged(t, db, r.Dir, map[string][]string{"public.bf": {"id"}})
	for _, id := range []string{"3", "1990"} {
		if v := rep["public.bf"][id]["v"]; v != "new" {
			t.Errorf("row %s: replica has v %q, want new", id, v)
		}
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestBackfillResumeAndCancel: pgq stopped mid-backfill resumes from the
// last completed chunk after a restart (and the journal still converges);
// a cancelled backfill stops and says so.
func TestBackfillResumeAndCancel(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE bf (id int PRIMARY KEY, v text, n int)`, `CREATE TABLE bf_marker (id text PRIMARY KEY)`,
		`INSERT INTO bf SELECT g, md5(g::text), g FROM generate_series(1, 20000) g`, `ANALYZE bf`)
	dir := t.TempDir()
	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	stop := make(chan struct{})
	_, done := workload(t, db, 9, 25000, nil, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()
	st := startBackfill(t, r, map[string]any{"tables": []string{"bf"}, "chunk_size": 50, "parallelism": 1})
	waitFor(t, 60*time.Second, "some chunks", func() bool { return getBackfill(t, r, st.ID).Chunks >= 20 })
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	r2 := startSidecar(t, db, dir, nil)
	mid := getBackfill(t, r2, st.ID)
	if mid.State != "running" || mid.Chunks < 20 || mid.LastKey["id"] == "" {
		t.Fatalf("after restart: %+v", mid)
	}
	fin := waitBackfill(t, r2, st.ID, "done", 120*time.Second)
	if fin.Chunks <= mid.Chunks || fin.Rows <= mid.Rows {
		t.Fatalf("resumed: %+v", fin)
	}
	close(stop)
	<-done
	checkConverged(t, db, r2.Dir, map[string][]string{"public.bf": {"id"}})

	cn := startBackfill(t, r2, map[string]any{"tables": []string{"bf"}, "chunk_size": 10})
	code, b := bfCall(t, r2, "DELETE", "/v1/backfills/"+cn.ID, nil)
	var cs bfStatus
	if code != 200 || json.Unmarshal(b, &cs) != nil || cs.State != "canceled" {
		t.Fatalf("cancel: %d %s", code, b)
	}
	time.Sleep(300 * time.Millisecond)
	after := getBackfill(t, r2, cn.ID)
	if after.State != "canceled" || after.Rows > cs.Rows+10 || serverparts.Of(r2.S).Ingester.Backfills().OpenChunks() != 0 {
		t.Fatalf("after cancel: %+v (was %+v), open chunks %d", after, cs, serverparts.Of(r2.S).Ingester.Backfills().OpenChunks())
	}
	var ids []string
	for _, s := range []bfStatus{getBackfill(t, r2, st.ID), after} {
		ids = append(ids, s.State)
	}
	if !slices.Equal(ids, []string{"done", "canceled"}) {
		t.Fatal(ids)
	}
}

// TestBackfillThrottle: a backfill with max_rate reads no faster than its
// cap (one chunk of burst); the cap survives a restart, PATCH changes it
// (0 lifts it) and refuses bad requests; the journal still converges.
func TestBackfillThrottle(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE bf (id int PRIMARY KEY, v text)`, `CREATE TABLE bf_marker (id text PRIMARY KEY)`,
		`INSERT INTO bf SELECT g, md5(g::text) FROM generate_series(1, 8000) g`, `ANALYZE bf`)
	bin := pgqbin.Path(t) // built before the clock of the capped backfill starts
	dir := t.TempDir()
	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	for _, req := range []map[string]any{
		{"tables": []string{"bf"}, "max_rate": -1},
		{"tables": []string{"bf"}, "max_rate": "fast"},
	} {
		if code, b := bfCall(t, r, "POST", "/v1/backfills", req); code != http.StatusBadRequest || !strings.Contains(string(b), "max_rate") {
			t.Fatalf("POST %v: %d %s", req, code, b)
		}
	}
	const chunk, capped = 100, 1000.0
	began := time.Now()
	st := startBackfill(t, r, map[string]any{"tables": []string{"bf"}, "chunk_size": chunk, "max_rate": capped})
	if st.MaxRate != capped {
		t.Fatalf("max_rate: %+v", st)
	}
	// The cap bounds the rows read: a chunk of burst plus the cap times
	// the time since the start, whatever the machine's speed.
	for range 5 {
		time.Sleep(200 * time.Millisecond)
		got := getBackfill(t, r, st.ID)
		if limit := chunk + capped*time.Since(began).Seconds(); float64(got.Rows) > limit {
			t.Fatalf("%d rows after %s, cap %v rows/s allows %.0f", got.Rows, time.Since(began), capped, limit)
		}
	}
	for _, b := range []any{map[string]any{"max_rate": -5}, map[string]any{}, map[string]any{"max_rate": 1, "chunk_size": 5}} {
		if code, body := bfCall(t, r, "PATCH", "/v1/backfills/"+st.ID, b); code != http.StatusBadRequest {
			t.Fatalf("PATCH %v: %d %s", b, code, body)
		}
	}
	// The body is read as the consumers API reads it: one object only.
	req, _ := http.NewRequest("PATCH", "http://"+r.S.Addr()+"/v1/backfills/"+st.ID, strings.NewReader(`{"max_rate":1} {"max_rate":0}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("PATCH with trailing data: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if code, body := bfCall(t, r, "PATCH", "/v1/backfills/bf999", map[string]any{"max_rate": 1}); code != http.StatusNotFound {
		t.Fatalf("PATCH unknown: %d %s", code, body)
	}
	// Much slower (by the CLI: 50 s per chunk), across a restart: the cap
	// is stored with the backfill.
	cli := exec.Command(bin, "backfill", "throttle", st.ID, "--max-rate", "2", "--addr", r.S.Addr())
	var stderr bytes.Buffer
	cli.Stderr = &stderr
	out, err := cli.Output()
	var th bfStatus
	if err != nil || json.Unmarshal(out, &th) != nil || th.MaxRate != 2 || th.State != "running" {
		t.Fatalf("pgq backfill throttle: %v %s %s", err, out, stderr.Bytes())
	}
	out, err = exec.Command(bin, "backfill", "throttle", "bf999", "--max-rate", "1", "--addr", r.S.Addr()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "bf999") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Fatalf("pgq backfill throttle of an unknown id: %v %q", err, out)
	}
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	r = startSidecar(t, db, dir, nil)
	restarted := time.Now()
	mid := getBackfill(t, r, st.ID)
	if mid.State != "running" || mid.MaxRate != 2 {
		t.Fatalf("after restart: %+v", mid)
	}
	time.Sleep(time.Second)
	if got := getBackfill(t, r, st.ID); float64(got.Rows-mid.Rows) > chunk+2*time.Since(restarted).Seconds() {
		t.Fatalf("after restart: %d rows more in %s at 2 rows/s", got.Rows-mid.Rows, time.Since(restarted))
	}
	// Lifted: the rest goes at the server's speed, at once (the runner
	// waiting 50 s for its next chunk is woken).
	if code, body := bfCall(t, r, "PATCH", "/v1/backfills/"+st.ID, map[string]any{"max_rate": 0}); code != http.StatusOK || !strings.Contains(string(body), `"max_rate":0`) {
		t.Fatalf("lift: %d %s", code, body)
	}
	fin := waitBackfill(t, r, st.ID, "done", 20*time.Second)
	if fin.Rows != 8000 {
		t.Fatalf("done: %+v", fin)
	}
	if code, body := bfCall(t, r, "PATCH", "/v1/backfills/"+st.ID, map[string]any{"max_rate": 5}); code != http.StatusBadRequest || !strings.Contains(string(body), "only a running backfill") {
		t.Fatalf("PATCH a done backfill: %d %s", code, body)
	}
	checkConverged(t, db, r.Dir, map[string][]string{"public.bf": {"id"}})
}

// pgqRun starts `pgq run` (the real binary) on dir and waits until it
// streams; it returns the process and its API address.
func pgqRun(t *testing.T, db *pgtest.DB, dir string) (*exec.Cmd, string) {
	t.Helper()
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(pgqbin.Path(t), "run", "--pg-url", db.URL, "--slot", slotName("pgq", db), "--publication", "pgq",
		"--create-slot", "--create-publication", "all", "--data-dir", dir, "--listen", addr)
	cmd.Env = cleanEnv()
	cmd.Stderr = &stLog{t: t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, 30*time.Second, "pgq streaming", func() bool {
		resp, err := http.Get("http://" + addr + "/v1/status")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var st struct {
			ProtoVersion int `json:"proto_version"`
		}
		return json.NewDecoder(resp.Body).Decode(&st) == nil && st.ProtoVersion > 0
	})
	return cmd, addr
}

// TestBackfillSIGKILLResume kills the real pgq binary (SIGKILL) in the
// middle of a backfill while random DML runs on the table, and starts it
// again on the same data directory: the backfill resumes from the last
// chunk whose progress was stored (none of the progress it reported is
// lost), finishes, and the journal still converges on the table. The
// chunk in flight at the kill may be journaled twice (whole-chunk
// duplicates, harmless under upsert).
func TestBackfillSIGKILLResume(t *testing.T) {
	db, dir, cmd, addr, stopDML := killableBackfill(t, 11)
	st := startBackfillAddr(t, addr, map[string]any{"tables": []string{"bf"}, "chunk_size": 50, "parallelism": 1})
	var seen bfStatus
	waitFor(t, 60*time.Second, "some chunks", func() bool { seen = getBackfillAddr(t, addr, st.ID); return seen.Chunks >= 30 })
	addr = killRestart(t, cmd, db, dir, seen.State, seen.Rows, seen)
	mid := getBackfillAddr(t, addr, st.ID)
	// Progress is reported only once stored: the restart has at least
	// what was seen before the kill.
	if mid.State != "running" || mid.Chunks < seen.Chunks || mid.Rows < seen.Rows || mid.LastKey["id"] == "" {
		t.Fatalf("after the kill: %+v, seen before %+v", mid, seen)
	}
	fin := waitBackfillAddr(t, addr, st.ID, "done", 120*time.Second)
	if fin.Chunks <= mid.Chunks {
		t.Fatalf("resumed: %+v after %+v", fin, mid)
	}
	stopDML()
	checkConverged(t, db, dir, map[string][]string{"public.bf": {"id"}})
}

// TestBackfillServerRestart restarts PostgreSQL in the middle of a
// backfill while random DML runs: the runner and ingest reconnect, the
// chunk in flight is read again, the backfill finishes and the journal
// converges on the table.
func TestBackfillServerRestart(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE bf (id int PRIMARY KEY, v text, n int)`, `CREATE TABLE bf_marker (id text PRIMARY KEY)`,
		`INSERT INTO bf SELECT g, md5(g::text), g FROM generate_series(1, 20000) g`, `ANALYZE bf`)
	dir := t.TempDir()
	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	stop := make(chan struct{})
	ops, done := workload(t, db, 12, 25000, nil, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()
	st := startBackfill(t, r, map[string]any{"tables": []string{"bf"}, "chunk_size": 50})
	waitFor(t, 60*time.Second, "some chunks", func() bool { return getBackfill(t, r, st.ID).Chunks >= 30 })
	before := getBackfill(t, r, st.ID)
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	// Within a minute: the wait for a chunk's result ends with its
	// connection, not after the high watermark's 2-minute timeout (a
	// restart cost that much when it did).
	fin := waitBackfill(t, r, st.ID, "done", 60*time.Second)
	if before.State != "running" || before.Rows >= 20000 || fin.Chunks <= before.Chunks {
		t.Fatalf("before the restart %+v, at the end %+v", before, fin)
	}
	if rc, _ := r.status(t)["reconnects"].(float64); rc < 1 {
		t.Fatalf("ingest did not reconnect (reconnects %v): the restart did not happen under it", rc)
	}
	close(stop)
	<-done
	t.Logf("backfill %+v; %d concurrent operations", fin, *ops)
	checkConverged(t, db, dir, map[string][]string{"public.bf": {"id"}})
}

// TestBackfillWhereAndTableNames (issue 23 items 10, 15, 16): a where
// predicate that would break out of its parentheses in the chunk query
// (whatever literal, identifier or comment it hides behind) is refused
// with 400 before anything runs, where before it was accepted and
// journaled the same chunk forever; one that keeps to them (parentheses
// and semicolons in literals, a trailing -- comment) reads what it
// selects. Tables whose schema or name holds a dot or a quote are read,
// named quoted or, without quotes, as changes show them; a table named
// several ways is read once, and the status shows each table in a form
// that names it again.
func TestBackfillWhereAndTableNames(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE bf_marker (id text PRIMARY KEY)`,
		`CREATE TABLE t (id int PRIMARY KEY, v text)`, `INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 40) g`,
		`CREATE SCHEMA "my.schema"`,
		`CREATE TABLE "my.schema"."a""b" (id int PRIMARY KEY)`, `INSERT INTO "my.schema"."a""b" SELECT generate_series(1, 25)`,
		`CREATE TABLE "my.schema".t2 (id int PRIMARY KEY)`, `INSERT INTO "my.schema".t2 SELECT generate_series(1, 15)`)
	dir := t.TempDir()
	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)

	for _, where := range []string{
		"false) or (true",
		"id > 0) OR (true) --",
		`v = 'a\') OR (true) --'`,
		`v = E'\'' ) OR (true) --'`,
		`v = $$'$$ ) OR (true) --'`,
		"true -- '\n ) OR (true) --'",
		`true /* /* */ ' */ ) OR (true) --'`,
		"true; SELECT 1",
		"id > $1",
	} {
		code, b := bfCall(t, r, "POST", "/v1/backfills", map[string]any{"tables": []string{"t"}, "where": where, "chunk_size": 10})
		if code == http.StatusCreated {
			var st bfStatus
			_ = json.Unmarshal(b, &st)
			bfCall(t, r, "DELETE", "/v1/backfills/"+st.ID, nil)
		}
		if code != 400 || !strings.Contains(string(b), `"bad_request"`) || !strings.Contains(string(b), "where must be one predicate") {
			t.Errorf("where %q: %d %s", where, code, b)
		}
	}
	code, b := bfCall(t, r, "POST", "/v1/backfills", map[string]any{"chunk_size": 10, "tables": []string{
		`"my.schema"."a""b"`, "t", "public.t", `"public"."t"`, "my.schema.t2", `"my.schema".t2`, `"my.schema"."a""b"`}})
	var st struct {
		ID     string   `json:"id"`
		Tables []string `json:"tables"`
	}
	if code != http.StatusCreated || json.Unmarshal(b, &st) != nil {
		t.Fatalf("POST: %d %s", code, b)
	}
	if want := []string{`"my.schema"."a""b"`, "public.t", `"my.schema".t2`}; !slices.Equal(st.Tables, want) {
		t.Fatalf("tables %q, want %q", st.Tables, want)
	}
	if s := waitBackfill(t, r, st.ID, "done", 60*time.Second); s.Rows != 25+40+15 {
		t.Fatalf("rows %d, want %d", s.Rows, 25+40+15)
	}
	syncJournal(t, db, dir)
	got := map[string]map[string]bool{}
	for _, tx := range records(t, dir) {
		if tx.Backfill != st.ID {
			continue
		}
		for _, c := range tx.Changes {
			k := c.Schema + "|" + c.Table
			if got[k] == nil {
				got[k] = map[string]bool{}
			}
			id := string(c.New[0].Data)
			if got[k][id] {
				t.Errorf("%s id %s journaled twice", k, id)
			}
			got[k][id] = true
		}
	}
	for k, n := range map[string]int{`my.schema|a"b`: 25, "public|t": 40, "my.schema|t2": 15} {
		if len(got[k]) != n {
			t.Errorf("%s: %d rows journaled, want %d", k, len(got[k]), n)
		}
	}

	w := startBackfill(t, r, map[string]any{"tables": []string{"t"}, "where": "(id % 2 = 0) AND v <> ');' -- even ids only", "chunk_size": 7})
	if w = waitBackfill(t, r, w.ID, "done", 60*time.Second); w.Rows != 20 {
		t.Fatalf("where: %d rows, want 20", w.Rows)
	}
}
