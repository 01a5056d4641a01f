package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
// messages (Member, Max and Wait are used). It does not retry.
func (c *Client) FetchMessages(ctx context.Context, group string, req FetchRequest) ([]api.Message, error) {
	body := api.FetchBody{Member: req.Member, Max: req.Max, Wait: api.Duration(req.Wait)}
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
	// Member identifies this consumer (required).
	Member string
	// Concurrency is how many handlers Consume runs at once; zero → 1.
	Concurrency int
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
	if o.Member == "" || len(o.Member) > api.MaxMemberLen {
		return nil, fmt.Errorf("client: shared consumer: member must be 1 to %d bytes", api.MaxMemberLen)
	}
	if o.Concurrency < 0 || o.Wait < 0 {
		return nil, errors.New("client: shared consumer: negative concurrency or wait")
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.Wait == 0 {
		o.Wait = 30 * time.Second
	}
	return &SharedConsumer{c: c, group: group, o: o}, nil
}

// Fetch long-polls for up to max messages (zero → Concurrency).
func (sc *SharedConsumer) Fetch(ctx context.Context, max int) ([]api.Message, error) {
	if max == 0 {
		max = sc.o.Concurrency
	}
	return sc.c.FetchMessages(ctx, sc.group, FetchRequest{Member: sc.o.Member, Max: max, Wait: sc.o.Wait})
}

// Ack acknowledges messages.
func (sc *SharedConsumer) Ack(ctx context.Context, msgs ...api.Message) error {
	_, err := sc.c.Ack(ctx, sc.group, ackIDs(msgs)...)
	return err
}

// Nak asks for redelivery after delay (zero: the group's backoff).
func (sc *SharedConsumer) Nak(ctx context.Context, delay time.Duration, msgs ...api.Message) error {
	_, err := sc.c.Nak(ctx, sc.group, delay, ackIDs(msgs)...)
	return err
}

// Term parks messages.
func (sc *SharedConsumer) Term(ctx context.Context, msgs ...api.Message) error {
	_, err := sc.c.Term(ctx, sc.group, ackIDs(msgs)...)
	return err
}

// InProgress restarts the ack wait of messages still being worked on.
func (sc *SharedConsumer) InProgress(ctx context.Context, msgs ...api.Message) error {
	_, err := sc.c.InProgress(ctx, sc.group, ackIDs(msgs)...)
	return err
}

func ackIDs(msgs []api.Message) []string {
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

// Consume runs handler on up to Concurrency messages at once until ctx
// ends: nil acks the message, Term(err) parks it, any other error naks it
// (redelivered after the group's backoff). It rides through transient
// failures and returns ctx's error, or the first error that is not
// transient (after the running handlers end).
func (sc *SharedConsumer) Consume(ctx context.Context, handler func(context.Context, api.Message) error) error {
	var (
		wg   sync.WaitGroup
		slot = make(chan struct{}, sc.o.Concurrency)
		mu   sync.Mutex // guards first
		// first is the first permanent error of a settle call.
		first error
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	failed := func() error {
		mu.Lock()
		defer mu.Unlock()
		return first
	}
	defer wg.Wait()
	delay := sc.c.o.Retry.Min
	for {
		if err := failed(); err != nil {
			return err
		}
		// Wait for a free handler, then fetch as many as are free.
		select {
		case slot <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		free := 1
	more:
		for free < sc.o.Concurrency {
			select {
			case slot <- struct{}{}:
				free++
			default:
				break more
			}
		}
		msgs, err := sc.Fetch(ctx, free)
		if err != nil {
			for range free {
				<-slot
			}
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
		for i := len(msgs); i < free; i++ {
			<-slot
		}
		for _, msg := range msgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slot }()
				herr := handler(ctx, msg)
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				var err error
				var te termError
				switch {
				case herr == nil:
					err = sc.Ack(sctx, msg)
				case errors.As(herr, &te):
					err = sc.Term(sctx, msg)
				default:
					err = sc.Nak(sctx, 0, msg)
				}
				var ae *api.Error
				if err != nil && !(errors.As(err, &ae) && ae.Code == api.CodeConflict) {
					// A conflict: the ack wait ended and the message went
					// to another member; anything else stops Consume.
					fail(fmt.Errorf("client: consume %q: settle %s: %w", sc.group, msg.AckID, err))
				}
			}()
		}
	}
}
