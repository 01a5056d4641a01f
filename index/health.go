package index

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/pgq-dev/pgq/internal/pebblefs"
)

// DefaultHealInterval is RunHealer's first retry delay when its interval is
// zero; retries back off exponentially up to maxHealBackoff.
const DefaultHealInterval = time.Second

// maxHealBackoff caps RunHealer's retry delay.
const maxHealBackoff = time.Minute

// health is the stale/failed state of an Index and its counters.
type health struct {
	// stale: the derived entries may be behind the journal. Set by a
	// failed Add, TruncateFront, Reset or CatchUp and by fail; cleared by
	// a CatchUp that succeeds on a Pebble that has not failed. Written
	// under wmu (fail also sets it from anywhere), read lock-free.
	stale atomic.Bool
	// broken: Pebble reported a failed write-side file operation or a
	// fatal error (fail); cleared when Heal reopens Pebble.
	broken atomic.Bool
	// failGen counts fail calls: a write that sees it change across its
	// commit failed (Pebble reports a failed commit only via Fatalf).
	failGen atomic.Uint64
	// wake (capacity 1) is signalled when the index goes stale, to wake
	// RunHealer.
	wake chan struct{}

	// mu guards the fields below; it is a leaf lock (nothing is called
	// while it is held), so fail may take it from Pebble's goroutines.
	mu          sync.Mutex
	cause       error // first failure since Pebble was (re)opened; nil when not broken
	lastErr     error
	staleSince  time.Time
	failedAdds  uint64
	skippedAdds uint64
	heals       uint64
	failedHeals uint64
	failures    uint64
}

func (h *health) init() { h.wake = make(chan struct{}, 1) }

func (h *health) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *health) failedAdd() {
	h.mu.Lock()
	h.failedAdds++
	h.mu.Unlock()
}

func (h *health) skippedAdd() {
	h.mu.Lock()
	h.skippedAdds++
	h.mu.Unlock()
}

// Stats is a snapshot of the index's health, for metrics and status pages.
type Stats struct {
	// Stale: the derived entries may be behind the journal; lookups past
	// LastOffset fail with ErrStale and Add is refused until a heal.
	Stale bool
	// StaleSince is when the index last went stale; zero when not stale.
	StaleSince time.Time
	// Failed: Pebble reported a storage failure (ErrFailed); writes,
	// group writes included, are refused until Heal reopens it.
	Failed bool
	// FailedAdds counts Add calls that failed and made the index stale.
	FailedAdds uint64
	// SkippedAdds counts Add calls refused because the index was stale.
	SkippedAdds uint64
	// Failures counts storage failures reported by Pebble or the FS.
	Failures uint64
	// Heals counts successful heals (stale → fresh); FailedHeals counts
	// Heal calls that returned an error.
	Heals       uint64
	FailedHeals uint64
	// LastError is the most recent failure (kept after a heal); nil if
	// there was none.
	LastError error
}

// Stats returns a snapshot of the index's health counters.
func (ix *Index) Stats() Stats {
	h := &ix.h
	h.mu.Lock()
	defer h.mu.Unlock()
	st := Stats{
		Stale:       h.stale.Load(),
		Failed:      h.broken.Load(),
		FailedAdds:  h.failedAdds,
		SkippedAdds: h.skippedAdds,
		Failures:    h.failures,
		Heals:       h.heals,
		FailedHeals: h.failedHeals,
		LastError:   h.lastErr,
	}
	if st.Stale {
		st.StaleSince = h.staleSince
	}
	return st
}

// Err returns nil while the index is fresh, else an error wrapping
// ErrStale (and ErrFailed with the cause when Pebble failed).
func (ix *Index) Err() error {
	if err := ix.failedErr(); err != nil {
		return fmt.Errorf("%w: %w", ErrStale, err)
	}
	if ix.h.stale.Load() {
		ix.h.mu.Lock()
		last := ix.h.lastErr
		ix.h.mu.Unlock()
		if last != nil {
			return fmt.Errorf("%w: %w", ErrStale, last)
		}
		return ErrStale
	}
	return nil
}

// failedErr returns an error wrapping ErrFailed and the first cause while
// Pebble has failed, else nil.
func (ix *Index) failedErr() error {
	if !ix.h.broken.Load() {
		return nil
	}
	ix.h.mu.Lock()
	cause := ix.h.cause
	ix.h.mu.Unlock()
	if cause == nil {
		return ErrFailed
	}
	return fmt.Errorf("%w: %w", ErrFailed, cause)
}

// fail marks Pebble failed on cause (see ErrFailed) and the index stale.
// It may be called from any goroutine, Pebble's included, with any lock of
// the index held: it takes only h.mu.
func (ix *Index) fail(cause error) {
	h := &ix.h
	h.mu.Lock()
	h.failures++
	h.lastErr = cause
	first := h.cause == nil
	if first {
		h.cause = cause
	}
	if !h.stale.Load() {
		h.staleSince = time.Now()
	}
	h.failGen.Add(1)
	h.broken.Store(true)
	h.stale.Store(true)
	h.mu.Unlock()
	if first {
		ix.log.Error("index: storage failed; index writes are refused and lookups past the last indexed offset fail until it is healed",
			"dir", ix.dir, "err", cause.Error(), "last_indexed", ix.last.Load())
	}
	h.signal()
}

// markStale marks the index stale because of err (logged once per
// episode) and wakes the healer.
func (ix *Index) markStale(err error) {
	h := &ix.h
	h.mu.Lock()
	h.lastErr = err
	was := h.stale.Swap(true)
	if !was {
		h.staleSince = time.Now()
	}
	h.mu.Unlock()
	if !was {
		ix.log.Warn("index: stale; lookups past the last indexed offset fail until it is healed from the journal",
			"err", err.Error(), "last_indexed", ix.last.Load())
	}
	h.signal()
}

