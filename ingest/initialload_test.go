package ingest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// loadArgs are pgq run's arguments for an initial load of the test's
// two tables.
func loadArgs(t *testing.T, db *pgtest.DB, slot, dir string) []string {
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"run", "--pg-url", db.URL, "--slot", slot, "--publication", "p_load", "--data-dir", dir,
		"--initial-load", "public.t_keyed,public.t_keyless", "--initial-load-parallelism", "2",
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--reconnect-min", "50ms", "--status-interval", "200ms"}
}

// listenOf is the --listen address of args.
func listenOf(args []string) string {
	for i, a := range args {
		if a == "--listen" {
			return args[i+1]
		}
	}
	return ""
}

// createLoadTables makes a keyed and a keyless table (REPLICA IDENTITY
// FULL, so its updates and deletes replicate) with rows rows each.
func createLoadTables(t *testing.T, db *pgtest.DB, rows int, pad int) {
	db.Exec(t,
		`CREATE TABLE t_keyed (id int PRIMARY KEY, v text)`,
		`CREATE TABLE t_keyless (n int, v text)`,
		`ALTER TABLE t_keyless REPLICA IDENTITY FULL`,
		fmt.Sprintf(`INSERT INTO t_keyed SELECT g, 'k' || g || repeat('x', %d) FROM generate_series(1, %d) g`, pad, rows),
		fmt.Sprintf(`INSERT INTO t_keyless SELECT g %% 1000, 'n' || g || repeat('y', %d) FROM generate_series(1, %d) g`, pad, rows),
		`CREATE PUBLICATION p_load FOR TABLE t_keyed, t_keyless`)
}

// rowOf is a change's row image (new, else old) as "col=value" pairs in
// column order.
func rowOf(c map[string]any, image string) string {
	m, _ := c[image].(map[string]any)
	if m == nil {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := m[k]
		if f, ok := v.(float64); ok {
			v = strconv.FormatFloat(f, 'f', -1, 64)
		}
		fmt.Fprintf(&b, "%s=%v;", k, v)
	}
	return b.String()
}

// dbRows is each table's rows as rowOf renders them, counted.
func dbRows(t *testing.T, db *pgtest.DB) map[string]map[string]int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	out := map[string]map[string]int{"t_keyed": {}, "t_keyless": {}}
	for _, q := range []struct{ table, sql string }{
		{"t_keyed", "SELECT 'id=' || id || ';v=' || v || ';' FROM t_keyed"},
		{"t_keyless", "SELECT 'n=' || n || ';v=' || v || ';' FROM t_keyless"},
	} {
		rows, err := conn.Query(context.Background(), q.sql)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out[q.table][s]++
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
	}
	return out
}

