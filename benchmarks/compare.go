package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// ErrCompareConfig is returned by Compare when the comparison is not set
// up (no REF binary, no output directory, no round).
var ErrCompareConfig = errors.New("compare: incomplete configuration")

// figure is one figure of the comparison: a Go benchmark name and its
// unit, as written to the benchmark-format files.
type figure struct {
	bench, unit string
	// diff compares the builds by HEAD − REF rather than HEAD / REF (a
	// latency gap can be zero or negative).
	diff bool
}

// The figures of the comparison, in the order of the summary.
var (
	figMix       = figure{bench: "Ingest/workload=mix", unit: "x-recvlogical"}
	figMixRSS    = figure{bench: "Ingest/workload=mix", unit: "peak-rss-B"}
	figSmall     = figure{bench: "Ingest/workload=small", unit: "x-recvlogical"}
	figSmallRSS  = figure{bench: "Ingest/workload=small", unit: "peak-rss-B"}
	figBulk      = figure{bench: "Ingest/workload=bulk", unit: "x-recvlogical"}
	figBulkRSS   = figure{bench: "Ingest/workload=bulk", unit: "peak-rss-B"}
	figDataDir   = figure{bench: "Footprint/tx=1row", unit: "x-pgoutput"}
	figLatGap    = figure{bench: "Latency/rate=1000", unit: "p99-gap-ms", diff: true}
	figLatPGQ    = figure{bench: "Latency/rate=1000", unit: "pgq-p99-ms"}
	figLatRef    = figure{bench: "Latency/rate=1000", unit: "ref-p99-ms"}
	compareOrder = []figure{figMix, figMixRSS, figSmall, figSmallRSS, figBulk, figBulkRSS, figDataDir, figLatGap, figLatPGQ, figLatRef}
)

// sample is one build's figures of one round.
type sample map[figure]float64

// comparison holds every round of both builds.
type comparison struct {
	ref, head []sample // one per round
}

// build is one side of the comparison.
type build struct {
	name, bin string
}

// Compare measures the pgq binary cfg.CompareRef (REF, a build of an older
// commit) against cfg.PGQBin (HEAD) on the same pre-generated WAL and
// the same cluster, cfg.Rounds rounds, the two builds alternately within
// each round (REF then HEAD) right after one pg_recvlogical drain of the
// same range that both are compared with. It writes the rounds of each
// build in Go benchmark format to ref.txt and head.txt in
// cfg.CompareOut (for benchstat) and a summary to w: each figure's
// median and spread (min–max) for REF and HEAD, and the per-round HEAD/REF
// ratio (HEAD − REF for the latency gap) with its spread.
func Compare(ctx context.Context, cfg Config, w io.Writer) error {
	if cfg.CompareRef == "" || cfg.CompareOut == "" || cfg.Rounds < 1 {
		return ErrCompareConfig
	}
	e, err := startEnv(ctx, cfg)
	if err != nil {
		return err
	}
	defer e.close()
	builds := [2]build{{"ref", cfg.CompareRef}, {"head", cfg.PGQBin}}
	c := &comparison{ref: make([]sample, cfg.Rounds), head: make([]sample, cfg.Rounds)}
	for i := range cfg.Rounds {
		c.ref[i], c.head[i] = sample{}, sample{}
	}
	if err := e.compareFootprint(ctx, builds, c); err != nil {
		return fmt.Errorf("compare footprint: %w", err)
	}
	if err := e.compareIngest(ctx, builds, c); err != nil {
		return fmt.Errorf("compare ingest: %w", err)
	}
	if err := e.compareLatency(ctx, builds, c); err != nil {
		return fmt.Errorf("compare latency: %w", err)
	}
	for i, s := range [][]sample{c.ref, c.head} {
		if err := writeBenchFile(filepath.Join(cfg.CompareOut, builds[i].name+".txt"), s); err != nil {
			return err
		}
	}
	return writeSummary(w, c, cfg.CompareRefName)
}

// record stores one build's figure of round i.
func (c *comparison) record(b int, round int, f figure, v float64) {
	if b == 0 {
		c.ref[round][f] = v
	} else {
		c.head[round][f] = v
	}
}

