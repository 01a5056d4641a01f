package ingest_test

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/syncbuf"
)

// TestSlowClientFloodUnderLowFileLimit is the attack of issue 23 item 1:
// pgq under a 200-file limit, 400 unauthenticated connections that each
// send headers and then a body one byte at a time. pgq must go on
// journaling (it used to exit: "fsync directory: too many open files"),
// answer its probes meanwhile (on the probe listener), and have every row once the flood ends.
func TestSlowClientFloodUnderLowFileLimit(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE fl (id int PRIMARY KEY)`, `CREATE PUBLICATION fl_pub FOR TABLE fl`)
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	probePort, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	probeAddr := fmt.Sprintf("127.0.0.1:%d", probePort)
	args := []string{"run", "--pg-url", db.URL, "--slot", "fl_" + db.Name, "--publication", "fl_pub", "--data-dir", t.TempDir(),
		"--create-slot", "--listen", addr, "--probe-listen", probeAddr, "--auth-token", "s3cret", "--segment-size", "65536"}
	cmd := exec.Command("bash", append([]string{"-c", `ulimit -n 200 && exec "$0" "$@"`, pgqbin.Path(t)}, args...)...)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	cmd.Env = cleanEnv()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	healthz := func(addr string) int {
		cl := http.Client{Timeout: 3 * time.Second}
		resp, err := cl.Get("http://" + addr + "/healthz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	t0 := time.Now()
	waitFor(t, 20*time.Second, "pgq listening", func() bool { return healthz(addr) == 200 && healthz(probeAddr) == 200 })
	waitFor(t, 20*time.Second, "pgq streaming", func() bool {
		st := authedStatus(t, addr, "s3cret")
		return st["connected"] == true
	})

	// The flood: 400 connections, each trickling its body.
	var flood []net.Conn
	defer func() {
		for _, fc := range flood {
			_ = fc.Close()
		}
	}()
	for range 400 {
		fc, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		flood = append(flood, fc)
		fmt.Fprintf(fc, "POST /v1/groups HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
	}
	t.Logf("%s: flood of 400 on", time.Since(t0))
	const rows = 300
	stop := time.Now().Add(6 * time.Second)
	probes, answered := 0, 0
	for i := 10; i <= rows; i += 10 {
		db.Exec(t, fmt.Sprintf(`INSERT INTO fl SELECT generate_series(%d, %d)`, i-9, i))
		if i%30 == 0 {
			for _, fc := range flood {
				_, _ = fc.Write([]byte(" ")) // one more byte each
			}
			probes++
			if healthz(probeAddr) == 200 {
				answered++
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("pgq exited under the flood: %v\n%s", err, stderr.String())
		default:
		}
	}
	for time.Now().Before(stop) {
		time.Sleep(100 * time.Millisecond)
	}
	if answered != probes {
		t.Errorf("/healthz on the probe listener answered %d of %d probes during the flood", answered, probes)
	}
	t.Logf("%s: rows inserted", time.Since(t0))
	for _, fc := range flood {
		_ = fc.Close()
	}
	flood = nil
	waitFor(t, 30*time.Second, "the API's port answering again", func() bool { return healthz(addr) == 200 })
	t.Logf("%s: API port answers", time.Since(t0))
	waitFor(t, 30*time.Second, "every row journaled after the flood", func() bool {
		st := authedStatus(t, addr, "s3cret")
		return st["journal_error"] == nil && st["changes_written"] != nil && st["changes_written"].(float64) >= rows
	})
	t.Logf("%s: every row journaled", time.Since(t0))
	select {
	case err := <-exited:
		t.Fatalf("pgq exited: %v\n%s", err, stderr.String())
	default:
	}
	if !strings.Contains(stderr.String(), "open-file limit is low") {
		t.Errorf("no warning that the API's connections were capped to fit the file limit:\n%s", stderr.String())
	}
}
