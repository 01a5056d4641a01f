package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/journal"
)

// templateSlot starts before the small transactions (the mix and the
// small-only range); bulkTemplateSlot starts after them (the bulk-only
// range).
const (
	templateSlot     = "pgqbench_template"
	bulkTemplateSlot = "pgqbench_template_bulk"
)

// workload is the WAL range every ingest drain decodes.
type workload struct {
	changes  int     // changes in the range (small transactions + bulk rows)
	txs      int     // committed transactions
	lastTx   pgq.LSN // insert position just before the last commit record
	endpos   pgq.LSN // flushed WAL end after the last commit (pg_recvlogical --endpos)
	duration time.Duration
	template string // the slot every drain copies; "" means templateSlot
	// small ends after the small transactions (one 1-row marker
	// transaction closes them); bulk is the bulk transaction alone, read
	// from bulkTemplateSlot.
	small, bulk walRange
}

// walRange is the part of the workload one drain decodes: from where the
// template slot starts to the commit before lastTx.
type walRange struct {
	template string
	lastTx   pgq.LSN
	endpos   pgq.LSN
	changes  int
	txs      int
}

// markerCommit commits one row with synchronous commit and returns the
// insert position just before its commit record and the flushed WAL end
// after it.
func (e *env) markerCommit(ctx context.Context) (lastTx, endpos pgq.LSN, err error) {
	tx, err := e.conn.Begin(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("marker transaction: %w", err)
	}
	defer tx.Rollback(ctx)
	var s string
	if _, err = tx.Exec(ctx, "SET LOCAL synchronous_commit = on"); err == nil {
		_, err = tx.Exec(ctx, "INSERT INTO bench_events (account, amount, note) VALUES (0, 0, 'marker')")
	}
	if err == nil {
		err = tx.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("marker transaction: %w", err)
	}
	if lastTx, err = pgq.ParseLSN(s); err != nil {
		return 0, 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, 0, fmt.Errorf("marker commit: %w", err)
	}
	endpos, err = e.currentLSN(ctx)
	return lastTx, endpos, err
}

// templateName is the slot the drains of w copy.
func (w workload) templateName() string {
	if w.template == "" {
		return templateSlot
	}
	return w.template
}

// whole is all of w as one range.
func (w workload) whole() walRange {
	return walRange{template: w.templateName(), lastTx: w.lastTx, endpos: w.endpos, changes: w.changes, txs: w.txs}
}

