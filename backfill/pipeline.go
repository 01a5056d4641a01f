package backfill

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/ingest"
)

// Chunks in memory per range (rangeDepth): the one being read, the one
// read whose high watermark goes out next, and those whose high watermark
// went out and whose result (journaled and durable) is awaited. Two is
// the least (one read while the one before is journaled); more hide a
// journal fsync or a progress write that takes longer than a read, up to
// maxDepth, within chunksInFlight chunks for all ranges of a table, and
// beyond minDepth only while the storage of a range's chunks in memory
// stays within depthBytes shared by the ranges: wide rows or a large
// chunk size read two deep, as before.
const (
	minDepth       = 2
	maxDepth       = 4
	chunksInFlight = 8
	depthBytes     = 96 << 20
)

// rangeDepth is how many chunks each of ranges ranges keeps in memory.
func rangeDepth(ranges int) int {
	return min(maxDepth, max(minDepth, chunksInFlight/max(ranges, 1)))
}

// runRange reads range ri of t (r) after its last key, chunk after chunk
// as runTable describes, with up to depth chunks in memory, and marks it
// done at its end. It reports false when the backfill was canceled or ctx
// ended.
//
// Two goroutines share the work: this one owns the connection and sends
// round trip after round trip (step: the previous chunk's high watermark,
// the next one's low watermark and its read); a completer takes the
// chunks whose high watermark went out, in order, waits for ingest's
// result and for the record to be durable, and stores the progress. The
// reader goes on while the completer waits, as long as the chunks in
// memory stay within depth. When a chunk must be read again, the
// completer stores no progress past it: the chunks read after it are
// abandoned (those whose high watermark went out are still awaited, so
// their storage is freed only once nothing reads it) and reading restarts
// at its start.
func (m *Manager) runRange(ctx context.Context, conn *pgx.Conn, j *job, t *table, w *ingest.Watch, where string, ri int, r keyRange, limit, depth, ranges int) (bool, error) {
	m.mu.Lock()
	id := j.st.ID
	m.mu.Unlock()
	tr := &tableRun{m: m, conn: conn, j: j, t: t, w: w, where: where, id: id, limit: limit, ri: ri, rb: r.bounds(), lastKey: r.LastKey,
		depth: max(depth, minDepth), budget: depthBytes / max(ranges, 1), pending: make(chan *inflight, max(depth, minDepth)), done: make(chan completion, max(depth, minDepth))}
	cctx, ccancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { tr.complete(cctx) })
	defer func() {
		ccancel()
		close(tr.pending)
		wg.Wait()
	}()
	for {
		if ok, err := tr.collect(ctx); !ok || err != nil {
			return false, err
		}
		if tr.end && tr.prev == nil {
			return tr.m.update(j, func(s *Status) { s.ranges[ri].Done = true })
		}
		if !tr.end && !tr.openNext(ctx) {
			return false, nil
		}
		if err := tr.roundTrip(ctx); err != nil {
			return false, err
		}
	}
}

// tableRun is the state runRange keeps from one round trip to the next.
type tableRun struct {
	m     *Manager
	conn  *pgx.Conn
	j     *job
	t     *table
	w     *ingest.Watch
	where string
	id    string // the backfill's
	limit int    // rows per chunk
	ri    int    // the range's index in the status
	rb    bounds // the range's
	depth int    // chunks in memory at most
	// budget is the range's share of depthBytes; held the storage of
	// the chunks the completer has (inflight.footprint).
	budget, held int
	// prev is the chunk read whose high watermark goes out next round
	// trip, next the one read this round trip; nil when there is none.
	prev, next *inflight
	// pending takes the chunks whose high watermark went out to the
	// completer, in order; done brings back what became of each.
	// awaited counts the chunks sent and not back yet.
	pending chan *inflight
	done    chan completion
	awaited int
	// epoch numbers the chunks read since the last restart (redo): the
	// completer stores no progress for the chunks of an epoch after one
	// of them was to be read again.
	epoch int
	// free holds storage of chunks no one refers to any more, for the
	// next ones: a chunk's is free once ingest never took it, dropped it,
	// or journaled it durably (the committer then no longer reads it).
	// fmu guards it: the completer gives storage back.
	fmu     sync.Mutex
	free    []*chunkBuf
	lastKey []string // the key the next read starts after
	end     bool     // nothing left after lastKey
	redos   int      // consecutive redos of the chunk after lastKey
}

