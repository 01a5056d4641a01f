package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/feedback"
)

// coverageGap is the least time between two stores of the coverage file:
// confirming past the journal's last record (idle keepalives, transactions
// that published nothing) costs one small atomic file replace per gap.
const coverageGap = time.Second

// loadCoverage reads the coverage file at New and returns the LSN the
// journal covers (see feedback.Coverage) and whether the data dir is
// brand new (empty journal, no coverage file).
func loadCoverage(o *Options) (covered pgq.LSN, fresh bool, err error) {
	j := o.Journal
	covered = j.LastEndLSN()
	c, ok, err := feedback.LoadCoverage(o.FS, o.CoveragePath)
	if err != nil {
		return 0, false, &FatalError{Err: fmt.Errorf("ingest: %w", err)}
	}
	switch {
	case !ok:
		return covered, j.LastOffset() == 0, nil
	case c.Covers(j):
		return max(covered, c.Covered), false, nil
	default:
		o.Logger.Warn("the journal lost records the coverage file names: it ends before them",
			"coverage_offset", c.Offset, "coverage_end_lsn", c.EndLSN, "journal_last_offset", j.LastOffset(), "journal_end_lsn", covered)
		return covered, false, nil
	}
}

// coveredLSN is the LSN up to which the journal holds every transaction
// of the slot: the durable journal end, or more where the coverage file
// says so. Nothing past it is ever confirmed.
func (in *Ingester) coveredLSN() pgq.LSN { return pgq.LSN(in.covered.Load()) }

func (in *Ingester) raiseCovered(lsn pgq.LSN) {
	for {
		old := in.covered.Load()
		if uint64(lsn) <= old || in.covered.CompareAndSwap(old, uint64(lsn)) {
			return
		}
	}
}

// storeCoverage makes "the journal covers lsn" durable before lsn is
// confirmed. Only the Run goroutine calls it, and only while every
// submitted transaction is durable, so the journal's last record is final
// and stable.
func (in *Ingester) storeCoverage(lsn pgq.LSN) error {
	j := in.o.Journal
	c := feedback.Coverage{Offset: j.LastOffset(), EndLSN: j.LastEndLSN(), Covered: lsn}
	d, err := feedback.StoreCoverage(in.o.FS, in.o.CoveragePath, c)
	if err != nil {
		return err
	}
	in.o.Metrics.CoverageSync.Observe(d.Seconds())
	in.coverageStoredAt = time.Now()
	in.raiseCovered(lsn)
	return nil
}

// checkContinuity runs after preflight on every start and reconnect. It
// compares where the slot resumes with what the journal covers: when
// PostgreSQL would start past it, the changes in between are not in the
// journal, and ingest refuses (ErrGap) or, with AcceptGap, journals one
// gap change and goes on. A brand-new data dir starts wherever the slot is.
func (in *Ingester) checkContinuity(ctx context.Context, info ServerInfo) error {
	covered := in.coveredLSN()
	slotAt := info.SlotConfirmed
	if in.fresh {
		in.o.Logger.Info("the journal is empty: it starts at the slot's position", "slot", in.o.Slot, "slot_lsn", slotAt)
		in.fresh = false
		return nil
	}
	var cause string
	switch {
	case info.SlotCreated:
		cause = fmt.Sprintf("slot %s was just created at %s over a journal that ends at %s: changes committed while there was no slot are not in the journal", in.o.Slot, slotAt, covered)
	case slotAt > covered:
		cause = fmt.Sprintf("the journal ends at %s but slot %s resumes at %s: changes in between are not in the journal", covered, in.o.Slot, slotAt)
	default:
		return nil
	}
	if !in.o.AcceptGap {
		return fatalf(ErrGap, "%s (restore the journal, or pass --accept-gap to record the hole and go on)", cause)
	}
	to := max(slotAt, covered)
	in.o.Logger.Warn("accepting a gap in the journal (--accept-gap)", "from_lsn", covered, "to_lsn", to, "cause", cause)
	tx := &pgq.Transaction{
		CommitLSN: to, EndLSN: to, CommitTime: time.Now().UTC().Truncate(time.Microsecond), Final: true,
		Changes: []pgq.Change{{Op: pgq.OpGap, FromLSN: covered, ToLSN: to}},
	}
	in.lastSubmitted = max(in.lastSubmitted, to)
	in.tracker.Begin()
	in.tracker.Submitted(to)
	if err := in.o.Committer.Submit(ctx, tx, 64); err != nil {
		return &FatalError{Err: fmt.Errorf("ingest: journal the gap: %w", err)}
	}
	// Wait until the gap is durable: it is what makes the new start
	// position legitimate.
	if err := in.o.Committer.Flush(ctx); err != nil {
		return &FatalError{Err: fmt.Errorf("ingest: journal the gap: %w", err)}
	}
	in.o.Metrics.Gaps.Inc()
	return nil
}
