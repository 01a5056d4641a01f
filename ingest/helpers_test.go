package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/syncbuf"
	"github.com/pgq-dev/pgq/journal"
	"github.com/pgq-dev/pgq/server"
)

// running is an in-process sidecar.
type running struct {
	S      *server.Server
	Dir    string
	cancel context.CancelFunc
	done   chan error
}

func startSidecar(t *testing.T, db *pgtest.DB, dir string, mod func(*server.Options)) *running {
	t.Helper()
	o := server.Options{
		DataDir: dir,
		Listen:  "127.0.0.1:0",
		Ingest: ingest.Options{
			PGURL: db.URL, Slot: slotName("pgq", db), Publication: "pgq",
			CreateSlot: true, CreatePublication: "all",
			ReconnectMin: 100 * time.Millisecond, ReconnectMax: time.Second,
		},
	}
	if mod != nil {
		mod(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := server.Open(ctx, o)
	if err != nil {
		cancel()
		t.Fatalf("server.Open: %v", err)
	}
	r := &running{S: s, Dir: dir, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx) }()
	t.Cleanup(func() { r.Stop(t) })
	return r
}

// waitStreaming waits until the slot exists and replication is starting.
func (r *running) waitStreaming(t *testing.T) {
	t.Helper()
	waitFor(t, 20*time.Second, "streaming", func() bool {
		v, _ := r.status(t)["proto_version"].(float64)
		return v > 0
	})
}

// Stop stops the sidecar cleanly and returns Run's error.
func (r *running) Stop(t *testing.T) error {
	if r.cancel == nil {
		return nil
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("sidecar did not stop")
		return nil
	}
}

func (r *running) status(t *testing.T) map[string]any {
	t.Helper()
	return getJSON(t, "http://"+r.S.Addr()+"/v1/status")
}

func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// records reads the journal of a data dir (read-only scan, works while
// running).
func records(t *testing.T, dataDir string) []*pgq.Transaction {
	t.Helper()
	var out []*pgq.Transaction
	err := journal.Scan(filepath.Join(dataDir, "journal"), 0, func(tx *pgq.Transaction) error {
		out = append(out, tx)
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("scan journal: %v", err)
	}
	return out
}

// dumpLines renders records as the dump contract does, parsed back.
func dumpLines(t *testing.T, txs []*pgq.Transaction) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, tx := range txs {
		var m map[string]any
		line := format.AppendJSON(nil, tx)
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("dump line is not JSON: %v\n%s", err, line)
		}
		out = append(out, m)
	}
	return out
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// changesOf flattens the changes of records as dump JSON maps.
func changesOf(t *testing.T, txs []*pgq.Transaction) []map[string]any {
	var out []map[string]any
	for _, m := range dumpLines(t, txs) {
		for _, c := range m["changes"].([]any) {
			out = append(out, c.(map[string]any))
		}
	}
	return out
}

// proc is a pgq subprocess.
type proc struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer // written by exec.Cmd's copying goroutine while the test reads
	done   chan struct{}
	err    error
}

func startPgq(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(pgqbin.Path(t), args...), stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd.Stderr = p.stderr
	p.cmd.Env = cleanEnv()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *proc) wait(t *testing.T, timeout time.Duration) (exitCode int, stderr string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("pgq did not exit; stderr:\n%s", p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode(), p.stderr.String()
}

// cleanEnv drops PGQ_* variables so the tests control flags exactly.
func cleanEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "PGQ_") {
			env = append(env, e)
		}
	}
	return env
}

func appendJSON(tx *pgq.Transaction) []byte { return format.AppendJSON(nil, tx) }

func lsnLess(t *testing.T, a, b string) bool {
	t.Helper()
	la, err := pgq.ParseLSN(a)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := pgq.ParseLSN(b)
	if err != nil {
		t.Fatal(err)
	}
	return la < lb
}

var interrupt = os.Interrupt

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }

// waitSlotActive waits until a walsender holds the slot.
func waitSlotActive(t *testing.T, db *pgtest.DB, slot string) {
	t.Helper()
	waitFor(t, 20*time.Second, "slot "+slot+" active", func() bool {
		var n int
		db.QueryRow(t, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+slot+"' AND active", &n)
		return n == 1
	})
}

// slotName makes a slot name unique to the test's database: slots are
// cluster-wide, databases are per test.
func slotName(base string, db *pgtest.DB) string { return base + "_" + db.Name }