// completion is what became of a chunk whose high watermark went out.
type completion struct {
	f       *inflight
	res     ingest.ChunkResult
	stored  bool // its progress is stored
	stopped bool // the backfill no longer runs: nothing was stored
	err     error
}

// reuse gives f's storage back for the next chunks.
func (tr *tableRun) reuse(f *inflight) {
	tr.fmu.Lock()
	defer tr.fmu.Unlock()
	if f.buf != nil {
		tr.free = append(tr.free, f.buf)
		f.buf = nil
	}
}

// takeBuf returns free storage for a chunk.
func (tr *tableRun) takeBuf() *chunkBuf {
	tr.fmu.Lock()
	defer tr.fmu.Unlock()
	if n := len(tr.free); n > 0 {
		b := tr.free[n-1]
		tr.free = tr.free[:n-1]
		return b
	}
	return &chunkBuf{}
}

// collect takes the completer's reports: all that are there, and it
// waits for more while the next read would take more than depth chunks,
// or at the range's end until every chunk is settled. It reports false
// when the range is to stop, with the error if any.
func (tr *tableRun) collect(ctx context.Context) (bool, error) {
	for tr.awaited > 0 {
		var c completion
		if tr.mustWait() {
			select {
			case c = <-tr.done:
			case <-ctx.Done():
				return false, nil
			}
		} else {
			select {
			case c = <-tr.done:
			default:
				return true, nil
			}
		}
		tr.awaited--
		tr.held -= c.f.footprint
		if ok, err := tr.settle(c); !ok || err != nil {
			return false, err
		}
	}
	return ctx.Err() == nil, nil
}

// mustWait reports whether the next round trip must wait for the
// completer: the read it makes would hold more chunks than depth (prev
// and next besides the awaited ones), or more than minDepth when their
// storage is over budget; at the range's end nothing is read but every
// chunk must be settled.
func (tr *tableRun) mustWait() bool {
	inMem := tr.awaited + tr.count(tr.prev) + 1
	held := tr.held
	if tr.prev != nil {
		held += tr.prev.footprint
	}
	return inMem > tr.depth || (inMem > minDepth && held > tr.budget) || (tr.end && tr.prev == nil && tr.awaited > 0)
}

// count is 1 for a chunk, 0 for none.
func (tr *tableRun) count(f *inflight) int {
	if f == nil {
		return 0
	}
	return 1
}

// settle acts on a completer's report: a chunk to read again restarts
// the range at its start (redo). It reports false when the range is to
// stop, with the error if any.
func (tr *tableRun) settle(c completion) (bool, error) {
	switch {
	case c.err != nil:
		return false, c.err
	case c.stopped:
		return false, nil
	case c.f.epoch != tr.epoch:
		return true, nil // abandoned by a restart already
	case c.res.Redo:
		return tr.redo(c.f, c.res)
	case c.stored:
		tr.redos = 0
	}
	return true, nil
}

// complete is the completer: for each chunk whose high watermark went
// out, in order, it waits for ingest's result and the record's
// durability (Manager.await), frees its storage when nothing reads it
// any more and, unless the chunk or one before it in its epoch is to be
// read again, stores its progress.
func (tr *tableRun) complete(ctx context.Context) {
	bad := -1 // an epoch with a chunk to read again
	for f := range tr.pending {
		c := completion{f: f}
		var reusable bool
		c.res, reusable, c.err = tr.m.await(ctx, f)
		f.ch.Close()
		if reusable {
			tr.reuse(f)
		}
		switch {
		case c.err != nil || f.epoch == bad:
		case c.res.Redo:
			bad = f.epoch
		default:
			ok, err := tr.m.update(tr.j, func(s *Status) {
				r := &s.ranges[tr.ri]
				r.LastKey, r.Rows = f.end, r.Rows+int64(f.rows)
				s.Rows, s.Dropped, s.Chunks = s.Rows+int64(f.rows), s.Dropped+int64(c.res.Dropped), s.Chunks+1
			})
			c.stored, c.stopped, c.err = err == nil && ok, err == nil && !ok, err
		}
		select {
		case tr.done <- c:
		case <-ctx.Done():
		}
	}
}

