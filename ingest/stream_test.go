package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/record"
	"github.com/pgq-dev/pgq/server"
)

// These tests run against the package's cluster, whose
// logical_decoding_work_mem is 64kB (see TestMain): a transaction of a few
// thousand rows is streamed while in progress (protocol v2).

const stPad = "repeat('x', 200)"

// stSidecar runs an in-process sidecar with a small record size limit.
type stSidecar struct {
	s      *server.Server
	dir    string
	cancel context.CancelFunc
	done   chan error
}

func stStart(t *testing.T, db *pgtest.DB, maxRecord int) *stSidecar {
	t.Helper()
	return stStartWith(t, db, func(o *ingest.Options) { o.MaxRecordBytes = maxRecord })
}

// stStartWith is stStart with ingest options changed by mod.
func stStartWith(t *testing.T, db *pgtest.DB, mod func(*ingest.Options)) *stSidecar {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	o := ingest.Options{
		PGURL: db.URL, Slot: stSlot(db), Publication: "pgq",
		CreateSlot: true, CreatePublication: "all",
		ReconnectMin: 100 * time.Millisecond, ReconnectMax: time.Second,
		StatusInterval: 500 * time.Millisecond,
	}
	mod(&o)
	s, err := server.Open(ctx, server.Options{DataDir: dir, Listen: "127.0.0.1:0", Ingest: o})
	if err != nil {
		cancel()
		t.Fatalf("server.Open: %v", err)
	}
	r := &stSidecar{s: s, dir: dir, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx) }()
	t.Cleanup(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("server.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("sidecar did not stop")
		}
	})
	waitFor(t, 30*time.Second, "streaming", func() bool {
		st := serverparts.Of(s).Ingester.Status()
		return st.Running && st.ProtoVersion > 0 && st.LastError == nil
	})
	if st := serverparts.Of(s).Ingester.Status(); st.ProtoVersion != 2 || !st.Streaming {
		t.Fatalf("want protocol 2 with streaming, status says %d, %v", st.ProtoVersion, st.Streaming)
	}
	return r
}

// streamed returns how many transactions the server streamed in progress.
func (r *stSidecar) streamed(t *testing.T) float64 {
	t.Helper()
	return r.counter(t, "pgq_streamed_transactions_total")
}

// counter returns the value of one of the sidecar's counters.
func (r *stSidecar) counter(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := serverparts.Of(r.s).Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s metric", name)
	return 0
}

// stTx is one journaled transaction: its parts and the ids it inserted.
type stTx struct {
	parts []*pgq.Transaction
	table string
	ids   []int
}

// stTransactions groups records into transactions, checking the part
// layout: consecutive records, Part 0..n-1, the same xid, LSNs and commit
// time, Final on the last only, and no record of another transaction in
// between. A trailing unfinished transaction is an error.
func stTransactions(t *testing.T, recs []*pgq.Transaction) []stTx {
	t.Helper()
	var out []stTx
	var cur *stTx
	for _, r := range recs {
		if cur == nil {
			if r.Part != 0 {
				t.Fatalf("offset %d: part %d starts a transaction", r.Offset, r.Part)
			}
			out = append(out, stTx{})
			cur = &out[len(out)-1]
		} else {
			p0 := cur.parts[0]
			if r.Part != uint32(len(cur.parts)) || r.Xid != p0.Xid || r.CommitLSN != p0.CommitLSN ||
				r.EndLSN != p0.EndLSN || !r.CommitTime.Equal(p0.CommitTime) || r.Offset != cur.parts[len(cur.parts)-1].Offset+1 {
				t.Fatalf("offset %d (xid %d part %d end %s) does not continue xid %d part %d end %s",
					r.Offset, r.Xid, r.Part, r.EndLSN, p0.Xid, len(cur.parts)-1, p0.EndLSN)
			}
		}
		cur.parts = append(cur.parts, r)
		for _, c := range r.Changes {
			if c.Op != pgq.OpInsert {
				continue
			}
			id, err := strconv.Atoi(string(c.New[0].Data))
			if err != nil {
				t.Fatalf("offset %d: id %q: %v", r.Offset, c.New[0].Data, err)
			}
			cur.table = c.Table
			cur.ids = append(cur.ids, id)
		}
		if r.Final {
			cur = nil
		}
	}
	if cur != nil {
		t.Fatalf("journal ends inside transaction %d (part %d not final)", cur.parts[0].Xid, len(cur.parts)-1)
	}
	return out
}

