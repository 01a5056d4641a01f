package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"os"
	"sync"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/internal/backoff"
)

// ConsumerOptions configure Client.Consumer. Zero values get the defaults
// noted.
type ConsumerOptions struct {
	// Member identifies this consumer; zero → "<hostname>-<random>".
	Member string
	// Max and MaxBytes per fetch; zero → the server defaults (100, 1 MiB).
	Max      int
	MaxBytes int64
	// Wait is the long-poll wait of each fetch; zero → 10s.
	Wait time.Duration
	// LeaseTTL is this member's lease; zero → 30s (the server default).
	// Consume renews it every LeaseTTL/3 while a handler runs.
	LeaseTTL time.Duration
	// FailFast makes a fetch fail with api.ErrConflict at once when another
	// member holds the group. Without it the consumer is a standby: it
	// waits, and takes over when the holder releases the lease or its
	// lease expires.
	FailFast bool
}

// Validate rejects negative values, and a Wait or LeaseTTL that is neither
// 0 nor at least api.MinDuration (the server refuses shorter durations).
func (o ConsumerOptions) Validate() error {
	if o.Max < 0 || o.MaxBytes < 0 || o.Wait < 0 || o.LeaseTTL < 0 || len(o.Member) > api.MaxMemberLen {
		return errors.New("client: consumer options: negative limit or member over 256 bytes")
	}
	if err := api.CheckDuration("Wait", o.Wait); err != nil {
		return fmt.Errorf("client: consumer options: %w", err)
	}
	if err := api.CheckDuration("LeaseTTL", o.LeaseTTL); err != nil {
		return fmt.Errorf("client: consumer options: %w", err)
	}
	return nil
}

// ErrRedeliver is returned by Consumer.Commit when the commit was refused
// because the lease was lost (taken over, reset, or pgq restarted with
// the delivery forgotten): the consumer has dropped what it buffered, and
// the uncommitted transactions will be delivered again (at-least-once).
var ErrRedeliver = errors.New("client: lease lost; uncommitted transactions will be delivered again")

// Consumer reads one group as one member, riding through pgq restarts and
// network errors (retried with jittered backoff) and waiting as a standby
// while another member holds the group. It is not safe for concurrent use:
// one goroutine calls Next/Messages/Consume/Commit.
type Consumer struct {
	c     *Client
	group string
	o     ConsumerOptions

	// stream is the answer being read (nil: none): Next decodes its
	// transactions one at a time, so a transaction of any size is held
	// one part at a time.
	stream     *FetchStream
	caughtUp   bool       // the stream's answer reached the journal's end
	next       pgq.Offset // NextOffset of the last fetch
	done       pgq.Offset // highest offset safe to commit
	committed  pgq.Offset
	generation uint64 // lease generation of the last fetch
	session    string // this incarnation, sent with every fetch
	// redeliveries counts the times the lease was lost and buffered or
	// uncommitted work dropped for redelivery (Redeliveries).
	redeliveries int
}

// Redeliveries returns how many times the lease was lost and buffered or
// uncommitted work was dropped, to be delivered again. Like the rest of a
// Consumer, it is for the goroutine that consumes.
func (cs *Consumer) Redeliveries() int { return cs.redeliveries }

// Consumer returns a consumer of group. Nothing is sent until Next.
func (c *Client) Consumer(group string, o ConsumerOptions) (*Consumer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := api.ValidateName(group); err != nil {
		return nil, err
	}
	if o.Member == "" {
		o.Member = defaultMember()
	}
	if o.Wait == 0 {
		o.Wait = 10 * time.Second
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 30 * time.Second
	}
	var sb [8]byte
	_, _ = rand.Read(sb[:])
	return &Consumer{c: c, group: group, o: o, session: hex.EncodeToString(sb[:])}, nil
}

// defaultMember is the member id of a consumer given none:
// "<hostname>-<12 random hex digits>".
func defaultMember() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	return host + "-" + hex.EncodeToString(b[:])
}

