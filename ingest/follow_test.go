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

	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/syncbuf"
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
	if out, err := exec.Command(pgqbin.Path(t), "groups", "create", "g", "--from", "earliest", "--addr", addr).CombinedOutput(); err != nil {
		t.Fatalf("groups create: %v %s", err, out)
	}
	consume := exec.Command(pgqbin.Path(t), "consume", "--group", "g", "--follow", "--wait", "200ms", "--addr", addr)
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

// TestConsumeStandbyTakesOverAfterSIGKILL: two `pgq consume --follow` of
// one group; the lease holder is killed with SIGKILL; the standby prints
// the rows that follow within the lease TTL.
func TestConsumeStandbyTakesOverAfterSIGKILL(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE sb (id int PRIMARY KEY)`)
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	slot := "sb_" + db.Name
	p := startPgq(t, "run", "--pg-url", db.URL, "--slot", slot, "--publication", "sb_pub", "--data-dir", t.TempDir(),
		"--create-slot", "--create-publication", "public.sb", "--listen", addr)
	waitFor(t, 20*time.Second, "pgq ready", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if out, err := exec.Command(pgqbin.Path(t), "groups", "create", "g", "--from", "earliest", "--addr", addr).CombinedOutput(); err != nil {
		t.Fatalf("groups create: %v %s", err, out)
	}
	type member struct {
		cmd    *exec.Cmd
		stderr syncbuf.Buffer
		mu     sync.Mutex // guards ids
		ids    []int
	}
	start := func(name string) *member {
		m := &member{cmd: exec.Command(pgqbin.Path(t), "consume", "--group", "g", "--follow", "--wait", "200ms", "--lease-ttl", "2s", "--member", name, "--addr", addr)}
		m.cmd.Env = cleanEnv()
		m.cmd.Stderr = &m.stderr
		out, err := m.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.cmd.Process.Kill(); _ = m.cmd.Wait() })
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var line struct {
					Changes []struct {
						New struct{ ID int } `json:"new"`
					} `json:"changes"`
				}
				if json.Unmarshal(sc.Bytes(), &line) == nil {
					m.mu.Lock()
					for _, ch := range line.Changes {
						m.ids = append(m.ids, ch.New.ID)
					}
					m.mu.Unlock()
				}
			}
		}()
		return m
	}
	seen := func(m *member, id int) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, x := range m.ids {
			if x == id {
				return true
			}
		}
		return false
	}
	a := start("a")
	db.Exec(t, `INSERT INTO sb VALUES (1)`)
	waitFor(t, 20*time.Second, "holder a prints row 1", func() bool { return seen(a, 1) })
	b := start("b")
	time.Sleep(500 * time.Millisecond)
	db.Exec(t, `INSERT INTO sb VALUES (2)`)
	waitFor(t, 20*time.Second, "holder a prints row 2", func() bool { return seen(a, 2) })
	if seen(b, 1) || seen(b, 2) {
		t.Fatal("the standby printed rows while the holder was alive")
	}
	if b.cmd.ProcessState != nil {
		t.Fatalf("the standby exited: %v", b.cmd.ProcessState)
	}
	_ = a.cmd.Process.Kill()
	killed := time.Now()
	db.Exec(t, `INSERT INTO sb VALUES (3)`)
	deadline := time.Now().Add(20 * time.Second)
	for !seen(b, 3) {
		if time.Now().After(deadline) {
			b.mu.Lock()
			alive := b.cmd.Process.Signal(syscall.Signal(0)) == nil
			info, _ := exec.Command(pgqbin.Path(t), "groups", "info", "g", "--addr", addr).CombinedOutput()
			t.Logf("group: %s", info)
			t.Fatalf("standby b did not print row 3 (alive %v); it printed %v; stderr:\n%s\na's stderr:\n%s", alive, b.ids, b.stderr.String(), a.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := time.Since(killed); d > 8*time.Second {
		t.Fatalf("standby took over after %s with a 2s lease", d)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, 30*time.Second)
	db.Exec(t, `SELECT pg_drop_replication_slot('`+slot+`')`)
}