// stIDs returns lo..hi.
func stIDs(lo, hi int) []int {
	var ids []int
	for i := lo; i <= hi; i++ {
		ids = append(ids, i)
	}
	return ids
}

func stSameIDs(t *testing.T, what string, got, want []int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: row %d has id %d, want %d", what, i, got[i], want[i])
		}
	}
}

// stWaitTxs waits until the journal holds n complete transactions.
func stWaitTxs(t *testing.T, dir string, n int) []stTx {
	t.Helper()
	var txs []stTx
	waitFor(t, 60*time.Second, fmt.Sprintf("%d transactions in the journal", n), func() bool {
		recs := records(t, dir)
		if len(recs) == 0 || !recs[len(recs)-1].Final {
			return false
		}
		txs = stTransactions(t, recs)
		return len(txs) >= n
	})
	if len(txs) != n {
		t.Fatalf("%d transactions in the journal, want %d", len(txs), n)
	}
	return txs
}

func stSpillFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.spill"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// stSetup creates a database with tables t and u. Slots are cluster-wide:
// each test's slot is named after its database (stSlot) and dropped at the
// end, after the sidecar stopped (cleanups run last-in first-out).
func stSetup(t *testing.T) *pgtest.DB {
	t.Helper()
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, "CREATE TABLE t (id int PRIMARY KEY, pad text)", "CREATE TABLE u (id int PRIMARY KEY, pad text)")
	t.Cleanup(func() {
		db.DropSlot(t, stSlot(db))
	})
	return db
}

func stSlot(db *pgtest.DB) string { return "pgq_" + db.Name }

func stInsert(table string, lo, hi int) string {
	return fmt.Sprintf("INSERT INTO %s SELECT g, %s FROM generate_series(%d, %d) g", table, stPad, lo, hi)
}

func TestStreamedCommit(t *testing.T) {
	db := stSetup(t)
	r := stStart(t, db, 64<<10)
	db.Exec(t, "BEGIN", stInsert("t", 1, 3000), stInsert("t", 3001, 6000), "COMMIT")
	txs := stWaitTxs(t, r.dir, 1)
	if r.streamed(t) < 1 {
		t.Fatal("the transaction was not streamed in progress")
	}
	stSameIDs(t, "streamed commit", txs[0].ids, stIDs(1, 6000))
	if len(txs[0].parts) < 2 {
		t.Fatalf("a ~1.4 MB transaction with a 64 KiB record limit has %d part(s)", len(txs[0].parts))
	}
	if f := stSpillFiles(t, filepath.Join(r.dir, "spill")); len(f) != 0 {
		t.Fatalf("spill files left after commit: %v", f)
	}
	// Confirmation reaches the transaction once its final part is durable.
	end := txs[0].parts[0].EndLSN
	waitFor(t, 30*time.Second, "confirmation", func() bool { return serverparts.Of(r.s).Ingester.Status().ConfirmedLSN >= end })
}

// A transaction streamed at full speed is read with coalescing on (the
// socket's low-water mark raised, messages gathered per window), a lone
// transaction after it is read as it comes, and both are journaled exactly;
// with coalescing off no window is counted and the journal is the same.
func TestReceiveCoalesce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		coalesce time.Duration
	}{{"default", 0}, {"off", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			db := stSetup(t)
			r := stStartWith(t, db, func(o *ingest.Options) { o.ReceiveCoalesce = tc.coalesce })
			db.Exec(t, "BEGIN", stInsert("t", 1, 20000), "COMMIT")
			db.Exec(t, stInsert("u", 20001, 20001))
			txs := stWaitTxs(t, r.dir, 2)
			stSameIDs(t, "burst", txs[0].ids, stIDs(1, 20000))
			stSameIDs(t, "lone transaction", txs[1].ids, stIDs(20001, 20001))
			windows := r.counter(t, "pgq_receive_coalesce_windows_total")
			if tc.coalesce < 0 && windows != 0 {
				t.Fatalf("coalescing off, yet %v gathering windows", windows)
			}
			if tc.coalesce == 0 && windows == 0 {
				t.Fatal("20,000 rows streamed at full speed, yet no gathering window")
			}
			t.Logf("gathering windows: %v", windows)
		})
	}
}