// replay applies the journal's changes to empty tables and fails the test
// on any overlap or hole: a read or insert of a row the replay already
// has (keyed: its id), an update or delete of one it lacks. It returns
// the tables, the number of read changes and the load's consistent LSN
// (the load's commit LSN; 0 without a load).
func replay(t *testing.T, txs []*pgq.Transaction) (tables map[string]map[string]int, reads int, loadAt pgq.LSN) {
	t.Helper()
	updates, deletes := 0, 0
	defer func() {
		t.Logf("replayed %d records: %d reads, %d updates, %d deletes", len(txs), reads, updates, deletes)
	}()
	tables = map[string]map[string]int{"t_keyed": {}, "t_keyless": {}}
	keyed := map[string]string{} // id → row
	inLoad := true
	for i, tx := range txs {
		if tx.Backfill != "" {
			if !inLoad {
				t.Fatalf("record %d: a load record after a streamed one", i+1)
			}
			if loadAt == 0 {
				loadAt = tx.CommitLSN
			}
			if tx.CommitLSN != loadAt || tx.EndLSN != loadAt || tx.Part != uint32(i) {
				t.Fatalf("record %d: load part %d at %s/%s, want part %d at %s", i+1, tx.Part, tx.CommitLSN, tx.EndLSN, i, loadAt)
			}
		} else {
			if inLoad && i > 0 && !txs[i-1].Final {
				t.Fatalf("record %d: streamed before the load's final part", i+1)
			}
			inLoad = false
			if tx.CommitLSN < loadAt {
				t.Fatalf("record %d: streamed transaction at %s, before the load's %s", i+1, tx.CommitLSN, loadAt)
			}
		}
		for _, c := range changesOf(t, []*pgq.Transaction{tx}) {
			table, _ := c["table"].(string)
			op, _ := c["op"].(string)
			newRow, oldRow := rowOf(c, "new"), rowOf(c, "old")
			id := ""
			if table == "t_keyed" {
				// The old key where there is one (a delete, an update of
				// the key), else the new row's.
				img, _ := c["old"].(map[string]any)
				if img == nil {
					img, _ = c["new"].(map[string]any)
				}
				id = fmt.Sprint(img["id"])
			}
			switch {
			case op == "read" && tx.Backfill == "":
				t.Fatalf("record %d: a read change outside the load", i+1)
			case op == "read" || op == "insert":
				reads += map[bool]int{true: 1}[op == "read"]
				if table == "t_keyed" {
					if _, dup := keyed[id]; dup {
						t.Fatalf("record %d: %s of id %s, which the journal already has (overlap)", i+1, op, id)
					}
					keyed[id] = newRow
				}
				tables[table][newRow]++
			case op == "update" || op == "delete":
				if op == "delete" {
					deletes++
				}
				before := oldRow
				if table == "t_keyed" {
					var ok bool
					if before, ok = keyed[id]; !ok {
						t.Fatalf("record %d: %s of id %s, which the journal lacks (hole)", i+1, op, id)
					}
					delete(keyed, id)
				}
				if tables[table][before] == 0 {
					t.Fatalf("record %d: %s of row %s, which the journal lacks (hole)", i+1, op, before)
				}
				if tables[table][before]--; tables[table][before] == 0 {
					delete(tables[table], before)
				}
				if op == "update" {
					if table == "t_keyed" {
						keyed[fmt.Sprint(c["new"].(map[string]any)["id"])] = newRow
					}
					updates++
					tables[table][newRow]++
				}
			}
		}
	}
	return tables, reads, loadAt
}

// sameRows compares replayed tables with the database's.
func sameRows(t *testing.T, got, want map[string]map[string]int) {
	t.Helper()
	for table, rows := range want {
		if len(got[table]) != len(rows) {
			t.Errorf("%s: journal replays to %d distinct rows, the table has %d", table, len(got[table]), len(rows))
		}
		for r, n := range rows {
			if got[table][r] != n {
				t.Fatalf("%s: row %s is in the table %d times, in the journal's replay %d times", table, r, n, got[table][r])
			}
		}
	}
}

// churn changes both tables until ctx ends: inserts, updates and deletes
// of the keyed table's loaded rows and inserts into the keyless one.
func churn(ctx context.Context, url string, from int) (int, error) {
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	i := 0
	for ; ctx.Err() == nil; i++ {
		id := from + 1 + i
		// One simple query: one transaction of five statements.
		_, err := conn.Exec(context.Background(), `
			INSERT INTO t_keyed VALUES ($1, 'new' || $1::text);
			UPDATE t_keyed SET v = v || '+' WHERE id = $2;
			DELETE FROM t_keyed WHERE id = $3 OR id = $1 - 50;
			INSERT INTO t_keyless VALUES ($2 % 1000, 'new' || $1::text);
			UPDATE t_keyless SET v = v || '+' WHERE ctid = (SELECT ctid FROM t_keyless WHERE n = $2 % 1000 LIMIT 1);`,
			pgx.QueryExecModeSimpleProtocol, id, 1+(i*7)%from, 2+(i*13)%(from-2))
		if err != nil {
			return i, err
		}
	}
	return i, nil
}

// insertAndStop inserts a row into the keyed table, waits until the
// journal ends with it, calls before (may be nil) and stops pgq with
// SIGTERM, which must exit 0.
func insertAndStop(t *testing.T, db *pgtest.DB, p *proc, dir string, id int, v string, before func()) {
	t.Helper()
	db.Exec(t, fmt.Sprintf(`INSERT INTO t_keyed VALUES (%d, '%s')`, id, v))
	waitFor(t, 60*time.Second, "the insert "+v+" in the journal", func() bool {
		txs := records(t, dir)
		return len(txs) > 0 && strings.Contains(string(appendJSON(txs[len(txs)-1])), `"`+v+`"`)
	})
	if before != nil {
		before()
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code, stderr := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr)
	}
}

