package benchmarks

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
)

// The latency rows: commit → pgq's Go consumer handler next to commit → a
// live pg_recvlogical reader, the same transactions in the same run.
const (
	latencyMetric    = "commit → consumer latency at 1,000 tx/s"
	latencyTargetP50 = "≤ reference + 1 ms"
	latencyTargetP99 = "≤ reference + 5 ms"
	latencyRefName   = "live pg_recvlogical, test_decoding"
	latencyRefSlot   = "pgqbench_latency_ref"
)

// latencyRows: pgbench at a steady 1,000 tx/s inserts one row per
// transaction. Two readers follow the server live: pg_recvlogical on a
// test_decoding slot (the reference: the time its COMMIT line reaches this
// process) and pgq's Go client (Consumer.Consume of a group filtered to
// the table, commit after each fetched batch: the time the handler runs).
// Both latencies are taken from the transaction's commit timestamp as pgq
// journaled it, matched by xid, so both sides measure the same
// transactions from the same origin on the same clock. The first second
// is skipped (warm-up).
func (e *env) latencyRows(ctx context.Context, cl *client.Client, p *pgqProc) []Row {
	fail := func(why string) []Row {
		return []Row{notMeasured(latencyMetric+", p50", latencyTargetP50, why), notMeasured(latencyMetric+", p99", latencyTargetP99, why)}
	}
	const group = "latency"
	if _, err := cl.CreateGroup(ctx, consumers.CreateRequest{Name: group, From: "latest", Tables: []string{"public.bench_events"}}); err != nil {
		return fail("create group: " + trimErr(err))
	}
	cs, err := cl.Consumer(group, client.ConsumerOptions{Member: "bench", Wait: 10 * time.Second, Max: 1000})
	if err != nil {
		return fail("consumer: " + trimErr(err))
	}
	ref, err := e.startRefReader(ctx)
	if err != nil {
		return fail(trimErr(err))
	}
	defer e.dropSlot(context.WithoutCancel(ctx), latencyRefSlot)

	type seen struct{ commit, got time.Time }
	var got []seen
	xids := map[uint32]int{} // xid → index in got
	cctx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	consumed := make(chan error, 1)
	go func() {
		consumed <- cs.Consume(cctx, func(_ context.Context, tx *pgq.Transaction) error {
			now := time.Now()
			if tx.Final {
				xids[tx.Xid] = len(got)
				got = append(got, seen{commit: tx.CommitTime, got: now})
			}
			return nil
		})
	}()
	warmup := time.Now().Add(time.Second)
	ingestBefore := p.durableWithin(ctx)
	e.log.Info("latency: pgbench at 1,000 tx/s, pgq and pg_recvlogical reading live", "for", e.sz.latencyFor)
	_, benchErr := e.pgbench(ctx, latencyScript, "-c", "2", "-j", "2", "-R", "1000", "-T", fmt.Sprint(int(e.sz.latencyFor.Seconds())))
	// Let both readers take the tail, then stop them.
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
	}
	stopConsumer()
	cerr := <-consumed
	_ = cs.Close(context.WithoutCancel(ctx))
	refCommits, rerr := ref.stop()
	ingestAfter := p.durableWithin(ctx)
	switch {
	case cerr != nil && !errors.Is(cerr, context.Canceled):
		return fail("consume: " + trimErr(cerr))
	case benchErr != nil:
		return fail(trimErr(benchErr))
	case rerr != nil:
		return fail(trimErr(rerr))
	}

	var pgqLat, refLat, pairGap []time.Duration
	missing := 0
	// Every transaction, for a closer look (pgqbench -keep): commit time,
	// then the latency of each reader in microseconds.
	var csv bytes.Buffer
	csv.WriteString("xid,commit_unix_us,pgq_us,ref_us\n")
	for xid, i := range xids {
		if r, ok := refCommits[xid]; ok {
			s := got[i]
			fmt.Fprintf(&csv, "%d,%d,%d,%d\n", xid, s.commit.UnixMicro(), s.got.Sub(s.commit).Microseconds(), r.Sub(s.commit).Microseconds())
		}
	}
	_ = os.WriteFile(filepath.Join(e.cfg.WorkDir, "latency.csv"), csv.Bytes(), 0o644)
	for xid, i := range xids {
		s := got[i]
		if !s.commit.After(warmup) {
			continue
		}
		r, ok := refCommits[xid]
		if !ok {
			missing++
			continue
		}
		pgqLat = append(pgqLat, s.got.Sub(s.commit))
		refLat = append(refLat, r.Sub(s.commit))
		pairGap = append(pairGap, s.got.Sub(r))
	}
	if len(pgqLat) == 0 {
		return fail(fmt.Sprintf("no transaction seen by both readers (pgq %d, pg_recvlogical %d)", len(got), len(refCommits)))
	}
	for _, l := range [][]time.Duration{pgqLat, refLat, pairGap} {
		slices.Sort(l)
	}
	at := func(l []time.Duration, p float64) time.Duration {
		return l[max(0, min(len(l)-1, int(p/100*float64(len(l)))))]
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	rows := make([]Row, 0, 2)
	for _, q := range []struct {
		p      float64
		target string
		limit  time.Duration
	}{{50, latencyTargetP50, time.Millisecond}, {99, latencyTargetP99, 5 * time.Millisecond}} {
		pv, rv := at(pgqLat, q.p), at(refLat, q.p)
		r := Row{Metric: fmt.Sprintf("%s, p%g", latencyMetric, q.p), Unit: "ms", PGQ: f64(ms(pv)), Reference: f64(ms(rv)), RefName: latencyRefName, Target: q.target}
		if rv > 0 {
			r.Ratio = f64(float64(pv) / float64(rv))
		}
		r.check(pv-rv <= q.limit)
		r.Note = fmt.Sprintf("gap %+.2f ms; same transaction pgq − reference: p%g %+.2f ms", ms(pv-rv), q.p, ms(at(pairGap, q.p)))
		rows = append(rows, r)
	}
	rows[0].Note = joinNotes(rows[0].Note, fmt.Sprintf("%d transactions seen by both (first second skipped, %d missing from the reference); commit → pg fsync → walsender → pgq fsync → fetch long-poll → Go library handler", len(pgqLat), missing))
	rows[1].Note = joinNotes(rows[1].Note, fmt.Sprintf("max pgq %.2f ms, reference %.2f ms", ms(pgqLat[len(pgqLat)-1]), ms(refLat[len(refLat)-1])), ingestShare(ingestBefore, ingestAfter))
	return rows
}

