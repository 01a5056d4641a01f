package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// TestJSONLogDurations: JSON logs write durations as Go writes them
// ("1.5s"), not as integer nanoseconds.
func TestJSONLogDurations(t *testing.T) {
	var buf bytes.Buffer
	newLogger(&buf, "info", "json").Info("waited", "wait", 1500*time.Millisecond, "attempt", 2)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["wait"] != "1.5s" || rec["attempt"] != float64(2) {
		t.Fatalf("logged %s", buf.Bytes())
	}
}

// logLines collects a process's JSON log records.
type logLines struct {
	mu   sync.Mutex
	recs []map[string]any
	raw  []string
}

func (l *logLines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var rec map[string]any
		_ = json.Unmarshal(sc.Bytes(), &rec)
		l.mu.Lock()
		l.recs, l.raw = append(l.recs, rec), append(l.raw, sc.Text())
		l.mu.Unlock()
	}
}

// index is the position of the first record with msg, -1 if none.
func (l *logLines) index(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range l.recs {
		if r["msg"] == msg {
			return i
		}
	}
	return -1
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.raw, "\n")
}

// TestRunStartupLogs runs pgq on a new slot: "pgq running" comes after
// the startup checks (once it streams), no record says start_lsn 0/0, and
// a second pgq on the same data dir exits with one line saying another
// pgq uses it. pgq status and pgq healthcheck then read the running pgq.
func TestRunStartupLogs(t *testing.T) {
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	probePort, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dataDir := t.TempDir()
	cmd := exec.Command(pgqbin.Path(t), "run", "--pg-url", db.URL, "--slot", "cli_logs", "--publication", "p", "--create-slot",
		"--create-publication", "all", "--data-dir", dataDir, "--listen", addr, "--auth-token", "s3cret",
		"--probe-listen", fmt.Sprintf("127.0.0.1:%d", probePort))
	cmd.Env = append(cliEnv(), "PGQ_LOG_FORMAT=json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var logs logLines
	go logs.read(stderr)
	deadline := time.Now().Add(60 * time.Second)
	for logs.index("pgq running") < 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no pgq running record:\n%s", &logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The last startup check passed logs that the new journal starts at
	// the slot; "pgq running" comes after it.
	running, checked := logs.index("pgq running"), logs.index("the journal is empty: it starts at the slot's position")
	if checked < 0 || running < checked || logs.index("created replication slot") > running || logs.index("created publication") > running {
		t.Fatalf("pgq running (record %d) logged before the startup checks (record %d):\n%s", running, checked, &logs)
	}
	if s := logs.String(); strings.Contains(s, `"start_lsn":"0/0"`) {
		t.Fatalf("a record says start_lsn 0/0:\n%s", s)
	}

	// A second pgq on the same data dir.
	code, line := runPgq(t, nil, "run", "--pg-url", db.URL, "--slot", "cli_logs2", "--publication", "p", "--data-dir", dataDir,
		"--listen", "127.0.0.1:0")
	if code != exitRuntime || line != fmt.Sprintf("pgq: another pgq uses this data dir (%s): stop it, or give this one its own --data-dir", dataDir) {
		t.Fatalf("second pgq: exit %d, %q", code, line)
	}

	// pgq status and pgq healthcheck against the real server.
	out, err := exec.Command(pgqbin.Path(t), "status", "--addr", addr, "--auth-token", "s3cret", "-o", "table").Output()
	if err != nil || !strings.HasPrefix(string(out), "ingest          streaming\nslot            cli_logs (publication p, protocol 2") {
		t.Fatalf("pgq status: %v\n%s", err, out)
	}
	out, err = exec.Command(pgqbin.Path(t), "status", "--addr", addr, "--auth-token", "s3cret", "-o", "json").Output()
	var doc statusDoc
	if err != nil || json.Unmarshal(out, &doc) != nil || !doc.Status.Connected || doc.Status.Slot != "cli_logs" {
		t.Fatalf("pgq status -o json: %v\n%s", err, out)
	}
	// api.Status holds the real document whole: no field of it is
	// unknown to the type, and the type adds none.
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var typed api.Status
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&typed); err != nil {
		t.Fatalf("GET /v1/status does not decode into api.Status: %v\n%s", err, raw)
	}
	var fromServer, fromType map[string]any
	again, _ := json.Marshal(typed)
	if json.Unmarshal(raw, &fromServer) != nil || json.Unmarshal(again, &fromType) != nil || len(fromServer) != len(fromType) {
		t.Fatalf("api.Status's fields differ from the server's:\n%s\n%s", raw, again)
	}

	healthy := [][]string{
		{"--addr", addr, "--auth-token", "s3cret"},        // the API, with the token
		{"--probe-listen", fmt.Sprintf(":%d", probePort)}, // the probe listener, no token; a wildcard host is this machine
	}
	for _, args := range healthy {
		hc := exec.Command(pgqbin.Path(t), append([]string{"healthcheck"}, args...)...)
		hc.Env = cliEnv()
		if out, err := hc.CombinedOutput(); err != nil || string(out) != "ready\n" {
			t.Fatalf("pgq healthcheck %v: %v\n%s", args, err, out)
		}
	}
	// Through PGQ_PROBE_LISTEN, as a container's HEALTHCHECK sees pgq's
	// environment.
	hc := exec.Command(pgqbin.Path(t), "healthcheck")
	hc.Env = append(cliEnv(), fmt.Sprintf("PGQ_PROBE_LISTEN=0.0.0.0:%d", probePort), "PGQ_ADDR=127.0.0.1:1")
	if out, err := hc.CombinedOutput(); err != nil || string(out) != "ready\n" {
		t.Fatalf("pgq healthcheck with PGQ_PROBE_LISTEN: %v\n%s", err, out)
	}
	// Without PGQ_ADDR, at PGQ_LISTEN: pgq run's environment in its
	// container.
	hc = exec.Command(pgqbin.Path(t), "healthcheck")
	hc.Env = append(cliEnv(), fmt.Sprintf("PGQ_LISTEN=0.0.0.0:%d", port), "PGQ_AUTH_TOKEN=s3cret")
	if out, err := hc.CombinedOutput(); err != nil || string(out) != "ready\n" {
		t.Fatalf("pgq healthcheck with PGQ_LISTEN: %v\n%s", err, out)
	}
	// Unhealthy is exit 1 whatever the cause (Docker reserves 2).
	if code, line := runPgq(t, nil, "healthcheck", "--addr", addr); code != exitRuntime || !strings.Contains(line, "not ready") || !strings.Contains(line, "bearer token") {
		t.Fatalf("healthcheck without the token: exit %d, %q", code, line)
	}
	if code, line := runPgq(t, nil, "healthcheck", "--addr", "127.0.0.1:1"); code != exitRuntime || !strings.Contains(line, "connection refused") {
		t.Fatalf("healthcheck of nothing: exit %d, %q", code, line)
	}
}