// compareFootprint drains the footprint workload (single-row
// transactions) once with pg_recvlogical proto 1 (its bytes do not vary)
// and then with each build, every round: the data dir (journal + index)
// against pgoutput's bytes.
func (e *env) compareFootprint(ctx context.Context, builds [2]build, c *comparison) error {
	w, err := e.runFootprintWorkload(ctx)
	defer e.dropSlot(ctx, footprintTemplate)
	if err != nil {
		return err
	}
	ref, err := e.drainRecvLogical(ctx, "pgqbench_cmp_fp_recv", false, w.whole())
	if err != nil {
		return err
	}
	for round := range c.ref {
		for b, bd := range builds {
			got, err := e.drainPGQBin(ctx, bd.bin, fmt.Sprintf("pgq-cmp-fp-%s-%d", bd.name, round), fmt.Sprintf("pgqbench_cmp_fp_%s_%d", bd.name, round), w.whole())
			if err != nil {
				return fmt.Errorf("%s: %w", bd.name, err)
			}
			ib, err := dirBytes(filepath.Join(filepath.Dir(got.journalDir), "index"), func(n string) bool { return n != "LOCK" })
			if err != nil {
				return fmt.Errorf("index size: %w", err)
			}
			if err := checkChanges(bd.name, got, w.changes); err != nil {
				return err
			}
			c.record(b, round, figDataDir, float64(got.journalBytes+ib)/float64(ref.outBytes))
			e.log.Info("compare: footprint drained", "round", round, "build", bd.name, "data_dir_bytes", got.journalBytes+ib, "pgoutput_bytes", ref.outBytes)
		}
	}
	return nil
}

// compareIngest writes the ingest workload (the small transactions, a
// marker, one bulk transaction) once; every round drains each range with
// pg_recvlogical (proto 2, streaming on) and then with each build. The
// small-only rounds run before the bulk transaction is written, as in
// splitRow.
func (e *env) compareIngest(ctx context.Context, builds [2]build, c *comparison) error {
	w, err := e.runWorkload(ctx, func(small walRange) error {
		return e.compareRange(ctx, builds, c, "small", small, figSmall, figSmallRSS)
	})
	defer e.dropSlot(ctx, templateSlot)
	defer e.dropSlot(ctx, bulkTemplateSlot)
	if err != nil {
		return err
	}
	if err := e.compareRange(ctx, builds, c, "mix", w.whole(), figMix, figMixRSS); err != nil {
		return err
	}
	return e.compareRange(ctx, builds, c, "bulk", w.bulk, figBulk, figBulkRSS)
}

// compareRange drains r every round: pg_recvlogical, then REF, then HEAD.
func (e *env) compareRange(ctx context.Context, builds [2]build, c *comparison, name string, r walRange, ratio, rss figure) error {
	for round := range c.ref {
		e.settleDisk()
		ref, err := e.drainRecvLogical(ctx, fmt.Sprintf("pgqbench_cmp_recv_%s_%d", name, round), true, r)
		if err != nil {
			return err
		}
		for b, bd := range builds {
			e.settleDisk()
			got, err := e.drainPGQBin(ctx, bd.bin, fmt.Sprintf("pgq-cmp-%s-%s-%d", name, bd.name, round), fmt.Sprintf("pgqbench_cmp_%s_%s_%d", name, bd.name, round), r)
			if err != nil {
				return fmt.Errorf("%s: %w", bd.name, err)
			}
			if err := checkChanges(bd.name, got, r.changes); err != nil {
				return err
			}
			c.record(b, round, ratio, ref.elapsed.Seconds()/got.elapsed.Seconds())
			c.record(b, round, rss, float64(got.peakRSS))
			e.log.Info("compare: drained", "range", name, "round", round, "build", bd.name,
				"pgq", got.elapsed.Round(time.Millisecond), "pg_recvlogical", ref.elapsed.Round(time.Millisecond), "peak_rss_mib", got.peakRSS>>20)
		}
	}
	return nil
}

// checkChanges fails a drain that did not journal the range's changes.
func checkChanges(build string, d pgqDrain, want int) error {
	if int(d.changes) != want {
		return fmt.Errorf("%s journaled %d changes, want %d", build, int(d.changes), want)
	}
	return nil
}

