package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/server"
)

// profiledDrain drains a copy of the template slot with an in-process
// sidecar while runtime/pprof records a CPU profile to Config.CPUProfile.
// The figure is informational: the profiler and the benchmark share the
// process.
func (e *env) profiledDrain(ctx context.Context, w walRange) (Row, error) {
	const slot = "pgqbench_prof"
	if err := e.copySlot(ctx, w.template, slot); err != nil {
		return Row{}, err
	}
	defer e.dropSlot(ctx, slot)
	dir := filepath.Join(e.cfg.WorkDir, "pgq-profile")
	s, err := server.Open(ctx, server.Options{DataDir: dir, Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler),
		Ingest: ingest.Options{PGURL: e.url, Slot: slot, Publication: publication}})
	if err != nil {
		return Row{}, fmt.Errorf("in-process sidecar: %w", err)
	}
	f, err := os.Create(e.cfg.CPUProfile)
	if err != nil {
		return Row{}, fmt.Errorf("cpu profile: %w", err)
	}
	defer f.Close()
	if err := writeAllocs(e.cfg.CPUProfile + ".allocs-before"); err != nil {
		return Row{}, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return Row{}, fmt.Errorf("cpu profile: %w", err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- s.Run(rctx) }()
	var runErr error
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
wait:
	for serverparts.Of(s).Journal.LastEndLSN() < w.lastTx {
		select {
		case runErr = <-done:
			done <- runErr
			break wait
		case <-ctx.Done():
			runErr = ctx.Err()
			break wait
		case <-tick.C:
		}
	}
	el := time.Since(start)
	reached := serverparts.Of(s).Journal.LastEndLSN() >= w.lastTx
	pprof.StopCPUProfile()
	allocErr := writeAllocs(e.cfg.CPUProfile + ".allocs")
	cancel()
	if err := errors.Join(runErr, <-done); err != nil {
		return Row{}, fmt.Errorf("in-process sidecar: %w", err)
	}
	if allocErr != nil {
		return Row{}, allocErr
	}
	if !reached {
		return Row{}, fmt.Errorf("in-process sidecar stopped before the end of the workload")
	}
	v := float64(w.changes) / el.Seconds()
	return Row{Metric: "ingest throughput, in-process sidecar under pprof (" + e.cfg.ProfileRange + ")", Unit: "changes/s", PGQ: f64(v), Target: "-", Status: Info,
		Note: fmt.Sprintf("%d changes in %.2fs; CPU profile and allocations written (go tool pprof; FILE.allocs -diff_base FILE.allocs-before is the drain's)", w.changes, el.Seconds())}, nil
}

// writeAllocs writes the allocation profile of the process so far to
// name: one before and one after a profiled drain, so that pprof's
// -diff_base leaves the drain's own allocations.
func writeAllocs(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("allocation profile: %w", err)
	}
	runtime.GC() // the profile counts up to the last GC
	if err := errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close()); err != nil {
		return fmt.Errorf("allocation profile %s: %w", name, err)
	}
	return nil
}