// TestInitialLoadSnapshot loads a keyed and a keyless table under the
// slot's exported snapshot while the tables keep changing, through pgq
// run --initial-load: the journal starts with the load (read changes in
// the parts of one transaction at the slot's consistent point, marked
// as a backfill), then holds every change committed after it exactly
// once; replaying it gives the tables as they are at the end, with no
// row both loaded and streamed. A second start with the same flag
// streams on without loading again.
func TestInitialLoadSnapshot(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	const rows = 30000
	createLoadTables(t, db, rows, 0)
	dir := t.TempDir()
	slot := slotName("load", db)

	ctx, stop := context.WithCancel(context.Background())
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	// The writer runs before the slot exists, while it loads and after.
	go func() { n, err := churn(ctx, db.URL, rows); done <- result{n, err} }()
	time.Sleep(100 * time.Millisecond)
	args := loadArgs(t, db, slot, dir)
	p := startPgq(t, args...)
	waitSlotActive(t, db, slot)
	time.Sleep(500 * time.Millisecond)
	stop()
	res := <-done
	if res.err != nil {
		t.Fatalf("writer: %v", res.err)
	}
	db.Exec(t, `INSERT INTO t_keyed VALUES (-1, 'end')`)
	waitFor(t, 30*time.Second, "the last insert in the journal", func() bool {
		txs := records(t, dir)
		return len(txs) > 0 && strings.Contains(string(appendJSON(txs[len(txs)-1])), `"end"`)
	})
	status, _ := getJSON(t, "http://"+listenOf(args)+"/v1/status")["initial_load"].(map[string]any)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code, stderr := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr)
	}
	txs := records(t, dir)
	got, reads, loadAt := replay(t, txs)
	if loadAt == 0 || reads < rows {
		t.Fatalf("load at %s with %d read changes; want one of about %d rows", loadAt, reads, 2*rows)
	}
	streamed := 0
	for _, tx := range txs {
		if tx.Backfill == "" {
			streamed++
		}
	}
	if streamed < 10 {
		t.Fatalf("only %d streamed transactions: the writer did not overlap the load's start", streamed)
	}
	sameRows(t, got, dbRows(t, db))
	if status["state"] != "done" || status["rows"] != float64(reads) || status["lsn"] != loadAt.String() {
		t.Fatalf("status initial_load %v, want done with %d rows at %s", status, reads, loadAt)
	}
	// On PostgreSQL 17+ the slot is a failover slot, as --create-slot
	// makes it (CREATE_REPLICATION_SLOT's FAILOVER option).
	if major, err := c.Major(); err != nil {
		t.Fatal(err)
	} else if major >= 17 {
		var failover bool
		db.QueryRow(t, "SELECT failover FROM pg_replication_slots WHERE slot_name = '"+slot+"'", &failover)
		if !failover {
			t.Fatal("the load's slot is not a failover slot")
		}
	}
	t.Logf("%d records: %d rows loaded at %s, %d streamed transactions (%d writer rounds)", len(txs), reads, loadAt, streamed, res.n)

	// A second start with the same flag streams on.
	p = startPgq(t, args...)
	waitSlotActive(t, db, slot)
	db.Exec(t, `INSERT INTO t_keyed VALUES (-2, 'again')`)
	waitFor(t, 30*time.Second, "the insert after the restart", func() bool {
		txs := records(t, dir)
		return strings.Contains(string(appendJSON(txs[len(txs)-1])), `"again"`)
	})
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code, stderr := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("restart: exit code %d; stderr:\n%s", code, stderr)
	}
	after := records(t, dir)
	if len(after) != len(txs)+1 {
		t.Fatalf("after the restart the journal has %d records, want %d (no second load)", len(after), len(txs)+1)
	}
	got, reads2, _ := replay(t, after)
	if reads2 != reads {
		t.Fatalf("read changes went from %d to %d", reads, reads2)
	}
	sameRows(t, got, dbRows(t, db))
}

// bigLoad is a test's database with two tables of bigLoadRows wide rows
// each, its data dir, slot and pgq run arguments.
type bigLoad struct {
	db        *pgtest.DB
	dir, slot string
	args      []string
	state     string // the load's state file
}

const bigLoadRows = 150000

