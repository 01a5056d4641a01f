package ingest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/feedback"
	"github.com/pgq-dev/pgq/opterr"
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
		if uint64(lsn) <= old {
			return
		}
		if in.covered.CompareAndSwap(old, uint64(lsn)) {
			in.spillRecovered(lsn)
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
		start, _ := parseStart(in.o.Start) // validated
		switch {
		case start.lsn != 0 && start.lsn < slotAt:
			return fatalOpt(ErrConfig, "{} lsn:%s: slot %s can no longer serve it: it resumes at %s", opterr.Of("ingest.Options.Start"), start.lsn, in.o.Slot, slotAt)
		case start.lsn != 0:
			in.startAt = start.lsn
		case start.latest:
			in.startAt = max(slotAt, info.CurrentWAL)
		}
		in.o.Logger.Info("the journal is empty: it starts at the slot's position", "slot", in.o.Slot, "slot_lsn", slotAt, "start_lsn", max(slotAt, in.startAt))
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
		return fatalOpt(ErrGap, "%s (restore the journal, or pass {} to record the hole and go on)", opterr.Of("ingest.Options.AcceptGap"), cause)
	}
	to := max(slotAt, covered)
	in.o.Logger.Warn("accepting a gap in the journal (ingest.Options.AcceptGap)", "from_lsn", covered, "to_lsn", to, "cause", cause)
	at, err := in.gapTime(ctx)
	if err != nil {
		return err
	}
	tx := &pgq.Transaction{
		CommitLSN: to, EndLSN: to, CommitTime: at, Final: true,
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

// gapTime is the commit time a gap record carries: that of the newest
// journaled transaction, the last time known before the hole. The
// transactions of the hole and after it committed later, possibly while
// pgq was down: the time of now would lie after theirs and make a
// time:T position skip them. Without any record it is the Unix epoch.
func (in *Ingester) gapTime(ctx context.Context) (time.Time, error) {
	// What a previous session submitted is journaled before the gap.
	if err := in.o.Committer.Flush(ctx); err != nil {
		return time.Time{}, &FatalError{Err: fmt.Errorf("ingest: journal the gap: %w", err)}
	}
	j := in.o.Journal
	if j.LastOffset() == 0 {
		return time.Unix(0, 0).UTC(), nil
	}
	last, err := j.Read(j.LastOffset())
	if err != nil {
		return time.Time{}, &FatalError{Err: fmt.Errorf("ingest: journal the gap: read the last record: %w", err)}
	}
	return last.CommitTime.UTC(), nil
}

// warnTables warns, once per table, about published tables whose updates
// and deletes cannot replicate, and about tables the operator asked for
// that the publication does not publish.
func (in *Ingester) warnTables(info ServerInfo) {
	var keyless, missing []string
	for _, t := range info.Keyless {
		if !in.warned["k"+t] {
			in.warned["k"+t] = true
			keyless = append(keyless, t)
		}
	}
	for _, t := range info.Unpublished {
		if !in.warned["u"+t] {
			in.warned["u"+t] = true
			missing = append(missing, t)
		}
	}
	if len(keyless) > 0 {
		in.o.Logger.Warn("published tables without a primary key or replica identity: UPDATE and DELETE on them fail in the application (add a primary key, set REPLICA IDENTITY FULL, or publish without them: ingest.Options.SkipTablesWithoutKey)",
			"publication", in.o.Publication, "tables", strings.Join(keyless, ","))
	}
	if len(missing) > 0 {
		in.o.Logger.Warn("the publication does not publish tables named in ingest.Options.CreatePublication", "publication", in.o.Publication, "tables", strings.Join(missing, ","))
	}
}

// dropRefusedSlot drops the slot when this Ingester created it and Run
// stops before any session streamed from it (a refused start: the
// continuity check, a preflight refusal after the creation, giving up on
// reconnecting). Such a slot holds nothing the journal needs, and left
// behind it would make PostgreSQL keep WAL for a pgq that is not running.
// A slot that existed before, or that streamed, is never dropped here.
func (in *Ingester) dropRefusedSlot() {
	if !in.createdSlot {
		return
	}
	in.createdSlot = false
	// Not forced: nothing of pgq's uses it, and whoever does now is not
	// pgq's to stop.
	in.dropSlotNow(false, "cannot drop the slot this refused start created: drop it (pgq slot drop)", "dropped the slot this refused start created")
}

// dropSlotNow drops pgq's slot (force: even while a walsender holds it)
// and logs failed (an error) or done.
func (in *Ingester) dropSlotNow(force bool, failed, done string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := DropSlot(ctx, in.o.PGURL, in.o.Slot, force); err != nil {
		in.o.Logger.Error(failed, "slot", in.o.Slot, "error", err)
		return
	}
	in.o.Logger.Info(done, "slot", in.o.Slot)
}

// dropOnExit drops the slot after a clean stop with
// --slot-lifecycle drop-on-exit.
func (in *Ingester) dropOnExit() {
	if in.o.SlotLifecycle != LifecycleDropOnExit {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The walsender of the closed connection may linger a moment: force.
	if err := DropSlot(ctx, in.o.PGURL, in.o.Slot, true); err != nil {
		in.o.Logger.Error("cannot drop the slot on exit (ingest.Options.SlotLifecycle drop-on-exit)", "slot", in.o.Slot, "error", err)
		return
	}
	in.o.Logger.Info("dropped the slot on exit (ingest.Options.SlotLifecycle drop-on-exit): changes committed from now on are not kept for pgq", "slot", in.o.Slot)
}
