package benchmarks

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/journal"
)

const footprintTemplate = "pgqbench_fp_template"

// footprintScript is one single-row transaction, as latencyScript but
// with its own note.
const footprintScript = `\set a random(1, 1000)
INSERT INTO bench_events (account, amount, note) VALUES (:a, :a * 0.01, 'footprint');
`

// runFootprintWorkload creates the footprint template slot and writes
// sz.footprintTx single-row transactions (pgbench), then one more whose
// synchronous commit makes the range's end flushed.
func (e *env) runFootprintWorkload(ctx context.Context) (workload, error) {
	w := workload{template: footprintTemplate}
	if _, err := e.conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", footprintTemplate); err != nil {
		return w, fmt.Errorf("create footprint slot: %w", err)
	}
	start := time.Now()
	per := max(e.sz.footprintTx/e.sz.clients, 1)
	if _, err := e.pgbench(ctx, footprintScript, "-c", fmt.Sprint(e.sz.clients), "-j", fmt.Sprint(e.sz.clients), "-t", fmt.Sprint(per)); err != nil {
		return w, err
	}
	tx, err := e.conn.Begin(ctx)
	if err != nil {
		return w, fmt.Errorf("footprint: last transaction: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = on"); err != nil {
		return w, fmt.Errorf("footprint: last transaction: %w", err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO bench_events (account, amount, note) VALUES (1, 0.01, 'footprint')"); err != nil {
		return w, fmt.Errorf("footprint: last transaction: %w", err)
	}
	var s string
	if err := tx.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		return w, fmt.Errorf("footprint: last transaction: %w", err)
	}
	if w.lastTx, err = pgq.ParseLSN(s); err != nil {
		return w, err
	}
	if err := tx.Commit(ctx); err != nil {
		return w, fmt.Errorf("footprint: last commit: %w", err)
	}
	w.duration = time.Since(start)
	if w.endpos, err = e.currentLSN(ctx); err != nil {
		return w, err
	}
	w.txs = per*e.sz.clients + 1
	w.changes = w.txs
	return w, nil
}

// footprintRows measures the data directory (journal and index, apparent
// size after a clean stop) per change on single-row transactions, against
// the pgoutput bytes of the same WAL range: what pg_recvlogical writes with
// proto_version 1 (each message's payload plus a newline).
func (e *env) footprintRows(ctx context.Context) []Row {
	const (
		dataMetric    = "data dir bytes per change (journal + index), 1-row tx"
		journalMetric = "journal bytes per change, 1-row tx"
		indexMetric   = "index bytes per change, 1-row tx"
		target        = "≤ 1.0× pgoutput"
	)
	fail := func(err error) []Row {
		return []Row{notMeasured(dataMetric, target, trimErr(err))}
	}
	e.log.Info("footprint: single-row transactions", "tx", e.sz.footprintTx)
	w, err := e.runFootprintWorkload(ctx)
	defer e.dropSlot(ctx, footprintTemplate)
	if err != nil {
		return fail(err)
	}
	ref, err := e.drainRecvLogical(ctx, "pgqbench_fp_recv", false, w.whole())
	if err != nil {
		return fail(err)
	}
	got, err := e.drainPGQ(ctx, "pgq-footprint", "pgqbench_fp_pgq", w.whole())
	if err != nil {
		return fail(err)
	}
	indexBytes, err := dirBytes(filepath.Join(filepath.Dir(got.journalDir), "index"), func(n string) bool { return n != "LOCK" })
	if err != nil {
		return fail(fmt.Errorf("index size: %w", err))
	}
	n := float64(w.changes)
	pb := float64(ref.outBytes) / n
	jb := float64(got.journalBytes) / n
	ib := float64(indexBytes) / n
	data := Row{Metric: dataMetric, Unit: "B", PGQ: f64(jb + ib), Reference: f64(pb), RefName: "pgoutput v1",
		Ratio: f64((jb + ib) / pb), Target: target}
	data.check((jb+ib)/pb <= 1.0)
	data.Note = fmt.Sprintf("%d tx of 1 insert; journal %d B + index %d B; pg_recvlogical proto-1 output %d B (payloads + 1 newline per message); payload bytes pgq received %.0f B",
		w.txs, got.journalBytes, indexBytes, ref.outBytes, got.pgoutputBytes)
	if int(got.changes) != w.changes {
		data.Status = Fail
		data.Note = joinNotes(data.Note, fmt.Sprintf("pgq journaled %d changes, want %d", int(got.changes), w.changes))
	}
	jr := Row{Metric: journalMetric, Unit: "B", PGQ: f64(jb), Reference: f64(pb), RefName: "pgoutput v1", Ratio: f64(jb / pb),
		Target: "part of the row above", Status: Info, Note: journalNote(got.journalDir)}
	ir := Row{Metric: indexMetric, Unit: "B", PGQ: f64(ib), Reference: f64(pb), RefName: "pgoutput v1", Ratio: f64(ib / pb),
		Target: "part of the row above", Status: Info, Note: "Pebble directory, every file but LOCK"}
	return []Row{data, jr, ir}
}

// journalNote breaks the journal's bytes down: records, their mean
// encoded size, and the segment framing.
func journalNote(dir string) string {
	var records, recBytes int64
	err := journal.ScanSized(dir, 0, func(_ *pgq.Transaction, size int) error {
		records++
		recBytes += int64(size)
		return nil
	})
	if err != nil || records == 0 {
		return fmt.Sprintf("no breakdown: %v", err)
	}
	total, err := dirBytes(dir, func(n string) bool { return n != journal.LockFile })
	if err != nil {
		return fmt.Sprintf("no breakdown: %v", err)
	}
	return fmt.Sprintf("%d records, mean record %.1f B, segment framing (length prefixes) %.1f B per record",
		records, float64(recBytes)/float64(records), float64(total-recBytes)/float64(records))
}
