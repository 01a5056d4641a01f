package benchmarks

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
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
	e.settleDisk()
	warmup := time.Now().Add(time.Second)
	before := p.snapshot(ctx)
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
	after := p.snapshot(ctx)
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
	rows[1].Note = joinNotes(rows[1].Note, fmt.Sprintf("max pgq %.2f ms, reference %.2f ms", ms(pgqLat[len(pgqLat)-1]), ms(refLat[len(refLat)-1])), stageNote(before, after, len(got)))
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

// pgqSnapshot is what the latency rows read from pgq's /metrics before
// and after the phase: the cumulative buckets of the stage histograms and
// the Go runtime's counters.
type pgqSnapshot struct {
	durable, delivered []bucket // pgq_commit_to_durable_seconds, pgq_tail_delivery_seconds
	journaled          []bucket // pgq_journal_to_delivery_seconds
	fsyncs             []bucket // pgq_fsync_seconds{store="journal"}
	gcCycles, alloc    float64  // go_gc_duration_seconds_count, go_memstats_alloc_bytes_total
	err                error
}

// bucket is one cumulative histogram bucket.
type bucket struct{ le, n float64 }

func (p *pgqProc) snapshot(ctx context.Context) pgqSnapshot {
	var s pgqSnapshot
	b, err := p.get(ctx, "/metrics")
	if err != nil {
		s.err = err
		return s
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			continue
		}
		switch {
		case name == "go_gc_duration_seconds_count":
			s.gcCycles = v
		case name == "go_memstats_alloc_bytes_total":
			s.alloc = v
		case strings.HasPrefix(name, "pgq_commit_to_durable_seconds_bucket{le="):
			s.durable = append(s.durable, bucket{leOf(name), v})
		case strings.HasPrefix(name, "pgq_tail_delivery_seconds_bucket{le="):
			s.delivered = append(s.delivered, bucket{leOf(name), v})
		case strings.HasPrefix(name, "pgq_journal_to_delivery_seconds_bucket{le="):
			s.journaled = append(s.journaled, bucket{leOf(name), v})
		case strings.HasPrefix(name, `pgq_fsync_seconds_bucket{store="journal",le=`):
			s.fsyncs = append(s.fsyncs, bucket{leOf(name), v})
		}
	}
	return s
}

// leOf parses the le label of a bucket sample name.
func leOf(name string) float64 {
	_, v, _ := strings.Cut(name, `le="`)
	v, _, _ = strings.Cut(v, `"`)
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return math.Inf(1)
	}
	return f
}

// quantile estimates the q-quantile (0..1) of what a histogram observed
// between two snapshots, interpolating linearly inside the bucket (as
// Prometheus' histogram_quantile does); ok is false without observations.
func quantile(before, after []bucket, q float64) (time.Duration, bool) {
	if len(after) == 0 || len(before) != len(after) {
		return 0, false
	}
	total := after[len(after)-1].n - before[len(before)-1].n
	if total <= 0 {
		return 0, false
	}
	rank := q * total
	lo, below := 0.0, 0.0
	for i := range after {
		n := after[i].n - before[i].n
		if n >= rank {
			hi := after[i].le
			if math.IsInf(hi, 1) {
				hi = lo
			}
			f := 0.0
			if n > below {
				f = (rank - below) / (n - below)
			}
			return time.Duration((lo + f*(hi-lo)) * float64(time.Second)), true
		}
		lo, below = after[i].le, n
	}
	return 0, false
}

// addDelta adds to acc (nil: none yet) what a histogram observed between
// two snapshots, bucket by bucket; quantile(zeroed(acc), acc, q) then
// reads the quantiles of several phases together. Mismatched snapshots
// (a failed scrape) leave acc as it was.
func addDelta(acc, before, after []bucket) []bucket {
	if len(after) == 0 || len(before) != len(after) || (acc != nil && len(acc) != len(after)) {
		return acc
	}
	if acc == nil {
		acc = zeroed(after)
	}
	for i := range after {
		acc[i].n += after[i].n - before[i].n
	}
	return acc
}

// zeroed returns b's bounds with no observations.
func zeroed(b []bucket) []bucket {
	z := make([]bucket, len(b))
	for i := range b {
		z[i].le = b[i].le
	}
	return z
}

// stageNote splits pgq's side of the latency by its own histograms:
// commit → journal fsync, commit → fetch answer, and the Go runtime's
// garbage collection during the phase.
func stageNote(before, after pgqSnapshot, txs int) string {
	if before.err != nil || after.err != nil {
		return "pgq stage histograms unavailable"
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }
	var parts []string
	for _, h := range []struct {
		name          string
		before, after []bucket
	}{{"commit → pgq fsync", before.durable, after.durable}, {"commit → fetch answer", before.delivered, after.delivered}} {
		p50, ok50 := quantile(h.before, h.after, 0.5)
		p99, ok99 := quantile(h.before, h.after, 0.99)
		if ok50 && ok99 {
			parts = append(parts, fmt.Sprintf("%s p50 %s p99 %s ms", h.name, ms(p50), ms(p99)))
		}
	}
	if txs > 0 {
		parts = append(parts, fmt.Sprintf("pgq GC: %.0f cycles, %.1f KiB allocated per transaction", after.gcCycles-before.gcCycles, (after.alloc-before.alloc)/1024/float64(txs)))
	}
	return "pgq's histograms (bucket-interpolated): " + strings.Join(parts, "; ")
}
