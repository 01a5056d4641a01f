package benchmarks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pgq-dev/pgq/ingest"
)

// snapshotSlot is the slot pgq run --initial-load creates for the
// snapshot load rows (dropped after each).
const snapshotSlot = "pgqbench_snapshot"

// snapshotLoadRows (issue 34) measures pgq run --initial-load of the
// backfill rows' table, loaded under the slot's exported snapshot by a
// pgq of its own (fresh data dir, new slot), at pgq's default
// parallelism and at 1, each against COPY (SELECT * FROM t) TO STDOUT of
// the same table measured right before and right after it (the mean).
func (e *env) snapshotLoadRows(ctx context.Context, rows int) []Row {
	var out []Row
	for _, par := range []int{0, 1} {
		out = append(out, e.snapshotLoadRow(ctx, rows, par))
	}
	return out
}

// loadState is the part of the initial load's state file the rows read:
// pgq's own stamps of the load's start and of its final record fsynced.
type loadState struct {
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	Rows       int64      `json:"rows"`
}

// snapshotLoadRow is one initial load of the table at parallelism par
// (0: pgq's default) against COPY; the note has pgq's peak RSS (VmHWM)
// over the whole load. Nothing streams meanwhile: the stream waits for
// the load by design.
func (e *env) snapshotLoadRow(ctx context.Context, rows, par int) Row {
	metric, target := "initial load under the slot's exported snapshot vs COPY TO STDOUT", "≥ 1.0× COPY"
	if par > 0 {
		metric, target = fmt.Sprintf("initial load at parallelism %d vs COPY TO STDOUT", par), "-"
	}
	copyBefore, err := e.copyTable(ctx)
	if err != nil {
		return notMeasured(metric, target, trimErr(err))
	}
	e.dropSlot(ctx, snapshotSlot)
	p, err := e.startPGQ(ctx, "snapshot-load", snapshotSlot, "--initial-load", backfillTable, "--initial-load-parallelism", fmt.Sprint(par))
	if err != nil {
		return notMeasured(metric, target, trimErr(err))
	}
	defer func() {
		_ = p.stop()
		e.dropSlot(context.Background(), snapshotSlot)
	}()
	st, err := waitLoad(ctx, p, 30*time.Minute)
	rss := peakRSS(p)
	if err != nil {
		return notMeasured(metric, target, trimErr(err))
	}
	copyAfter, err := e.copyTable(ctx)
	if err != nil {
		return notMeasured(metric, target, trimErr(err))
	}
	took := st.FinishedAt.Sub(st.StartedAt)
	copyTook := (copyBefore + copyAfter) / 2
	v, ref := float64(st.Rows)/took.Seconds(), float64(rows)/copyTook.Seconds()
	r := Row{Metric: metric, Unit: "rows/s", PGQ: f64(v), Reference: f64(ref), RefName: "COPY TO STDOUT", Ratio: f64(v / ref), Target: target}
	if par == 0 {
		r.check(v/ref >= 1.0)
	}
	r.Note = fmt.Sprintf("%d rows loaded of %d, parallelism %d (0: pgq's default): from the state file's start to the final record fsynced %.2fs vs COPY %.2fs (mean of %.2fs before and %.2fs after); pgq's peak RSS %s",
		st.Rows, rows, par, took.Seconds(), copyTook.Seconds(), copyBefore.Seconds(), copyAfter.Seconds(), rss)
	return r
}

// waitLoad waits until p's initial load is journaled (its state file has
// finished_at) or p exits.
func waitLoad(ctx context.Context, p *pgqProc, limit time.Duration) (loadState, error) {
	path := filepath.Join(p.dataDir, "journal", ingest.LoadStateFile)
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		var st loadState
		if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &st) == nil && st.FinishedAt != nil {
			return st, nil
		}
		select {
		case err := <-p.done:
			p.done <- err // for stop
			return loadState{}, fmt.Errorf("pgq exited during the load: %v", err)
		case <-ctx.Done():
			return loadState{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return loadState{}, errors.New("the load did not finish in time")
}