// Member returns the member id.
func (cs *Consumer) Member() string { return cs.o.Member }

// Poll does one fetch with the given wait, retrying transient failures
// (and, unless FailFast, waiting while another member holds the lease),
// and opens its answer for Next, which decodes the transactions as they
// arrive (Buffered counts them). While an answer is still being read,
// Poll fetches nothing. It reports whether the group has caught up.
func (cs *Consumer) Poll(ctx context.Context, wait time.Duration) (caughtUp bool, err error) {
	if cs.stream != nil {
		return cs.caughtUp, nil
	}
	var s *FetchStream
	err = cs.c.retry(ctx, func() error {
		var err error
		// From: what this consumer has received, so that an answer lost
		// on the way is delivered again rather than skipped.
		s, err = cs.c.FetchStream(ctx, cs.group, FetchRequest{Member: cs.o.Member, Max: cs.o.Max, MaxBytes: cs.o.MaxBytes, Wait: wait, LeaseTTL: cs.o.LeaseTTL, FailFast: cs.o.FailFast,
			Session: cs.session, From: cs.next})
		if err != nil && !cs.o.FailFast && errors.Is(err, api.ErrConflict) {
			// Standby: the holder's lease has not expired within wait.
			// Asking again at once is what takes over when it does.
			if ctx.Err() == nil {
				return cs.standbyPause(ctx, wait)
			}
		}
		return err
	})
	if err != nil {
		return false, err
	}
	if s == nil {
		return false, nil // standby: nothing yet
	}
	res := s.Result()
	if res.Generation != cs.generation && cs.generation != 0 {
		// A new lease: whatever this member buffered or handled under the
		// old one without committing is redelivered from the cursor. It
		// counts here, not when the old lease's commit is refused: that
		// commit may never be sent (a later one under the new lease
		// replaces it in the background queue).
		if cs.done > res.CommittedOffset {
			cs.redeliveries++
		}
		cs.done, cs.committed = res.CommittedOffset, res.CommittedOffset
	}
	cs.generation = res.Generation
	cs.next = res.NextOffset
	if cs.committed == 0 || res.CommittedOffset > cs.committed {
		cs.committed = res.CommittedOffset
	}
	cs.done = max(cs.done, cs.committed)
	cs.caughtUp = res.NextOffset > res.LastOffset
	if s.Remaining() == 0 {
		s.Close()
		cs.done = max(cs.done, res.NextOffset-1) // filtered-out records
	} else {
		cs.stream = s
	}
	return cs.caughtUp, nil
}

// dropStream closes the answer being read; what Next has not returned
// comes again from the cursor (or From).
func (cs *Consumer) dropStream() {
	if cs.stream != nil {
		cs.stream.Close()
		cs.stream = nil
	}
}

// standbyPause waits briefly before a standby asks again, so that a
// server answering a conflict at once (an old pgq) is not hammered.
func (cs *Consumer) standbyPause(ctx context.Context, wait time.Duration) error {
	return backoff.Sleep(ctx, backoff.Jitter(max(cs.c.o.Retry.Min, min(wait, time.Second))))
}

// Buffered reports how many fetched transactions Next will return without
// a fetch: those of the answer being read that Next has not returned
// (decoded as Next returns them, not held).
func (cs *Consumer) Buffered() int {
	if cs.stream == nil {
		return 0
	}
	return cs.stream.Remaining()
}

