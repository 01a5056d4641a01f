package journal

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/pgq-dev/pgq"
)

// CommitterOptions configure a Committer.
type CommitterOptions struct {
	// MaxPendingBytes bounds the bytes submitted but not yet durable
	// (queued plus being written); Submit blocks above it. Zero means 64 MiB.
	MaxPendingBytes int
	// MaxBatch bounds the transactions written by one Append. Zero means 4096.
	MaxBatch int
}

// Committer is the group-commit front of a Journal. Producers Submit
// transactions; one Run goroutine appends what is queued as one batch
// (one write, one fsync; up to MaxBatch records, at most one of them big:
// see bigRecord) and
// loops, and a second one runs the OnAppend hook of each durable batch
// and publishes the durable position, while the next batch is written. There are no timers: a batch is written as
// soon as something is queued, and while its fsync runs the next batch
// accumulates, so batches grow with load.
type Committer struct {
	j    *Journal
	opts CommitterOptions
	// markDelay is the package's markDelay (tests lengthen it so that
	// only markBatches bounds a marker's wait on a slow machine).
	markDelay time.Duration

	// mu guards every field below.
	mu         sync.Mutex
	queue      []*Record
	sizes      []int
	pending    int           // bytes queued or being written
	submitted  uint64        // transactions accepted by Submit
	durable    uint64        // transactions made durable by Run
	durableOff pgq.Offset    // offset of the last durable transaction
	durableLSN pgq.LSN       // its EndLSN
	waited     time.Duration // time SubmitRecord blocked on MaxPendingBytes
	durableCh  chan struct{} // closed and replaced after each durable batch, and on stop
	spaceCh    chan struct{} // closed and replaced when pending bytes drop, and on stop
	err        error         // Run's failure, or errCommitterStopped once it returned
	running    bool
	closing    bool
	writing    bool          // Run's appending goroutine is writing a batch
	bigAhead   int           // big records (bigRecord) queued or being written (not yet handed to publishing)
	done       chan struct{} // closed when Run returns
	onAppend   func(batch []*Record)
	onWritten  func(batch []*Record)
	// merged holds the records of several batches published together
	// (only the publishing goroutine uses it).
	merged []*Record
	// appended carries durable batches from Run's appending goroutine to
	// its publishing one (set by Run before either starts; tests read
	// its length).
	appended chan appendedBatch

	wake    chan struct{} // buffered(1): something was queued
	closeCh chan struct{} // closed by Close
}

var errCommitterStopped = errors.New("journal: committer stopped")

// NewCommitter returns a Committer writing to j. Start Run in a goroutine.
func NewCommitter(j *Journal, opts CommitterOptions) *Committer {
	if opts.MaxPendingBytes <= 0 {
		opts.MaxPendingBytes = 64 << 20
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 4096
	}
	off, lsn := j.LastOffset(), j.LastEndLSN()
	return &Committer{
		j:          j,
		opts:       opts,
		markDelay:  markDelay,
		durableOff: off,
		durableLSN: lsn,
		durableCh:  make(chan struct{}),
		spaceCh:    make(chan struct{}),
		done:       make(chan struct{}),
		wake:       make(chan struct{}, 1),
		closeCh:    make(chan struct{}),
	}
}

// SetOnAppend sets a hook called after each durable batch, in batch
// order, before the batch is published to Durable, DurableChanged and
// Flush; each record's Tx.Offset and Bytes are set. Under Run it runs on a
// goroutine of its own while the next batch is written; batches that
// became durable together may come in one call. The hook must not call
// Submit or Flush, nor keep batch after it returns.
func (c *Committer) SetOnAppend(fn func(batch []*Record)) {
	c.mu.Lock()
	c.onAppend = fn
	c.mu.Unlock()
}

// SetOnWritten sets a hook called for each batch as soon as its records
// are fsynced, in batch order, on the goroutine that runs the OnAppend
// hook, before the batch's durable-point marker (which may wait for later
// batches: see gather) and so before OnAppend: the records are readable
// then (LastOffset, Changed) and survive a crash, but are not yet
// reported durable. It is for what may see records before they are
// confirmed, an index or the wake-ups of waiting readers, so that the
// marker's wait never delays them; a confirmation belongs in OnAppend.
// Each record's Tx.Offset and Bytes are set. The hook must not call
// Submit or Flush, nor keep batch after it returns.
func (c *Committer) SetOnWritten(fn func(batch []*Record)) {
	c.mu.Lock()
	c.onWritten = fn
	c.mu.Unlock()
}

