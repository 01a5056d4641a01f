package pgqbin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Output runs pgq with args (environment Env) and returns its standard
// output; a failure fails t with its standard error.
func Output(t testing.TB, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(Path(t), args...)
	cmd.Env = Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pgq %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// Proc is a pgq process a test started (Start).
type Proc struct {
	args   []string
	cmd    *exec.Cmd
	stderr bytes.Buffer // written by the process until Stop waited for it
	once   sync.Once
}

// Start starts pgq with args (environment Env) in the background; it is
// killed when the test ends, its standard error logged if the test
// failed.
func Start(t testing.TB, args ...string) *Proc {
	t.Helper()
	p := &Proc{args: args, cmd: exec.Command(Path(t), args...)}
	p.cmd.Env = Env()
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("pgq %v: %v", args, err)
	}
	t.Cleanup(func() {
		if stderr := p.Stop(); t.Failed() {
			t.Logf("pgq %v:\n%s", args, stderr)
		}
	})
	return p
}

// Stop kills the process, waits for it and returns its standard error;
// later calls return the same. The standard error is read only once the
// process is gone, so that no write races the read.
func (p *Proc) Stop() string {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
	return p.stderr.String()
}

// RunOptions say what StartRun starts: `pgq run --create-slot
// --create-publication <Tables>` on a data directory of the test's.
type RunOptions struct {
	// PGURL, Slot and Publication are --pg-url, --slot and
	// --publication; required.
	PGURL, Slot, Publication string
	// Tables is --create-publication's value; "" → "all".
	Tables string
	// Stopped is called in the test's cleanup once the process is gone
	// (drop the slot there); nil → nothing.
	Stopped func()
}

// Run is a `pgq run` process a test started (StartRun).
type Run struct {
	// Addr is its HTTP API's address, host:port on 127.0.0.1.
	Addr string
}

// StartRun starts `pgq run` as o says, listening on a free port of
// 127.0.0.1, and returns once its /readyz answers 200 (a minute at the
// most; else t fails with the process's standard error). It is killed
// when the test ends.
func StartRun(t testing.TB, o RunOptions) *Run {
	t.Helper()
	tables := o.Tables
	if tables == "" {
		tables = "all"
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // pgq listens there in a moment
	if o.Stopped != nil {
		t.Cleanup(o.Stopped) // cleanups run last first: after the process's
	}
	p := Start(t, "run", "--pg-url", o.PGURL, "--slot", o.Slot, "--publication", o.Publication, "--data-dir", t.TempDir(),
		"--create-slot", "--create-publication", tables, "--listen", addr)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return &Run{Addr: addr}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgq run not ready:\n%s", p.Stop())
		}
	}
}

// Out runs pgq with args against the run (--addr) and returns its
// standard output (Output).
func (r *Run) Out(t testing.TB, args ...string) []byte {
	t.Helper()
	return Output(t, append(args, "--addr", r.Addr)...)
}

// WebhookEvents runs `pgq bridge webhook --url <a receiver> --addr
// <the run's> args` until the receiver got want events (a minute at the
// most), lets it run 300 ms more (a request too many would be a bug: let
// it show), and returns the events of the requests' bodies (JSON arrays
// of events). Fewer events, or a body that is no JSON array, fail t with
// the bridge's standard error.
func (r *Run) WebhookEvents(t testing.TB, want int, args ...string) []json.RawMessage {
	t.Helper()
	var (
		mu   sync.Mutex
		evs  []json.RawMessage
		errs []string
	)
	got := make(chan struct{}, 1) // want events arrived
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var batch []json.RawMessage
		mu.Lock()
		defer mu.Unlock()
		if err := json.Unmarshal(b, &batch); err != nil {
			errs = append(errs, fmt.Sprintf("%v: %s", err, b))
		}
		if evs = append(evs, batch...); len(evs) >= want {
			select {
			case got <- struct{}{}:
			default:
			}
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := Start(t, append([]string{"bridge", "webhook", "--url", srv.URL, "--addr", r.Addr}, args...)...)
	select {
	case <-got:
		time.Sleep(300 * time.Millisecond)
	case <-ctx.Done():
	}
	stderr := p.Stop()
	mu.Lock()
	defer mu.Unlock()
	if len(evs) < want || len(errs) > 0 {
		t.Fatalf("webhook %v: %d events, want %d; errors %q; bridge:\n%s", args, len(evs), want, errs, stderr)
	}
	return evs
}