func TestStreamAbort(t *testing.T) {
	db := stSetup(t)
	r := stStart(t, db, 0)
	db.Exec(t, "BEGIN", stInsert("t", 1, 5000), "ROLLBACK")
	db.Exec(t, "INSERT INTO u VALUES (1, 'after')")
	txs := stWaitTxs(t, r.dir, 1)
	// PostgreSQL 18 checks a transaction for an abort before streaming it
	// and drops one already rolled back unsent; older servers stream it.
	if r.streamed(t) < 1 && sharedMajor(t) < 18 {
		t.Fatal("the aborted transaction was not streamed")
	}
	if txs[0].table != "u" || len(txs[0].ids) != 1 {
		t.Fatalf("journal holds %s %v, want only the row of u", txs[0].table, txs[0].ids)
	}
	if f := stSpillFiles(t, filepath.Join(r.dir, "spill")); len(f) != 0 {
		t.Fatalf("spill files left after abort: %v", f)
	}
}

func TestStreamRollbackToSavepoint(t *testing.T) {
	db := stSetup(t)
	r := stStart(t, db, 256<<10)
	db.Exec(t, "BEGIN",
		stInsert("t", 1, 2000),
		"SAVEPOINT a", stInsert("t", 2001, 4000),
		"SAVEPOINT b", stInsert("t", 4001, 6000), // nested in a
		"ROLLBACK TO SAVEPOINT a",
		stInsert("t", 6001, 7000),
		"SAVEPOINT c", stInsert("t", 7001, 8000), "RELEASE SAVEPOINT c", // kept
		"SAVEPOINT d", stInsert("t", 8001, 9000), "ROLLBACK TO SAVEPOINT d",
		stInsert("t", 9001, 10000),
		"COMMIT")
	txs := stWaitTxs(t, r.dir, 1)
	if r.streamed(t) < 1 {
		t.Fatal("the transaction was not streamed")
	}
	want := append(stIDs(1, 2000), stIDs(6001, 8000)...)
	want = append(want, stIDs(9001, 10000)...)
	stSameIDs(t, "rollback to savepoint", txs[0].ids, want)
}