// Run writes batches until ctx is done or Close is called, then flushes
// what is queued and returns: nil after Close, ctx.Err() after ctx ends, or
// the first Append error (after which Submit and Flush return it too).
//
// Run appends on its own goroutine and hands each durable batch to a
// second goroutine that runs the OnAppend hook and then publishes it
// (Durable, DurableChanged, Flush, the pending bytes): the next batch's
// write and fsync overlap the previous batch's marker and hook. Hooks and
// publications stay in batch order; at most publishAhead batches wait for
// them, and the batches that waited get one marker write, one hook call
// (their records together) and one publication. While the appending
// goroutine is busy, a marker also waits for up to markBatches batches
// (at most markDelay; see gather).
func (c *Committer) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.running || c.err != nil || c.closing {
		c.mu.Unlock()
		return errors.New("journal: committer: Run called twice or after Close")
	}
	c.running = true
	c.mu.Unlock()
	defer close(c.done)

	appended := make(chan appendedBatch, publishAhead)
	c.appended = appended
	published := make(chan struct{})
	markFailed := make(chan error, 1)
	go func() {
		defer close(published)
		failed := false
		var waiting []appendedBatch
		gatherTimer := time.NewTimer(time.Hour)
		gatherTimer.Stop()
		defer gatherTimer.Stop()
		for b := range appended {
			// Every batch that became durable while the previous marker
			// was written is published behind one marker write, and so
			// is every one written within markDelay while the stream
			// goes on.
			waiting = c.takeWaiting(c.received(waiting[:0], b, !failed), appended, !failed)
			if !failed {
				waiting = c.gather(waiting, appended, gatherTimer)
			}
			// After a failed mark nothing more is published: the journal
			// failed, and Run stops with the error.
			if !failed {
				if err := c.publish(waiting); err != nil {
					failed = true
					markFailed <- err
				}
			}
			clear(waiting)
		}
	}()
	handOff := func(b appendedBatch) { appended <- b }
	var stopErr error
	for stopErr == nil {
		select {
		case <-c.wake:
		case <-c.closeCh:
			stopErr = errCommitterStopped
		case <-ctx.Done():
			stopErr = ctx.Err()
		case err := <-markFailed:
			close(appended)
			<-published
			c.stop(err)
			return err
		}
		if err := c.drain(stopErr != nil, handOff); err != nil {
			close(appended)
			<-published // what was fsynced before the failure is published
			c.stop(err)
			return err
		}
	}
	close(appended)
	<-published
	c.stop(errCommitterStopped)
	if errors.Is(stopErr, errCommitterStopped) {
		return nil
	}
	return stopErr
}

// publishAhead is how many durable batches may wait for the publishing
// goroutine while it writes the durable-point marker: the appending
// goroutine goes on writing meanwhile, and the next marker write covers
// them all (one marker fsync for several batches under load, instead of
// one per batch competing with the batches' own fsyncs). The pending
// bytes (MaxPendingBytes) still bound what waits.
const publishAhead = 8

// markBatches and markDelay bound how far a batch's marker may wait for
// the next batches while the appending goroutine writes them (or has them
// queued): one marker write and fsync then covers up to markBatches
// batches instead of each batch paying a second fsync, the marker's,
// beside its own (a second flush of the disk per group commit, which
// halved the group commits a stream of small transactions got, the ~10 %
// ingest lost to 40e4daf). Only the OnAppend hook (ingest's confirmation)
// and the publication wait, at most markDelay past the oldest batch's
// fsync; the records are readable (Changed, LastOffset) and the OnWritten
// hook (the index, filtered readers' wake-ups) runs as soon as their own
// fsync returned, and ingest confirms at most every 10 ms anyway. An appender with nothing to write means no batch is coming: the
// marker is written at once.
//
// While a big record (bigRecord) is queued or being written, the marker
// is written at once. The wait pays off for a stream of small
// transactions, whose next batch is one small fsync away; behind a
// backfill's chunk records (about 1.2 MB each) it held the confirmation
// of every small transaction made durable before them until the chunks'
// own fsync or markDelay (pgqbench's full-speed backfill: the marker's
// wait reached 25 ms at p99, and a small transaction's
// submit-to-confirmable 35 ms). A drain of many small transactions keeps
// the wait, however many megabytes are queued: their batches come one
// fsync after another, and a marker per batch was the ~10 % above.
const (
	markBatches = 4
	markDelay   = 25 * time.Millisecond
)

// bigRecord is the Submit size estimate from which a record is big: a
// batch holds at most one (and whatever small records come before or
// after it up to the next big one), so that a small transaction queued
// ahead of or between a backfill's chunk records is durable after one
// chunk's write and fsync, not all of those queued (up to 4.5 MB in
// pgqbench's full-speed backfill); and while one is queued or being
// written, a durable batch's marker does not wait for the next batch.
// The size of internal/wal's entries written straight to the file.
const bigRecord = 256 << 10

