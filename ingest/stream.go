package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/journal"
	"github.com/pgq-dev/pgq/pgoutput"
	"github.com/pgq-dev/pgq/record"
)

// streamState is the session's view of streamed (protocol v2) in-progress
// transactions. Only the session goroutine touches it.
type streamState struct {
	// open holds every streamed transaction seen and not yet committed or
	// aborted, by toplevel xid.
	open map[uint32]*spillTx
	// cur is the transaction of the current stream block (between
	// StreamStart and StreamStop), nil outside a block.
	cur *spillTx
}

// handleStream handles the stream messages and everything inside a stream
// block. It reports whether msg was one of them.
func (s *session) handleStream(ctx context.Context, msg pgoutput.Message, size int) (bool, error) {
	st := &s.streams
	switch m := msg.(type) {
	case *pgoutput.StreamStart:
		if s.in.o.SpillDir == "" {
			return true, errors.New("ingest: the server streams an in-progress transaction, but no spill directory is set")
		}
		if st.open == nil {
			st.open = map[uint32]*spillTx{}
		}
		t := st.open[m.Xid]
		if t == nil {
			if !m.First {
				return true, fmt.Errorf("ingest: stream block of xid %d without its first block", m.Xid)
			}
			t = s.newSpill(m.Xid)
			st.open[m.Xid] = t
			s.in.tracker.StreamStarted()
			s.in.o.Metrics.StreamsStarted.Inc()
		}
		st.cur = t
	case *pgoutput.StreamStop:
		st.cur = nil
	case *pgoutput.StreamCommit:
		return true, s.streamCommit(ctx, m)
	case *pgoutput.StreamAbort:
		t := st.open[m.Xid]
		if t == nil {
			return true, nil // nothing of it was streamed to us
		}
		if m.SubXid != m.Xid {
			t.abortSub(m.SubXid)
			t.ddl.reset() // a proof row of the aborted subtransaction proves nothing
			return true, nil
		}
		delete(st.open, m.Xid)
		s.in.tracker.StreamEnded()
		s.in.o.Metrics.TxSkipped.WithLabelValues("aborted").Inc()
		return true, t.discard()
	default:
		if st.cur == nil {
			return false, nil
		}
		switch m := msg.(type) {
		case *pgoutput.Origin:
			st.cur.origin = m.Name
		case *pgoutput.Relation:
			// Cached by the decoder; spilled changes carry names, types
			// and the row's key.
			s.resolveBaseTypes(ctx, m)
			return true, s.resolveRowKey(ctx, m)
		case *pgoutput.TypeMsg:
		case *pgoutput.Row:
			xid := m.Xid
			if xid == 0 {
				xid = st.cur.xid
			}
			if s.checkDDL(&st.cur.ddl, &m.Change, xid) {
				return true, nil // a proof row: pgq's, not the user's
			}
			return true, st.cur.add(xid, &m.Change)
		default:
			return true, fmt.Errorf("ingest: unexpected %T inside a stream block", msg)
		}
	}
	return true, nil
}

// chunkBytes is the write buffer of one spilled transaction.
func (s *session) chunkBytes() int {
	return min(spillChunkBytes, s.in.o.MaxRecordBytes)
}

// streamCommit journals a streamed transaction from its spill, part by
// part, and removes the spill.
func (s *session) streamCommit(ctx context.Context, m *pgoutput.StreamCommit) error {
	t := s.streams.open[m.Xid]
	delete(s.streams.open, m.Xid)
	if s.streams.cur == t {
		s.streams.cur = nil
	}
	hdr := pgq.Transaction{Xid: m.Xid, CommitLSN: m.CommitLSN, EndLSN: m.EndLSN, CommitTime: m.CommitTime}
	if t == nil {
		// Streamed without a change for us (nothing was in a block).
		s.in.tracker.Skipped(m.EndLSN)
		s.in.o.Metrics.TxSkipped.WithLabelValues("empty").Inc()
		return nil
	}
	defer s.in.tracker.StreamEnded()
	hdr.Origin = t.origin
	s.backfillStreamed(m.Xid)
	err := s.journalSpill(ctx, t, hdr)
	if derr := t.discard(); err == nil {
		err = derr
	}
	return err
}

// journalSpill submits t as the transaction hdr: each surviving chunk of
// the spill becomes one part, its header restamped with hdr's (no change
// is decoded or re-encoded; chunks are at most MaxRecordBytes).
func (s *session) journalSpill(ctx context.Context, t *spillTx, hdr pgq.Transaction) error {
	if hdr.EndLSN <= s.in.lastSubmitted { // a re-send: already journaled
		s.in.tracker.Skipped(hdr.EndLSN)
		s.in.o.Metrics.TxSkipped.WithLabelValues("duplicate").Inc()
		return nil
	}
	start := time.Now()
	w := partWriter{s: s, hdr: hdr}
	// A chunk is submitted once the next one shows it is not the last. It
	// is restamped as a non-final part as it is read (the one copy out of
	// the read buffer); only the last one is restamped again, as final.
	h := heldPart{w: &w}
	err := t.replayChunks(func(rec []byte) error { return h.add(ctx, rec) })
	if err == nil {
		err = h.finish(ctx)
	}
	if err != nil {
		if w.part > 0 && ctx.Err() == nil && !IsFatal(err) {
			// Some parts are queued: PostgreSQL's re-send would now be
			// dropped as a duplicate. A restart cuts the parts off the
			// journal and takes the transaction again.
			err = &FatalError{Err: fmt.Errorf("ingest: transaction %d partially journaled: %w", hdr.Xid, err)}
		}
		return err
	}
	s.in.o.Metrics.SpilledBytes.Add(float64(t.written))
	s.in.o.Logger.Debug("journaled a spilled transaction", "xid", hdr.Xid, "end_lsn", hdr.EndLSN,
		"changes", w.changes, "parts", w.part, "spill_bytes", t.written, "took", time.Since(start))
	return nil
}

