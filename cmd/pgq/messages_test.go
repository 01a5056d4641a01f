package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/journal"
)

// authCluster starts a cluster that asks every role but postgres for its
// password over TCP, with the role pgq_pw (password "right", REPLICATION).
func authCluster(t *testing.T) (*pgtest.Cluster, *pgtest.DB) {
	t.Helper()
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	db := c.NewDB(t)
	db.Exec(t, `CREATE ROLE pgq_pw LOGIN REPLICATION PASSWORD 'right'`,
		`DO $$ BEGIN EXECUTE format('COPY (SELECT * FROM (VALUES (%L), (%L), (%L)) v) TO %L',
			'local all all trust', 'host all postgres 127.0.0.1/32 trust', 'host all all 127.0.0.1/32 scram-sha-256',
			current_setting('hba_file')); END $$`,
		`SELECT pg_reload_conf()`)
	return c, db
}

// TestConnectErrorsSayWhatToChange: a wrong password is an
// authentication failure naming the user and where the password came
// from, not "server unreachable"; a refused connection names its address
// and reason once.
func TestConnectErrorsSayWhatToChange(t *testing.T) {
	c, db := authCluster(t)
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	closed := fmt.Sprintf("127.0.0.1:%d", port)
	run := func(url string) []string {
		return []string{"run", "--pg-url", url, "--slot", "s", "--publication", "p", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--no-reconnect"}
	}
	wrong := fmt.Sprintf("postgres://pgq_pw:wrong@127.0.0.1:%d/%s?sslmode=disable", c.Port, db.Name)
	noPassword := fmt.Sprintf("postgres://pgq_pw@127.0.0.1:%d/%s?sslmode=disable", c.Port, db.Name)
	checkExits(t, []exitCase{
		{"wrong password in the URL", run(wrong), nil, exitRuntime, `authentication failed: password authentication failed for user "pgq_pw" (the password is the connection URL's)`},
		{"wrong password in PGPASSWORD", run(noPassword), []string{"PGPASSWORD=wrong"}, exitRuntime, `user "pgq_pw" (the password is PGPASSWORD's`},
		{"slot info, wrong password", []string{"slot", "info", "--pg-url", wrong, "--slot", "s"}, nil, exitRuntime, `authentication failed: password authentication failed for user "pgq_pw"`},
		{"refused", run("postgres://postgres@" + closed + "/x?sslmode=disable"), nil, exitRuntime, "server unreachable: cannot connect to PostgreSQL at " + closed + ": connection refused"},
		// sslmode=prefer (libpq's default) tries TLS and then plain text:
		// two failures that say the same, said once.
		{"refused, sslmode prefer", run("postgres://postgres@" + closed + "/x"), nil, exitRuntime, "server unreachable: cannot connect to PostgreSQL at " + closed + ": connection refused"},
	})
	t.Run("wrong password leaves no data dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		checkExits(t, []exitCase{{"run", []string{"run", "--pg-url", wrong, "--slot", "s", "--publication", "p", "--data-dir", dir, "--listen", "127.0.0.1:0", "--no-reconnect"},
			nil, exitRuntime, "authentication failed"}})
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("the failed start left %s (%v)", dir, err)
		}
	})
	t.Run("refused names the address once", func(t *testing.T) {
		_, line := runPgq(t, nil, run("postgres://postgres@"+closed+"/x?sslmode=disable")...)
		if n := strings.Count(line, closed); n != 1 {
			t.Fatalf("%q names %s %d times, want once", line, closed, n)
		}
	})
}

// busyAndClosed are two addresses for tests of failed starts: one a
// listener holds until the test ends (in use), one nothing listens on
// (refused).
func busyAndClosed(t *testing.T) (busy net.Listener, closed string) {
	t.Helper()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return busy, fmt.Sprintf("127.0.0.1:%d", port)
}

// unreachablePG is a connection URL of a PostgreSQL at addr, where none
// answers, that gives up quickly.
func unreachablePG(addr string) string {
	return "postgres://postgres@" + addr + "/x?sslmode=disable&connect_timeout=2"
}