// gather adds to bs (durable batches waiting for their marker, oldest
// first) the batches handed over in ch while the appending goroutine is
// busy with small records (see busy), until there are markBatches or
// markDelay passed since the oldest one became durable; t is the
// publishing goroutine's timer (stopped).
// Without fsyncs a marker costs a write only: nothing waits.
func (c *Committer) gather(bs []appendedBatch, ch <-chan appendedBatch, t *time.Timer) []appendedBatch {
	if c.j.opts.NoSync || c.j.opts.noDurable {
		return bs
	}
	deadline := bs[0].at.Add(c.markDelay)
	for len(bs) < markBatches && c.busy() {
		wait := time.Until(deadline)
		if wait <= 0 {
			return bs
		}
		t.Reset(wait)
		select {
		case b, ok := <-ch:
			t.Stop()
			if !ok {
				return bs
			}
			bs = c.takeWaiting(c.received(bs, b, true), ch, true)
		case <-t.C:
			return bs
		}
	}
	return bs
}

// busy reports whether the appending goroutine is writing a batch or has
// one queued, and none of it is a big record: another durable batch is
// coming soon. Behind a big record (a backfill's chunk, a large
// transaction's part) the next fsync is megabytes away, so the marker is
// written at once rather than after it.
func (c *Committer) busy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return (c.writing || len(c.queue) > 0) && c.bigAhead == 0
}

// takeWaiting adds to bs (see received) the batches already waiting in
// ch, without blocking.
func (c *Committer) takeWaiting(bs []appendedBatch, ch <-chan appendedBatch, hook bool) []appendedBatch {
	for {
		select {
		case b, ok := <-ch:
			if !ok {
				return bs
			}
			bs = c.received(bs, b, hook)
		default:
			return bs
		}
	}
}

// received appends b, a batch the publishing goroutine took over, to bs,
// having run the OnWritten hook on it first when hook is set (not after a
// failed marker: nothing more is published then).
func (c *Committer) received(bs []appendedBatch, b appendedBatch, hook bool) []appendedBatch {
	if hook {
		c.mu.Lock()
		onWritten := c.onWritten
		c.mu.Unlock()
		if onWritten != nil {
			onWritten(b.recs)
		}
	}
	return append(bs, b)
}

// appendedBatch is a durable batch waiting for its hook and publication.
type appendedBatch struct {
	recs  []*Record
	bytes int          // their pending bytes
	point durablePoint // to mark before the hook
	at    time.Time    // when its fsync returned
}

// drain appends queued batches, handing each durable one to publish; with
// all it loops until the queue is empty, otherwise it writes at most one
// batch (the next wake-up brings the rest).
func (c *Committer) drain(all bool, publish func(appendedBatch)) error {
	for {
		c.mu.Lock()
		n := min(len(c.queue), c.opts.MaxBatch)
		if n == 0 {
			c.mu.Unlock()
			return nil
		}
		bytes, big := 0, 0
		for i, s := range c.sizes[:n] {
			if s >= bigRecord {
				if big > 0 {
					n = i
					break
				}
				big++
			}
			bytes += s
		}
		batch := append([]*Record(nil), c.queue[:n]...)
		rest := copy(c.queue, c.queue[n:])
		clear(c.queue[rest:])
		c.queue = c.queue[:rest]
		c.sizes = c.sizes[:copy(c.sizes, c.sizes[n:])]
		if rest > 0 {
			c.signal()
		}
		c.writing = true
		c.mu.Unlock()

		point, err := c.j.appendRecords(batch)
		// Not writing (nor its bytes ahead) before the hand-over, so that
		// the publishing goroutine, which checks them on receiving this
		// batch, does not wait for a batch that is not coming.
		c.mu.Lock()
		c.writing = false
		c.bigAhead -= big
		c.mu.Unlock()
		if err != nil {
			return err // Append's error names the journal and the batch
		}
		// Append closed the journal's Changed channel: a long-polling
		// fetch waiting for these records is runnable now. Yield so that
		// it runs on this thread at once, before the hook and the next
		// batch, instead of waiting for another thread to be woken (a
		// wait of its own when the machine's CPUs are busy).
		runtime.Gosched()
		publish(appendedBatch{recs: batch, bytes: bytes, point: point, at: time.Now()})
		if !all {
			return nil
		}
	}
}

