package bridge

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/backoff"
)

// Publisher sends messages to one broker. Implementations live in the
// subpackages (bridge/jetstream, bridge/kafka).
type Publisher interface {
	// Publish sends, in order, every msgs[i] whose acked[i] is false and
	// returns once each of them is acknowledged (acked[i] set to true) or
	// has failed. It returns nil only when every message is acknowledged.
	// After a failure it may stop sending the rest, so that no message is
	// stored after one that failed on the same key. It is never called
	// concurrently. A message the broker already holds (at or before the
	// position of the last message it holds, read at start and after a
	// reconnect or failure; see the package doc) is set acknowledged
	// without being sent. A stream or topic another group's bridge (or
	// another producer) writes is refused with an error wrapping
	// ErrShared, which ends Run.
	Publish(ctx context.Context, msgs []Message, acked []bool) error
	// Name is the broker kind ("jetstream", "kafka"), a metrics label.
	Name() string
}

// Options configure New. Zero values get the defaults noted.
type Options struct {
	// Client of the pgq API; required.
	Client *client.Client
	// Group is the consumer group read; required (it must exist).
	Group string
	// Member is the prefix of the member id; zero → the host name. Each
	// New appends a random suffix: a restarted bridge must not continue
	// the delivery of a killed one under the same id (pgq would go on
	// after what it delivered to that id, not from the cursor). A new
	// member waits until the killed one's lease expires (LeaseTTL).
	Member string
	// Publisher; required.
	Publisher Publisher
	// MaxTransactions and MaxBytes per fetch; zero → 1000 and 4 MiB.
	MaxTransactions int
	MaxBytes        int64
	// MaxInFlight bounds the messages (changes) of one batch, and so what
	// is handed to the broker and not yet acknowledged at once: a fetch's
	// answer, read as it arrives, is cut into batches of at most this
	// many, so a transaction larger than it is published in windows, each
	// acknowledged before the next is sent, and the group's cursor is
	// committed only after the window holding its last change (a journal
	// record holding more changes goes alone, in one batch of its own);
	// zero → 10000.
	MaxInFlight int
	// Wait is the long-poll wait of a fetch; zero → 1s.
	Wait time.Duration
	// LeaseTTL of the group lease; zero → 30s.
	LeaseTTL time.Duration
	// BackoffMin and BackoffMax bound the wait between publish attempts
	// of a batch the broker did not acknowledge (each wait drawn from
	// [d/2, d], d doubling); zero → 100ms and 10s.
	BackoffMin, BackoffMax time.Duration
	// ShutdownGrace is how long, once Run's context ends, the batch being
	// published may still be acknowledged and committed (so a clean stop
	// leaves nothing to re-publish); zero → 10s.
	ShutdownGrace time.Duration
	// LagInterval is how often the group's lag is read for Status and
	// metrics; zero → 5s, negative → never.
	LagInterval time.Duration
	// Linger holds a fetched batch of fewer than LingerChanges changes for
	// up to Linger, fetching more into it, so that a trickle of changes
	// goes out in fuller batches (the webhook's requests) at the cost of
	// that much latency; zero → a batch goes out as soon as fetched.
	// LingerChanges zero with Linger set → 100.
	Linger        time.Duration
	LingerChanges int
	// Format of the messages' payloads (see formatter.apply); zero → pgq's
	// own (the package doc's wire format). FormatOptions configure its
	// renderer (database, slot, decimal mode, ...); a database or slot
	// they leave empty is pgq's own (Run reads pgq's status once, at its
	// start), unless they set the CloudEvents Source.
	Format        format.Format
	FormatOptions format.Options
	// Metrics; nil → not recorded.
	Metrics *Metrics
	// Logger; nil → slog.Default().
	Logger *slog.Logger
}

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	switch {
	case o.Client == nil:
		return errors.New("bridge: options: no pgq client")
	case o.Group == "":
		return errors.New("bridge: options: no group")
	case o.Publisher == nil:
		return errors.New("bridge: options: no publisher")
	case o.MaxTransactions < 0 || o.MaxBytes < 0 || o.MaxInFlight < 0 || o.Wait < 0 || o.LeaseTTL < 0 || o.BackoffMin < 0 || o.BackoffMax < 0 || o.ShutdownGrace < 0 || o.Linger < 0 || o.LingerChanges < 0:
		return errors.New("bridge: options: negative limit")
	case o.BackoffMax > 0 && o.BackoffMax < o.BackoffMin:
		return errors.New("bridge: options: BackoffMax below BackoffMin")
	}
	return nil
}

