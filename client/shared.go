package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/internal/backoff"
)

// Shared groups (api.CreateRequest with Mode "shared") deliver single
// changes to any number of members; each is acked, naked or termed on its
// own (see docs/http-api.md).

// doJSON is do with a JSON answer (responses that embed raw JSON).
func (c *Client) doJSON(ctx context.Context, method, path string, body, out any) error {
	return c.retry(ctx, func() error {
		data, _, err := c.roundTrip(ctx, method, path, "application/json", body)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("client: %s %s: decode response: %w", method, path, err)
		}
		return nil
	})
}

// FetchMessages is one long-poll fetch of a shared group: up to req.Max
// messages (Member, Max, Wait, Format and the value modes are used) in the
// JSON answer's form, each change as in `pgq journal dump` or in Format
// (for tools that print or forward it, as pgq consume does). FetchShared returns them typed. It does not retry.
func (c *Client) FetchMessages(ctx context.Context, group string, req FetchRequest) ([]api.Message, error) {
	body := api.FetchBody{Member: req.Member, Max: req.Max, Wait: api.Duration(req.Wait), Format: req.Format,
		DecimalHandlingMode: req.DecimalHandlingMode, TimePrecisionMode: req.TimePrecisionMode, IntervalHandlingMode: req.IntervalHandlingMode,
		HstoreHandlingMode: req.HstoreHandlingMode, ProvideTransactionMetadata: req.ProvideTransactionMetadata, Schemas: req.Schemas}
	data, _, err := c.roundTrip(ctx, http.MethodPost, groupPath(group)+"/fetch", "application/json", body)
	if err != nil {
		return nil, err
	}
	var mr api.MessagesResponse
	if err := json.Unmarshal(data, &mr); err != nil {
		return nil, fmt.Errorf("client: fetch %q: decode response: %w", group, err)
	}
	return mr.Messages, nil
}

func (c *Client) settle(ctx context.Context, group, action string, body api.AckBody) (int, error) {
	var ar api.AckResult
	err := c.do(ctx, http.MethodPost, groupPath(group)+"/"+action, body, &ar)
	return ar.Count, err
}

// Ack acknowledges messages of a shared group (retried when transient:
// acking twice is harmless).
func (c *Client) Ack(ctx context.Context, group string, ackIDs ...string) (int, error) {
	return c.settle(ctx, group, "ack", api.AckBody{AckIDs: ackIDs})
}

// Nak asks for redelivery after delay (zero: the group's next backoff
// step).
func (c *Client) Nak(ctx context.Context, group string, delay time.Duration, ackIDs ...string) (int, error) {
	return c.settle(ctx, group, "nak", api.AckBody{AckIDs: ackIDs, Delay: api.Duration(delay)})
}

// NakUnhandled gives back messages that no handler saw (fetched ahead by
// a member that stops): delivered again at once, never parked by it.
func (c *Client) NakUnhandled(ctx context.Context, group string, ackIDs ...string) (int, error) {
	return c.settle(ctx, group, "nak", api.AckBody{AckIDs: ackIDs, Unhandled: true})
}

// Term parks messages at once.
func (c *Client) Term(ctx context.Context, group string, ackIDs ...string) (int, error) {
	return c.settle(ctx, group, "term", api.AckBody{AckIDs: ackIDs})
}

// InProgress restarts the ack wait of messages still being worked on.
func (c *Client) InProgress(ctx context.Context, group string, ackIDs ...string) (int, error) {
	return c.settle(ctx, group, "progress", api.AckBody{AckIDs: ackIDs})
}

// Parked lists a shared group's parked messages.
func (c *Client) Parked(ctx context.Context, group string) ([]api.ParkedMessage, error) {
	var pr api.ParkedResponse
	if err := c.doJSON(ctx, http.MethodGet, groupPath(group)+"/parked", nil, &pr); err != nil {
		return nil, err
	}
	return pr.Parked, nil
}

