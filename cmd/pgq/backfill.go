package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pgq-dev/pgq/client"
)

// BackfillCmd is `pgq backfill`.
type BackfillCmd struct {
	Start    BackfillStartCmd    `cmd:"" help:"Backfill the rows already in tables into the journal (read changes) while streaming goes on."`
	List     BackfillListCmd     `cmd:"" help:"List backfills."`
	Status   BackfillStatusCmd   `cmd:"" help:"Show one backfill."`
	Throttle BackfillThrottleCmd `cmd:"" help:"Change a running backfill's cap on rows read per second."`
	Cancel   BackfillCancelCmd   `cmd:"" help:"Cancel a running backfill."`
}

// BackfillStartCmd is `pgq backfill start`.
type BackfillStartCmd struct {
	APIFlags
	Table     []string `required:"" help:"Table to backfill (schema.table, a part quoted to hold a dot or a quote: '\"my.schema\".t'; repeat for several, read one after the other; a table named twice is read once; at most 1000)."`
	ChunkSize int      `name:"chunk-size" default:"10000" help:"Rows per chunk (one journal record per chunk)."`
	Where     string   `help:"Only rows matching this SQL predicate (pasted into the chunk query between parentheses; it must be one predicate: no unbalanced parenthesis, ; or $1 outside literals and comments)."`
	MaxRate   float64  `name:"max-rate" help:"Read at most this many rows per second, to leave the database and the stream room (0: as fast as the server reads; change it later with pgq backfill throttle)."`
	Wait      bool     `help:"Wait until the backfill ends (a progress bar on a terminal); exit non-zero unless it is done."`
}

// Run starts the backfill and prints it as JSON.
func (c *BackfillStartCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	b, err := cl.StartBackfill(ctx, client.BackfillRequest{Tables: c.Table, ChunkSize: c.ChunkSize, Where: c.Where, MaxRate: c.MaxRate})
	if err != nil {
		return err
	}
	if !c.Wait {
		return printJSON(b)
	}
	return waitBackfill(ctx, cl, b)
}

// BackfillListCmd is `pgq backfill list`.
type BackfillListCmd struct {
	APIFlags
}

// Run prints every backfill as a JSON array.
func (c *BackfillListCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	l, err := cl.Backfills(ctx)
	if err != nil {
		return err
	}
	if l == nil {
		l = []client.Backfill{}
	}
	return printJSON(l)
}

// BackfillStatusCmd is `pgq backfill status`.
type BackfillStatusCmd struct {
	APIFlags
	ID   string `arg:"" help:"Backfill id."`
	Wait bool   `help:"Wait until the backfill ends (a progress bar on a terminal); exit non-zero unless it is done."`
}

// Run prints the backfill as JSON.
func (c *BackfillStatusCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	b, err := cl.Backfill(ctx, c.ID)
	if err != nil {
		return err
	}
	if !c.Wait {
		return printJSON(b)
	}
	return waitBackfill(ctx, cl, b)
}

// BackfillThrottleCmd is `pgq backfill throttle`.
type BackfillThrottleCmd struct {
	APIFlags
	ID      string  `arg:"" help:"Backfill id."`
	MaxRate float64 `name:"max-rate" required:"" help:"Rows per second at most (0 lifts the cap)."`
}

// Run sets the cap and prints the backfill as JSON.
func (c *BackfillThrottleCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	b, err := cl.ThrottleBackfill(ctx, c.ID, c.MaxRate)
	if err != nil {
		return err
	}
	return printJSON(b)
}

// BackfillCancelCmd is `pgq backfill cancel`.
type BackfillCancelCmd struct {
	APIFlags
	ID string `arg:"" help:"Backfill id."`
}

// Run cancels the backfill and prints it as JSON.
func (c *BackfillCancelCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	b, err := cl.CancelBackfill(ctx, c.ID)
	if err != nil {
		return err
	}
	return printJSON(b)
}

// waitBackfill polls until b ends, drawing a progress bar on stderr when
// it is a terminal, then prints the final status.
func waitBackfill(ctx context.Context, cl *client.Client, b client.Backfill) error {
	tty := isTerminal(os.Stderr)
	for !b.Finished() {
		if tty {
			fmt.Fprintf(os.Stderr, "\r\033[K%s", progressLine(b))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		nb, err := cl.Backfill(ctx, b.ID)
		if err != nil {
			return err
		}
		b = nb
	}
	if tty {
		fmt.Fprintf(os.Stderr, "\r\033[K%s\n", progressLine(b))
	}
	if err := printJSON(b); err != nil {
		return err
	}
	if b.State != "done" {
		msg := "backfill " + b.ID + " " + b.State
		if b.Error != nil {
			msg += ": " + *b.Error
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// progressLine renders "[#####.....] 52% bf1 public.orders 52000/100000 rows 8100/s (cap 10000/s) ETA 6s".
func progressLine(b client.Backfill) string {
	frac := 0.0
	if b.RowsEstimate > 0 {
		frac = min(float64(b.Rows)/float64(b.RowsEstimate), 1)
	}
	if b.State == "done" {
		frac = 1
	}
	const width = 30
	n := int(frac * width)
	s := fmt.Sprintf("[%s%s] %3.0f%% %s %s %d/%d rows", strings.Repeat("#", n), strings.Repeat(".", width-n), frac*100, b.ID, b.Table, b.Rows, b.RowsEstimate)
	if b.Rate > 0 {
		s += fmt.Sprintf(" %.0f/s", b.Rate)
	}
	if b.MaxRate > 0 {
		s += fmt.Sprintf(" (cap %.0f/s)", b.MaxRate)
	}
	if b.ETA != nil {
		s += " ETA " + (time.Duration(*b.ETA) * time.Second).String()
	}
	if b.State != "running" {
		s += " " + b.State
	}
	return s
}
