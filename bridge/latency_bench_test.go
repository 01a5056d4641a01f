package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/internal/bridgetest"
	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// latencies collects receive time minus commit time, after a warm-up.
type latencies struct {
	mu     sync.Mutex // guards the fields below
	warm   time.Time
	lats   []time.Duration
	events int
	err    error // the first undecodable message
}

func (l *latencies) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

func (l *latencies) add(commit time.Time, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events++
	if commit.After(l.warm) {
		l.lats = append(l.lats, now.Sub(commit))
	}
}

func (l *latencies) firstErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *latencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events
}

// at returns the p-th percentile (0 < p ≤ 100).
func (l *latencies) at(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lats) == 0 {
		return 0
	}
	s := slices.Clone(l.lats)
	slices.Sort(s)
	return s[max(0, min(len(s)-1, int(p/100*float64(len(s)))))]
}

// BenchmarkEndToEndLatency: pgbench commits one-row transactions at a
// steady 1,000 tx/s into a real PostgreSQL 15; a real pgq sidecar (the
// pgq binary, `pgq run`) journals them; in the same run two groups read
// the journal from the same point: one through the Go client's Consume
// (pgq's own commit → consumer latency) and one through the bridge into a
// real nats-server's JetStream stream (file storage, one replica), read by
// a JetStream consumer (commit → JetStream consumer). Both latencies are
// receive time minus the transaction's commit time (pgoutput's commit
// timestamp; one machine, one clock), the first second skipped. Reported:
// pgq_p99_ms and bridge_p99_ms (and the p50s).
func BenchmarkEndToEndLatency(b *testing.B) {
	const seconds = 10
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel)
		c, err := pgtest.Start(pgtest.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Stop)
		db, err := c.CreateDB(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Exec(ctx, db,
			`CREATE TABLE ev (id bigserial PRIMARY KEY, note text NOT NULL)`,
			`CREATE PUBLICATION lat FOR TABLE ev`); err != nil {
			b.Fatal(err)
		}
		dir := b.TempDir()
		bin := pgqbin.Path(b)
		port, err := pgtest.FreePort()
		if err != nil {
			b.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		logf, err := os.Create(filepath.Join(dir, "pgq.log"))
		if err != nil {
			b.Fatal(err)
		}
		pgqCmd := exec.Command(bin, "run", "--pg-url", c.URL(db), "--slot", "lat", "--create-slot", "--publication", "lat",
			"--data-dir", filepath.Join(dir, "data"), "--listen", addr)
		pgqCmd.Stdout, pgqCmd.Stderr = logf, logf
		if err := pgqCmd.Start(); err != nil {
			b.Fatal(err)
		}
		pgqDone := make(chan struct{})
		go func() { _ = pgqCmd.Wait(); _ = logf.Close(); close(pgqDone) }()
		b.Cleanup(func() { // a clean stop; before the cluster's (cleanups run last first)
			_ = pgqCmd.Process.Signal(os.Interrupt)
			<-pgqDone
		})
		cl, err := client.New(addr, client.Options{Retry: client.RetryOptions{Min: 10 * time.Millisecond, Max: 200 * time.Millisecond}})
		if err != nil {
			b.Fatal(err)
		}
		for _, g := range []string{"direct", "bridge"} {
			if _, err := cl.CreateGroup(ctx, api.CreateRequest{Name: g, From: "earliest"}); err != nil {
				b.Fatalf("create group %s (pgq log %s): %v", g, logf.Name(), err)
			}
		}

		ns := bridgetest.StartNATS(b, filepath.Join(dir, "nats"), 0)
		b.Cleanup(ns.Shutdown)
		p, err := jetstream.New(ctx, jetstream.Options{URL: ns.ClientURL(), CreateStream: true})
		if err != nil {
			b.Fatal(err)
		}
		br, err := bridge.New(bridge.Options{Client: cl, Group: "bridge", Member: "bench", Publisher: p, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		bridged := make(chan error, 1)
		go func() { bridged <- br.Run(ctx) }()

		warm := time.Now().Add(time.Second)
		direct, viaNATS := &latencies{warm: warm}, &latencies{warm: warm}
		cs, err := cl.Consumer("direct", client.ConsumerOptions{Member: "bench", Wait: time.Second, Max: 1000})
		if err != nil {
			b.Fatal(err)
		}
		consumed := make(chan error, 1)
		go func() {
			consumed <- cs.Consume(ctx, func(_ context.Context, tx *pgq.Transaction) error {
				now := time.Now()
				for range tx.Changes {
					direct.add(tx.CommitTime, now)
				}
				return nil
			})
		}()
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			b.Fatal(err)
		}
		js, err := njs.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		st, err := js.Stream(ctx, "PGQ")
		if err != nil {
			b.Fatal(err)
		}
		oc, err := st.OrderedConsumer(ctx, njs.OrderedConsumerConfig{})
		if err != nil {
			b.Fatal(err)
		}
		cc, err := oc.Consume(func(m njs.Msg) {
			now := time.Now()
			var pl struct {
				CommitTime time.Time `json:"commit_time"`
			}
			if err := json.Unmarshal(m.Data(), &pl); err != nil {
				viaNATS.fail(err)
				return
			}
			viaNATS.add(pl.CommitTime, now)
		})
		if err != nil {
			b.Fatal(err)
		}

		// 1,000 tx/s, as the end-to-end row of make bench.
		script := filepath.Join(dir, "lat.sql")
		if err := os.WriteFile(script, []byte("INSERT INTO ev (note) VALUES ('latency');\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		pgb := exec.Command(filepath.Join(c.BinDir, "pgbench"), "-n", "-f", script, "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port), "-U", "postgres",
			"-c", "2", "-j", "2", "-R", "1000", "-T", strconv.Itoa(seconds), db)
		pgb.Env = append(os.Environ(), "PGOPTIONS=-c synchronous_commit=on")
		if out, err := pgb.CombinedOutput(); err != nil {
			b.Fatalf("pgbench: %v\n%s", err, out)
		}
		var rows int
		conn, err := c.Connect(ctx, db)
		if err != nil {
			b.Fatal(err)
		}
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM ev").Scan(&rows); err != nil {
			b.Fatal(err)
		}
		_ = conn.Close(ctx)
		deadline := time.Now().Add(time.Minute)
		for direct.count() < rows || viaNATS.count() < rows {
			if time.Now().After(deadline) {
				b.Fatalf("%d rows; the Go client received %d, the JetStream consumer %d", rows, direct.count(), viaNATS.count())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := viaNATS.firstErr(); err != nil {
			b.Fatal(err)
		}
		if n := viaNATS.count(); n != rows {
			b.Fatalf("%d rows, %d JetStream messages", rows, n)
		}

		cc.Stop()
		nc.Close()
		cancel()
		if err := <-bridged; err != nil {
			b.Fatal(err)
		}
		if err := <-consumed; err != nil && !errors.Is(err, context.Canceled) {
			b.Fatal(err)
		}
		_ = p.Close()

		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(direct.at(99)), "pgq_p99_ms")
		b.ReportMetric(ms(viaNATS.at(99)), "bridge_p99_ms")
		b.ReportMetric(ms(direct.at(50)), "pgq_p50_ms")
		b.ReportMetric(ms(viaNATS.at(50)), "bridge_p50_ms")
		b.Logf("%d rows at 1,000 tx/s for %ds: commit → Go client p50 %.2f ms p99 %.2f ms; commit → bridge → JetStream consumer p50 %.2f ms p99 %.2f ms",
			rows, seconds, ms(direct.at(50)), ms(direct.at(99)), ms(viaNATS.at(50)), ms(viaNATS.at(99)))
	}
}