// markFresh clears the stale mark after a CatchUp succeeded; the caller
// holds wmu. It does nothing while Pebble has failed.
func (ix *Index) markFresh() {
	h := &ix.h
	h.mu.Lock()
	if h.broken.Load() || !h.stale.Load() {
		h.mu.Unlock()
		return
	}
	h.stale.Store(false)
	h.heals++
	since := h.staleSince
	h.mu.Unlock()
	ix.log.Info("index: healed from the journal", "last_indexed", ix.last.Load(), "stale_for", time.Since(since).Round(time.Millisecond))
}

// commit commits b unless Pebble has failed, and reports a failure of the
// commit that Pebble only logged through Fatalf.
func (ix *Index) commit(b *pebble.Batch, o *pebble.WriteOptions) error {
	if err := ix.failedErr(); err != nil {
		return err
	}
	gen := ix.h.failGen.Load()
	if err := b.Commit(o); err != nil {
		return err
	}
	if ix.h.failGen.Load() != gen {
		if err := ix.failedErr(); err != nil {
			return err
		}
		return ErrFailed
	}
	return nil
}

// Heal brings a stale index back in line with the journal: when Pebble has
// failed it closes it and opens it afresh (replaying its WAL: what was
// synced survives, group state included), then it runs CatchUp, which
// clears the stale mark when it succeeds. Heal on a fresh index is a
// CatchUp that finds nothing to do. It takes the writer lock for the
// CatchUp, and a reopen excludes every other call for its duration: do
// not call it from the journal's committer goroutine (use RunHealer).
func (ix *Index) Heal(ctx context.Context, src Source) error {
	err := ix.reopenIfFailed()
	if err == nil {
		err = ix.CatchUp(ctx, src)
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		ix.h.mu.Lock()
		ix.h.failedHeals++
		ix.h.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("index: heal: %w", err)
	}
	return nil
}

// reopenIfFailed closes a failed Pebble and opens it again. The
// lifecycle lock is held only to swap the handle: closing the failed
// Pebble, probing the disk and opening Pebble again happen outside it, so
// lookups keep answering (with ErrFailed) meanwhile. Pebble's Open can
// block for good on a disk that still fails its writes (it waits for a
// flush that never succeeds), so a small probe write goes first and a
// disk that still fails it is not opened.
func (ix *Index) reopenIfFailed() error {
	if !ix.h.broken.Load() && !ix.dbMissing() {
		return nil
	}
	ix.life.Lock()
	if ix.closed {
		ix.life.Unlock()
		return ErrClosed
	}
	if !ix.h.broken.Load() && ix.db != nil {
		ix.life.Unlock()
		return nil // another Heal reopened it
	}
	old := ix.db
	ix.db = nil
	ix.life.Unlock()
	if old != nil {
		if err := pebblefs.CloseDB(old); err != nil {
			ix.log.Warn("index: closing the failed pebble", "err", err.Error())
		}
	}
	fail := func(err error) error {
		ix.h.mu.Lock()
		ix.h.broken.Store(true)
		ix.h.lastErr = err
		ix.h.mu.Unlock()
		return err
	}
	if err := pebblefs.Probe(ix.fs, ix.dir); err != nil {
		return fail(fmt.Errorf("reopen: the disk still fails: %w", err))
	}
	ix.h.mu.Lock()
	cause := ix.h.cause
	ix.h.cause = nil
	ix.h.broken.Store(false)
	ix.h.mu.Unlock()
	ix.life.Lock()
	defer ix.life.Unlock()
	if ix.closed {
		return ErrClosed
	}
	if err := ix.openDB(); err != nil {
		ix.h.mu.Lock()
		if ix.h.cause == nil {
			ix.h.cause = cause
		}
		ix.h.mu.Unlock()
		return fail(fmt.Errorf("reopen: %w", err))
	}
	ix.log.Info("index: reopened pebble after a storage failure", "last_indexed", ix.last.Load())
	return nil
}

func (ix *Index) dbMissing() bool {
	ix.life.RLock()
	defer ix.life.RUnlock()
	return !ix.closed && ix.db == nil
}

// RunHealer heals the index in the background until ctx ends or the index
// is closed: whenever the index goes stale (Add, TruncateFront or CatchUp
// failed, Pebble failed) it runs Heal at once, and while Heal fails it
// retries after interval (zero: DefaultHealInterval), doubling the delay up
// to a minute. Run it on its own goroutine next to the journal's
// committer, whose after-append hook calls only Add: Add never waits for
// the healer beyond the writer lock, and while the index is stale Add
// returns at once with ErrStale.
func (ix *Index) RunHealer(ctx context.Context, src Source, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultHealInterval
	}
	delay := interval
	for {
		if ix.h.stale.Load() {
			err := ix.Heal(ctx, src)
			switch {
			case err == nil && !ix.h.stale.Load():
				delay = interval
				continue
			case errors.Is(err, ErrClosed), ctx.Err() != nil:
				return
			case err == nil:
				// Went stale again during the heal: retry after the delay.
				ix.log.Warn("index: stale again right after a heal; retrying", "retry_in", delay)
			default:
				ix.log.Warn("index: heal failed; retrying", "err", err.Error(), "retry_in", delay)
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			delay = min(2*delay, max(maxHealBackoff, interval))
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-ix.h.wake:
		}
	}
}
