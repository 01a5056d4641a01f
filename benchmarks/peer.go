package benchmarks

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The peer rows (issue 34 item 3): pgq (journal, then `pgq consume`
// writing every change to a file) next to Conduit's built-in PostgreSQL
// source (pgoutput) writing into its file destination, and next to
// pg_recvlogical, on the same pre-generated WAL. Each tool drains a copy
// of one template slot alone; a round runs every tool once, in the same
// order, and the figures are taken round by round.

// ConduitVersion is the Conduit release benchmarks/peers/conduit builds
// (its go.mod pins it).
const ConduitVersion = "v0.14.0"

// peerModule is the separate Go module that builds Conduit, relative to
// the repository root: pgq's own module does not depend on Conduit.
const peerModule = "benchmarks/peers/conduit"

const peerTemplate = "pgqbench_peer_template"

// peerSizes is the peer workload: one-row transactions, then bulk
// transactions of many rows each.
type peerSizes struct {
	smallTx, bulkTx, bulkRows, rounds int
}

// peerSizesOf is 20,000 one-row transactions and 2 of 100,000 rows in
// short mode, the hand measurement's 200,000 and 20 with -full, both
// scaled by Config.Scale; rounds is Config.PeerRounds (zero: 3).
func peerSizesOf(cfg Config) peerSizes {
	ps := peerSizes{smallTx: 20_000, bulkTx: 2, bulkRows: 100_000, rounds: cfg.PeerRounds}
	if cfg.Full {
		ps.smallTx, ps.bulkTx = 200_000, 20
	}
	if cfg.Scale > 0 && cfg.Scale != 1 {
		ps.smallTx = max(2, int(float64(ps.smallTx)*cfg.Scale))
		ps.bulkRows = max(1, int(float64(ps.bulkRows)*cfg.Scale))
	}
	if ps.rounds <= 0 {
		ps.rounds = 3
	}
	return ps
}

// peerTool is one side of the peer comparison.
type peerTool struct {
	name  string // as in the rows
	drain func(ctx context.Context, slot string, r walRange, timeout time.Duration) (peerDrain, error)
}

// peerDrain is one tool's drain of the range into a file.
type peerDrain struct {
	elapsed time.Duration // start of the process(es) until the file held every change
	cpu     time.Duration // user + system time of the tool's processes, start to exit
}

// conduitVariant is one way of running Conduit.
type conduitVariant struct {
	name string
	// args are added to `conduit run`; settings to both connectors'.
	args     []string
	settings map[string]string
}

// conduitVariants: Conduit as it comes, and its v2 pipeline
// architecture (a preview in v0.14, without its byte metrics) with the
// SDK's batching on both connectors.
var conduitVariants = []conduitVariant{
	{name: "Conduit " + ConduitVersion + " (defaults)"},
	{name: "Conduit " + ConduitVersion + " (pipeline v2, batches of 10,000)",
		args:     []string{"--preview.pipeline-arch-v2", "--preview.pipeline-arch-v2-disable-metrics"},
		settings: map[string]string{"sdk.batch.size": "10000", "sdk.batch.delay": "100ms"}},
}

// peerRows writes the peer workload and drains it round after round with
// pg_recvlogical (protocol 1, as Conduit's source asks for), pgq with a
// consumer writing Debezium lines (one per change, as Conduit writes one
// OpenCDC line per change) and each Conduit variant. When Conduit cannot
// be built or run, its rows say why and the others stand.
func (e *env) peerRows(ctx context.Context) ([]Row, error) {
	ps := peerSizesOf(e.cfg)
	r, err := e.runPeerWorkload(ctx, ps)
	defer e.dropSlot(ctx, peerTemplate)
	if err != nil {
		return nil, err
	}
	e.log.Info("peer workload written", "changes", r.changes, "txs", r.txs)
	tools := []peerTool{
		{name: "pg_recvlogical v1", drain: func(ctx context.Context, slot string, r walRange, _ time.Duration) (peerDrain, error) {
			d, err := e.drainRecvLogical(ctx, slot, false, r)
			return peerDrain{elapsed: d.elapsed, cpu: d.cpu}, err
		}},
		{name: "pgq", drain: e.drainPGQToFile},
	}
	bin, berr := e.conduitBinary(ctx)
	if berr == nil {
		for _, v := range conduitVariants {
			tools = append(tools, peerTool{name: v.name, drain: func(ctx context.Context, slot string, r walRange, timeout time.Duration) (peerDrain, error) {
				return e.drainConduit(ctx, bin, v, slot, r, timeout)
			}})
		}
	}
	got := make([][]peerDrain, len(tools))
	failed := make([]error, len(tools))
	for round := range ps.rounds {
		var timeout time.Duration
		for i, t := range tools {
			if failed[i] != nil {
				continue
			}
			slot := fmt.Sprintf("pgqbench_peer_%d", i)
			d, err := t.drain(ctx, slot, r, max(time.Minute, timeout))
			e.dropSlot(ctx, slot)
			if err != nil {
				if ctx.Err() != nil || i < 2 {
					return nil, fmt.Errorf("peer round %d, %s: %w", round+1, t.name, err)
				}
				failed[i] = err
				continue
			}
			if i == 0 {
				// A peer 40× slower than pg_recvlogical is taken as stuck.
				timeout = time.Minute + 40*d.elapsed
			}
			e.log.Info("peer drained", "round", round+1, "tool", t.name, "took", d.elapsed.Round(time.Millisecond), "cpu", d.cpu.Round(time.Millisecond))
			got[i] = append(got[i], d)
		}
	}
	return peerTable(ps, r, tools, got, failed, berr), nil
}

// peerTable turns the rounds into rows: pgq against pg_recvlogical (no
// target: pgq also journals, fsyncs and serves the consumer) and each
// Conduit variant against pgq (target: pgq is faster).
func peerTable(ps peerSizes, r walRange, tools []peerTool, got [][]peerDrain, failed []error, berr error) []Row {
	work := fmt.Sprintf("%d changes: %d one-row tx + %d tx of %d rows, %d rounds", r.changes, ps.smallTx, ps.bulkTx, ps.bulkRows, ps.rounds)
	pgq := got[1]
	rows := []Row{peerRow("peer: pgq + consumer → file vs pg_recvlogical → file", tools[0].name, r.changes, pgq, got[0], "", work)}
	if berr != nil {
		for _, v := range conduitVariants {
			rows = append(rows, notMeasured("peer: pgq + consumer → file vs "+v.name+" → file", "≥ 1.0× Conduit", "Conduit not built: "+trimErr(berr)))
		}
		return rows
	}
	for i := 2; i < len(tools); i++ {
		metric := "peer: pgq + consumer → file vs " + tools[i].name + " → file"
		if failed[i] != nil {
			rows = append(rows, notMeasured(metric, "≥ 1.0× Conduit", fmt.Sprintf("round %d (after %d complete): %s", len(got[i])+1, len(got[i]), trimErr(failed[i]))))
			continue
		}
		rows = append(rows, peerRow(metric, tools[i].name, r.changes, pgq, got[i], "≥ 1.0× Conduit", work))
	}
	return rows
}

// peerRow compares pgq's drains with a reference tool's of the same
// rounds: rates from the medians, the wall-time and CPU-time ratios taken
// round by round (reference / pgq: above 1 pgq is faster or cheaper),
// each with its spread.
func peerRow(metric, refName string, changes int, pgq, ref []peerDrain, target, work string) Row {
	n := min(len(pgq), len(ref))
	if n == 0 {
		return notMeasured(metric, target, "no round completed")
	}
	wall, cpu, pt, rt, pc, rc := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		pt[i], rt[i] = pgq[i].elapsed.Seconds(), ref[i].elapsed.Seconds()
		pc[i], rc[i] = pgq[i].cpu.Seconds(), ref[i].cpu.Seconds()
		wall[i], cpu[i] = rt[i]/pt[i], rc[i]/max(pc[i], 1e-3)
	}
	ws, ps, rs := spreadOf(wall), spreadOf(pt), spreadOf(rt)
	row := Row{Metric: metric, Unit: "changes/s", PGQ: f64(float64(changes) / ps.med), Reference: f64(float64(changes) / rs.med),
		RefName: refName, Ratio: f64(ws.med), Target: target, Status: Info}
	if target != "" {
		row.check(ws.lo >= 1)
	}
	row.Note = fmt.Sprintf("%s; wall pgq %s s, ref %s s, ref/pgq %s; CPU pgq %s s, ref %s s, ref/pgq %s (median [min–max])",
		work, ps.format(1), rs.format(1), ws.format(1), spreadOf(pc).format(1), spreadOf(rc).format(1), spreadOf(cpu).format(1))
	return row
}

