package ingest_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/internal/pgtest"
)

// TestConsumeFollowRidesThroughRestart: `pgq consume --follow` runs while
// `pgq run` is stopped with SIGTERM and started again under write load.
// Every row is printed, in order, none skipped (rows printed but not
// committed before the stop may be printed again).
func TestConsumeFollowRidesThroughRestart(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE fo (id int PRIMARY KEY)`)
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dir := t.TempDir()
	slot := "fo_" + db.Name
	run := func() *proc {
		p := startPgq(t, "run", "--pg-url", db.URL, "--slot", slot, "--publication", "fo_pub", "--data-dir", dir,
			"--create-slot", "--create-publication", "public.fo", "--listen", addr)
		waitFor(t, 20*time.Second, "pgq listening", func() bool {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
		return p
	}
	p := run()
	if out, err := exec.Command(pgqBinary(t), "groups", "create", "g", "--from", "earliest", "--addr", addr).CombinedOutput(); err != nil {
		t.Fatalf("groups create: %v %s", err, out)
	}
	consume := exec.Command(pgqBinary(t), "consume", "--group", "g", "--follow", "--wait", "200ms", "--addr", addr)
	consume.Env = cleanEnv()
	stdout, err := consume.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := consume.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = consume.Process.Kill(); _ = consume.Wait() })
	var mu sync.Mutex
	var ids []int
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var line struct {
				Changes []struct {
					New struct{ ID int } `json:"new"`
				} `json:"changes"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			mu.Lock()
			for _, ch := range line.Changes {
				ids = append(ids, ch.New.ID)
			}
			mu.Unlock()
		}
	}()
	const total = 300
	written := make(chan struct{})
	go func() {
		defer close(written)
		for i := 1; i <= total; i++ {
			db.Exec(t, fmt.Sprintf(`INSERT INTO fo VALUES (%d)`, i))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	for restart := 0; restart < 2; restart++ {
		time.Sleep(300 * time.Millisecond)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		if code, stderr := p.wait(t, 30*time.Second); code != 0 {
			t.Fatalf("pgq run exit %d after SIGTERM: %s", code, stderr)
		}
		time.Sleep(300 * time.Millisecond) // pgq is down; consume waits
		p = run()
	}
	<-written
	waitFor(t, 30*time.Second, "every row printed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ids) > 0 && maxInt(ids) == total
	})
	mu.Lock()
	defer mu.Unlock()
	hi := 0
	for i, id := range ids {
		if id > hi+1 {
			t.Fatalf("row %d printed after %d: rows skipped (position %d)", id, hi, i)
		}
		hi = max(hi, id)
	}
	if consume.ProcessState != nil {
		t.Fatalf("pgq consume --follow exited: %v", consume.ProcessState)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, 30*time.Second)
	db.Exec(t, `SELECT pg_drop_replication_slot('`+slot+`')`)
}

func maxInt(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
