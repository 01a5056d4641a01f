package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
)

// APIFlags address a running sidecar.
type APIFlags struct {
	Addr      string `default:"127.0.0.1:5480" env:"PGQ_ADDR" help:"Address of the pgq sidecar's HTTP API: host:port, or an http:// or https:// URL."`
	AuthToken string `name:"auth-token" env:"PGQ_AUTH_TOKEN" help:"Bearer token of the API."`
	ClientTLSFlags
}

// client dials the API. Admin commands retry a restarting pgq for a
// short while, then report it unreachable.
func (f APIFlags) client() (*client.Client, error) {
	cl, err := client.Dial(f.Addr, client.Options{Token: f.AuthToken, Retry: client.RetryOptions{GiveUp: 5 * time.Second}, TLS: f.tls()})
	return cl, usage(err)
}

// GroupsCmd is `pgq groups`.
type GroupsCmd struct {
	Create GroupsCreateCmd `cmd:"" help:"Create a consumer group."`
	List   GroupsListCmd   `cmd:"" help:"List consumer groups with their lag."`
	Info   GroupsInfoCmd   `cmd:"" help:"Show one consumer group."`
	Delete GroupsDeleteCmd `cmd:"" help:"Delete a consumer group."`
	Reset  GroupsResetCmd  `cmd:"" help:"Move a consumer group to a position."`
	Parked GroupsParkedCmd `cmd:"" help:"Parked messages of a shared group: list, requeue, drop."`
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// GroupsCreateCmd is `pgq groups create`.
type GroupsCreateCmd struct {
	APIFlags
	Name        string `arg:"" help:"Group name."`
	From        string `default:"latest" help:"Start position: earliest, latest, offset:N, lsn:X/Y or time:RFC3339."`
	Tables      string `help:"Only these tables (comma-separated schema.table, globs allowed)."`
	Ops         string `help:"Only these ops (comma-separated insert,update,delete,truncate,message,gap)."`
	IfNotExists bool   `name:"if-not-exists" help:"Succeed (printing the existing group) when the group already exists."`
	Mode        string `enum:"exclusive,shared" default:"exclusive" help:"exclusive: one leased member, cumulative commits; shared: many members, per-change ack/nak/term."`
	// Shared groups only.
	AckWait       time.Duration `name:"ack-wait" help:"Shared: redeliver a message not acked within this (default 30s)."`
	MaxDeliver    int           `name:"max-deliver" help:"Shared: park a message after this many deliveries (default 5)."`
	Backoff       string        `help:"Shared: redelivery delays after the 1st, 2nd, ... nak (comma-separated durations, the last repeats; default: at once)."`
	MaxAckPending int           `name:"max-ack-pending" help:"Shared: most messages in flight in the group (default 1000)."`
	Key           string        `enum:",pk,table,none" default:"" help:"Shared: ordering key: pk (table and replica identity key, the default), table, or none."`
	HoldSlot      bool          `name:"hold-slot" help:"Hold the replication slot for the group: PostgreSQL keeps what it has not committed, so losing pgq's disk loses none of it (see pgq run --hold-slot-max-lag)."`
	OutputFlag
}

// Run creates the group.
func (c *GroupsCreateCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	req := api.CreateRequest{Name: c.Name, From: c.From, Tables: splitList(c.Tables), Ops: splitList(c.Ops), Key: c.Key,
		AckWait: api.Duration(c.AckWait), MaxDeliver: c.MaxDeliver, MaxAckPending: c.MaxAckPending, HoldSlot: c.HoldSlot}
	if c.Mode == "shared" {
		req.Mode = "shared"
	}
	for _, b := range splitList(c.Backoff) {
		d, err := time.ParseDuration(b)
		if err != nil {
			return usage(fmt.Errorf("--backoff %q: %w", b, err))
		}
		req.Backoff = append(req.Backoff, api.Duration(d))
	}
	gi, err := cl.CreateGroup(ctx, req)
	if errors.Is(err, api.ErrExists) && c.IfNotExists {
		gi, err = cl.Group(ctx, c.Name)
	}
	if err != nil {
		return err
	}
	return c.print(gi)
}

// GroupsListCmd is `pgq groups list`.
type GroupsListCmd struct {
	APIFlags
	OutputFlag
}

// Run lists the groups: a table, or a JSON array.
func (c *GroupsListCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	gs, err := cl.Groups(ctx)
	if err != nil {
		return err
	}
	if c.json() {
		if gs == nil {
			gs = []api.GroupInfo{}
		}
		return printJSON(gs)
	}
	rows := make([][]string, 0, len(gs))
	for _, g := range gs {
		member := g.Member
		if member == "" {
			member = "-"
		}
		hold := "-"
		switch {
		case g.HoldReleased:
			hold = "released"
		case g.HoldSlot:
			hold = "yes"
		}
		rows = append(rows, []string{g.Name, fmt.Sprint(g.Committed), fmt.Sprint(g.Lag.Records), fmt.Sprint(g.Lag.Bytes),
			fmt.Sprintf("%.1f", g.Lag.Seconds), fmt.Sprint(g.Lag.OutOfRange), member, hold})
	}
	return table(os.Stdout, []string{"GROUP", "COMMITTED", "LAG", "LAG_BYTES", "LAG_SEC", "OUT_OF_RANGE", "MEMBER", "HOLD_SLOT"}, rows)
}

// GroupsInfoCmd is `pgq groups info`.
type GroupsInfoCmd struct {
	APIFlags
	Name string `arg:"" help:"Group name."`
	OutputFlag
}

// Run prints the group as JSON.
func (c *GroupsInfoCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	gi, err := cl.Group(ctx, c.Name)
	if err != nil {
		return err
	}
	return c.print(gi)
}

// GroupsDeleteCmd is `pgq groups delete`.
type GroupsDeleteCmd struct {
	APIFlags
	Name string `arg:"" help:"Group name."`
}

// Run deletes the group.
func (c *GroupsDeleteCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	return cl.DeleteGroup(ctx, c.Name)
}

// GroupsResetCmd is `pgq groups reset`.
type GroupsResetCmd struct {
	APIFlags
	Name   string `arg:"" help:"Group name."`
	To     string `required:"" help:"Position: earliest, latest, offset:N, lsn:X/Y or time:RFC3339."`
	DryRun bool   `name:"dry-run" help:"Only report where the group would land."`
	OutputFlag
}

// Run resets the group and prints where it landed.
func (c *GroupsResetCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	rr, err := cl.ResetGroup(ctx, c.Name, c.To, c.DryRun)
	if err != nil {
		return err
	}
	return c.print(rr)
}

// GroupsParkedCmd is `pgq groups parked`.
type GroupsParkedCmd struct {
	List    GroupsParkedListCmd    `cmd:"" help:"List a shared group's parked messages."`
	Requeue GroupsParkedRequeueCmd `cmd:"" help:"Deliver parked messages again, delivery count restarted (by ack id, or --all)."`
	Drop    GroupsParkedDropCmd    `cmd:"" help:"Forget parked messages (by ack id, or --all)."`
}

// GroupsParkedListCmd is `pgq groups parked list`.
type GroupsParkedListCmd struct {
	APIFlags
	Name string `arg:"" help:"Group name."`
	OutputFlag
}

// Run lists the parked messages: a table, or one JSON line each.
func (c *GroupsParkedListCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	ps, err := cl.Parked(ctx, c.Name)
	if err != nil {
		return err
	}
	if c.json() {
		for _, p := range ps {
			if err := printJSON(p); err != nil {
				return err
			}
		}
		return nil
	}
	rows := make([][]string, 0, len(ps))
	for _, p := range ps {
		rows = append(rows, []string{p.AckID, fmt.Sprint(p.Offset), fmt.Sprint(p.Delivery), p.Parked.Format(time.RFC3339), p.Reason, string(p.Change)})
	}
	return table(os.Stdout, []string{"ACK_ID", "OFFSET", "DELIVERIES", "PARKED", "REASON", "CHANGE"}, rows)
}

// GroupsParkedActionCmd are the arguments of `pgq groups parked requeue|drop`.
type GroupsParkedActionCmd struct {
	APIFlags
	Name   string   `arg:"" help:"Group name."`
	AckIDs []string `arg:"" optional:"" name:"ack-id" help:"Ack ids of parked messages (see pgq groups parked list)."`
	All    bool     `help:"Every parked message."`
}

// GroupsParkedRequeueCmd is `pgq groups parked requeue`.
type GroupsParkedRequeueCmd struct{ GroupsParkedActionCmd }

// GroupsParkedDropCmd is `pgq groups parked drop`.
type GroupsParkedDropCmd struct{ GroupsParkedActionCmd }

// Run requeues and prints how many messages were requeued.
func (c *GroupsParkedRequeueCmd) Run(ctx context.Context) error { return c.run(ctx, true) }

// Run drops and prints how many messages were dropped.
func (c *GroupsParkedDropCmd) Run(ctx context.Context) error { return c.run(ctx, false) }

func (c *GroupsParkedActionCmd) run(ctx context.Context, requeue bool) error {
	if c.All == (len(c.AckIDs) > 0) {
		return usage(errors.New("give ack ids or --all"))
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	act := cl.DropParked
	if requeue {
		act = cl.Requeue
	}
	n, err := act(ctx, c.Name, c.All, c.AckIDs...)
	if err != nil {
		return err
	}
	fmt.Println(n)
	return nil
}
