package benchmarks

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// splitReps is how many times each split row drains its range with each
// tool (alternately); the row compares the medians, so one drain slowed
// by the shared machine does not decide it.
const splitReps = 5

// splitRow measures one half of the ingest workload on its own against
// pg_recvlogical with proto_version 2 and streaming on: the many small
// transactions (templateSlot up to the marker commit) or the one bulk
// transaction, streamed in progress by the server (bulkTemplateSlot to
// the end).
func (e *env) splitRow(ctx context.Context, name, metric string, r walRange) (Row, error) {
	// Every drain has a slot of its own: the walsender of the previous
	// one may still hold its slot for a moment after the reader exits.
	var refs []recvDrain
	var gots, befores []pgqDrain
	var refWS, pgqWS string
	for i := range splitReps {
		ws, err := e.sampleWalsenders(ctx)
		if err != nil {
			return Row{}, err
		}
		e.settleDisk()
		ref, err := e.drainRecvLogical(ctx, fmt.Sprintf("pgqbench_recv_%s_%d", name, i), true, r)
		if w := ws.stop(); i == 0 {
			refWS = w
		}
		if err != nil {
			return Row{}, err
		}
		if ws, err = e.sampleWalsenders(ctx); err != nil {
			return Row{}, err
		}
		e.settleDisk()
		got, err := e.drainPGQ(ctx, fmt.Sprintf("pgq-ingest-%s-%d", name, i), fmt.Sprintf("pgqbench_pgq_%s_%d", name, i), r)
		if w := ws.stop(); i == 0 {
			pgqWS = w
		}
		if err != nil {
			return Row{}, err
		}
		e.log.Info("drained", "range", name, "pg_recvlogical", ref.elapsed.Round(time.Millisecond), "pgq", got.elapsed.Round(time.Millisecond), "changes", got.changes)
		refs, gots = append(refs, ref), append(gots, got)
		if e.cfg.PGQBefore != "" {
			b, err := e.drainPGQBin(ctx, e.cfg.PGQBefore, fmt.Sprintf("pgq-before-%s-%d", name, i), fmt.Sprintf("pgqbench_pgqb_%s_%d", name, i), r)
			if err != nil {
				return Row{}, fmt.Errorf("-pgq-before: %w", err)
			}
			e.log.Info("drained", "range", name, "pgq_before", b.elapsed.Round(time.Millisecond))
			befores = append(befores, b)
		}
	}
	slices.SortFunc(refs, func(a, b recvDrain) int { return cmp.Compare(a.elapsed, b.elapsed) })
	slices.SortFunc(gots, func(a, b pgqDrain) int { return cmp.Compare(a.elapsed, b.elapsed) })
	row := throughputRow(metric, r, gots[len(gots)/2], refs[len(refs)/2])
	var ts, waits []string
	for i := range refs {
		ts = append(ts, fmt.Sprintf("%.2f/%.2f", gots[i].elapsed.Seconds(), refs[i].elapsed.Seconds()))
		waits = append(waits, fmt.Sprintf("%.2f", gots[i].diskWait))
	}
	row.Note = joinNotes(row.Note, fmt.Sprintf("medians of %d drains each; sorted pgq/ref s: %s; pgq waited for its fsyncs (s, same order): %s",
		splitReps, strings.Join(ts, " "), strings.Join(waits, " ")))
	row.Note = joinNotes(row.Note, "first drains: pgq: "+pgqWS, "pg_recvlogical: "+refWS)
	if len(befores) > 0 {
		slices.SortFunc(befores, func(a, b pgqDrain) int { return cmp.Compare(a.elapsed, b.elapsed) })
		b := befores[len(befores)/2]
		row.Note = joinNotes(row.Note, fmt.Sprintf("-pgq-before binary in the same run: median %.2fs, %.3f× ref, CPU %.2fs",
			b.elapsed.Seconds(), refs[len(refs)/2].elapsed.Seconds()/b.elapsed.Seconds(), b.cpu.Seconds()))
	}
	for _, g := range gots {
		if int(g.changes) != r.changes {
			row.Status = Fail
			row.Note = joinNotes(row.Note, fmt.Sprintf("a pgq drain journaled %d changes, want %d", int(g.changes), r.changes))
		}
	}
	return row, nil
}

// throughputRow compares a pgq drain with a pg_recvlogical v2 streaming
// drain of the same range.
func throughputRow(metric string, r walRange, got pgqDrain, ref recvDrain) Row {
	pq := float64(r.changes) / got.elapsed.Seconds()
	rf := float64(r.changes) / ref.elapsed.Seconds()
	row := Row{Metric: metric, Unit: "changes/s", PGQ: f64(pq), Reference: f64(rf), RefName: refName(true),
		Ratio: f64(pq / rf), Target: "≥ 0.95× ref, fsync per group commit"}
	row.check(pq/rf >= 0.95)
	row.Note = fmt.Sprintf("%d changes in %d tx; pgq %.2fs (proto %d, streaming %v) vs ref %.2fs; both include connect; CPU pgq %.2fs, pg_recvlogical %.2fs",
		r.changes, r.txs, got.elapsed.Seconds(), got.status.ProtoVersion, got.status.Streaming, ref.elapsed.Seconds(), got.cpu.Seconds(), ref.cpu.Seconds())
	if int(got.changes) != r.changes {
		row.Status = Fail
		row.Note = joinNotes(row.Note, fmt.Sprintf("pgq journaled %d changes, want %d", int(got.changes), r.changes))
	}
	return row
}

// drainPGQBin is drainPGQ with another pgq binary.
func (e *env) drainPGQBin(ctx context.Context, bin, name, slot string, r walRange) (pgqDrain, error) {
	saved := e.cfg.PGQBin
	e.cfg.PGQBin = bin
	defer func() { e.cfg.PGQBin = saved }()
	return e.drainPGQ(ctx, name, slot, r)
}