// refReader is a live pg_recvlogical on a test_decoding slot, writing to
// a pipe read here: each COMMIT line is stamped when it arrives.
type refReader struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the pipe is drained
	// mu guards commits and err, written by the reading goroutine.
	mu      sync.Mutex
	commits map[uint32]time.Time // xid → arrival of its COMMIT line
	err     error
}

// startRefReader creates the reference slot and starts pg_recvlogical on
// it. pg_recvlogical writes every message with its own write(2) and
// fsyncs only regular files, so a line reaches the pipe as soon as the
// walsender sent the message.
func (e *env) startRefReader(ctx context.Context) (*refReader, error) {
	e.dropSlot(ctx, latencyRefSlot)
	if _, err := e.conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'test_decoding')", latencyRefSlot); err != nil {
		return nil, fmt.Errorf("create reference slot: %w", err)
	}
	stderr, err := os.Create(filepath.Join(e.cfg.WorkDir, "latency-pg_recvlogical.log"))
	if err != nil {
		return nil, fmt.Errorf("pg_recvlogical log: %w", err)
	}
	defer stderr.Close() // the child has its own descriptor
	r := &refReader{done: make(chan struct{}), commits: map[uint32]time.Time{}}
	r.cmd = exec.Command(filepath.Join(e.cluster.BinDir, "pg_recvlogical"), "-d", e.url, "--slot", latencyRefSlot,
		"--start", "--no-loop", "-f", "-", "-o", "include-xids=1", "-o", "skip-empty-xacts=1")
	r.cmd.Stderr = stderr
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("pg_recvlogical: %w", err)
	}
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start pg_recvlogical: %w", err)
	}
	go r.read(out)
	return r, nil
}

// read stamps COMMIT lines ("COMMIT <xid>") until the pipe closes.
func (r *refReader) read(out io.Reader) {
	defer close(r.done)
	br := bufio.NewReaderSize(out, 1<<16)
	atStart := true // line begins a line (ReadSlice may return a long line in pieces)
	for {
		line, err := br.ReadSlice('\n')
		now := time.Now()
		if rest, ok := bytes.CutPrefix(line, []byte("COMMIT ")); ok && atStart {
			f := bytes.Fields(rest)
			x, perr := uint64(0), error(nil)
			if len(f) == 0 {
				perr = errors.New("no xid")
			} else {
				x, perr = strconv.ParseUint(string(f[0]), 10, 32)
			}
			r.mu.Lock()
			if perr != nil && r.err == nil {
				r.err = fmt.Errorf("pg_recvlogical: bad COMMIT line %q: %w", strings.TrimSpace(string(line)), perr)
			}
			r.commits[uint32(x)] = now
			r.mu.Unlock()
		}
		atStart = err == nil
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return
		default:
			r.mu.Lock()
			r.err = fmt.Errorf("read pg_recvlogical: %w", err)
			r.mu.Unlock()
			return
		}
	}
}

// stop ends pg_recvlogical (SIGINT, as an operator would) and returns the
// COMMIT arrivals.
func (r *refReader) stop() (map[uint32]time.Time, error) {
	_ = r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	_ = r.cmd.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commits, r.err
}

// durableBuckets are upper bounds (seconds) of pgq's
// pgq_commit_to_durable_seconds histogram read for the latency row.
var durableBuckets = []string{"0.004", "0.008", "0.016", "0.032", "0.064", "+Inf"}

// durableWithin reads the cumulative bucket counts of pgq's commit → fsync
// histogram (nil when unavailable).
func (p *pgqProc) durableWithin(ctx context.Context) []float64 {
	out := make([]float64, len(durableBuckets))
	for i, le := range durableBuckets {
		v, err := p.metric(ctx, `pgq_commit_to_durable_seconds_bucket{le="`+le+`"}`)
		if err != nil {
			return nil
		}
		out[i] = v
	}
	return out
}

// ingestShare splits the end-to-end row: which share of the phase's
// transactions pgq had fsynced within each bound after their commit.
func ingestShare(before, after []float64) string {
	if before == nil || after == nil {
		return "pgq commit → fsync histogram unavailable"
	}
	total := after[len(after)-1] - before[len(before)-1]
	if total <= 0 {
		return "pgq commit → fsync: no transactions"
	}
	parts := make([]string, 0, len(durableBuckets)-1)
	for i, le := range durableBuckets[:len(durableBuckets)-1] {
		ms, _ := strconv.ParseFloat(le, 64)
		parts = append(parts, fmt.Sprintf("≤%gms %.1f%%", ms*1000, 100*(after[i]-before[i])/total))
	}
	return "pgq commit → fsync (its own histogram): " + strings.Join(parts, ", ")
}
