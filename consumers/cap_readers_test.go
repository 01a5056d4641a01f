package consumers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/server"
)

// capReaders is how many long-polling readers TestReadersBeyondCap opens,
// each on its own connection, against a cap of capConns: most of them
// are beyond it.
const (
	capReaders = 200
	capConns   = 16
	capProbes  = 4
	capCommits = 60
	capPace    = 50 * time.Millisecond
)

// TestReadersBeyondCap (issue 34 item 2): with far more long-polling
// readers than the API's connection cap, (1) ingest keeps journaling:
// every committed transaction reaches the journal, and the commit →
// journal latency stays within a ratio of the same workload's without
// readers, measured in the same test; (2) readers beyond the cap wait or
// get 503 unavailable with the documented message, never another
// failure; the probe listener answers /healthz, /readyz and /metrics all
// along; (3) once the readers go, the API answers normally and the
// process's file descriptors return near where they started.
func TestReadersBeyondCap(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd")
		}
		return len(ents)
	}
	fds()
	e := start(t, func(o *server.Options) {
		o.HTTP = httpapi.Limits{MaxConns: capConns, ProbeConns: capProbes}
		o.ProbeListen = "127.0.0.1:0"
	})
	ctx := ctxT(t)
	for i := range capReaders {
		if _, err := e.C.CreateGroup(ctx, api.CreateRequest{Name: fmt.Sprintf("r%d", i), From: "latest"}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, e.DB.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// The cluster commits asynchronously (its WAL writer flushes every
	// 200 ms, and the walsender sends only flushed WAL): this writer's
	// commits flush at once, so that what is measured is pgq's part.
	if _, err := conn.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}

	base := commitLatencies(t, ctx, e, conn)
	fdsBefore := fds()

	rctx, stop := context.WithCancel(ctx)
	var (
		wg    sync.WaitGroup
		stats readerStats
	)
	transports := make([]*http.Transport, capReaders)
	for i := range capReaders {
		// One connection per reader: its own transport, one connection
		// per host.
		transports[i] = &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}
		wg.Go(func() { stats.read(rctx, &http.Client{Transport: transports[i]}, e.Base, fmt.Sprintf("r%d", i)) })
	}
	// The cap is full once capConns readers were served; the rest wait in
	// the accept queue or take the overflow slots (and their 503).
	deadline := time.Now().Add(30 * time.Second)
	for stats.served.Load() < capConns && time.Now().Before(deadline) {
		e.DB.Exec(t, "INSERT INTO t (v) VALUES ('warm')")
		time.Sleep(50 * time.Millisecond)
	}
	if n := stats.served.Load(); n < capConns {
		t.Fatalf("only %d fetches answered within 30 s with %d readers", n, capReaders)
	}
	probesDone := make(chan int)
	go func() { probesDone <- probeWhileCapped(rctx, t, "http://"+e.S.ProbeAddr()) }()
	loaded := commitLatencies(t, ctx, e, conn)
	// Each reader holds one descriptor here (its client side) and the
	// server one per accepted connection, at most the caps: a waiting
	// reader's connection is the kernel's, not pgq's.
	const slack = 8
	fdsCapped := fds()
	if limit := fdsBefore + capReaders + capConns + capProbes + slack; fdsCapped > limit {
		t.Errorf("%d file descriptors with %d readers over a cap of %d+%d, want at most %d", fdsCapped, capReaders, capConns, capProbes, limit)
	}
	stop()
	probes := <-probesDone
	wg.Wait()
	for _, tr := range transports {
		tr.CloseIdleConnections()
	}

	bp50, bmax := quantile(base, 0.5), quantile(base, 1)
	lp50, lmax := quantile(loaded, 0.5), quantile(loaded, 1)
	t.Logf("commit → journal, %d commits: without readers p50 %v max %v; with %d readers over a cap of %d: p50 %v (×%.1f) max %v (×%.1f)",
		capCommits, bp50, bmax, capReaders, capConns, lp50, ratio(lp50, bp50), lmax, ratio(lmax, bmax))
	t.Logf("readers: %d answers with transactions, %d empty, %d × 503 over the cap, %d client-side timeouts while waiting; %d probe rounds",
		stats.served.Load(), stats.empty.Load(), stats.refused.Load(), stats.waited.Load(), probes)
	// Starved ingest would take the readers' long-poll wait (seconds) or
	// never journal at all; CPU shared with 200 readers on a small
	// machine costs a few times the idle latency at most.
	const bound = 25
	if r := ratio(lp50, bp50); r > bound {
		t.Errorf("median commit → journal latency ×%.1f with readers beyond the cap, want ≤ ×%d", r, bound)
	}
	if lmax > time.Second && ratio(lmax, bmax) > bound {
		t.Errorf("slowest commit → journal %v with readers beyond the cap (×%.1f of %v), want ≤ ×%d or under 1 s", lmax, ratio(lmax, bmax), bmax, bound)
	}
	if stats.served.Load() == 0 || stats.refused.Load()+stats.waited.Load() == 0 {
		t.Errorf("the test did not exercise the cap: %d served, %d refused, %d waited", stats.served.Load(), stats.refused.Load(), stats.waited.Load())
	}
	for _, f := range stats.failures() {
		t.Error(f)
	}
	if probes == 0 {
		t.Error("no probe round completed while the API was at its cap")
	}

	// (3) The API answers normally again, and the descriptors the readers
	// held are given back.
	left := time.Now()
	for {
		code, body := e.call(t, "GET", "/v1/groups/r0", "")
		if code == 200 {
			break
		}
		if time.Since(left) > 10*time.Second || code != 503 || !overCap(body) {
			t.Fatalf("GET /v1/groups/r0 %v after the readers left: %d %s", time.Since(left), code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("the API answered normally %v after the readers left", time.Since(left))
	e.DB.Exec(t, "INSERT INTO t (v) VALUES ('after')")
	if res := fetch(t, e, fmt.Sprintf("r%d", capReaders-1), "m", 10, 10*time.Second); len(res.Transactions) == 0 {
		t.Error("a fetch after the readers left got no transaction")
	}
	deadline = time.Now().Add(15 * time.Second)
	for fds() > fdsBefore+slack && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := fds(); n > fdsBefore+slack {
		t.Errorf("%d file descriptors 15 s after the readers left, %d before they came", n, fdsBefore)
	} else {
		t.Logf("file descriptors: %d before the readers, %d with them, %d after", fdsBefore, fdsCapped, n)
	}
}

// commitLatencies commits capCommits single-row transactions one at a
// time, one each capPace (so that the readers run for seconds, longer
// than their long poll), and returns, for each, how long after its commit
// it was in the journal.
func commitLatencies(t *testing.T, ctx context.Context, e *env, conn *pgx.Conn) []time.Duration {
	t.Helper()
	j := serverparts.Of(e.S).Journal
	out := make([]time.Duration, 0, capCommits)
	for i := range capCommits {
		want := j.LastOffset() + 1
		if _, err := conn.Exec(ctx, "INSERT INTO t (v) VALUES ($1)", fmt.Sprintf("c%d", i)); err != nil {
			t.Fatal(err)
		}
		committed := time.Now()
		for j.LastOffset() < want {
			if time.Since(committed) > 30*time.Second {
				t.Fatalf("commit %d not journaled within 30 s (journal at %d, want %d)", i, j.LastOffset(), want)
			}
			time.Sleep(200 * time.Microsecond)
		}
		out = append(out, time.Since(committed))
		time.Sleep(capPace - time.Since(committed))
	}
	return out
}

// readerStats counts what the readers of TestReadersBeyondCap got.
type readerStats struct {
	served, empty, refused, waited atomic.Int64
	mu                             sync.Mutex
	failed                         []string
}

func (s *readerStats) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failed) < 10 {
		s.failed = append(s.failed, fmt.Sprintf(format, args...))
	}
}