func newBigLoad(t *testing.T, name string) *bigLoad {
	db := pgtest.Shared(t).NewDB(t)
	createLoadTables(t, db, bigLoadRows, 200)
	l := &bigLoad{db: db, dir: t.TempDir(), slot: slotName(name, db)}
	l.args = loadArgs(t, db, l.slot, l.dir)
	l.state = filepath.Join(l.dir, "journal", ingest.LoadStateFile)
	return l
}

// slotCount is 1 while the load's slot exists, else 0.
func (l *bigLoad) slotCount(t *testing.T) int {
	var n int
	l.db.QueryRow(t, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+l.slot+"'", &n)
	return n
}

// loadsExactlyOnce starts pgq over the dropped slot: it loads from
// scratch, and the journal holds every row once.
func (l *bigLoad) loadsExactlyOnce(t *testing.T) {
	p := startPgq(t, l.args...)
	waitSlotActive(t, l.db, l.slot)
	insertAndStop(t, l.db, p, l.dir, -1, "end", nil)
	got, reads, _ := replay(t, records(t, l.dir))
	if reads != 2*bigLoadRows {
		t.Fatalf("%d read changes, want %d", reads, 2*bigLoadRows)
	}
	sameRows(t, got, dbRows(t, l.db))
}

// TestInitialLoadKilledRefuses kills pgq with SIGKILL in the middle of an
// initial load. The restart with --initial-load refuses with one line
// saying what to do, and changes nothing: the slot, the state file and
// the journal stay as they were (the journal holds no part of the
// unfinished load: journal.Open cuts an unfinished transaction's parts).
// After the slot is dropped, as the error says, the next start loads
// from scratch: every row exactly once.
func TestInitialLoadKilledRefuses(t *testing.T) {
	l := newBigLoad(t, "loadkill")
	for i, a := range l.args {
		if a == "--initial-load-parallelism" {
			l.args[i+1] = "1" // a longer load
		}
	}
	p := startPgq(t, l.args...)
	waitFor(t, 60*time.Second, "a part of the load in the journal", func() bool { return len(records(t, l.dir)) > 0 })
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t, 10*time.Second)
	txs := records(t, l.dir)
	if len(txs) > 0 && txs[len(txs)-1].Final {
		t.Skip("the load finished before the kill")
	}
	t.Logf("killed with %d parts of the load journaled", len(txs))
	before, err := os.ReadFile(l.state)
	if err != nil {
		t.Fatal(err)
	}

	p = startPgq(t, l.args...)
	code, stderr := p.wait(t, 30*time.Second)
	if code == 0 || !strings.Contains(stderr, "was interrupted") || !strings.Contains(stderr, "pgq slot drop") || !strings.Contains(stderr, "--initial-load") {
		t.Fatalf("restart after the kill: exit %d, want a refusal naming --initial-load and pgq slot drop; stderr:\n%s", code, stderr)
	}
	t.Logf("refusal: %s", strings.TrimSpace(stderr))
	if l.slotCount(t) != 1 {
		t.Fatal("the refusal dropped the slot")
	}
	if after, err := os.ReadFile(l.state); err != nil || string(after) != string(before) {
		t.Fatalf("the refusal changed the state file: %v\n%s\n%s", err, before, after)
	}
	for _, tx := range records(t, l.dir) {
		if tx.Backfill != "" {
			t.Fatalf("the journal kept a part of the unfinished load: %+v", tx)
		}
	}
	l.db.DropSlot(t, l.slot)
	l.loadsExactlyOnce(t)
}

// TestInitialLoadStoppedDropsSlot stops pgq (SIGTERM) in the middle of
// an initial load: it exits 0 and drops the slot it created, whose
// snapshot no connection can import again, so the next start creates a
// new slot and loads from scratch, every row once.
func TestInitialLoadStoppedDropsSlot(t *testing.T) {
	l := newBigLoad(t, "loadstop")
	p := startPgq(t, l.args...)
	waitFor(t, 60*time.Second, "the load's start", func() bool { _, err := os.Stat(l.state); return err == nil })
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code, stderr := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("SIGTERM during the load: exit %d; stderr:\n%s", code, stderr)
	}
	if txs := records(t, l.dir); len(txs) > 0 && txs[len(txs)-1].Final {
		t.Skip("the load finished before the stop")
	}
	if l.slotCount(t) != 0 {
		t.Fatal("the slot of the stopped load is still there")
	}
	l.loadsExactlyOnce(t)
}
