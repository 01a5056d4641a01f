package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/backoff"
)

// ConsumeCmd is `pgq consume`.
type ConsumeCmd struct {
	APIFlags
	Group    string        `required:"" help:"Consumer group."`
	Max      int           `default:"100" help:"Transactions per fetch."`
	Wait     time.Duration `default:"1s" help:"Long-poll wait per fetch (with --follow: how long each fetch waits)."`
	Follow   bool          `help:"Keep waiting for new transactions instead of exiting once caught up; rides through pgq restarts and waits while another member holds the group."`
	NoCommit bool          `name:"no-commit" help:"Do not commit: the next consume sees the same transactions."`
	Member   string        `help:"Member id (default: host name and a random suffix)."`
	GiveUp   Duration      `name:"give-up" help:"How long to retry while pgq is unreachable before failing (default: 5s, with --follow: never)."`
	LeaseTTL Duration      `name:"lease-ttl" default:"30s" help:"This member's lease: a standby takes over this long after the holder died."`

	// --format, --format-db, --format-slot
	FormatFlags `envprefix:"PGQ_CONSUME_"`
}

// Run prints transactions as `pgq journal dump` lines, committing after
// each printed batch. With --format debezium it prints one line per
// Debezium event instead (none for a ddl or gap change, two for a
// key-changing update), with --format cloudevents one structured-mode
// CloudEvent per change; a transaction's lines are written before its
// commit all the same. Without --follow it exits 0 once caught up. With
// --follow it is a standby while another member holds the group, and rides
// through pgq restarts: transactions printed but not committed when pgq
// went away are printed again (at-least-once), none is skipped.
func (c *ConsumeCmd) Run(ctx context.Context) (err error) {
	fm, fo, err := c.options()
	if err != nil {
		return err
	}
	giveUp := c.GiveUp.D()
	if giveUp == 0 && !c.Follow {
		giveUp = 5 * time.Second
	}
	cl, err := client.New(c.Addr, client.Options{Token: c.AuthToken, Retry: client.RetryOptions{GiveUp: giveUp}, TLS: c.tls()})
	if err != nil {
		return usage(err)
	}
	r, err := renderer(ctx, cl, fm, fo)
	if err != nil {
		return err
	}
	gi, err := cl.Group(ctx, c.Group)
	if err != nil {
		return err
	}
	if gi.Mode == "shared" {
		if r != nil {
			// A shared group's messages carry single changes without
			// their transaction, which the renderer needs.
			return usage(fmt.Errorf("--format %s: group %q is shared; a shared group prints in pgq's format only", r.Format(), c.Group))
		}
		return c.runShared(ctx, cl)
	}
	cs, err := cl.Consumer(c.Group, client.ConsumerOptions{Member: c.Member, Max: c.Max, Wait: c.Wait, FailFast: !c.Follow, LeaseTTL: c.LeaseTTL.D()})
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := cs.Close(rctx); rerr != nil && err == nil && !errors.Is(rerr, api.ErrNotFound) && !client.IsTransient(rerr) {
			err = rerr
		}
	}()
	return c.runExclusive(ctx, cs, r)
}

// renderer returns the renderer of format fm: nil for pgq's own lines,
// exactly as before. A database or slot the flags leave empty is pgq's
// own (its status), as in pgq's HTTP fetch: every path names a change's
// source alike.
func renderer(ctx context.Context, cl *client.Client, fm format.Format, fo format.Options) (*format.Renderer, error) {
	if fm == format.PGQ {
		return nil, nil
	}
	if !fo.NamesSource() {
		st, err := cl.Status(ctx)
		if err != nil {
			return nil, fmt.Errorf("pgq's status, for the source --format %s names: %w", fm.Spec().Name, err)
		}
		fo.FillSource(st.Database, st.Slot)
	}
	r, err := format.New(fm, fo)
	if err != nil {
		return nil, usage(err)
	}
	return r, nil
}

// runExclusive consumes an exclusive group through cs: it prints each
// fetched batch and commits it, until caught up (without --follow) or
// interrupted (with it).
func (c *ConsumeCmd) runExclusive(ctx context.Context, cs *client.Consumer, r *format.Renderer) error {
	w := bufio.NewWriterSize(stdout, 1<<16)
	defer w.Flush()
	var buf []byte
	for {
		wait := time.Duration(0)
		if c.Follow {
			wait = c.Wait
		}
		caughtUp, err := cs.Poll(ctx, wait)
		if err != nil {
			if c.Follow && ctx.Err() != nil {
				return nil // interrupted
			}
			return err
		}
		if buf, err = printBuffered(ctx, w, cs, r, buf); err != nil {
			return err
		}
		if !c.NoCommit {
			if err := cs.Commit(ctx); err != nil {
				if c.Follow && errors.Is(err, client.ErrRedeliver) {
					continue // the next fetch starts at the cursor again
				}
				if c.Follow && ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		if caughtUp && !c.Follow {
			return nil
		}
	}
}

// printBuffered writes every transaction cs holds to w, rendered by r
// (see appendLines), and flushes w. buf is scratch space, returned for
// reuse.
func printBuffered(ctx context.Context, w *bufio.Writer, cs *client.Consumer, r *format.Renderer, buf []byte) ([]byte, error) {
	for cs.Buffered() > 0 {
		tx, err := cs.Next(ctx)
		if err != nil {
			return buf, err
		}
		buf = appendLines(buf[:0], r, tx)
		if _, err := w.Write(buf); err != nil {
			return buf, err
		}
	}
	return buf, w.Flush()
}

// runShared consumes a shared group: it prints each message as one JSON
// line ({"offset","xid","commit_lsn","commit_time","index","change",
// "delivery","ack_id"}) and acks each fetched batch once it is printed.
// Without --follow it exits when a fetch returns nothing. With
// --no-commit nothing is acked: the messages go to members again after
// the group's ack wait.
func (c *ConsumeCmd) runShared(ctx context.Context, cl *client.Client) error {
	member := c.Member
	if member == "" {
		host, _ := os.Hostname()
		member = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	defer w.Flush()
	enc := json.NewEncoder(w)
	for {
		wait := time.Duration(0)
		if c.Follow {
			wait = c.Wait
		}
		msgs, err := cl.FetchMessages(ctx, c.Group, client.FetchRequest{Member: member, Max: c.Max, Wait: wait})
		if err != nil {
			if c.Follow && ctx.Err() != nil {
				return nil // interrupted
			}
			if c.Follow && client.IsTransient(err) {
				if err := backoff.Sleep(ctx, time.Second); err != nil {
					return nil
				}
				continue
			}
			return err
		}
		ids := make([]string, len(msgs))
		for i, m := range msgs {
			if err := enc.Encode(m); err != nil {
				return err
			}
			ids[i] = m.AckID
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if len(ids) > 0 && !c.NoCommit {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			_, err := cl.Ack(actx, c.Group, ids...)
			cancel()
			if err != nil {
				return fmt.Errorf("ack: %w", err)
			}
		}
		if len(msgs) == 0 && !c.Follow {
			return nil
		}
	}
}

// appendLines appends tx's output lines: one `pgq journal dump` line when
// r is nil, else one line per event of each change as r renders it.
func appendLines(b []byte, r *format.Renderer, tx *pgq.Transaction) []byte {
	if r == nil {
		return append(format.AppendJSON(b, tx), '\n')
	}
	for i := range tx.Changes {
		for k, n := 0, r.Events(tx, i); k < n; k++ {
			b = append(r.AppendEvent(b, tx, i, k), '\n')
		}
	}
	return b
}
