package ingest_test

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// TestRunAuthAndRetentionFlags drives `pgq run` with --auth-token and the
// retention flags: the API refuses calls without the token (but /healthz),
// the CLI authenticates with --auth-token or PGQ_AUTH_TOKEN, and the size
// cap drops old segments while ingest goes on.
func TestRunAuthAndRetentionFlags(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE rf (id int PRIMARY KEY, pad text)`, `CREATE PUBLICATION rf_pub FOR TABLE rf`)
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dir := t.TempDir()
	p := startPgq(t, "run", "--pg-url", db.URL, "--slot", "rf_"+db.Name, "--publication", "rf_pub", "--data-dir", dir,
		"--create-slot", "--listen", addr, "--auth-token", "s3cret",
		"--segment-size", "4096", "--retain-max-bytes", "16384", "--retain-interval", "100ms")

	get := func(path, token string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor(t, 20*time.Second, "pgq listening", func() bool { return get("/healthz", "") == 200 })
	for path, want := range map[string]int{"/v1/status": 401, "/metrics": 401, "/v1/groups": 401} {
		if got := get(path, ""); got != want {
			t.Errorf("GET %s without token: %d, want %d", path, got, want)
		}
		if got := get(path, "wrong"); got != 401 {
			t.Errorf("GET %s with a wrong token: %d, want 401", path, got)
		}
		if got := get(path, "s3cret"); got != 200 {
			t.Errorf("GET %s with the token: %d, want 200", path, got)
		}
	}

	cli := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(pgqbin.Path(t), args...)
		cmd.Env = append(cleanEnv(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := cli(nil, "groups", "list", "--addr", addr); err == nil || !strings.Contains(out, "missing or wrong bearer token") {
		t.Fatalf("groups list without token: %v %q", err, out)
	}
	if out, err := cli(nil, "groups", "create", "keep", "--addr", addr, "--auth-token", "s3cret", "--from", "earliest"); err != nil {
		t.Fatalf("groups create with --auth-token: %v %s", err, out)
	}
	if out, err := cli([]string{"PGQ_AUTH_TOKEN=s3cret", "PGQ_ADDR=" + addr}, "groups", "list"); err != nil || !strings.Contains(out, "keep") {
		t.Fatalf("groups list with PGQ_AUTH_TOKEN: %v %s", err, out)
	}

	// ~300 bytes a record, 4 KiB segments: 200 records span ~15 segments,
	// and the 16 KiB cap keeps only the newest few although group "keep"
	// never committed anything.
	var inserts []string
	for i := 0; i < 200; i++ {
		inserts = append(inserts, fmt.Sprintf(`INSERT INTO rf VALUES (%d, repeat('x', 200))`, i))
	}
	db.Exec(t, inserts...)
	waitFor(t, 30*time.Second, "retention to drop old segments", func() bool {
		st := authedStatus(t, addr, "s3cret")
		first, _ := st["journal_first_offset"].(float64)
		last, _ := st["journal_last_offset"].(float64)
		return last == 200 && first > 1
	})
	if out, err := cli([]string{"PGQ_AUTH_TOKEN=s3cret", "PGQ_ADDR=" + addr}, "consume", "--group", "keep"); err == nil || !strings.Contains(out, "below the journal start") || !strings.Contains(out, "reset the group") {
		t.Fatalf("consume of a group below the journal start: %v %q, want an out_of_range error", err, out)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code, stderr := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	db.Exec(t, `SELECT pg_drop_replication_slot('rf_`+db.Name+`')`) // slots are cluster-wide
}

func authedStatus(t *testing.T, addr, token string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := jsonDecode(resp, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
