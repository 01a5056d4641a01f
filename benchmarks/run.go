package benchmarks

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// Run starts a throwaway cluster, runs every measurement and returns the
// report. A measurement that cannot be taken becomes a NOT MEASURED row with
// the reason; only a broken environment (no cluster, no workload) is an
// error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	rep := &Report{Started: time.Now().UTC(), Mode: "short", Host: HostInfo{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}}
	if cfg.Full {
		rep.Mode = "full"
	}
	e, err := startEnv(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer e.close()
	rep.Host.ServerVersion = e.serverVersion(ctx)

	if cfg.Only == "" || cfg.Only == "footprint" {
		rep.Rows = append(rep.Rows, e.footprintRows(ctx)...)
	}
	if cfg.Only == "footprint" {
		rep.Duration = time.Since(rep.Started).Round(time.Second).String()
		return rep, nil
	}
	if cfg.Only == "readers" {
		rep.Rows = append(rep.Rows, e.readersRows(ctx)...)
		rep.Duration = time.Since(rep.Started).Round(time.Second).String()
		return rep, nil
	}
	if cfg.Only == "snapshot-load" {
		rows := e.backfillTableRows()
		if err := e.createBackfillTable(ctx, rows); err != nil {
			return rep, fmt.Errorf("snapshot-load: %w", err)
		}
		rep.Rows = append(rep.Rows, e.snapshotLoadRows(ctx, rows)...)
		rep.Duration = time.Since(rep.Started).Round(time.Second).String()
		return rep, nil
	}
	if cfg.Only == "hold" {
		rows, err := e.holdOnlyRows(ctx)
		rep.Rows = append(rep.Rows, rows...)
		rep.Duration = time.Since(rep.Started).Round(time.Second).String()
		if err != nil {
			return rep, fmt.Errorf("hold: %w", err)
		}
		return rep, nil
	}
	if cfg.Only == "peer" || (cfg.Only == "" && cfg.Peer) {
		rows, err := e.peerRows(ctx)
		rep.Rows = append(rep.Rows, rows...)
		if err != nil {
			return rep, fmt.Errorf("peer: %w", err)
		}
	}
	if cfg.Only == "peer" {
		rep.Duration = time.Since(rep.Started).Round(time.Second).String()
		return rep, nil
	}
	all := cfg.Only == ""
	if all || cfg.Only == "ingest" {
		rows, err := e.ingestRows(ctx)
		rep.Rows = append(rep.Rows, rows...)
		if err != nil {
			return rep, fmt.Errorf("ingest: %w", err)
		}
		rep.Rows = append(rep.Rows, e.tailRow(ctx))
	}
	if cfg.Only == "ingest" {
		rep.Duration = time.Since(rep.Started).Round(time.Second).String()
		return rep, nil
	}
	p, err := e.startLoadPGQ(ctx)
	if err != nil {
		return rep, fmt.Errorf("start pgq: %w", err)
	}
	defer func() {
		_ = p.stop()
		e.dropSlot(context.Background(), loadSlot)
	}()
	if cfg.Only == "latency" {
		rep.Rows = append(rep.Rows, e.latencyOnlyRows(ctx, p)...)
		rep.Duration = time.Since(rep.Started).Round(time.Second).String()
		return rep, nil
	}
	if all {
		rows, err := e.lagRows(ctx, p)
		rep.Rows = append(rep.Rows, rows...)
		if err != nil {
			return rep, fmt.Errorf("lag: %w", err)
		}
		rep.Rows = append(rep.Rows, e.consumerRows(ctx, p)...)
	}
	rep.Rows = append(rep.Rows, e.backfillRows(ctx, p)...)
	rep.Duration = time.Since(rep.Started).Round(time.Second).String()
	return rep, nil
}
