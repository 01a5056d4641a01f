// Command pgqbench runs pgq's benchmarks (`make bench`): it starts a
// throwaway PostgreSQL, measures pgq (bin/pgq) against pg_recvlogical and
// the design targets, prints one table and writes it as JSON.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/pgq-dev/pgq/benchmarks"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pgqbench:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg benchmarks.Config
	flag.BoolVar(&cfg.Full, "full", false, "bigger run (minutes); the default short run takes under 5 minutes on 2 cores")
	flag.StringVar(&cfg.PGQBin, "pgq", "bin/pgq", "pgq binary (make build)")
	flag.StringVar(&cfg.CPUProfile, "cpuprofile", "", "also drain the workload with an in-process pgq and write its CPU profile here")
	flag.StringVar(&cfg.Only, "only", "", `run only these rows: "backfill", "footprint", "ingest" (the ingest rows and the big-transaction tail) "latency" (the commit → consumer latency rows) "hold" (the hold-slot row) "peer" (the peer rows, see -peer), "snapshot-load" (the initial load under an exported snapshot against COPY) or "readers" (1,000 long-polling readers, readers-* flags)`)
	flag.StringVar(&cfg.ProfileRange, "cpuprofile-range", "mix", "WAL range of the profiled drain: mix, small or bulk")
	flag.StringVar(&cfg.PGQBefore, "pgq-before", "", "another pgq binary (a build before a change) the split ingest rows also drain, for a same-run before/after")
	flag.StringVar(&cfg.CompareRef, "compare-ref", "", "compare this pgq binary (REF, an older build) with -pgq (HEAD), alternately, on the same WAL (make bench-compare); only the comparison runs")
	flag.StringVar(&cfg.CompareRefName, "compare-ref-name", "", "what REF is called in the comparison's summary (a commit)")
	flag.StringVar(&cfg.CompareOut, "compare-out", ".", "directory of the comparison's Go benchmark-format files ref.txt and head.txt (for benchstat)")
	flag.IntVar(&cfg.Rounds, "rounds", 6, "rounds of the comparison (each build once per round)")
	flag.IntVar(&cfg.BackfillRows, "backfill-rows", 0, "rows of the backfill rows' table (0: 1,000,000; 5,000,000 with -full)")
	flag.Float64Var(&cfg.Scale, "scale", 1, "multiply the workload sizes and load times (0.05 makes a smoke run)")
	flag.BoolVar(&cfg.Peer, "peer", false, "add the peer rows: pgq + consumer into a file against Conduit's PostgreSQL source into a file and pg_recvlogical, same WAL, alternating rounds")
	flag.StringVar(&cfg.ConduitBin, "conduit", "", "Conduit binary of the peer rows (default: build it from benchmarks/peers/conduit)")
	flag.IntVar(&cfg.PeerRounds, "peer-rounds", 3, "rounds of the peer rows (each tool once per round)")
	flag.IntVar(&cfg.Readers.Groups, "readers-groups", 1000, "readers rows: exclusive groups, each long-polling on a connection of its own")
	flag.IntVar(&cfg.Readers.Shared, "readers-shared", 100, "readers rows: members of the one shared group")
	flag.IntVar(&cfg.Readers.Rate, "readers-rate", 1000, "readers rows: transactions per second written meanwhile")
	flag.IntVar(&cfg.Readers.Tables, "readers-tables", 0, "readers rows: tables the groups filter (group i filters table i mod this); 0: one per group")
	flag.DurationVar(&cfg.Readers.For, "readers-for", 20*time.Second, "readers rows: length of each phase (without and with readers, alternating twice)")
	out := flag.String("out", "benchmarks/results/latest.json", "JSON results file")
	keep := flag.Bool("keep", false, "keep the work directory (pgq data dirs and logs)")
	flag.Parse()

	bin, err := filepath.Abs(cfg.PGQBin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("pgq binary: %w (run make build)", err)
	}
	cfg.PGQBin = bin
	if !slices.Contains([]string{"", "backfill", "footprint", "ingest", "latency", "hold", "peer", "readers", "snapshot-load"}, cfg.Only) {
		return fmt.Errorf("-only %q: want backfill, footprint, ingest, latency, hold, peer, readers or snapshot-load", cfg.Only)
	}
	if cfg.ConduitBin != "" {
		if cfg.ConduitBin, err = filepath.Abs(cfg.ConduitBin); err != nil {
			return err
		}
	}
	if cfg.PGQBefore != "" {
		if cfg.PGQBefore, err = filepath.Abs(cfg.PGQBefore); err != nil {
			return err
		}
	}
	cfg.WorkDir, err = os.MkdirTemp("", "pgqbench-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintln(os.Stderr, "pgqbench: work directory", cfg.WorkDir)
	} else {
		defer os.RemoveAll(cfg.WorkDir)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.CompareRef != "" {
		return compare(ctx, cfg)
	}
	rep, err := benchmarks.Run(ctx, cfg)
	if rep != nil {
		if werr := benchmarks.WriteTable(os.Stdout, rep.Rows); werr != nil {
			return werr
		}
		if werr := benchmarks.WriteJSON(*out, rep); werr != nil {
			return werr
		}
		fmt.Printf("\n%s mode, %s; results in %s\n", rep.Mode, rep.Duration, *out)
		if failed := benchmarks.Failed(rep.Rows); len(failed) > 0 {
			fmt.Printf("missed targets: %s\n", strings.Join(failed, ", "))
		}
	}
	return err
}

// compare runs the REF/HEAD comparison (-compare-ref).
func compare(ctx context.Context, cfg benchmarks.Config) error {
	var err error
	if cfg.CompareRef, err = filepath.Abs(cfg.CompareRef); err != nil {
		return err
	}
	if _, err := os.Stat(cfg.CompareRef); err != nil {
		return fmt.Errorf("-compare-ref: %w", err)
	}
	if cfg.Rounds < 1 {
		return fmt.Errorf("-rounds %d: want at least 1", cfg.Rounds)
	}
	if err := os.MkdirAll(cfg.CompareOut, 0o755); err != nil {
		return fmt.Errorf("-compare-out: %w", err)
	}
	return benchmarks.Compare(ctx, cfg, os.Stdout)
}