// runWorkload creates the template slot, then writes the many small
// transactions (pgbench) and one bulk transaction. between runs after the
// small transactions, before the bulk one: the small-only drains happen
// there, with nothing after the range in the WAL, as for every other
// drain (pg_recvlogical --endpos then stops at the server's keepalive
// instead of waiting for a message past it). Its time is not part of
// w.duration.
func (e *env) runWorkload(ctx context.Context, between func(small walRange) error) (workload, error) {
	var w workload
	if _, err := e.conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", templateSlot); err != nil {
		return w, fmt.Errorf("create template slot: %w", err)
	}
	start := time.Now()
	if _, err := e.pgbench(ctx, smallTxScript, "-c", fmt.Sprint(e.sz.clients), "-j", fmt.Sprint(e.sz.clients), "-t", fmt.Sprint(e.sz.txPerClient)); err != nil {
		return w, err
	}
	nSmall := e.sz.clients * e.sz.txPerClient
	w.small = walRange{template: templateSlot, changes: nSmall*changesPerSmallTx + 1, txs: nSmall + 1}
	var err error
	if w.small.lastTx, w.small.endpos, err = e.markerCommit(ctx); err != nil {
		return w, err
	}
	betweenStart := time.Now()
	if err := between(w.small); err != nil {
		return w, err
	}
	start = start.Add(time.Since(betweenStart))
	if _, err := e.conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", bulkTemplateSlot); err != nil {
		return w, fmt.Errorf("create bulk template slot: %w", err)
	}
	tx, err := e.conn.Begin(ctx)
	if err != nil {
		return w, fmt.Errorf("bulk transaction: %w", err)
	}
	defer tx.Rollback(ctx)
	// A synchronous commit flushes the WAL, so --endpos below is reachable
	// at once (the cluster runs with synchronous_commit = off).
	if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
		return w, fmt.Errorf("bulk transaction: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO bench_events (account, amount, note)
		SELECT g % 1000, g * 0.01, 'bulk row ' || g FROM generate_series(1, $1::int) g`, e.sz.bulkRows); err != nil {
		return w, fmt.Errorf("bulk insert: %w", err)
	}
	var s string
	if err := tx.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		return w, fmt.Errorf("bulk transaction: %w", err)
	}
	if w.lastTx, err = pgq.ParseLSN(s); err != nil {
		return w, err
	}
	if err := tx.Commit(ctx); err != nil {
		return w, fmt.Errorf("bulk commit: %w", err)
	}
	w.duration = time.Since(start)
	if w.endpos, err = e.currentLSN(ctx); err != nil {
		return w, err
	}
	w.bulk = walRange{template: bulkTemplateSlot, lastTx: w.lastTx, endpos: w.endpos, changes: e.sz.bulkRows, txs: 1}
	w.txs = w.small.txs + 1
	w.changes = w.small.changes + e.sz.bulkRows
	return w, nil
}

// recvDrain is one pg_recvlogical drain.
type recvDrain struct {
	elapsed  time.Duration
	outBytes int64
	cpu      time.Duration // user + system time of pg_recvlogical
}

// drainRecvLogical copies the range's template into slot and reads it
// with pg_recvlogical up to r.endpos.
func (e *env) drainRecvLogical(ctx context.Context, slot string, streaming bool, r walRange) (recvDrain, error) {
	var d recvDrain
	if err := e.copySlot(ctx, r.template, slot); err != nil {
		return d, err
	}
	defer e.dropSlot(ctx, slot)
	out := filepath.Join(e.cfg.WorkDir, slot+".out")
	args := []string{"-d", e.url, "--slot", slot, "--start", "--no-loop", "--endpos", r.endpos.String(), "-f", out,
		"-o", "publication_names=" + publication}
	if streaming {
		args = append(args, "-o", "proto_version=2", "-o", "streaming=on")
	} else {
		args = append(args, "-o", "proto_version=1")
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, filepath.Join(e.cluster.BinDir, "pg_recvlogical"), args...)
	start := time.Now()
	b, err := cmd.CombinedOutput()
	d.elapsed = time.Since(start)
	if err != nil {
		return d, fmt.Errorf("pg_recvlogical: %w: %s", err, lastLines(b, 5))
	}
	d.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	fi, err := os.Stat(out)
	if err != nil {
		return d, fmt.Errorf("pg_recvlogical output: %w", err)
	}
	d.outBytes = fi.Size()
	_ = os.Remove(out)
	return d, nil
}

// pgqDrain is one pgq drain.
type pgqDrain struct {
	elapsed       time.Duration
	status        pgqStatus
	changes       float64 // pgq_changes_written_total
	pgoutputBytes float64 // pgq_pgoutput_bytes_received_total
	journalBytes  int64
	journalDir    string
	cpu           time.Duration // user + system time of pgq, start to stop
	diskWait      float64       // s ingest waited for fsyncs (pgq_journal_submit_wait_seconds_total)
	peakRSS       int64         // largest VmRSS of pgq sampled every 20 ms until the range was journaled
}

// drainPGQ copies the range's template into slot and runs bin/pgq on it
// until the range's last transaction is journaled (fsynced).
func (e *env) drainPGQ(ctx context.Context, name, slot string, r walRange) (pgqDrain, error) {
	var d pgqDrain
	if err := e.copySlot(ctx, r.template, slot); err != nil {
		return d, err
	}
	p, err := e.startPGQ(ctx, name, slot)
	if err != nil {
		return d, err
	}
	rss := p.samplePeakRSS(20 * time.Millisecond)
	at, st, werr := p.waitJournaled(ctx, r.lastTx, 10*time.Minute)
	d.elapsed, d.status, d.peakRSS = at.Sub(p.started), st, rss()
	if werr == nil {
		// The status can show the last transaction journaled a moment
		// before the counter of written changes has counted it (older
		// builds update the two apart): read it until it holds the
		// range's changes or a few seconds passed, then take what it says.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			d.changes, werr = p.metric(ctx, "pgq_changes_written_total")
			if werr != nil || int(d.changes) >= r.changes || time.Now().After(deadline) {
				break
			}
		}
	}
	if werr == nil {
		d.pgoutputBytes, werr = p.metric(ctx, "pgq_pgoutput_bytes_received_total")
	}
	if werr == nil {
		// Absent from builds before it (-pgq-before): then zero.
		d.diskWait, _ = p.metric(ctx, "pgq_journal_submit_wait_seconds_total")
	}
	serr := p.stop()
	if ps := p.cmd.ProcessState; ps != nil {
		d.cpu = ps.UserTime() + ps.SystemTime()
	}
	e.dropSlot(ctx, slot)
	if err := errors.Join(werr, serr); err != nil {
		return d, fmt.Errorf("pgq drain (log %s.log): %w", name, err)
	}
	d.journalDir = filepath.Join(p.dataDir, "journal")
	d.journalBytes, err = dirBytes(d.journalDir, func(n string) bool { return n != journal.LockFile })
	if err != nil {
		return d, fmt.Errorf("journal size: %w", err)
	}
	return d, nil
}

// ingestRows runs item 1 (ingest vs pg_recvlogical, streaming off and on),
// item 5's bytes per change and item 4's in-process replay.
func (e *env) ingestRows(ctx context.Context) ([]Row, error) {
	e.log.Info("workload: small transactions + one bulk transaction", "small_tx", e.sz.clients*e.sz.txPerClient, "bulk_rows", e.sz.bulkRows)
	var rows []Row
	w, err := e.runWorkload(ctx, func(small walRange) error {
		r, err := e.splitRow(ctx, "small", "ingest throughput, small transactions only", small)
		if err == nil {
			rows = append(rows, r)
		}
		return err
	})
	if err != nil {
		return rows, err
	}
	e.log.Info("workload written", "changes", w.changes, "took", w.duration.Round(time.Millisecond), "endpos", w.endpos)
	defer e.dropSlot(ctx, templateSlot)
	defer e.dropSlot(ctx, bulkTemplateSlot)
	mix := walRange{template: templateSlot, lastTx: w.lastTx, endpos: w.endpos, changes: w.changes, txs: w.txs}

	var first pgqDrain
	var recvOff recvDrain
	for i, streaming := range []bool{false, true} {
		mode := map[bool]string{false: "off", true: "on"}[streaming]
		ref, err := e.drainRecvLogical(ctx, "pgqbench_recv_"+mode, streaming, mix)
		if err != nil {
			return rows, err
		}
		e.log.Info("pg_recvlogical drained", "streaming", mode, "took", ref.elapsed.Round(time.Millisecond), "bytes", ref.outBytes)
		got, err := e.drainPGQ(ctx, "pgq-ingest-"+mode, "pgqbench_pgq_"+mode, mix)
		if err != nil {
			return rows, err
		}
		e.log.Info("pgq drained", "streaming", mode, "took", got.elapsed.Round(time.Millisecond), "changes", got.changes)
		if i == 0 {
			first, recvOff = got, ref
		}
		pq := float64(w.changes) / got.elapsed.Seconds()
		rf := float64(w.changes) / ref.elapsed.Seconds()
		r := Row{Metric: "ingest throughput, pg_recvlogical streaming " + mode, Unit: "changes/s",
			PGQ: f64(pq), Reference: f64(rf), RefName: refName(streaming), Ratio: f64(pq / rf), Target: "≥ 0.95× ref, fsync per group commit"}
		r.check(pq/rf >= 0.95)
		r.Note = fmt.Sprintf("%d changes in %d tx; pgq %.2fs (proto %d, streaming %v) vs ref %.2fs; both include connect",
			w.changes, w.txs, got.elapsed.Seconds(), got.status.ProtoVersion, got.status.Streaming, ref.elapsed.Seconds())
		if int(got.changes) != w.changes {
			r.Status = Fail
			r.Note = joinNotes(r.Note, fmt.Sprintf("pgq journaled %d changes, want %d", int(got.changes), w.changes))
		}
		rows = append(rows, r)
	}

	// Footprint: journal bytes per change against pgoutput for the same
	// data (pg_recvlogical proto 1 output: payloads plus one newline per
	// message).
	jb := float64(first.journalBytes) / float64(w.changes)
	pb := float64(recvOff.outBytes) / float64(w.changes)
	fr := Row{Metric: "journal bytes per change", Unit: "B", PGQ: f64(jb), Reference: f64(pb), RefName: "pgoutput",
		Ratio: f64(jb / pb), Target: "≤ 1.0× pgoutput"}
	fr.check(jb/pb <= 1.0)
	fr.Note = fmt.Sprintf("journal %d B; pg_recvlogical proto-1 output %d B; payload bytes pgq received %.0f B", first.journalBytes, recvOff.outBytes, first.pgoutputBytes)
	rows = append(rows, fr)

	rows = append(rows, e.readerRow(first.journalDir, w.changes))
	rows = append(rows, e.holdRow(ctx, mix))

	r, err := e.splitRow(ctx, "bulk", "ingest throughput, one bulk transaction (streamed)", w.bulk)
	if err != nil {
		return rows, err
	}
	rows = append(rows, r)

	if e.cfg.CPUProfile != "" {
		pr := map[string]walRange{"small": w.small, "bulk": w.bulk}[e.cfg.ProfileRange]
		if pr.template == "" {
			e.cfg.ProfileRange, pr = "mix", mix
		}
		r, err := e.profiledDrain(ctx, pr)
		if err != nil {
			return rows, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func refName(streaming bool) string {
	if streaming {
		return "pg_recvlogical v2 streaming"
	}
	return "pg_recvlogical v1"
}

// readerRow replays the journal in-process with journal.Reader (item 4).
// It repeats passes over the drained journal until at least sz.replay
// changes were read, so the figure covers the same change count in short
// and full mode.
func (e *env) readerRow(dir string, perPass int) Row {
	const metric = "consumer replay, journal.Reader in-process"
	const target = "≥ 1,000,000 changes/s"
	j, err := journal.Open(journal.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return notMeasured(metric, target, "open journal: "+err.Error())
	}
	defer j.Close()
	var changes, records int
	start := time.Now()
	passes := 0
	for changes < e.sz.replay {
		passes++
		r := j.NewReader(0)
		for {
			tx, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return notMeasured(metric, target, "read journal: "+err.Error())
			}
			records++
			changes += len(tx.Changes)
		}
		if passes == 1 && changes == 0 {
			return notMeasured(metric, target, "journal is empty")
		}
	}
	el := time.Since(start)
	v := float64(changes) / el.Seconds()
	row := Row{Metric: metric, Unit: "changes/s", PGQ: f64(v), Target: target}
	row.check(v >= 1e6)
	row.Note = fmt.Sprintf("%d changes (%d records, %d passes over a %d-change journal) in %.2fs, decoded to pgq.Transaction", changes, records, passes, perPass, el.Seconds())
	return row
}

// trimErr shortens an error for a table note.
func trimErr(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