// Status is a snapshot of a running bridge.
type Status struct {
	Group           string     `json:"group"`
	Broker          string     `json:"broker"`
	Member          string     `json:"member"`
	CommittedOffset pgq.Offset `json:"committed_offset"`
	Published       uint64     `json:"published"`
	// Skipped counts the messages the broker already held (at or before
	// the position its publisher resumed from), not sent again; they
	// count as published too.
	Skipped uint64 `json:"skipped"`
	Batches uint64 `json:"batches"`
	// InFlight counts the messages handed to the broker and not yet
	// acknowledged, including those waiting for a retry.
	InFlight int    `json:"in_flight"`
	Errors   uint64 `json:"errors"`
	// BrokerOK is false from a failed publish until the next
	// acknowledged batch.
	BrokerOK bool `json:"broker_ok"`
	// RetryingSince is when the current unacknowledged batch first failed.
	RetryingSince *time.Time `json:"retrying_since,omitempty"`
	// LastError is the last failure, kept after the bridge recovered
	// (BrokerOK says whether it still holds); LastErrorAt is when it
	// happened.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	LagRecords  uint64     `json:"lag_records"`
	LagSeconds  float64    `json:"lag_seconds"`
}

// Bridge reads one consumer group and publishes every change to a broker,
// committing the group's cursor only after the broker acknowledged every
// message of the committed range.
type Bridge struct {
	o      Options
	cs     *client.Consumer // used by Run's loop only
	member string           // cs.Member(), for the lease renewals
	// parts, warnedParts and fmt are used by the stage building a batch
	// (one at a time, in order; see pipeline.launch).
	parts       partCounter
	warnedParts bool
	fmt         *formatter // nil: pgq's format
	// inTx is used by Run's loop only: the last record read is a part of
	// a transaction other than its last.
	inTx bool
	// carry is used by Run's loop only: the record read from the answer
	// that did not fit the last batch (MaxInFlight); it opens the next.
	carry *pgq.Transaction
	// busy counts the batches between fetch and the end of their publish,
	// plus one while an answer is still being read (Run's loop sets it):
	// the lease is renewed while it is above zero (keepLease).
	busy      atomic.Int32
	streaming bool // used by Run's loop only: busy counts the answer being read

	mu sync.Mutex // guards st
	st Status
}

// New returns a bridge; nothing is sent until Run.
func New(o Options) (*Bridge, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.MaxTransactions == 0 {
		o.MaxTransactions = 1000
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = 4 << 20
	}
	if o.Wait == 0 {
		o.Wait = time.Second
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 10000
	}
	if o.BackoffMin == 0 {
		o.BackoffMin = 100 * time.Millisecond
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = max(10*time.Second, o.BackoffMin)
	}
	if o.Linger > 0 && o.LingerChanges == 0 {
		o.LingerChanges = 100
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = 10 * time.Second
	}
	if o.LagInterval == 0 {
		o.LagInterval = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Member == "" {
		o.Member, _ = os.Hostname()
	}
	var rnd [4]byte
	_, _ = crand.Read(rnd[:])
	o.Member += "-" + hex.EncodeToString(rnd[:])
	cs, err := o.Client.Consumer(o.Group, client.ConsumerOptions{Member: o.Member, Max: o.MaxTransactions, MaxBytes: o.MaxBytes, Wait: o.Wait, LeaseTTL: o.LeaseTTL})
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	fm, err := newFormatter(o.Format, o.FormatOptions, o.Publisher)
	if err != nil {
		return nil, err
	}
	b := &Bridge{o: o, cs: cs, member: cs.Member(), fmt: fm}
	b.st = Status{Group: o.Group, Broker: o.Publisher.Name(), Member: cs.Member(), BrokerOK: true}
	o.Metrics.init(o.Group, o.Publisher.Name())
	return b, nil
}

// Status returns a snapshot.
func (b *Bridge) Status() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.st
}

func (b *Bridge) update(f func(*Status)) {
	b.mu.Lock()
	f(&b.st)
	b.mu.Unlock()
}