// Requeue puts parked messages (by ack id, or all) back into delivery.
func (c *Client) Requeue(ctx context.Context, group string, all bool, ackIDs ...string) (int, error) {
	return c.settle(ctx, group, "parked/requeue", api.AckBody{AckIDs: ackIDs, All: all})
}

// DropParked forgets parked messages (by ack id, or all).
func (c *Client) DropParked(ctx context.Context, group string, all bool, ackIDs ...string) (int, error) {
	return c.settle(ctx, group, "parked/drop", api.AckBody{AckIDs: ackIDs, All: all})
}

// SharedConsumerOptions configure a SharedConsumer.
type SharedConsumerOptions struct {
	// Member identifies this consumer; zero → "<hostname>-<random>", as
	// for a Consumer (a shared group's members need not be told apart:
	// any member may settle any message).
	Member string
	// Concurrency is how many handlers Consume runs at once; zero → 1.
	Concurrency int
	// Prefetch is how many messages Consume fetches ahead of its running
	// handlers, so that the next fetch overlaps their work, and how many
	// one fetch of Messages asks for; zero → Concurrency. Messages
	// fetched ahead are in flight on the server (their ack wait runs).
	// Those not handled when Consume ends it gives back (Release): they
	// go to another member at once. A Messages loop's caller releases
	// what it does not handle; otherwise it goes to a member again when
	// its ack wait ends.
	Prefetch int
	// Wait is a fetch's long-poll; zero → 30s.
	Wait time.Duration
}

// SharedConsumer reads a shared group. It is safe for concurrent use.
type SharedConsumer struct {
	c     *Client
	group string
	o     SharedConsumerOptions
}

// SharedConsumer returns a consumer of a shared group.
func (c *Client) SharedConsumer(group string, o SharedConsumerOptions) (*SharedConsumer, error) {
	if err := api.ValidateName(group); err != nil {
		return nil, fmt.Errorf("client: shared consumer: %w", err)
	}
	if len(o.Member) > api.MaxMemberLen {
		return nil, fmt.Errorf("client: shared consumer: member over %d bytes", api.MaxMemberLen)
	}
	if o.Member == "" {
		o.Member = defaultMember()
	}
	if o.Concurrency < 0 || o.Prefetch < 0 || o.Wait < 0 {
		return nil, errors.New("client: shared consumer: negative concurrency, prefetch or wait")
	}
	if err := api.CheckDuration("Wait", o.Wait); err != nil {
		return nil, fmt.Errorf("client: shared consumer: %w", err)
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.Prefetch == 0 {
		o.Prefetch = o.Concurrency
	}
	if o.Wait == 0 {
		o.Wait = 30 * time.Second
	}
	return &SharedConsumer{c: c, group: group, o: o}, nil
}

// Member returns the member id.
func (sc *SharedConsumer) Member() string { return sc.o.Member }

// Fetch long-polls for up to max messages (zero → Concurrency), typed
// (Client.FetchShared).
func (sc *SharedConsumer) Fetch(ctx context.Context, max int) ([]Message, error) {
	if max == 0 {
		max = sc.o.Concurrency
	}
	return sc.c.FetchShared(ctx, sc.group, FetchRequest{Member: sc.o.Member, Max: max, Wait: sc.o.Wait})
}

// Ack acknowledges messages.
func (sc *SharedConsumer) Ack(ctx context.Context, msgs ...Message) error {
	_, err := sc.c.Ack(ctx, sc.group, ackIDs(msgs)...)
	return err
}

// Nak asks for redelivery after delay (zero: the group's backoff).
func (sc *SharedConsumer) Nak(ctx context.Context, delay time.Duration, msgs ...Message) error {
	_, err := sc.c.Nak(ctx, sc.group, delay, ackIDs(msgs)...)
	return err
}

// Release gives back messages fetched and not handled, for another
// member at once (see Client.NakUnhandled).
func (sc *SharedConsumer) Release(ctx context.Context, msgs ...Message) error {
	_, err := sc.c.NakUnhandled(ctx, sc.group, ackIDs(msgs)...)
	return err
}

// Term parks messages.
func (sc *SharedConsumer) Term(ctx context.Context, msgs ...Message) error {
	_, err := sc.c.Term(ctx, sc.group, ackIDs(msgs)...)
	return err
}

// InProgress restarts the ack wait of messages still being worked on.
func (sc *SharedConsumer) InProgress(ctx context.Context, msgs ...Message) error {
	_, err := sc.c.InProgress(ctx, sc.group, ackIDs(msgs)...)
	return err
}

func ackIDs(msgs []Message) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.AckID
	}
	return ids
}

