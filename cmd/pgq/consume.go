package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/consumers"
)

// ConsumeCmd is `pgq consume`.
type ConsumeCmd struct {
	APIFlags
	Group    string        `required:"" help:"Consumer group."`
	Max      int           `default:"100" help:"Transactions per fetch."`
	Wait     time.Duration `default:"1s" help:"Long-poll wait per fetch (with --follow: how long each fetch waits)."`
	Follow   bool          `help:"Keep waiting for new transactions instead of exiting once caught up."`
	NoCommit bool          `name:"no-commit" help:"Do not commit: the next consume sees the same transactions."`
	Member   string        `help:"Member id (default: host name and a random suffix)."`
}

// Run prints transactions as `pgq journal dump` lines, committing after
// each printed batch. Without --follow it exits 0 once caught up.
func (c *ConsumeCmd) Run(ctx context.Context) (err error) {
	cl, err := c.client()
	if err != nil {
		return err
	}
	cs, err := cl.Consumer(c.Group, consumers.ConsumerOptions{Member: c.Member, Max: c.Max, Wait: c.Wait, FailFast: true})
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := cs.Close(rctx); rerr != nil && err == nil && !errors.Is(rerr, consumers.ErrNotFound) {
			err = rerr
		}
	}()
	w := bufio.NewWriterSize(os.Stdout, 1<<16)
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
		for cs.Buffered() > 0 {
			tx, err := cs.Next(ctx)
			if err != nil {
				return err
			}
			buf = pgq.AppendJSON(buf[:0], tx)
			buf = append(buf, '\n')
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if !c.NoCommit {
			if err := cs.Commit(ctx); err != nil {
				return err
			}
		}
		if caughtUp && !c.Follow {
			return nil
		}
	}
}