// Run bridges until ctx ends (then it returns nil after releasing the
// group's lease) or pgq fails for good (the group does not exist, a bad
// token, ...). A broker outage is not an error: the batch is retried with
// backoff until the broker acknowledges it or ctx ends.
func (b *Bridge) Run(ctx context.Context) error {
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = b.cs.Close(rctx) // uncommitted messages are re-published by the next member
	}()
	if b.o.LagInterval > 0 {
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan struct{})
		defer func() { cancel(); <-done }()
		go func() { defer close(done); b.lagLoop(lctx) }()
	}
	// pctx outlives ctx by ShutdownGrace: the batch in flight when ctx
	// ends is still acknowledged and committed.
	pctx, pcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer pcancel()
	stopGrace := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(b.o.ShutdownGrace, pcancel)
		context.AfterFunc(pctx, func() { t.Stop() })
	})
	defer stopGrace()
	// rctx ends the retries of a batch in flight when Run fails for good.
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	if err := b.nameSource(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer b.keepLease(pctx)()
	pl := pipeline{free: make([]*batch, 0, maxInFlight+1)}
	for range maxInFlight + 1 {
		pl.free = append(pl.free, &batch{})
	}
	for {
		if ctx.Err() != nil {
			return b.finish(ctx, pctx, &pl)
		}
		// Commit the batches at the front that are acknowledged; with the
		// pipeline full, wait for the oldest.
		if stop, err := b.retire(ctx, pctx, &pl, len(pl.q) == maxInFlight); stop {
			rcancel()
			pl.waitAll()
			return err
		}
		// With batches in flight, fetch without waiting: what arrived is
		// built and queued while the broker acknowledges.
		wait := b.o.Wait
		if len(pl.q) > 0 {
			wait = 0
		}
		bt := pl.take()
		if err := b.fetch(ctx, bt, wait); err != nil {
			pl.give(bt)
			if ctx.Err() != nil {
				return b.finish(ctx, pctx, &pl)
			}
			b.fail("fetch", err)
			rcancel()
			pl.waitAll()
			return fmt.Errorf("bridge: fetch group %q: %w", b.o.Group, err)
		}
		// A batch cut before the answer's end (carry) is not committed:
		// the consumer's mark already covers the carried record, which the
		// next batch holds (and commits).
		bt.mark, bt.inTx = b.cs.Mark(), b.inTx || b.carry != nil
		b.setStreaming(b.carry != nil || b.cs.Buffered() > 0)
		if len(bt.txs) > 0 {
			pl.launch(b, rctx, pctx, bt)
			continue
		}
		mark := bt.mark
		pl.give(bt)
		if len(pl.q) > 0 {
			// Nothing new: commit the oldest batch once acknowledged.
			if stop, err := b.retire(ctx, pctx, &pl, true); stop {
				rcancel()
				pl.waitAll()
				return err
			}
			continue
		}
		// Caught up, or all filtered out: commit what the fetch moved
		// past, unless that is inside a transaction (see partCounter).
		if b.inTx {
			continue
		}
		if stop, err := b.commit(ctx, pctx, mark); stop {
			return err
		}
	}
}

// nameSource completes the format's options from pgq's status (once,
// before the first batch is built) where they name no database or slot
// (format.Options.NamesSource): the bridge's messages then name a
// change's source as pgq's HTTP fetch does.
func (b *Bridge) nameSource(ctx context.Context) error {
	o := b.o.FormatOptions
	if b.fmt == nil || o.NamesSource() {
		return nil
	}
	st, err := b.o.Client.Status(ctx)
	if err != nil {
		return fmt.Errorf("bridge: pgq's status, for the source the format names: %w", err)
	}
	o.FillSource(st.Database, st.Slot)
	f, err := newFormatter(b.o.Format, o, b.o.Publisher)
	if err != nil {
		return err
	}
	b.fmt = f
	return nil
}