// termError marks a handler error that parks the message.
type termError struct{ err error }

func (e termError) Error() string { return "term: " + e.err.Error() }
func (e termError) Unwrap() error { return e.err }

// Term wraps a handler's error so that Consume parks the message instead
// of naking it.
func Term(err error) error { return termError{err} }

// Messages iterates over the group's messages, fetching up to Prefetch
// at a time, until ctx ends or a fetch fails with an error that is not
// transient (yielded last; transient ones are retried with backoff).
// Settling is the caller's: call Ack, Nak or Term for each message (one
// not settled within the group's ack wait is delivered again).
func (sc *SharedConsumer) Messages(ctx context.Context) iter.Seq2[Message, error] {
	return func(yield func(Message, error) bool) {
		delay := sc.c.o.Retry.Min
		for {
			msgs, err := sc.Fetch(ctx, sc.o.Prefetch)
			if err != nil {
				if ctx.Err() == nil && IsTransient(err) {
					if err = backoff.Sleep(ctx, backoff.Jitter(delay)); err == nil {
						delay = min(delay*2, sc.c.o.Retry.Max)
						continue
					}
				}
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(Message{}, err)
				return
			}
			delay = sc.c.o.Retry.Min
			for _, m := range msgs {
				if !yield(m, nil) {
					return
				}
			}
		}
	}
}

// maxSettleBatch caps the ack ids of one settle request Consume sends.
const maxSettleBatch = 2000

// settlement is a handled message and its handler's result.
type settlement struct {
	msg Message
	err error
}

