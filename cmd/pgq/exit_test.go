package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/journal"
)

// TestMain removes the pgq binary the tests built (pgqbin.Path) after them.
func TestMain(m *testing.M) {
	code := m.Run()
	pgqbin.Remove()
	os.Exit(code)
}

// exitCase is one command line and what pgq must answer.
type exitCase struct {
	name string
	args []string
	env  []string // added to an environment without PGQ_*
	code int
	want string // in the error line
}

// runPgq runs the built binary (logs as JSON, so that pgq's error line is
// the one line of stderr that is not a log record) and returns its exit
// code and that line.
func runPgq(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(pgqbin.Path(t), args...)
	cmd.Env = append(cliEnv(), "PGQ_LOG_FORMAT=json")
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("pgq %v did not exit; stderr:\n%s", args, stderr.String())
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if !strings.HasPrefix(l, "{") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "pgq: ") {
		t.Fatalf("pgq %v: stderr is not one error line (besides JSON logs):\n%s", args, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), lines[0]
}

// cliEnv is the environment without PGQ_* variables.
func cliEnv() []string { return pgqbin.Env() }

func checkExits(t *testing.T, cases []exitCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, line := runPgq(t, tc.env, tc.args...)
			if code != tc.code || !strings.Contains(line, tc.want) {
				t.Fatalf("exit %d, %q; want exit %d and %q", code, line, tc.code, tc.want)
			}
		})
	}
}

// writeFile writes a file under dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigFileRefusals: a config file that repeats a key (also as
// pg-url and pg_url, also in JSON) or names another config file is
// refused with one line naming the key and its line, and the usage exit
// status; so is any other bad file.
func TestConfigFileRefusals(t *testing.T) {
	dir := t.TempDir()
	run := func(file string) []string {
		return []string{"run", "--config", file, "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0"}
	}
	base := "pg-url: postgres://127.0.0.1:1/x\npublication: p\n"
	checkExits(t, []exitCase{
		{"repeated key", run(writeFile(t, dir, "dup.yaml", base+"slot: a\nslot: b\n")), nil, exitUsage, "line 4: key slot repeats slot of line 3"},
		{"repeated key, dash and underscore", run(writeFile(t, dir, "alias.yaml", base+"slot: a\npg_url: postgres://other/x\n")), nil, exitUsage, "line 4: key pg_url repeats pg-url of line 1"},
		{"repeated key in JSON", run(writeFile(t, dir, "dup.json", `{"pg-url": "postgres://127.0.0.1:1/x", "publication": "p",`+"\n"+`"slot": "a", "slot": "b"}`)), nil, exitUsage, "line 2: key slot repeats slot of line 2"},
		{"config key", run(writeFile(t, dir, "nested.yaml", base+"slot: a\nconfig: other.yaml\n")), nil, exitUsage, "line 4: key config: a config file cannot name another"},
		{"config key through PGQ_CONFIG", []string{"run", "--data-dir", dir}, []string{"PGQ_CONFIG=" + writeFile(t, dir, "env.yaml", "config: x.yaml\n"+base)}, exitUsage, "line 1: key config"},
		{"unknown key", run(writeFile(t, dir, "typo.yaml", base+"slott: a\n")), nil, exitUsage, "line 3: unknown key slott"},
		{"unknown keys", run(writeFile(t, dir, "typos.yaml", "zzz: 1\n"+base+"slott: a\n")), nil, exitUsage, "unknown keys zzz (line 1), slott (line 4)"},
		{"unknown key in JSON", run(writeFile(t, dir, "typo.json", `{"pg-url": "postgres://127.0.0.1:1/x", "publication": "p",`+"\n"+`"slott": "a"}`)), nil, exitUsage, "line 2: unknown key slott"},
		{"bad YAML", run(writeFile(t, dir, "bad.yaml", base+"slot: [a\n")), nil, exitUsage, "--config"},
		{"missing file", run(filepath.Join(dir, "nope.yaml")), nil, exitUsage, "nope.yaml"},
	})
}