// fetch polls once (long-polling for wait) and moves what arrived into
// bt, decoding the answer as it goes, until bt holds MaxInFlight changes
// (the rest of the answer stays on the wire for the next batch); with
// Linger, a batch of fewer than LingerChanges changes is held, polling
// for more, until it has them or Linger has passed since the first poll.
func (b *Bridge) fetch(ctx context.Context, bt *batch, wait time.Duration) error {
	var deadline time.Time
	changes := 0
	for {
		if b.carry == nil {
			// Poll fetches nothing while an answer is still being read.
			if _, err := b.cs.Poll(ctx, wait); err != nil {
				return err
			}
		}
		for b.carry != nil || b.cs.Buffered() > 0 {
			tx := b.carry
			b.carry = nil
			if tx == nil {
				var err error
				if tx, err = b.cs.Next(ctx); err != nil {
					return err
				}
			}
			if len(bt.txs) > 0 && changes+len(tx.Changes) > b.o.MaxInFlight {
				b.carry = tx
				return nil
			}
			bt.txs = append(bt.txs, tx)
			changes += len(tx.Changes)
			b.inTx = !tx.Final && tx.Backfill == ""
		}
		if b.o.Linger <= 0 || len(bt.txs) == 0 || changes >= b.o.LingerChanges {
			return nil
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(b.o.Linger)
		}
		// Less than api.MinDuration left: the server would refuse such
		// a wait, and lingering that little more gains nothing.
		if wait = time.Until(deadline); wait < api.MinDuration {
			return nil
		}
	}
}

// maxInFlight is how many fetched batches may be between Run's fetch and
// their commit: one being published, one built and waiting for it.
// Together with the one Run fetches, three stages run at once: fetching
// and decoding (Run), building the messages, publishing.
const maxInFlight = 2

// pipeline holds Run's batches: q in flight (oldest first), free the
// arrays to reuse. It is used by Run's goroutine only; the stages touch
// only their own batch and the flight of the one before.
type pipeline struct {
	q    []*batch
	free []*batch
}

func (pl *pipeline) take() *batch {
	bt := pl.free[len(pl.free)-1]
	pl.free = pl.free[:len(pl.free)-1]
	bt.reset()
	return bt
}

func (pl *pipeline) give(bt *batch) { pl.free = append(pl.free, bt) }

// launch starts bt's stage after the last one in flight: its messages are
// built once the previous batch's are (the builder's state, partCounter,
// goes in order) and published once the previous batch is acknowledged
// (per-key order); a previous batch that failed fails bt without sending.
func (pl *pipeline) launch(b *Bridge, rctx, pctx context.Context, bt *batch) {
	var prev *flight
	if n := len(pl.q); n > 0 {
		prev = pl.q[n-1].fl
	}
	fl := &flight{built: make(chan struct{}), finished: make(chan struct{})}
	bt.fl = fl
	pl.q = append(pl.q, bt)
	b.busy.Add(1)
	go func() {
		defer b.busy.Add(-1)
		defer close(fl.finished)
		if prev != nil {
			<-prev.built
		}
		for _, tx := range bt.txs {
			b.add(bt, tx)
		}
		clear(bt.txs) // the transactions are garbage once built
		close(fl.built)
		if prev != nil {
			if <-prev.finished; prev.err != nil {
				fl.err = prev.err
				return
			}
		}
		if len(bt.msgs) > 0 {
			fl.err = b.publish(rctx, pctx, bt.msgs, bt.acked)
		}
	}()
}

// waitAll waits until every batch in flight is finished and drops them
// (what they published is published again from the cursor).
func (pl *pipeline) waitAll() {
	for _, bt := range pl.q {
		<-bt.fl.finished
		pl.give(bt)
	}
	pl.q = pl.q[:0]
}

// retire commits the acknowledged batches at the front of the pipeline in
// order (with block, it waits for the oldest first). A lost lease drops
// every batch in flight (they come again from the cursor). stop: Run
// returns err (nil when ctx ended).
func (b *Bridge) retire(ctx, pctx context.Context, pl *pipeline, block bool) (stop bool, err error) {
	for len(pl.q) > 0 {
		front := pl.q[0]
		if !block {
			select {
			case <-front.fl.finished:
			default:
				return false, nil
			}
		}
		block = false
		<-front.fl.finished
		if err := front.fl.err; err != nil {
			return true, b.refused(err) // or ctx ended; nothing past the acknowledged is committed
		}
		pl.q = pl.q[1:]
		pl.give(front)
		if front.inTx {
			continue
		}
		stop, err := b.commit(ctx, pctx, front.mark)
		if stop {
			return true, err
		}
		if err != nil {
			pl.waitAll() // published again after the redelivery, or never committed
			return false, nil
		}
	}
	return false, nil
}