func (s *readerStats) failures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.failed)
}

// read long-polls group until ctx ends, each fetch resuming from the last
// answer's next_offset, as a client that does not commit does. A 503 is
// retried later as the Go client retries it (client.RetryOptions: a wait
// drawn from [d/2, d], d doubling from 100 ms to 5 s, back to 100 ms
// after an answer); a client-side timeout is a reader that waited in the
// accept queue.
func (s *readerStats) read(ctx context.Context, hc *http.Client, base, group string) {
	var from int64
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		body := `{"member":"m","wait":"2s"}`
		if from > 0 {
			body = fmt.Sprintf(`{"member":"m","wait":"2s","from":%d}`, from)
		}
		status, b, err := post(ctx, hc, base+"/v1/groups/"+group+"/fetch", body)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, context.DeadlineExceeded):
			s.waited.Add(1)
		case err != nil:
			s.fail("%s: fetch: %v", group, err)
			time.Sleep(100 * time.Millisecond)
		case status == http.StatusOK:
			var res struct {
				Transactions []json.RawMessage `json:"transactions"`
				NextOffset   int64             `json:"next_offset"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				s.fail("%s: fetch answer: %v", group, err)
				continue
			}
			from, backoff = res.NextOffset, 100*time.Millisecond
			if len(res.Transactions) == 0 {
				s.empty.Add(1)
			} else {
				s.served.Add(1)
			}
		case status == http.StatusServiceUnavailable && overCap(b):
			s.refused.Add(1)
			pause(ctx, backoff/2+rand.N(backoff/2))
			backoff = min(2*backoff, 5*time.Second)
		default:
			s.fail("%s: fetch: %d %s", group, status, b)
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// overCap tells whether b is the documented answer of an overflow
// connection: the error envelope with code unavailable and the cap's
// message.
func overCap(b []byte) bool {
	var eb struct {
		Error struct{ Code, Message string }
	}
	return json.Unmarshal(b, &eb) == nil && eb.Error.Code == api.CodeUnavailable &&
		strings.HasPrefix(eb.Error.Message, fmt.Sprintf("too many connections (the API serves %d at a time)", capConns))
}

// post sends body with a 5 s bound (longer than the 2 s long poll: only
// a reader left waiting for a connection reaches it).
func post(ctx context.Context, hc *http.Client, url, body string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// probeWhileCapped gets /healthz, /readyz and /metrics from the probe
// listener at base until ctx ends, failing t on any answer but 200, and
// returns the rounds done.
func probeWhileCapped(ctx context.Context, t *testing.T, base string) int {
	hc := &http.Client{Timeout: 5 * time.Second}
	rounds := 0
	for ctx.Err() == nil {
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			resp, err := hc.Get(base + path)
			if err != nil {
				t.Errorf("probe listener GET %s with the API at its cap: %v", path, err)
				return rounds
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("probe listener GET %s with the API at its cap: %d", path, resp.StatusCode)
			}
		}
		rounds++
		pause(ctx, 200*time.Millisecond)
	}
	return rounds
}

// quantile returns the q-quantile (0…1) of ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(max(b, time.Microsecond)) }