// TestListenAndAddrMessages: a --listen or --probe-listen no address can
// have is a usage error (exit 2, one line) before anything is opened; an
// address in use names its flag; a client command that finds no pgq
// names --addr and PGQ_ADDR.
func TestListenAndAddrMessages(t *testing.T) {
	busy, closed := busyAndClosed(t)
	url := unreachablePG(closed)
	var dataDirs []string
	run := func(extra ...string) []string {
		d := filepath.Join(t.TempDir(), "data")
		dataDirs = append(dataDirs, d)
		return append([]string{"run", "--pg-url", url, "--slot", "s", "--publication", "p", "--data-dir", d, "--no-reconnect"}, extra...)
	}
	checkExits(t, []exitCase{
		{"listen port out of range", run("--listen", "127.0.0.1:99999"), nil, exitUsage, "--listen 127.0.0.1:99999: port 99999 is out of range: want 0 to 65535"},
		{"listen from the environment", run(), []string{"PGQ_LISTEN=127.0.0.1:99999"}, exitUsage, "--listen 127.0.0.1:99999: port 99999"},
		{"listen without a port", run("--listen", "localhost"), nil, exitUsage, `--listen "localhost": want HOST:PORT`},
		{"probe-listen port out of range", run("--listen", "127.0.0.1:0", "--probe-listen", "127.0.0.1:70000"), nil, exitUsage, "--probe-listen 127.0.0.1:70000: port 70000"},
		{"listen in use", run("--listen", busy.Addr().String()), nil, exitRuntime,
			"cannot listen on " + busy.Addr().String() + ", the address of --listen or PGQ_LISTEN: address already in use"},
		{"probe-listen in use", run("--listen", "127.0.0.1:0", "--probe-listen", busy.Addr().String()), nil, exitRuntime, "the address of --probe-listen or PGQ_PROBE_LISTEN: address already in use"},
		{"no pgq at --addr", []string{"consume", "--group", "g", "--addr", closed, "--give-up", "300ms"}, nil, exitRuntime,
			"connection refused (no pgq answers at " + closed + ": start it, or give its address with --addr or PGQ_ADDR)"},
		{"no pgq at PGQ_ADDR", []string{"groups", "list"}, []string{"PGQ_ADDR=http://" + closed}, exitRuntime, "give its address with --addr or PGQ_ADDR"},
	})
	for _, d := range dataDirs[:4] {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("a refused --listen created %s (%v)", d, err)
		}
	}
}

// TestFailedStartRemovesWhatItCreated: a start that fails before anything
// was journaled (PostgreSQL unreachable, the address in use) removes the
// data dir it created, or empties the empty one it was given; a data dir
// that held a journal keeps every byte of it.
func TestFailedStartRemovesWhatItCreated(t *testing.T) {
	busy, closed := busyAndClosed(t)
	url := unreachablePG(closed)
	run := func(dataDir, listen string) []string {
		return []string{"run", "--pg-url", url, "--slot", "s", "--publication", "p", "--data-dir", dataDir, "--listen", listen, "--no-reconnect"}
	}
	missing := func(t *testing.T, dir string) {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("the failed start left %s (%v)", dir, err)
		}
	}
	t.Run("unreachable, new data dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		checkExits(t, []exitCase{{"run", run(dir, "127.0.0.1:0"), nil, exitRuntime, "server unreachable"}})
		missing(t, dir)
	})
	t.Run("address in use, new data dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		checkExits(t, []exitCase{{"run", run(dir, busy.Addr().String()), nil, exitRuntime, "address already in use"}})
		missing(t, dir)
	})
	t.Run("unreachable, empty data dir", func(t *testing.T) {
		dir := t.TempDir()
		checkExits(t, []exitCase{{"run", run(dir, "127.0.0.1:0"), nil, exitRuntime, "server unreachable"}})
		if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
			t.Fatalf("the given empty data dir: %v, %v; want it there and empty", ents, err)
		}
	})
	t.Run("unreachable, data dir with a journal", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		writeJournal(t, dir)
		before := dirSum(t, filepath.Join(dir, "journal"))
		checkExits(t, []exitCase{{"run", run(dir, "127.0.0.1:0"), nil, exitRuntime, "server unreachable"}})
		if after := dirSum(t, filepath.Join(dir, "journal")); after != before {
			t.Fatal("the failed start changed the journal it found")
		}
	})
}

// writeJournal writes a journal of three transactions into dataDir.
func writeJournal(t *testing.T, dataDir string) {
	t.Helper()
	x := []byte("x")
	journalOfMessages(t, dataDir, 0, x, x, x)
}

// journalOfMessages writes into dataDir a journal (of segmentSize, 0 for
// the default) of one transaction per content, each a transactional
// message with that content, and returns its segments.
func journalOfMessages(t *testing.T, dataDir string, segmentSize int, contents ...[]byte) []journal.Segment {
	t.Helper()
	j, err := journal.Open(journal.Options{Dir: filepath.Join(dataDir, "journal"), SegmentSize: segmentSize, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for k, content := range contents {
		i := k + 1
		tx := &pgq.Transaction{Xid: uint32(i), CommitLSN: pgq.LSN(100 * i), EndLSN: pgq.LSN(100*i + 10), CommitTime: time.Now(), Final: true,
			Changes: []pgq.Change{{Op: pgq.OpMessage, Prefix: "p", Content: content, Transactional: true}}}
		if err := j.Append([]*pgq.Transaction{tx}); err != nil {
			t.Fatal(err)
		}
	}
	segs, err := j.Segments()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return segs
}

// TestStatusTableWithoutBackfills: `pgq status -o table` leaves the
// backfills section out when there are none (it printed a header over
// nothing), and keeps it when there are.
func TestStatusTableWithoutBackfills(t *testing.T) {
	defer func(f func() time.Time) { now = f }(now)
	now = func() time.Time { return t0 }
	doc := statusFixture()
	doc.Backfills = nil
	out := string(render(t, func() error { return statusTable(stdout, doc) }))
	if strings.Contains(out, "ROWS_ESTIMATE") || !strings.HasSuffix(out, "released\n") {
		t.Fatalf("status without backfills:\n%s", out)
	}
	if out := string(render(t, func() error { return statusTable(stdout, statusFixture()) })); !strings.Contains(out, "ROWS_ESTIMATE") {
		t.Fatalf("status with backfills has no backfills section:\n%s", out)
	}
}