// batch is one fetch's transactions and their messages, published
// together and committed at mark. Payloads and keys live in arena.
type batch struct {
	txs    []*pgq.Transaction // fetched by Run, built by the stage
	msgs   []Message
	acked  []bool
	arena  []byte
	prefix []byte
	mark   client.Mark
	// inTx: the batch ends inside a multi-part transaction (its last
	// record is not the final part); its mark is not committed.
	inTx bool
	fl   *flight // this launch's, new each time (the next stage holds it)
}

// flight is one batch's progress through its stage: built closes once
// its messages are built, finished once they are published or failed
// (err, read after finished).
type flight struct {
	built, finished chan struct{}
	err             error
}

func (bt *batch) reset() {
	clear(bt.msgs) // drop references to the previous batch's strings
	bt.txs, bt.msgs, bt.acked, bt.arena, bt.fl = bt.txs[:0], bt.msgs[:0], bt.acked[:0], bt.arena[:0], nil
}

// add appends tx's messages to bt. It runs in the batches' stages, one
// at a time, in fetch order.
func (b *Bridge) add(bt *batch, tx *pgq.Transaction) {
	tx, unknown := b.parts.fix(tx)
	if unknown && !b.warnedParts {
		b.warnedParts = true
		b.o.Logger.Warn("bridge: the group's cursor is inside a transaction journaled in parts before pgq recorded ordinals: its earlier parts are unknown, so this part's message ids may repeat theirs; reset the group to the transaction's first part",
			"group", b.o.Group, "offset", tx.Offset, "part", tx.Part, "commit_lsn", tx.CommitLSN)
	}
	n := len(bt.msgs)
	bt.msgs, bt.arena, bt.prefix = appendMessages(bt.msgs, bt.arena, bt.prefix, tx, b.o.Group)
	if b.fmt != nil {
		bt.msgs, bt.arena = b.fmt.apply(bt.msgs, n, bt.arena, tx)
	}
	for range len(bt.msgs) - n {
		bt.acked = append(bt.acked, false)
	}
}

// commit commits the group through mark. err != nil with stop == false:
// the lease was lost, the uncommitted batches come again from the cursor
// (JetStream drops the duplicates by Nats-Msg-Id). stop: Run returns err
// (nil when ctx ended).
func (b *Bridge) commit(ctx, pctx context.Context, mark client.Mark) (stop bool, err error) {
	if err := b.cs.CommitMark(pctx, mark); err != nil {
		b.fail("commit", err)
		if errors.Is(err, client.ErrRedeliver) {
			return false, err
		}
		if ctx.Err() != nil {
			return true, nil
		}
		return true, fmt.Errorf("bridge: commit group %q: %w", b.o.Group, err)
	}
	b.committed()
	return false, nil
}

// finish is Run's end once ctx ended: the batches in flight are still
// acknowledged and committed, in order, within ShutdownGrace (pctx).
func (b *Bridge) finish(ctx, pctx context.Context, pl *pipeline) error {
	var (
		last client.Mark
		have bool
		err  error
	)
	for _, bt := range pl.q {
		<-bt.fl.finished
		if err = bt.fl.err; err != nil {
			break
		}
		if !bt.inTx {
			last, have = bt.mark, true
		}
	}
	pl.waitAll()
	if have {
		_, _ = b.commit(ctx, pctx, last) // a failure: re-published from the cursor
	}
	return b.refused(err)
}

// refused is Run's result once a publish ended with err: the publisher
// refused the stream or topic (ErrShared), or (nil) ctx ended.
func (b *Bridge) refused(err error) error {
	if errors.Is(err, ErrShared) || errors.Is(err, ErrGaveUp) {
		return fmt.Errorf("bridge: group %q: %w", b.o.Group, err)
	}
	return nil
}

