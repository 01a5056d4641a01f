package index

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgq-dev/pgq"
)

// Source is what CatchUp reads: the journal.
type Source interface {
	// FirstOffset and LastOffset bound the records held; LastOffset 0 (or
	// below FirstOffset) means empty.
	FirstOffset() pgq.Offset
	LastOffset() pgq.Offset
	// ReadSized returns the record at off and its encoded size in the
	// journal (Entry.Bytes), so that CatchUp never encodes a record.
	ReadSized(off pgq.Offset) (*pgq.Transaction, int, error)
}

// catchUpBatch is how many records CatchUp indexes per Pebble batch.
const catchUpBatch = 512

// CatchUp makes the index cover every record of src from src.FirstOffset()
// to the src.LastOffset() seen when it starts, with the record sizes src
// reports.
//
//   - Journal empty: the derived entries are dropped.
//   - Index empty, ahead of the journal (LastOffset > src.LastOffset()),
//     disagreeing with it at the index's last offset (CommitLSN, EndLSN or
//     CommitTime differ: the journal was replaced), or ending before the
//     journal's first record minus one (a gap): Reset, then index every
//     record of src.
//   - Otherwise: entries below src.FirstOffset() are truncated away and
//     the missing tail is added.
//
// A CatchUp that succeeds clears the stale mark (see Heal) unless Pebble
// has failed; one that fails sets it.
//
// CatchUp holds the writer lock for its whole run, so a concurrent Add
// waits and then skips what CatchUp already indexed. Readers keep working;
// during a rebuild they see a partial index. ctx is checked between
// batches; a cancelled CatchUp leaves a consistent, shorter index that the
// next CatchUp continues.
func (ix *Index) CatchUp(ctx context.Context, src Source) error {
	if err := ix.enter(); err != nil {
		return err
	}
	defer ix.exit()
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	if err := ix.catchUpLocked(ctx, src); err != nil {
		ix.markStale(err)
		return err
	}
	ix.markFresh()
	return nil
}

func (ix *Index) catchUpLocked(ctx context.Context, src Source) error {
	first, last := src.FirstOffset(), src.LastOffset()
	if first == 0 {
		first = 1
	}
	if last == 0 || last < first {
		if ix.last.Load() == 0 {
			return nil
		}
		ix.log.Info("journal is empty: dropping the index", "index_last", ix.last.Load())
		return ix.resetLocked()
	}

	ixLast := pgq.Offset(ix.last.Load())
	reason, err := ix.rebuildReason(src, first, last, ixLast)
	if err != nil {
		return err
	}
	next := ixLast + 1
	if reason != "" {
		if ixLast != 0 {
			ix.log.Info("rebuilding the index from the journal", "reason", reason,
				"index_last", ixLast, "journal_first", first, "journal_last", last)
		}
		if err := ix.resetLocked(); err != nil {
			return err
		}
		next = first
	} else if err := ix.truncateFrontLocked(first); err != nil {
		return err
	}

	batch := make([]Entry, 0, catchUpBatch)
	for off := next; off <= last; {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("index: catch up at offset %d: %w", off, err)
		}
		batch = batch[:0]
		for ; off <= last && len(batch) < catchUpBatch; off++ {
			tx, n, err := src.ReadSized(off)
			if err != nil {
				return fmt.Errorf("index: catch up: read journal offset %d: %w", off, err)
			}
			if tx == nil {
				return fmt.Errorf("index: catch up: journal offset %d read as nil", off)
			}
			e := EntryOf(tx, n, len(tx.Changes))
			e.Offset = off
			batch = append(batch, e)
		}
		if err := ix.addLocked(batch); err != nil {
			return fmt.Errorf("index: catch up: %w", err)
		}
	}
	return nil
}

// rebuildReason says why the index cannot simply be extended from
// ixLast+1, or "" when it can.
func (ix *Index) rebuildReason(src Source, first, last, ixLast pgq.Offset) (string, error) {
	switch {
	case ixLast == 0:
		return "index empty", nil
	case ixLast > last:
		return "index ahead of journal", nil
	case ixLast+1 < first:
		return "journal starts after the index ends", nil
	case ixLast+1 == first:
		return "", nil
	}
	have, err := ix.get(ixLast)
	if errors.Is(err, ErrNotFound) {
		return "index has no entry at its last offset", nil
	}
	if err != nil {
		return "", fmt.Errorf("index: catch up: %w", err)
	}
	tx, _, err := src.ReadSized(ixLast)
	if err != nil {
		return "", fmt.Errorf("index: catch up: read journal offset %d: %w", ixLast, err)
	}
	if tx == nil {
		return "", fmt.Errorf("index: catch up: journal offset %d read as nil", ixLast)
	}
	if tx.CommitLSN != have.CommitLSN || tx.EndLSN != have.EndLSN ||
		tx.CommitTime.UnixMicro() != have.CommitTime.UnixMicro() {
		return "index disagrees with journal", nil
	}
	return "", nil
}
