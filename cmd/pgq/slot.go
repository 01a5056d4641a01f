package main

import (
	"context"
	"fmt"

	"github.com/pgq-dev/pgq/ingest"
)

// SlotCmd is `pgq slot`.
type SlotCmd struct {
	Info SlotInfoCmd `cmd:"" help:"Show the slot and its lag."`
	Drop SlotDropCmd `cmd:"" help:"Drop the slot (stop pgq first, or --force)."`
}

type slotFlags struct {
	PGURL string `name:"pg-url" required:"" env:"PGQ_PG_URL" help:"PostgreSQL URL."`
	Slot  string `required:"" env:"PGQ_SLOT" help:"Replication slot."`
}

// SlotInfoCmd is `pgq slot info`.
type SlotInfoCmd struct {
	slotFlags
	OutputFlag
}

// Run prints the slot's state.
func (c *SlotInfoCmd) Run(ctx context.Context) error {
	info, err := ingest.SlotLag(ctx, c.PGURL, c.Slot)
	if err != nil {
		return err
	}
	return c.showFields("", info)
}

// SlotDropCmd is `pgq slot drop`.
type SlotDropCmd struct {
	slotFlags
	Force bool `help:"Terminate the connection using the slot first."`
}

// Run drops the slot.
func (c *SlotDropCmd) Run(ctx context.Context) error {
	if err := ingest.DropSlot(ctx, c.PGURL, c.Slot, c.Force); err != nil {
		return err
	}
	_, err := fmt.Fprintf(stdout, "dropped slot %s\n", c.Slot)
	return err
}