// Consume runs handler on up to Concurrency messages at once until ctx
// ends: nil acks the message, Term(err) parks it, any other error naks it
// (redelivered after the group's backoff). It fetches up to Prefetch
// messages ahead while handlers run, and settles handled messages in
// batches (one ack request for what finished while the previous one was
// on its way). It rides through transient failures and returns ctx's
// error, or the first error that is not transient (after the running
// handlers end and what they handled is settled).
func (sc *SharedConsumer) Consume(ctx context.Context, handler func(context.Context, Message) error) error {
	var (
		mu sync.Mutex // guards first
		// first is the first permanent error of a fetch or settle call.
		first error
	)
	fctx, stopFetch := context.WithCancel(ctx) // ends the fetch loop
	defer stopFetch()
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		stopFetch()
	}
	capacity := sc.o.Concurrency + sc.o.Prefetch
	var (
		slots = make(chan struct{}, capacity) // one per message fetched and not handled yet
		work  = make(chan Message, capacity)
		// results never holds a handler up while a settle request is on
		// its way: what is handled meanwhile goes in the next batch.
		results = make(chan settlement, capacity+maxSettleBatch)
		hwg     sync.WaitGroup
		settled = make(chan struct{})
		umu     sync.Mutex // guards unhandled
		// unhandled are the messages fetched ahead that no handler ran
		// because Consume is ending: given back at the end.
		unhandled []Message
	)
	for range sc.o.Concurrency {
		hwg.Add(1)
		go func() {
			defer hwg.Done()
			for msg := range work {
				if fctx.Err() != nil { // ending: give it back below
					<-slots
					umu.Lock()
					unhandled = append(unhandled, msg)
					umu.Unlock()
					continue
				}
				herr := handler(ctx, msg)
				<-slots
				results <- settlement{msg, herr}
			}
		}()
	}
	go func() {
		defer close(settled)
		sc.settleLoop(ctx, results, fail)
	}()
	err := sc.fetchLoop(fctx, slots, work)
	close(work)
	hwg.Wait()
	close(results)
	<-settled
	if len(unhandled) > 0 {
		// Another member gets them at once instead of after their ack
		// wait. A failure leaves them to it.
		rctx := context.WithoutCancel(ctx)
		for batch := range slices.Chunk(unhandled, maxSettleBatch) {
			if sc.settleBatch(rctx, "nak", api.AckBody{Unhandled: true}, batch) != nil {
				break
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if first != nil {
		return first
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// fetchLoop fetches as many messages as there are free slots and queues
// them on work, until ctx ends or a fetch fails for good.
func (sc *SharedConsumer) fetchLoop(ctx context.Context, slots chan struct{}, work chan Message) error {
	delay := sc.c.o.Retry.Min
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		// Take every free slot; wait for half of them to be free unless
		// the handlers are about to run dry, so that fetches are not one
		// message each while handlers free their slots one by one.
		free := 1
	more:
		for free < cap(slots) {
			select {
			case slots <- struct{}{}:
				free++
				continue
			default:
			}
			if free >= cap(slots)/2 || len(work) == 0 {
				break more
			}
			select {
			case slots <- struct{}{}:
				free++
			case <-ctx.Done():
				for range free {
					<-slots
				}
				return ctx.Err()
			}
		}
		msgs, err := sc.Fetch(ctx, free)
		for i := len(msgs); i < free; i++ {
			<-slots
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !IsTransient(err) {
				return err
			}
			if err := backoff.Sleep(ctx, backoff.Jitter(delay)); err != nil {
				return err
			}
			delay = min(delay*2, sc.c.o.Retry.Max)
			continue
		}
		delay = sc.c.o.Retry.Min
		for _, m := range msgs {
			work <- m // never blocks: work holds as many as there are slots
		}
	}
}

// settleLoop sends the handlers' results in batches until results is
// closed: what arrived while a request was on its way goes in the next.
func (sc *SharedConsumer) settleLoop(ctx context.Context, results <-chan settlement, fail func(error)) {
	sctx := context.WithoutCancel(ctx) // settle what was handled, also when ctx ends
	for r := range results {
		batch := []settlement{r}
	more:
		for len(batch) < maxSettleBatch {
			select {
			case r, ok := <-results:
				if !ok {
					break more
				}
				batch = append(batch, r)
			default:
				break more
			}
		}
		var acks, naks, terms []Message
		for _, r := range batch {
			var te termError
			switch {
			case r.err == nil:
				acks = append(acks, r.msg)
			case errors.As(r.err, &te):
				terms = append(terms, r.msg)
			default:
				naks = append(naks, r.msg)
			}
		}
		for _, s := range []struct {
			action string
			msgs   []Message
		}{{"ack", acks}, {"nak", naks}, {"term", terms}} {
			if len(s.msgs) > 0 {
				if err := sc.settleBatch(sctx, s.action, api.AckBody{}, s.msgs); err != nil {
					fail(err)
				}
			}
		}
	}
}

// settleBatch acks, naks or terms msgs in one request (body: the fields
// besides the ack ids, e.g. Unhandled). A conflict (one message's ack wait
// ended and it went to another member: the server changes nothing) makes
// it settle them one by one, skipping conflicts.
func (sc *SharedConsumer) settleBatch(ctx context.Context, action string, body api.AckBody, msgs []Message) error {
	send := func(msgs []Message) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		body.AckIDs = ackIDs(msgs)
		_, err := sc.c.settle(ctx, sc.group, action, body)
		return err
	}
	conflict := func(err error) bool {
		var ae *api.Error
		return errors.As(err, &ae) && ae.Code == api.CodeConflict
	}
	err := send(msgs)
	if err == nil || (conflict(err) && len(msgs) == 1) {
		return nil
	}
	if !conflict(err) {
		return fmt.Errorf("client: consume %q: %s %d messages: %w", sc.group, action, len(msgs), err)
	}
	for _, m := range msgs {
		if err := send([]Message{m}); err != nil && !conflict(err) {
			return fmt.Errorf("client: consume %q: %s %s: %w", sc.group, action, m.AckID, err)
		}
	}
	return nil
}