// Next returns the next transaction (a journal record: a whole
// transaction, or one part of a multi-part one, Final on its last),
// long-polling as needed until one arrives or ctx ends. It decodes the
// answer as it arrives, so a transaction of any size is held one part at
// a time. Returned transactions are not committed: call Commit after
// processing them (at-least-once); a commit never lands inside a
// multi-part transaction, and the end of an answer is committed only once
// the answer was read to its end. An answer cut short is an error (its
// transactions from the first incomplete one on come again from the
// cursor, or from the next fetch's From).
func (cs *Consumer) Next(ctx context.Context) (*pgq.Transaction, error) {
	for cs.stream == nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, err := cs.Poll(ctx, cs.o.Wait); err != nil {
			return nil, err
		}
	}
	tx, err := cs.stream.Next()
	if err != nil {
		cs.dropStream()
		// Resume after the last whole transaction returned: a fetch from
		// inside a multi-part transaction is refused.
		cs.next = cs.done + 1
		return nil, err
	}
	if tx.Final {
		cs.done = max(cs.done, tx.Offset)
	}
	if cs.stream.Remaining() == 0 {
		// Next returned the last transaction only after reading the
		// answer to its end.
		cs.dropStream()
		cs.done = max(cs.done, cs.next-1)
	}
	return tx, nil
}

// Commit commits everything Next returned (and the filtered-out records
// around it), retrying transient failures. It never commits inside a
// multi-part transaction. When the lease was lost it returns an error
// wrapping ErrRedeliver and the api error, after dropping the buffer.
func (cs *Consumer) Commit(ctx context.Context) error {
	return cs.CommitMark(ctx, cs.Mark())
}

// Mark is a point of a Consumer's delivery that can be committed later:
// see Consumer.Mark.
type Mark struct {
	offset     pgq.Offset
	generation uint64 // the lease that delivered it
}

// Offset returns the offset the mark commits.
func (m Mark) Offset() pgq.Offset { return m.offset }

// Mark returns what Commit would commit now: everything Next returned
// (and the filtered-out records around it), always a transaction
// boundary, under the current lease. With CommitMark a caller can go on
// fetching (Poll, Next) while the transactions up to a mark are still
// being processed, and commit exactly those later.
func (cs *Consumer) Mark() Mark { return Mark{offset: cs.done, generation: cs.generation} }

// CommitMark commits through m, a Mark of this consumer, retrying
// transient failures; a mark at or below what is committed is a no-op.
// The commit carries the mark's lease generation: when the lease was lost
// since (even if this member holds a new one), it returns an error
// wrapping ErrRedeliver and the api error after dropping the buffer, as
// Commit does.
func (cs *Consumer) CommitMark(ctx context.Context, m Mark) error {
	if m.offset <= cs.committed {
		return nil
	}
	// The commit renews the lease: for this member's TTL, not the
	// server's default, or a standby would wait that long after a crash.
	cr, err := cs.c.commit(ctx, cs.group, cs.o.Member, m.offset, m.generation, cs.o.LeaseTTL)
	if err != nil {
		return cs.commitFailed(err)
	}
	cs.committed = max(cs.committed, cr.CommittedOffset)
	return nil
}

// commitFailed turns a refused commit into ErrRedeliver and forgets what
// was fetched: the next fetch starts at the group's cursor. It asks for
// that explicitly (From just after the last cursor this consumer saw):
// with From left at the end of the dropped buffer, a server whose lease
// still held resumed there, and the dropped transactions were skipped
// (a commit sent before a pgq restart and refused after it, while a
// newer batch was buffered).
func (cs *Consumer) commitFailed(err error) error {
	if errors.Is(err, api.ErrFenced) || errors.Is(err, api.ErrInvalidCommit) {
		cs.next = cs.committed + 1
		cs.dropStream()
		cs.done, cs.committed, cs.generation = 0, 0, 0
		cs.redeliveries++
		return fmt.Errorf("%w: %w", ErrRedeliver, err)
	}
	return err
}

// Messages iterates over transactions until ctx ends or a fetch fails (the
// error is yielded last). Commit is the caller's: call Consumer.Commit.
func (cs *Consumer) Messages(ctx context.Context) iter.Seq2[*pgq.Transaction, error] {
	return func(yield func(*pgq.Transaction, error) bool) {
		for {
			tx, err := cs.Next(ctx)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(tx, nil) {
				return
			}
		}
	}
}