func TestStreamInterleaved(t *testing.T) {
	db := stSetup(t)
	r := stStart(t, db, 128<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	connect := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, db.URL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	a, b := connect(), connect()
	exec := func(c *pgx.Conn, sql string) {
		t.Helper()
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(a, "BEGIN")
	exec(a, stInsert("t", 1, 2000))
	exec(b, "BEGIN")
	exec(b, stInsert("u", 1, 2000))
	exec(a, stInsert("t", 2001, 4000))
	exec(b, stInsert("u", 2001, 4000))
	exec(a, stInsert("t", 4001, 6000))
	exec(b, "COMMIT") // started second, commits first
	exec(a, "COMMIT")
	txs := stWaitTxs(t, r.dir, 2)
	if r.streamed(t) < 2 {
		t.Fatalf("%v transactions streamed, want both", r.streamed(t))
	}
	if txs[0].table != "u" || txs[1].table != "t" {
		t.Fatalf("journal order %s, %s; want commit order u, t", txs[0].table, txs[1].table)
	}
	stSameIDs(t, "second started, first committed", txs[0].ids, stIDs(1, 4000))
	stSameIDs(t, "first started, last committed", txs[1].ids, stIDs(1, 6000))
	if txs[0].parts[0].EndLSN >= txs[1].parts[0].EndLSN {
		t.Fatalf("end LSNs out of commit order: %s then %s", txs[0].parts[0].EndLSN, txs[1].parts[0].EndLSN)
	}
}

// TestMultiPartLayout checks the record layout of transactions split into
// parts, for a transaction assembled in memory (not streamed: below
// logical_decoding_work_mem) and for a streamed one, between small ones.
func TestMultiPartLayout(t *testing.T) {
	db := stSetup(t)
	const limit = 4 << 10
	r := stStart(t, db, limit)
	db.Exec(t, "INSERT INTO u VALUES (1, 'small')")
	db.Exec(t, "INSERT INTO t SELECT g, repeat('y', 100) FROM generate_series(1, 150) g") // ~20 kB: in memory
	db.Exec(t, "INSERT INTO u VALUES (2, 'small')")
	db.Exec(t, "BEGIN", stInsert("t", 1001, 4000), "COMMIT") // streamed
	db.Exec(t, "INSERT INTO u VALUES (3, 'small')")
	txs := stWaitTxs(t, r.dir, 5)
	stSameIDs(t, "in-memory split", txs[1].ids, stIDs(1, 150))
	stSameIDs(t, "streamed split", txs[3].ids, stIDs(1001, 4000))
	for i, tx := range txs {
		small := i%2 == 0
		if small != (len(tx.parts) == 1) {
			t.Fatalf("transaction %d (%s) has %d parts", i, tx.table, len(tx.parts))
		}
		for _, p := range tx.parts {
			if n := len(record.Append(nil, p)); len(p.Changes) > 1 && n > 2*limit {
				t.Fatalf("offset %d: record of %d bytes with a %d-byte limit", p.Offset, n, limit)
			}
		}
	}
	// Dump lines carry part and final.
	last := txs[3].parts[len(txs[3].parts)-1]
	line := string(format.AppendJSON(nil, last))
	if want := fmt.Sprintf(`"part":%d,"final":true`, last.Part); !strings.Contains(line, want) {
		t.Fatalf("dump line lacks %s: %.200s", want, line)
	}
	if line := string(format.AppendJSON(nil, txs[3].parts[0])); !strings.Contains(line, `"part":0,"final":false`) {
		t.Fatalf("dump line of part 0 lacks part/final: %.200s", line)
	}
}

// TestStreamKillRestart kills pgq (SIGKILL) while a streamed transaction
// is in progress, commits it, and restarts pgq: the transaction is then in
// the journal exactly once and complete, and no spill file is left.
func TestStreamKillRestart(t *testing.T) {
	db := stSetup(t)
	bin := pgqbin.Path(t)
	dir := t.TempDir()
	spill := filepath.Join(dir, "spill")
	run := func() (*exec.Cmd, string) {
		port, err := pgtest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command(bin, "run", "--pg-url", db.URL, "--slot", stSlot(db), "--publication", "pgq",
			"--create-slot", "--create-publication", "all", "--data-dir", dir, "--listen", addr,
			"--status-interval", "500ms", "--max-record-bytes", "65536")
		var env []string
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "PGQ_") {
				env = append(env, e)
			}
		}
		cmd.Env = env
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
				ProtoVersion int  `json:"proto_version"`
				Streaming    bool `json:"streaming"`
			}
			return json.NewDecoder(resp.Body).Decode(&st) == nil && st.ProtoVersion == 2 && st.Streaming
		})
		return cmd, addr
	}

	cmd, _ := run()
	db.Exec(t, "INSERT INTO u VALUES (1, 'before')")
	stWaitTxs(t, dir, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{"BEGIN", stInsert("t", 1, 4000)} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "a spill file", func() bool { return len(stSpillFiles(t, spill)) > 0 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(stSpillFiles(t, spill)) == 0 {
		t.Fatal("the killed pgq left no spill file: the kill was not mid-stream")
	}
	for _, sql := range []string{stInsert("t", 4001, 8000), "COMMIT"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	db.Exec(t, "INSERT INTO u VALUES (2, 'after')")

	run()
	txs := stWaitTxs(t, dir, 3)
	stSameIDs(t, "before", txs[0].ids, []int{1})
	stSameIDs(t, "killed mid-stream", txs[1].ids, stIDs(1, 8000))
	stSameIDs(t, "after", txs[2].ids, []int{2})
	if len(txs[1].parts) < 2 {
		t.Fatalf("want a multi-part transaction, have %d part(s)", len(txs[1].parts))
	}
	if f := stSpillFiles(t, spill); len(f) != 0 {
		t.Fatalf("spill files left: %v", f)
	}
}

// stLog forwards a subprocess's stderr to the test log.
type stLog struct{ t *testing.T }

func (l *stLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
