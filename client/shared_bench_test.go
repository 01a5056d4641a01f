package client_test

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
)

// sharedLoad is one shared-group consumption over HTTP: n one-row
// transactions over keys rows, members SharedConsumers running Consume
// with concurrency handlers and prefetch each, handlers sleeping work.
type sharedLoad struct {
	n, keys, members, concurrency, prefetch int
	work                                    time.Duration
}

// run measures l against a fresh in-process server and returns
// messages/s and how busy the handlers were: their summed run time over
// members × Concurrency × the wall time (1: a handler always ran; what
// pgq adds between handlers is the rest). It fails b when a key's messages were handled out of commit
// order or at once, or when not every message was handled and acked
// exactly once. With PGQ_SHARED_CPUPROFILE=<file> the measured part is
// CPU-profiled.
func (l sharedLoad) run(b *testing.B) (rate, busy float64) {
	b.Helper()
	s := startServer(b, b.TempDir(), "127.0.0.1:0", nil)
	defer s.stop()
	for done := 0; done < l.n; done += 10000 {
		s.appendKeyed(min(10000, l.n-done), l.keys)
	}
	c, err := client.New(s.addr, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "jobs", Mode: "shared", From: "earliest", MaxAckPending: 10000}); err != nil {
		b.Fatal(err)
	}
	var (
		mu       sync.Mutex // guards the fields below
		last     = make([]pgq.Offset, l.keys)
		inUse    = make([]bool, l.keys)
		handled  = make([]uint8, l.n+1)
		count    int
		failures []string
		worked   atomic.Int64 // handlers' sleeping, ns
	)
	handler := func(_ context.Context, m client.Message) error {
		k := int(m.Offset-1) % l.keys
		mu.Lock()
		if inUse[k] || m.Offset <= last[k] {
			failures = append(failures, fmt.Sprintf("key %d: offset %d after %d (busy %v)", k, m.Offset, last[k], inUse[k]))
		}
		inUse[k], last[k] = true, m.Offset
		mu.Unlock()
		if l.work > 0 {
			start := time.Now()
			time.Sleep(l.work)
			worked.Add(int64(time.Since(start)))
		}
		mu.Lock()
		inUse[k] = false
		handled[m.Offset]++
		count++
		if count == l.n {
			cancel()
		}
		mu.Unlock()
		return nil
	}
	if p := os.Getenv("PGQ_SHARED_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range l.members {
		sc, err := c.SharedConsumer("jobs", client.SharedConsumerOptions{Member: "m" + strconv.Itoa(i), Concurrency: l.concurrency, Prefetch: l.prefetch, Wait: 100 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = sc.Consume(ctx, handler)
		}()
	}
	wg.Wait() // Consume settles what it handled before it returns
	wall := time.Since(start)
	rate = float64(l.n) / wall.Seconds()
	busy = float64(worked.Load()) / float64(int64(l.members*l.concurrency)*int64(wall))
	gi, err := c.Group(context.Background(), "jobs")
	if err != nil || gi.CommittedOffset != pgq.Offset(l.n) || gi.Shared.InFlight != 0 || gi.Shared.Redeliveries != 0 {
		b.Fatalf("not every message acked exactly once: %+v, %v", gi.Shared, err)
	}
	for off := 1; off <= l.n; off++ {
		if handled[off] != 1 {
			b.Fatalf("offset %d handled %d times", off, handled[off])
		}
	}
	if len(failures) > 0 {
		b.Fatalf("per-key order broken %d times: %v", len(failures), failures[0])
	}
	return rate, busy
}

// BenchmarkSharedScaling: a handler sleeping 1 ms, 10k keys; one member
// (5k changes) against 8 members over 200k changes, in the same run, each
// member with Concurrency 1 and Prefetch 4. Target: ratio ≥ 6. Run with
// -benchtime=1x (about a minute). The ratio can exceed 8: time.Sleep(1ms)
// takes about 1.7 ms on an otherwise idle process here (the timer wakes
// late) and about 1.1 ms while other members keep the runtime busy; the
// busy figures (handler time over members × wall time, about 1.0 on both
// sides) show that the members are never idle, so the rate follows what
// the handler takes.
func BenchmarkSharedScaling(b *testing.B) {
	for b.Loop() {
		one, oneBusy := sharedLoad{n: 5000, keys: 10000, members: 1, concurrency: 1, prefetch: 4, work: time.Millisecond}.run(b)
		eight, eightBusy := sharedLoad{n: 200000, keys: 10000, members: 8, concurrency: 1, prefetch: 4, work: time.Millisecond}.run(b)
		b.ReportMetric(one, "1member_msgs/s")
		b.ReportMetric(eight, "8members_msgs/s")
		b.ReportMetric(eight/one, "ratio")
		b.ReportMetric(oneBusy, "1member_busy")
		b.ReportMetric(eightBusy, "8members_busy")
	}
}

// BenchmarkSharedNoop: raw shared-group throughput over HTTP with a no-op
// handler, 200k changes over 10k keys, 4 members (Concurrency 8, Prefetch
// 512). Target: ≥ 100k msgs/s.
func BenchmarkSharedNoop(b *testing.B) {
	for b.Loop() {
		rate, _ := sharedLoad{n: 200000, keys: 10000, members: 4, concurrency: 8, prefetch: 512}.run(b)
		b.ReportMetric(rate, "msgs/s")
	}
}