// Consume calls handler for each transaction and commits after each
// fetched batch. The commit of a handled batch goes out on a background
// goroutine while the next fetch waits for data, so a transaction
// committed in PostgreSQL during a commit round trip is not held back by
// it; commits stay in order, one at a time, each after its batch was
// handled. It rides through pgq restarts and network errors, waits
// as a standby while another member holds the group, and renews the lease
// every LeaseTTL/3 while a handler runs, so a slow handler keeps the
// group. Delivery is at-least-once: when the lease is lost (taken over
// after an expiry, reset, or a restart that forgot the delivery), what was
// handled but not committed is delivered again, here or to another
// member. When handler fails, what succeeded is committed and the error is
// returned. It returns ctx's error when ctx ends, after committing what
// was handled.
func (cs *Consumer) Consume(ctx context.Context, handler func(context.Context, *pgq.Transaction) error) error {
	hb := cs.startHeartbeats(ctx)
	defer hb.stop()
	bg := cs.startCommits(ctx)
	defer bg.stop()
	// settle waits for the background commits and takes their outcome: a
	// refused one (lease lost) drops what was fetched under that lease.
	settle := func(wait bool) error {
		err := bg.take(wait)
		if errors.Is(err, ErrRedeliver) {
			return nil // refetch from the cursor
		}
		return err
	}
	commitRest := func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := settle(true); err != nil && ctx.Err() == nil {
			return err
		}
		err := cs.Commit(cctx)
		if errors.Is(err, ErrRedeliver) {
			return nil
		}
		return err
	}
	for {
		// A commit that failed because ctx ended is retried by commitRest
		// once Next reports the end.
		if err := settle(false); err != nil && ctx.Err() == nil {
			return err
		}
		before := cs.done // always a transaction boundary
		tx, err := cs.Next(ctx)
		if err != nil {
			if cerr := commitRest(); cerr != nil && ctx.Err() == nil {
				return errors.Join(err, cerr)
			}
			return err
		}
		hb.busy(true)
		err = handler(ctx, tx)
		// An answer still being read keeps the lease renewed too: a big
		// transaction is handled part by part as it arrives.
		hb.busy(cs.Buffered() > 0)
		if err != nil {
			cs.done = before
			cs.dropStream() // redelivered after the lease changes
			if cerr := commitRest(); cerr != nil {
				return errors.Join(err, cerr)
			}
			return err
		}
		if cs.Buffered() == 0 {
			if ctx.Err() != nil {
				// The handler saw the end coming: keep what it did.
				if err := commitRest(); err != nil {
					return errors.Join(ctx.Err(), err)
				}
				return ctx.Err()
			}
			bg.commit(cs.done, cs.generation)
		}
	}
}

// commitReq is one commit for the background committer.
type commitReq struct {
	offset     pgq.Offset
	generation uint64
}

// bgCommits commits on a goroutine of its own for Consume: the latest
// request wins (commits are cumulative), one commit is in flight at a
// time, in increasing order.
type bgCommits struct {
	cs     *Consumer
	wake   chan struct{} // buffered(1): a request is pending
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine returns

	// mu guards every field below.
	mu        sync.Mutex
	want      commitReq     // pending request; offset 0: none
	sent      commitReq     // the last request (offset 0 after a failure)
	busy      bool          // a commit is in flight
	committed pgq.Offset    // highest offset the server acknowledged
	failed    commitReq     // the request that failed
	err       error         // its error, until take
	idle      chan struct{} // closed and replaced when nothing is pending or in flight
}

func (cs *Consumer) startCommits(ctx context.Context) *bgCommits {
	cctx, cancel := context.WithCancel(ctx)
	b := &bgCommits{cs: cs, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{}), idle: make(chan struct{})}
	go b.run(cctx)
	return b
}