// openNext opens next, the chunk after lastKey, with storage, once the
// pace allows. It reports false when ctx ended while it waited.
func (tr *tableRun) openNext(ctx context.Context) bool {
	// A chunk's worth of the cap before each read, so the stream's
	// transactions meet idle cores and disk between chunks. When it is
	// not there yet, prev's high watermark goes out alone first, so prev
	// is journaled without waiting for it.
	ready := tr.j.pace.AllowN(time.Now(), tr.limit)
	if !ready && tr.prev == nil {
		if !tr.j.waitPace(ctx, tr.limit) {
			return false
		}
		ready = true
	}
	if !ready {
		return true
	}
	tr.next = tr.m.open(tr.j, tr.w, tr.lastKey)
	tr.next.epoch = tr.epoch
	tr.next.buf = tr.takeBuf()
	return true
}

// roundTrip runs one step: prev's high watermark, next's low watermark
// and the read of next (only the high watermark when there is no next).
// prev goes to the completer and next, when it has rows, becomes prev.
func (tr *tableRun) roundTrip(ctx context.Context) error {
	prev, next := tr.prev, tr.next
	var high, low *ingest.Watermark
	if prev != nil {
		high = &ingest.Watermark{ID: prev.id, Key: prev.ch.Key(), Kind: "high", Xmin: prev.snap.xmin, Xmax: prev.snap.xmax, Xip: prev.snap.xip}
	}
	var buf *chunkBuf // nil when only prev's high watermark goes out: nothing is read
	if next != nil {
		low = &ingest.Watermark{ID: next.id, Key: next.ch.Key(), Kind: "low"}
		buf = next.buf
	}
	var r stepResult
	r.read, r.snap, r.err = step(ctx, tr.conn, tr.t, tr.where, high, low, tr.lastKey, tr.rb, tr.limit, tr.id, buf)
	if r.err != nil {
		return r.err
	}
	if prev != nil {
		// Its high watermark went out: the completer takes it (never
		// blocks: collect keeps awaited below depth).
		tr.awaited++
		tr.held += prev.footprint
		tr.pending <- prev
	}
	if next != nil && r.read.rows > 0 {
		// Its high watermark goes out next round trip.
		next.ch.SetRecord(r.read.encoded, r.read.rows)
	}
	tr.prev = nil
	tr.takeRead(r)
	tr.prev, tr.next = tr.next, nil
	return nil
}

// takeRead records the read of next: an empty one means the table has
// no rows after lastKey, and next is dropped.
func (tr *tableRun) takeRead(r stepResult) {
	next := tr.next
	if next == nil {
		return
	}
	if r.read.rows == 0 {
		if next.ch.Close() {
			tr.reuse(next)
		}
		tr.next, tr.end = nil, true
		return
	}
	next.snap, next.rows, next.end = r.snap, r.read.rows, r.read.lastKey
	next.footprint = next.buf.footprint()
	tr.lastKey, tr.end = next.end, r.read.rows < tr.limit
}

// redo abandons the chunks read after done, which ingest asked to be read
// again, and goes back to its start, up to MaxRedos times in a row: prev
// (its high watermark was never emitted) now, the ones awaited as the
// completer reports them. It reports false when the backfill is to stop,
// with the error if any.
func (tr *tableRun) redo(done *inflight, res ingest.ChunkResult) (bool, error) {
	if tr.prev != nil {
		if tr.prev.ch.Close() { // its high watermark was never emitted
			tr.reuse(tr.prev)
		}
		tr.prev = nil
	}
	tr.epoch++
	tr.redos++
	j, t, redos := tr.j, tr.t, tr.redos
	tr.m.o.Logger.Debug("backfill chunk read again", "id", j.st.ID, "table", t.qualified(), "reason", res.Reason, "times", redos)
	if ok, err := tr.m.update(j, func(s *Status) { s.Redone++ }); !ok || err != nil {
		return false, err
	}
	if redos >= tr.m.o.MaxRedos {
		return false, fmt.Errorf("%w: the chunk of %s after key %v was read %d times in a row and never journaled; last reason: %s",
			ErrRedoLimit, t.qualified(), done.start, redos, res.Reason)
	}
	tr.lastKey, tr.end = done.start, false
	return true, nil
}

// footprint is the bytes of b's storage: what a chunk read into it holds
// in memory until its storage is free again (its record; the changes
// ingest decodes from it when keys changed in its window or it is too
// large for one record are ingest's, for as long as it journals them).
func (b *chunkBuf) footprint() int {
	return cap(b.encoded) + cap(b.row)*int(unsafe.Sizeof(pgq.Value{})) + cap(b.key)
}
