package benchmarks

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// loadSlot is the slot of the pgq that serves the lag, RSS, latency and
// HTTP replay measurements.
const loadSlot = "pgqbench_load"

// startLoadPGQ starts pgq on a fresh slot and waits until it streams.
func (e *env) startLoadPGQ(ctx context.Context) (*pgqProc, error) {
	lsn, err := e.currentLSN(ctx)
	if err != nil {
		return nil, err
	}
	p, err := e.startPGQ(ctx, "pgq-load", loadSlot, "--create-slot")
	if err != nil {
		return nil, err
	}
	if _, _, err := p.waitJournaled(ctx, 0, time.Minute); err == nil {
		err = e.waitConfirmed(ctx, loadSlot, lsn, time.Minute)
	}
	if err != nil {
		_ = p.stop()
		e.dropSlot(ctx, loadSlot)
		return nil, err
	}
	return p, nil
}

// lagRows runs item 2 (slot lag under full-speed pgbench with one consumer
// group that never fetches) and item 5's RSS, sampled in the same run.
func (e *env) lagRows(ctx context.Context, p *pgqProc) ([]Row, error) {
	const slot = loadSlot
	const lagMetric, lagTarget = "slot lag under load, p99", "≤ 1 MiB, one group stalled"
	const rssMetric, rssTarget = "pgq RSS under load, steady state", "≤ 128 MiB"
	groupNote := "group \"stalled\" created at earliest, never fetches"
	if err := p.createGroup(ctx, "stalled"); err != nil {
		groupNote = "no stalled group: " + trimErr(err)
	}

	e.settleDisk()
	e.log.Info("lag: pgbench at full speed", "for", e.sz.loadFor)
	lctx, cancel := context.WithTimeout(ctx, e.sz.loadFor+2*time.Minute)
	defer cancel()
	benchDone := make(chan error, 1)
	go func() {
		_, err := e.pgbench(lctx, smallTxScript, "-c", fmt.Sprint(e.sz.clients), "-j", fmt.Sprint(e.sz.clients), "-T", fmt.Sprint(int(e.sz.loadFor.Seconds())))
		benchDone <- err
	}()
	var lags, rss []float64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var benchErr error
sample:
	for {
		select {
		case benchErr = <-benchDone:
			break sample
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
			var lag int64
			if err := e.conn.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lag); err != nil {
				return nil, fmt.Errorf("sample slot lag: %w", err)
			}
			lags = append(lags, float64(lag))
			if b, err := rssBytes(p.cmd.Process.Pid); err == nil {
				rss = append(rss, float64(b))
			}
		}
	}
	if benchErr != nil {
		return nil, benchErr
	}
	st, _ := p.status(ctx)
	records := st.RecordsWritten

	var rows []Row
	if len(lags) == 0 {
		rows = append(rows, notMeasured(lagMetric, lagTarget, "no samples"))
	} else {
		p50, p99, mx := pct(lags, 50), pct(lags, 99), slices.Max(lags)
		r := Row{Metric: lagMetric, Unit: "B", PGQ: f64(p99), Target: lagTarget}
		r.check(p99 <= 1<<20)
		r.Note = joinNotes(fmt.Sprintf("p50 %.0f B, p99 %.0f B, max %.0f B over %d samples every 100ms; %d records journaled", p50, p99, mx, len(lags), records), groupNote)
		rows = append(rows, r)
	}
	// Steady state: the samples after the first quarter of the load.
	if len(rss) < 4 {
		rows = append(rows, notMeasured(rssMetric, rssTarget, "too few RSS samples"))
	} else {
		steady := rss[len(rss)/4:]
		med, mx := pct(steady, 50), slices.Max(rss)
		const mib = 1 << 20
		r := Row{Metric: rssMetric, Unit: "MiB", PGQ: f64(math.Round(med/mib*10) / 10), Target: rssTarget}
		r.check(med <= 128*mib)
		r.Note = fmt.Sprintf("median VmRSS of the last 3/4 of the load; max %.1f MiB over the whole load", mx/mib)
		rows = append(rows, r)
	}
	return rows, nil
}

// waitConfirmed waits until slot's confirmed_flush_lsn reaches lsn,
// looking every 50 ms.
func (e *env) waitConfirmed(ctx context.Context, slot string, lsn interface{ String() string }, timeout time.Duration) error {
	return e.waitConfirmedEvery(ctx, slot, lsn, timeout, 50*time.Millisecond)
}

// waitConfirmedEvery is waitConfirmed looking every interval: it asks
// PostgreSQL, and costs pgq nothing.
func (e *env) waitConfirmedEvery(ctx context.Context, slot string, lsn interface{ String() string }, timeout, every time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var ok bool
		err := e.conn.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn >= $2::pg_lsn, false) FROM pg_replication_slots WHERE slot_name = $1`, slot, lsn.String()).Scan(&ok)
		if err == nil && ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
	return fmt.Errorf("slot %s did not confirm %s within %s", slot, lsn, timeout)
}

// pct is the nearest-rank percentile of xs (0 when xs is empty).
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	i = max(0, min(i, len(s)-1))
	return s[i]
}