// commit asks for offset to be committed under generation (skipped when
// already committed, or requested under the same lease).
func (b *bgCommits) commit(offset pgq.Offset, generation uint64) {
	b.mu.Lock()
	if offset <= b.cs.committed || (generation == b.sent.generation && offset <= b.sent.offset) {
		b.mu.Unlock()
		return
	}
	b.want, b.sent = commitReq{offset, generation}, commitReq{offset, generation}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *bgCommits) run(ctx context.Context) {
	defer close(b.done)
	for {
		select {
		case <-b.wake:
		case <-ctx.Done():
			return
		}
		b.mu.Lock()
		r := b.want
		b.want = commitReq{}
		b.busy = r.offset != 0
		b.mu.Unlock()
		if r.offset == 0 {
			continue
		}
		cs := b.cs
		cr, err := cs.c.commit(ctx, cs.group, cs.o.Member, r.offset, r.generation, cs.o.LeaseTTL)
		b.mu.Lock()
		b.busy = false
		if err != nil {
			if b.err == nil {
				b.failed, b.err = r, err
			}
			b.sent = commitReq{} // what failed may be asked again
		} else {
			b.committed = max(b.committed, cr.CommittedOffset)
		}
		if b.want.offset == 0 {
			close(b.idle)
			b.idle = make(chan struct{})
		}
		b.mu.Unlock()
	}
}

// take applies the outcome of the commits so far to the consumer (on
// Consume's goroutine); with wait it first waits until none is pending
// or in flight. A commit refused because the lease was lost drops the
// buffer (commitFailed) when the consumer still fetches under that lease,
// and returns an error wrapping ErrRedeliver.
func (b *bgCommits) take(wait bool) error {
	b.mu.Lock()
	for wait && (b.busy || b.want.offset != 0) {
		idle := b.idle
		b.mu.Unlock()
		select {
		case <-idle:
		case <-b.done:
			b.mu.Lock()
			b.busy, b.want = false, commitReq{} // stopped: nothing more comes
			b.mu.Unlock()
		}
		b.mu.Lock()
	}
	committed, failed, err := b.committed, b.failed, b.err
	b.err = nil
	b.mu.Unlock()
	cs := b.cs
	cs.committed = max(cs.committed, committed)
	if err == nil {
		return nil
	}
	if failed.generation != cs.generation {
		// Refused under a lease this consumer no longer fetches under: the
		// new lease already restarted delivery at the cursor (Poll dropped
		// what was buffered under the old one, and counted it).
		if errors.Is(err, api.ErrFenced) || errors.Is(err, api.ErrInvalidCommit) {
			return nil
		}
	}
	return cs.commitFailed(err)
}

// stop ends the goroutine, cancelling a commit in flight.
func (b *bgCommits) stop() {
	b.cancel()
	<-b.done
}

// heartbeats renew the lease while a handler runs.
type heartbeats struct {
	mu      sync.Mutex // guards running
	running bool
	cancel  context.CancelFunc
	done    chan struct{}
}

func (h *heartbeats) busy(b bool) {
	h.mu.Lock()
	h.running = b
	h.mu.Unlock()
}

func (h *heartbeats) stop() {
	h.cancel()
	<-h.done
}

func (cs *Consumer) startHeartbeats(ctx context.Context) *heartbeats {
	hctx, cancel := context.WithCancel(ctx)
	h := &heartbeats{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(cs.o.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			h.mu.Lock()
			running := h.running
			h.mu.Unlock()
			if running {
				// A failure here shows at the next commit (fenced → redeliver).
				_ = cs.c.Heartbeat(hctx, cs.group, cs.o.Member, cs.o.LeaseTTL)
			}
		}
	}()
	return h
}

// Close releases the lease so another member can take over at once.
// Uncommitted transactions will be delivered again.
func (cs *Consumer) Close(ctx context.Context) error {
	cs.dropStream()
	return cs.c.Release(ctx, cs.group, cs.o.Member)
}
