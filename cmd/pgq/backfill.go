package main

import (
	"context"
	"fmt"
	"io"
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
	Table       []string `required:"" help:"Table to backfill (schema.table, a part quoted to hold a dot or a quote: '\"my.schema\".t'; repeat for several, read one after the other; a table named twice is read once; at most 1000)."`
	ChunkSize   int      `name:"chunk-size" default:"10000" help:"Rows per chunk (one journal record per chunk)."`
	Where       string   `help:"Only rows matching this SQL predicate (pasted into the chunk query between parentheses; it must be one predicate: no unbalanced parenthesis, ; or $1 outside literals and comments)."`
	MaxRate     float64  `name:"max-rate" help:"Read at most this many rows per second, to leave the database and the stream room (0: as fast as the server reads; change it later with pgq backfill throttle)."`
	Parallelism int      `help:"Key ranges of each table read at once, each on its own connection (1-16; 0: twice the server's CPUs, up to 4). --max-rate caps them together."`
	Wait        bool     `help:"Wait until the backfill ends (a progress bar on a terminal); exit non-zero unless it is done."`
	OutputFlag
}

// Run starts the backfill and prints it.
func (c *BackfillStartCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	b, err := cl.StartBackfill(ctx, client.BackfillRequest{Tables: c.Table, ChunkSize: c.ChunkSize, Where: c.Where, MaxRate: c.MaxRate, Parallelism: c.Parallelism})
	if err != nil {
		return err
	}
	if !c.Wait {
		return c.showFields("started backfill "+b.ID, b)
	}
	return waitBackfill(ctx, cl, b, c.OutputFlag)
}

// BackfillListCmd is `pgq backfill list`.
type BackfillListCmd struct {
	APIFlags
	OutputFlag
}

// Run prints every backfill: a table, or the API's JSON array.
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
	return c.show(l, func(w io.Writer) error { return backfillsTable(w, l) })
}

// backfillsTable prints a row per backfill (pgq backfill list, pgq status).
func backfillsTable(w io.Writer, l []client.Backfill) error {
	rows := make([][]string, 0, len(l))
	for _, b := range l {
		eta := "-"
		if b.ETA != nil {
			eta = (time.Duration(*b.ETA) * time.Second).String()
		}
		maxRate := "-"
		if b.MaxRate > 0 {
			maxRate = fmt.Sprintf("%.0f", b.MaxRate)
		}
		tables := fmt.Sprintf("%d/%d", min(b.TableIndex+1, len(b.Tables)), len(b.Tables))
		errText := "-"
		if b.Error != nil {
			errText = *b.Error
		}
		rows = append(rows, []string{b.ID, b.State, b.Table, tables, fmt.Sprint(b.Rows), fmt.Sprint(b.RowsEstimate), fmt.Sprintf("%.0f", b.Rate), maxRate, eta,
			b.CreatedAt.UTC().Format(time.RFC3339), errText})
	}
	return table(w, []string{"ID", "STATE", "TABLE", "TABLES", "ROWS", "ROWS_ESTIMATE", "RATE", "MAX_RATE", "ETA", "CREATED", "ERROR"}, rows)
}

// BackfillStatusCmd is `pgq backfill status`.
type BackfillStatusCmd struct {
	APIFlags
	ID   string `arg:"" help:"Backfill id."`
	Wait bool   `help:"Wait until the backfill ends (a progress bar on a terminal); exit non-zero unless it is done."`
	OutputFlag
}

// Run prints the backfill.
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
		return c.showFields("", b)
	}
	return waitBackfill(ctx, cl, b, c.OutputFlag)
}

// BackfillThrottleCmd is `pgq backfill throttle`.
type BackfillThrottleCmd struct {
	APIFlags
	ID      string  `arg:"" help:"Backfill id."`
	MaxRate float64 `name:"max-rate" required:"" help:"Rows per second at most (0 lifts the cap)."`
	OutputFlag
}

// Run sets the cap and prints the backfill.
func (c *BackfillThrottleCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	b, err := cl.ThrottleBackfill(ctx, c.ID, c.MaxRate)
	if err != nil {
		return err
	}
	heading := fmt.Sprintf("backfill %s: at most %g rows per second", b.ID, c.MaxRate)
	if c.MaxRate == 0 {
		heading = "backfill " + b.ID + ": no cap on rows per second"
	}
	return c.showFields(heading, b)
}

// BackfillCancelCmd is `pgq backfill cancel`.
type BackfillCancelCmd struct {
	APIFlags
	ID string `arg:"" help:"Backfill id."`
	OutputFlag
}

// Run cancels the backfill and prints it.
func (c *BackfillCancelCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	b, err := cl.CancelBackfill(ctx, c.ID)
	if err != nil {
		return err
	}
	heading := "canceled backfill " + b.ID
	if b.State != "canceled" {
		heading = fmt.Sprintf("backfill %s had ended (%s): nothing to cancel", b.ID, b.State)
	}
	return c.showFields(heading, b)
}

// waitBackfill polls until b ends, drawing a progress bar on stderr when
// it is a terminal, then prints the final status.
func waitBackfill(ctx context.Context, cl *client.Client, b client.Backfill, out OutputFlag) error {
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
	if err := out.showFields("", b); err != nil {
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