// memAPI serves the HTTP API over a journal of one transaction.
func memAPI(t *testing.T, token string) string {
	t.Helper()
	dir, log := t.TempDir(), slog.New(slog.DiscardHandler)
	j, err := journal.Open(journal.Options{Dir: dir + "/journal", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	ix, err := index.Open(index.Options{Dir: dir + "/index", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	m, err := consumers.NewManager(consumers.ManagerOptions{Journal: j, Index: ix, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tx := &pgq.Transaction{Xid: 1, CommitLSN: 100, EndLSN: 110, CommitTime: time.Now().UTC().Truncate(time.Microsecond), Final: true,
		Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: []pgq.Column{{Name: "id", TypeOID: 20, Key: true}},
			New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}}}}}
	if err := j.Append([]*pgq.Transaction{tx}); err != nil {
		t.Fatal(err)
	}
	mux, err := httpapi.New(httpapi.Options{Groups: m, AuthToken: token})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// corruptJournal writes a journal of a few records into dataDir and
// flips a byte inside its first record.
func corruptJournal(t *testing.T, dataDir string) {
	t.Helper()
	x := bytes.Repeat([]byte("x"), 64)
	segs := journalOfMessages(t, dataDir, 0, x, x, x)
	b, err := os.ReadFile(segs[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, bytes.Repeat([]byte("x"), 64))
	if i < 0 {
		t.Fatal("message content not found in the segment")
	}
	b[i+10] ^= 0xff
	if err := os.WriteFile(segs[0].Path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestExitStatus runs every kind of command with a usage or configuration
// error (exit 2) and with a runtime failure (exit 1): each prints one
// error line.
func TestExitStatus(t *testing.T) {
	dir := t.TempDir()
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	closed := fmt.Sprintf("127.0.0.1:%d", port) // nothing listens there
	unreachablePG := fmt.Sprintf("postgres://postgres@%s/x?sslmode=disable&connect_timeout=2", closed)
	run := func(extra ...string) []string {
		return append([]string{"run", "--pg-url", unreachablePG, "--slot", "s", "--publication", "p", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--no-reconnect"}, extra...)
	}
	addr := memAPI(t, "s3cret")
	api := func(args ...string) []string { return append(args, "--addr", addr, "--auth-token", "s3cret") }
	empty := t.TempDir()
	corrupt := t.TempDir()
	corruptJournal(t, corrupt)
	checkExits(t, []exitCase{
		// Usage and configuration: exit 2.
		{"unknown command", []string{"nope"}, nil, exitUsage, "unknown command nope (see pgq --help)"},
		{"unknown flag", run("--bogus"), nil, exitUsage, "unknown flag --bogus"},
		{"missing flag", []string{"run", "--data-dir", dir}, nil, exitUsage, "missing flags"},
		{"bad enum", run("--slot-lifecycle", "forever"), nil, exitUsage, "--slot-lifecycle"},
		{"bad duration", run("--reconnect-min", "soon"), nil, exitUsage, "invalid duration"},
		{"bad duration from the environment", run(), []string{"PGQ_STATUS_INTERVAL=soon"}, exitUsage, "invalid duration"},
		{"invalid slot name", []string{"run", "--pg-url", unreachablePG, "--slot", "Bad-Slot", "--publication", "p", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, nil, exitUsage, "invalid slot name"},
		{"bad table list", run("--create-publication", "a.b.c"), nil, exitUsage, "invalid table"},
		{"reconnect-max below min", run("--reconnect-min", "10s", "--reconnect-max", "1s"), nil, exitUsage, "--reconnect-max"},
		{"journal without a journal", []string{"journal", "dump", "--data-dir", empty}, nil, exitUsage, "no journal in"},
		{"journal verify without a journal", []string{"journal", "verify", "--data-dir", empty}, nil, exitUsage, "no journal in"},
		{"slot info with a bad slot name", []string{"slot", "info", "--pg-url", unreachablePG, "--slot", "Bad;"}, nil, exitUsage, "invalid slot name"},
		{"bad API address", []string{"groups", "list", "--addr", "::bad::"}, nil, exitUsage, "want host:port"},
		{"bad --backoff", api("groups", "create", "g", "--mode", "shared", "--backoff", "1s,soon"), nil, exitUsage, "--backoff"},
		{"parked without ids", api("groups", "parked", "requeue", "g"), nil, exitUsage, "give ack ids or --all"},
		{"bridge flag value", api("bridge", "kafka", "--group", "g", "--brokers", "k:9092", "--delivery-timeout=-1s"), nil, exitUsage, "negative"},
		{"bad decimal mode", api("consume", "--group", "g", "--format", "debezium", "--decimal-handling-mode", "exact"), nil, exitUsage, "--decimal-handling-mode"},
		{"bad time mode from the environment", api("consume", "--group", "g"), []string{"PGQ_CONSUME_TIME_PRECISION_MODE=nanoseconds"}, exitUsage, "--time-precision-mode"},
		{"bad hstore mode", api("consume", "--group", "g", "--format", "debezium", "--hstore-handling-mode", "hash"), nil, exitUsage, "--hstore-handling-mode"},
		{"bad interval mode of a bridge", api("bridge", "webhook", "--group", "g", "--url", "http://127.0.0.1:1/", "--interval-handling-mode", "iso"), nil, exitUsage, "--interval-handling-mode"},
		{"API: invalid name", api("groups", "create", "bad name!"), nil, exitUsage, "invalid"},
		{"API: bad position", api("groups", "create", "g1", "--from", "yesterday"), nil, exitUsage, "yesterday"},
		{"API: unauthorized", []string{"groups", "list", "--addr", addr, "--auth-token", "wrong"}, nil, exitUsage, "bearer token"},
		// Runtime failures: exit 1.
		{"PostgreSQL unreachable", run(), nil, exitRuntime, "server unreachable"},
		{"API unreachable", []string{"consume", "--group", "g", "--addr", closed, "--give-up", "300ms"}, nil, exitRuntime, "connection refused"},
		{"API: no such group", api("groups", "info", "nope"), nil, exitRuntime, "nope"},
		{"corrupt journal", []string{"journal", "verify", "--data-dir", corrupt}, nil, exitRuntime, "offset 1"},
	})
}

// TestPreflightExitStatus: preflight refusals that only a change of the
// configuration or of the database's setup ends exit 2: a missing
// publication, a missing slot, wal_level not logical.
func TestPreflightExitStatus(t *testing.T) {
	c, err := pgtest.Start(pgtest.Options{}) // cmd/pgq has no shared cluster: its other tests need none
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	db := c.NewDB(t)
	slot := "cli_exit"
	db.Exec(t, `CREATE TABLE t (id int PRIMARY KEY)`, `CREATE PUBLICATION p FOR TABLE t`,
		`SELECT pg_create_logical_replication_slot('`+slot+`', 'pgoutput')`)
	run := func(url, slot, pub string) []string {
		return []string{"run", "--pg-url", url, "--slot", slot, "--publication", pub, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--no-reconnect"}
	}
	cases := []exitCase{
		{"missing publication", run(db.URL, slot, "nopub"), nil, exitUsage, `publication "nopub" does not exist`},
		{"missing slot", run(db.URL, "cli_nosuch", "p"), nil, exitUsage, "does not exist"},
	}
	replica, err := pgtest.Start(pgtest.Options{Settings: []string{"wal_level = replica"}})
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Stop()
	cases = append(cases, exitCase{"wal_level replica", run(replica.URL("postgres"), "s", "p"), nil, exitUsage, "wal_level"})
	checkExits(t, cases)
}

// TestHelpDocumentsExitStatus: `pgq --help` names both exit statuses.
func TestHelpDocumentsExitStatus(t *testing.T) {
	out, err := exec.Command(pgqbin.Path(t), "--help").Output()
	if err != nil {
		t.Fatalf("pgq --help: %v", err)
	}
	help := strings.Join(strings.Fields(string(out)), " ")
	for _, want := range []string{"1 a runtime failure", "2 a usage or configuration error"} {
		if !strings.Contains(help, want) {
			t.Errorf("pgq --help does not say %q:\n%s", want, out)
		}
	}
}