// publish retries until every message is acknowledged; it fails only when
// ctx ends (between attempts) or pctx ends (during one), or when the
// publisher refuses the stream or topic (ErrShared).
func (b *Bridge) publish(ctx, pctx context.Context, msgs []Message, acked []bool) error {
	m := b.o.Metrics
	// In flight: handed to the broker and not acknowledged, between the
	// attempts too (a batch waiting out an outage is in flight), until
	// publish returns.
	defer func() {
		m.inFlight(0)
		b.update(func(s *Status) { s.InFlight = 0 })
	}()
	wait := b.o.BackoffMin
	var since time.Time
	for {
		pending := 0
		for _, a := range acked {
			if !a {
				pending++
			}
		}
		b.update(func(s *Status) { s.InFlight = pending })
		m.inFlight(pending)
		start := time.Now()
		err := b.o.Publisher.Publish(pctx, msgs, acked)
		n := 0
		for _, a := range acked {
			if a {
				n++
			}
		}
		done := pending - (len(msgs) - n)
		m.published(done)
		m.inFlight(len(msgs) - n)
		b.update(func(s *Status) { s.InFlight = len(msgs) - n; s.Published += uint64(done) })
		if sk, ok := b.o.Publisher.(interface{ Skipped() uint64 }); ok {
			n := sk.Skipped()
			b.update(func(s *Status) { s.Skipped = n })
		}
		if errors.Is(err, ErrShared) || errors.Is(err, ErrGaveUp) {
			b.fail("publish", err)
			return err // retrying cannot help
		}
		if err == nil {
			m.latency(time.Since(start))
			b.update(func(s *Status) { s.Batches++; s.BrokerOK = true; s.RetryingSince = nil })
			m.brokerUp(true)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if pctx.Err() != nil {
			return pctx.Err()
		}
		if since.IsZero() {
			since = time.Now()
		}
		b.fail("publish", err)
		b.update(func(s *Status) { s.BrokerOK = false; t := since; s.RetryingSince = &t })
		m.brokerUp(false)
		b.o.Logger.Warn("bridge: broker did not acknowledge; retrying", "broker", b.o.Publisher.Name(), "unacknowledged", len(msgs)-n, "retry_in", wait, "err", err)
		if err := backoff.Sleep(ctx, backoff.Jitter(wait)); err != nil {
			return err
		}
		wait = min(wait*2, b.o.BackoffMax)
	}
}

// setStreaming records whether an answer is still being read (Run's
// loop): while it is, the lease is renewed although no batch may be in
// flight at a given moment.
func (b *Bridge) setStreaming(on bool) {
	if on != b.streaming {
		b.streaming = on
		if on {
			b.busy.Add(1)
		} else {
			b.busy.Add(-1)
		}
	}
}

// keepLease renews the group's lease every LeaseTTL/3, while a batch is
// between its fetch and the end of its publish or an answer is still
// being read (busy), until the returned stop is called: a batch waiting
// for the broker (an outage), and a big transaction published window by
// window (many short publishes, no fetch or commit between them), keep
// the lease; otherwise the commit would be fenced and the batches
// published again (duplicates in Kafka). A lease lost anyway shows at the
// commit.
func (b *Bridge) keepLease(ctx context.Context) (stop func()) {
	every := b.o.LeaseTTL
	if every == 0 {
		every = 30 * time.Second // the server's default
	}
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every / 3)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			if b.busy.Load() > 0 {
				_ = b.o.Client.Heartbeat(hctx, b.o.Group, b.member, b.o.LeaseTTL)
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (b *Bridge) fail(kind string, err error) {
	b.o.Metrics.error(kind)
	at := time.Now().UTC()
	b.update(func(s *Status) { s.Errors++; s.LastError, s.LastErrorAt = kind+": "+err.Error(), &at })
}

func (b *Bridge) committed() {
	// The consumer knows what it committed; the group's info is read by
	// lagLoop. Record what this bridge acknowledged.
	b.o.Metrics.batchCommitted()
}

func (b *Bridge) lagLoop(ctx context.Context) {
	t := time.NewTicker(b.o.LagInterval)
	defer t.Stop()
	for {
		gi, err := b.o.Client.Group(ctx, b.o.Group)
		if err == nil {
			b.update(func(s *Status) {
				s.CommittedOffset = gi.CommittedOffset
				s.LagRecords = gi.Lag.Records
				s.LagSeconds = gi.Lag.Seconds
			})
			b.o.Metrics.lag(gi.Lag.Records, gi.Lag.Seconds, uint64(gi.CommittedOffset))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