// discardStreams removes every spill of the session (at its end: a new
// session receives in-progress transactions again from their start).
func (s *session) discardStreams() {
	var errs []error
	for xid, t := range s.streams.open {
		errs = append(errs, t.discard())
		delete(s.streams.open, xid)
	}
	s.streams.cur = nil
	if s.curSpill != nil {
		errs = append(errs, s.curSpill.discard())
		s.curSpill = nil
	}
	if err := errors.Join(errs...); err != nil {
		s.in.o.Logger.Warn("removing spill files", "error", err)
	}
}

// partWriter cuts one transaction's changes into records of at most
// MaxRecordBytes (estimated; a single larger change gets a record of its
// own) and submits them back to back: Part 0..n-1, Final on the last. It
// holds at most one part; the committer's MaxPendingBytes bounds the rest.
type partWriter struct {
	s       *session
	hdr     pgq.Transaction
	cur     []pgq.Change
	curEnc  int
	curMem  int
	part    uint32
	changes int
}

// addAll cuts changes already in memory into parts: subslices of
// changes, nothing is copied.
func (w *partWriter) addAll(ctx context.Context, changes []pgq.Change) error {
	from := 0
	for i := range changes {
		enc, mem := changeSize(&changes[i])
		if i > from && w.curEnc+enc > w.s.in.o.MaxRecordBytes {
			w.cur = changes[from:i:i]
			if err := w.submit(ctx, false); err != nil {
				return err
			}
			from = i
		}
		w.curEnc += enc
		w.curMem += mem
		w.changes++
	}
	w.cur = changes[from:]
	return nil
}

// finish submits the last part (Final), or records an empty transaction.
func (w *partWriter) finish(ctx context.Context) error {
	if len(w.cur) == 0 && w.part == 0 {
		w.s.in.tracker.Skipped(w.hdr.EndLSN)
		w.s.in.o.Metrics.TxSkipped.WithLabelValues("empty").Inc()
		return nil
	}
	return w.submit(ctx, true)
}

func (w *partWriter) submit(ctx context.Context, final bool) error {
	tx := w.hdr
	tx.Part, tx.Final, tx.Changes = w.part, final, w.cur
	// w.changes already counts w.cur: its first change's ordinal is the
	// count of the changes before it.
	tx.FirstOrdinal = uint32(w.changes - len(w.cur))
	if err := w.submitTx(ctx, &journal.Record{Tx: &tx}, w.curMem); err != nil {
		return err
	}
	w.cur, w.curEnc, w.curMem = nil, 0, 0
	return nil
}

// restamp copies one spilled chunk record into a new record: the next
// part of w's transaction, with w.hdr's header.
func (w *partWriter) restamp(rec []byte, final bool) (*journal.Record, error) {
	tx := w.hdr
	tx.Part, tx.Final = w.part, final
	tx.FirstOrdinal = uint32(w.changes) // the changes of the parts before
	enc, n, err := record.Restamp(nil, rec, &tx)
	if err != nil {
		return nil, fmt.Errorf("ingest: spilled chunk of xid %d: %w", tx.Xid, err)
	}
	return &journal.Record{Tx: &tx, Encoded: enc, EncodedChanges: n}, nil
}

// submitChunk submits a record made by restamp as the next part.
func (w *partWriter) submitChunk(ctx context.Context, r *journal.Record) error {
	w.changes += r.EncodedChanges
	return w.submitTx(ctx, r, len(r.Encoded))
}

// submitTx hands one part to the committer; size is its memory estimate.
func (w *partWriter) submitTx(ctx context.Context, r *journal.Record, size int) error {
	tx := r.Tx
	if w.part == 0 {
		// Once per transaction, before its first part: confirmation now
		// waits until the final part is durable.
		w.s.in.lastSubmitted = tx.EndLSN
		w.s.in.tracker.Submitted(tx.EndLSN)
	}
	if err := w.s.in.o.Committer.SubmitRecord(ctx, r, size); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &FatalError{Err: fmt.Errorf("ingest: journal: %w", err)}
	}
	w.part++
	// Journaling a large transaction keeps the loop from receiving for a
	// while: keep the walsender's timeout at bay. A broken connection shows
	// up at the next receive, once the transaction is fully submitted. An
	// initial load's session has no connection: it is not streaming yet.
	if w.s.conn == nil {
		return nil
	}
	if err := w.s.maybeSendStatus(false); err != nil {
		w.s.in.o.Logger.Debug("status update while journaling parts", "error", err)
	}
	return nil
}