// compareLatency runs the latency rows (1,000 tx/s, pgq's Go consumer
// next to a live pg_recvlogical) once per build every round, each build
// as the load pgq on a fresh slot.
func (e *env) compareLatency(ctx context.Context, builds [2]build, c *comparison) error {
	saved := e.cfg.PGQBin
	defer func() { e.cfg.PGQBin = saved }()
	for round := range c.ref {
		for b, bd := range builds {
			e.cfg.PGQBin = bd.bin
			p, err := e.startLoadPGQ(ctx)
			if err != nil {
				return fmt.Errorf("%s: start pgq: %w", bd.name, err)
			}
			rows := e.latencyOnlyRows(ctx, p)
			serr := p.stop()
			e.dropSlot(ctx, loadSlot)
			if serr != nil {
				return fmt.Errorf("%s: %w", bd.name, serr)
			}
			p99 := rows[len(rows)-1]
			if p99.PGQ == nil || p99.Reference == nil {
				return fmt.Errorf("%s: latency not measured: %s", bd.name, p99.Note)
			}
			c.record(b, round, figLatGap, *p99.PGQ-*p99.Reference)
			c.record(b, round, figLatPGQ, *p99.PGQ)
			c.record(b, round, figLatRef, *p99.Reference)
			e.log.Info("compare: latency", "round", round, "build", bd.name, "pgq_p99_ms", *p99.PGQ, "ref_p99_ms", *p99.Reference)
		}
	}
	return nil
}

// writeBenchFile writes one build's rounds in Go benchmark format, one
// line per benchmark and round, every unit of the benchmark on it.
// No configuration line tells the builds apart: benchstat's columns are
// its input files (labelled ref= and head= by scripts/bench-compare.sh).
func writeBenchFile(path string, rounds []sample) error {
	var b strings.Builder
	b.WriteString("pkg: github.com/pgq-dev/pgq/benchmarks\n")
	for _, s := range rounds {
		var line, bench string
		for _, f := range compareOrder {
			v, ok := s[f]
			if !ok {
				continue
			}
			if f.bench != bench {
				if line != "" {
					b.WriteString(line + "\n")
				}
				bench, line = f.bench, "Benchmark"+f.bench+" 1"
			}
			line += fmt.Sprintf(" %g %s", v, f.unit)
		}
		if line != "" {
			b.WriteString(line + "\n")
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// medianSpread is a median with the smallest and largest value.
type medianSpread struct{ med, lo, hi float64 }

func spreadOf(v []float64) medianSpread {
	s := slices.Clone(v)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return medianSpread{med: med, lo: s[0], hi: s[len(s)-1]}
}

func (s medianSpread) format(scale float64) string {
	return fmt.Sprintf("%.3g [%.3g–%.3g]", s.med/scale, s.lo/scale, s.hi/scale)
}

// writeSummary prints, per figure, REF and HEAD (median [min–max] over
// the rounds) and the per-round HEAD/REF ratio, or HEAD − REF for a
// difference figure, with its spread.
func writeSummary(w io.Writer, c *comparison, refName string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "FIGURE\tUNIT\tREF %s\tHEAD\tHEAD vs REF\n", refName)
	for _, f := range compareOrder {
		var refs, heads, cmp []float64
		for i := range c.ref {
			r, okr := c.ref[i][f]
			h, okh := c.head[i][f]
			if !okr || !okh {
				continue
			}
			refs, heads = append(refs, r), append(heads, h)
			if f.diff {
				cmp = append(cmp, h-r)
			} else if r != 0 {
				cmp = append(cmp, h/r)
			}
		}
		if len(refs) == 0 {
			continue
		}
		unit, scale, vs := f.unit, 1.0, "HEAD/REF "
		if strings.HasSuffix(unit, "-B") {
			unit, scale = strings.TrimSuffix(unit, "-B")+" MiB", 1<<20
		}
		if f.diff {
			vs = "HEAD−REF "
		}
		cs := "-"
		if len(cmp) > 0 {
			cs = vs + spreadOf(cmp).format(1)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.bench, unit, spreadOf(refs).format(scale), spreadOf(heads).format(scale), cs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d rounds; median [min–max] over the rounds; x-recvlogical = pg_recvlogical's time / pgq's on the same range (higher is faster); x-pgoutput = data dir bytes / pgoutput bytes (lower is smaller); p99-gap-ms = pgq's commit → consumer p99 − live pg_recvlogical's\n", len(c.ref))
	return err
}