// publish records durable batches (consecutive, in append order) in the
// journal's durable-point marker, with one write naming the last one's
// point, which covers the others; then it runs the OnAppend hook once for
// all their records and makes them visible to Durable, DurableChanged and
// Flush and frees their pending bytes. The marker's fsync thus overlaps
// the next batches' writes and fsyncs, and still comes before the hook,
// which lets ingest confirm them. When the marker fails (which fails the
// journal), nothing is published and the committer stops with the error.
func (c *Committer) publish(bs []appendedBatch) error {
	if err := c.j.markDurable(bs[len(bs)-1].point); err != nil {
		c.stop(err)
		return err
	}
	recs, bytes := bs[0].recs, bs[0].bytes
	if len(bs) > 1 {
		recs = c.merged[:0]
		for _, b := range bs {
			recs = append(recs, b.recs...)
		}
		c.merged = recs
		bytes = 0
		for _, b := range bs {
			bytes += b.bytes
		}
	}
	c.mu.Lock()
	onAppend := c.onAppend
	c.mu.Unlock()
	if onAppend != nil {
		onAppend(recs)
	}
	last := recs[len(recs)-1]
	c.mu.Lock()
	c.durable += uint64(len(recs))
	c.durableOff, c.durableLSN = last.Tx.Offset, last.Tx.EndLSN
	c.pending -= bytes
	close(c.durableCh)
	c.durableCh = make(chan struct{})
	close(c.spaceCh)
	c.spaceCh = make(chan struct{})
	c.mu.Unlock()
	clear(c.merged) // the hook keeps no reference to the batch
	return nil
}

func (c *Committer) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// stop records why Run ended and releases every waiter.
func (c *Committer) stop(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	close(c.durableCh)
	c.durableCh = make(chan struct{})
	close(c.spaceCh)
	c.spaceCh = make(chan struct{})
	c.mu.Unlock()
}

// Submit queues tx for the next batch, to be encoded by the journal (see
// SubmitRecord).
func (c *Committer) Submit(ctx context.Context, tx *pgq.Transaction, size int) error {
	return c.SubmitRecord(ctx, &Record{Tx: tx}, size)
}

// SubmitRecord queues r for the next batch. size is the caller's estimate
// of its bytes, used for the MaxPendingBytes bound: it blocks while the
// pending bytes are above it (a record is always admitted when nothing is
// pending). It returns Run's error once Run has failed or stopped.
func (c *Committer) SubmitRecord(ctx context.Context, r *Record, size int) error {
	size = max(size, 0)
	for {
		c.mu.Lock()
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			return fmt.Errorf("journal: submit: %w", err)
		}
		if c.closing {
			c.mu.Unlock()
			return fmt.Errorf("journal: submit: %w", errCommitterStopped)
		}
		if c.pending == 0 || c.pending+size <= c.opts.MaxPendingBytes {
			c.queue = append(c.queue, r)
			c.sizes = append(c.sizes, size)
			c.pending += size
			if size >= bigRecord {
				c.bigAhead++
			}
			c.submitted++
			c.mu.Unlock()
			c.signal()
			return nil
		}
		space := c.spaceCh
		c.mu.Unlock()
		start := time.Now()
		var err error
		select {
		case <-space:
		case <-ctx.Done():
			err = fmt.Errorf("journal: submit: %w", ctx.Err())
		}
		c.mu.Lock()
		c.waited += time.Since(start)
		c.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// SubmitWaited is the total time SubmitRecord blocked because
// MaxPendingBytes were submitted and not yet durable: the time producers
// waited for the disk.
func (c *Committer) SubmitWaited() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waited
}

// Durable returns the offset of the last fsynced transaction and its EndLSN.
func (c *Committer) Durable() (pgq.Offset, pgq.LSN) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.durableOff, c.durableLSN
}

// DurableChanged returns a channel closed after the next durable batch (or
// when Run stops).
func (c *Committer) DurableChanged() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.durableCh
}

// Flush waits until everything submitted before the call is durable.
func (c *Committer) Flush(ctx context.Context) error {
	c.mu.Lock()
	target := c.submitted
	for c.durable < target {
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			return fmt.Errorf("journal: flush: %w", err)
		}
		ch := c.durableCh
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("journal: flush: %w", ctx.Err())
		}
		c.mu.Lock()
	}
	c.mu.Unlock()
	return nil
}

// Close flushes what is queued and stops Run (waiting for it to return).
// Without a running Run it flushes on the caller's goroutine. It does not
// close the Journal.
func (c *Committer) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil
	}
	c.closing = true
	running := c.running
	c.mu.Unlock()
	close(c.closeCh)
	if running {
		<-c.done
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		if err != nil && !errors.Is(err, errCommitterStopped) {
			return err
		}
		return nil
	}
	err := c.drain(true, func(b appendedBatch) { _ = c.publish([]appendedBatch{b}) })
	if err == nil {
		err = errCommitterStopped
	}
	c.stop(err)
	if errors.Is(err, errCommitterStopped) {
		return nil
	}
	return err
}