// runPeerWorkload creates the peer template slot and writes the workload
// after it: the one-row transactions (pgbench, 2 clients), the bulk
// transactions, and a marker that closes the range.
func (e *env) runPeerWorkload(ctx context.Context, ps peerSizes) (walRange, error) {
	r := walRange{template: peerTemplate}
	if _, err := e.conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", peerTemplate); err != nil {
		return r, fmt.Errorf("create peer template slot: %w", err)
	}
	if _, err := e.pgbench(ctx, latencyScript, "-c", "2", "-j", "2", "-t", fmt.Sprint(ps.smallTx/2)); err != nil {
		return r, err
	}
	for range ps.bulkTx {
		if err := e.bulkInsert(ctx, ps.bulkRows); err != nil {
			return r, err
		}
	}
	var err error
	if r.lastTx, r.endpos, err = e.markerCommit(ctx); err != nil {
		return r, err
	}
	small := ps.smallTx / 2 * 2
	r.changes, r.txs = small+ps.bulkTx*ps.bulkRows+1, small+ps.bulkTx+1
	return r, nil
}

// bulkInsert commits one transaction of rows inserts, synchronously (the
// cluster runs with synchronous_commit = off).
func (e *env) bulkInsert(ctx context.Context, rows int) error {
	tx, err := e.conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("bulk transaction: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
		return fmt.Errorf("bulk transaction: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO bench_events (account, amount, note)
		SELECT g % 1000, g * 0.01, 'bulk row ' || g FROM generate_series(1, $1::int) g`, rows); err != nil {
		return fmt.Errorf("bulk insert: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("bulk commit: %w", err)
	}
	return nil
}

// drainPGQToFile copies the range's template into slot, runs bin/pgq on
// it with a group created as soon as its API answers, and `pgq consume
// --follow --format debezium` writing one line per change into a file,
// until the file holds every change of the range.
func (e *env) drainPGQToFile(ctx context.Context, slot string, r walRange, timeout time.Duration) (d peerDrain, err error) {
	if err := e.copySlot(ctx, r.template, slot); err != nil {
		return d, err
	}
	p, err := e.startPGQ(ctx, "pgq-peer", slot)
	if err != nil {
		return d, err
	}
	var cons *exec.Cmd
	defer func() {
		if cons != nil {
			d.cpu += stopChild(cons, 10*time.Second)
		}
		_ = p.stop()
		if ps := p.cmd.ProcessState; ps != nil {
			d.cpu += ps.UserTime() + ps.SystemTime()
		}
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if err = p.createGroup(ctx, "peer"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return d, fmt.Errorf("pgq API: %w", err)
		}
	}
	out := filepath.Join(e.cfg.WorkDir, "pgq-peer.jsonl")
	defer os.Remove(out)
	cons = exec.Command(e.cfg.PGQBin, "consume", "--addr", p.addr, "--group", "peer", "--follow", "--max", "1000", "--format", "debezium")
	if err := startToFile(cons, out, filepath.Join(e.cfg.WorkDir, "pgq-peer-consume.log")); err != nil {
		cons = nil
		return d, err
	}
	at, err := waitLines(ctx, out, r.changes, timeout, p.done)
	d.elapsed = at.Sub(p.started)
	return d, err
}

// drainConduit copies the range's template into slot and runs Conduit
// with one pipeline: its built-in postgres source (logical replication
// only, no snapshot) on slot and the publication every tool reads, into
// its built-in file destination, until the file holds every change.
func (e *env) drainConduit(ctx context.Context, bin string, v conduitVariant, slot string, r walRange, timeout time.Duration) (peerDrain, error) {
	var d peerDrain
	if err := e.copySlot(ctx, r.template, slot); err != nil {
		return d, err
	}
	dir := filepath.Join(e.cfg.WorkDir, "conduit-peer")
	if err := os.RemoveAll(dir); err != nil {
		return d, fmt.Errorf("conduit dir: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "pipelines"), 0o755); err != nil {
		return d, fmt.Errorf("conduit dir: %w", err)
	}
	out := filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(filepath.Join(dir, "pipelines", "peer.yaml"), []byte(conduitPipeline(e.url, slot, out, v.settings)), 0o644); err != nil {
		return d, fmt.Errorf("conduit pipeline: %w", err)
	}
	// Conduit puts its state (Badger), plugin dirs and pipelines under
	// its working directory; its API is off, so no port is taken.
	cmd := exec.Command(bin, append([]string{"run", "--api.enabled=false", "--log.level", "warn", "--log.format", "json"}, v.args...)...)
	cmd.Dir = dir
	logPath := filepath.Join(e.cfg.WorkDir, "conduit-peer.log")
	start := time.Now()
	if err := startToFile(cmd, "", logPath); err != nil {
		return d, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	at, err := waitLines(ctx, out, r.changes, timeout, done)
	d.elapsed = at.Sub(start)
	d.cpu = stopStarted(cmd, done, 30*time.Second)
	if err != nil {
		b, _ := os.ReadFile(logPath)
		return d, fmt.Errorf("%w (log: %s)", err, lastLines(b, 3))
	}
	return d, nil
}

// conduitPipeline is the pipeline configuration file (version 2.2).
func conduitPipeline(url, slot, out string, settings map[string]string) string {
	var extra strings.Builder
	for _, k := range []string{"sdk.batch.size", "sdk.batch.delay"} {
		if v, ok := settings[k]; ok {
			fmt.Fprintf(&extra, "          %s: %q\n", k, v)
		}
	}
	return fmt.Sprintf(`version: "2.2"
pipelines:
  - id: peer
    status: running
    connectors:
      - id: pg
        type: source
        plugin: builtin:postgres
        settings:
          url: %q
          tables: bench_events
          snapshotMode: never
          cdcMode: logrepl
          logrepl.publicationName: %s
          logrepl.slotName: %s
          logrepl.autoCleanup: "false"
%s      - id: file
        type: destination
        plugin: builtin:file
        settings:
          path: %q
%s`, url, publication, slot, extra.String(), out, extra.String())
}

// conduitBinary returns Config.ConduitBin, or builds Conduit from the
// peer module into the work directory when it is empty.
func (e *env) conduitBinary(ctx context.Context) (string, error) {
	if e.cfg.ConduitBin != "" {
		if _, err := os.Stat(e.cfg.ConduitBin); err != nil {
			return "", fmt.Errorf("conduit binary: %w", err)
		}
		return e.cfg.ConduitBin, nil
	}
	bin := filepath.Join(e.cfg.WorkDir, "conduit")
	e.log.Info("building Conduit from its module", "module", peerModule, "version", ConduitVersion)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/conduitio/conduit/cmd/conduit")
	cmd.Dir = peerModule
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build in %s: %w: %s", peerModule, err, lastLines(b, 3))
	}
	return bin, nil
}

// startToFile starts cmd with stdout into out (none when empty) and
// stderr (and stdout when out is empty) into logPath.
func startToFile(cmd *exec.Cmd, out, logPath string) error {
	logf, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = logf, logf
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return fmt.Errorf("output file: %w", err)
		}
		defer f.Close()
		cmd.Stdout = f
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", filepath.Base(cmd.Path), err)
	}
	return nil
}

// stopChild ends a child started with startToFile and returns its CPU
// time.
func stopChild(cmd *exec.Cmd, grace time.Duration) time.Duration {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return stopStarted(cmd, done, grace)
}

// stopStarted sends SIGTERM to a child whose Wait reports on done, kills
// it after grace, and returns its user + system time.
func stopStarted(cmd *exec.Cmd, done chan error, grace time.Duration) time.Duration {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
	if ps := cmd.ProcessState; ps != nil {
		return ps.UserTime() + ps.SystemTime()
	}
	return 0
}

// waitLines polls the file at path every 10 ms, reading only what was
// appended, until it holds want lines, and returns when that was first
// seen. It fails when the producer exits first (exited reports it) or
// after timeout.
func waitLines(ctx context.Context, path string, want int, timeout time.Duration, exited chan error) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	var n lineCounter
	var off int64
	for {
		if f, err := os.Open(path); err == nil {
			m, _ := io.Copy(&n, io.NewSectionReader(f, off, 1<<62))
			off += m
			f.Close()
		}
		now := time.Now()
		if int(n) >= want {
			return now, nil
		}
		select {
		case err := <-exited:
			exited <- err
			return now, fmt.Errorf("exited with %d of %d lines written: %v", n, want, err)
		case <-ctx.Done():
			return now, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if now.After(deadline) {
			return now, fmt.Errorf("%d of %d lines after %s", n, want, timeout)
		}
	}
}
