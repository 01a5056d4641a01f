package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	return f.clientWith(client.RetryOptions{GiveUp: 5 * time.Second})
}

// clientWith dials the API with these retries: every client of the API
// the CLI makes (pgq healthcheck's too) is made here, with the flags'
// token and TLS settings.
func (f APIFlags) clientWith(retry client.RetryOptions) (*client.Client, error) {
	cl, err := client.New(f.Addr, client.Options{Token: f.AuthToken, Retry: retry, TLS: f.tls()})
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
	Ops         string `help:"Only these ops (comma-separated insert,update,delete,truncate,message,ddl,read,gap; read: rows of a backfill)."`
	IfNotExists bool   `name:"if-not-exists" help:"Succeed (printing the existing group) when the group already exists."`
	Mode        string `enum:"exclusive,shared" default:"exclusive" help:"exclusive: one leased member, cumulative commits; shared: many members, per-change ack/nak/term."`
	// Shared groups only.
	AckWait       time.Duration `name:"ack-wait" help:"Shared: redeliver a message not acked within this (default 30s)."`
	MaxDeliver    int           `name:"max-deliver" help:"Shared: park a message after this many deliveries (default 5)."`
	Backoff       string        `help:"Shared: redelivery delays after the 1st, 2nd, ... nak (comma-separated durations, the last repeats; default: at once)."`
	MaxAckPending int           `name:"max-ack-pending" help:"Shared: most messages in flight in the group (default 1000)."`
	Key           string        `enum:"pk,table,none" default:"pk" help:"Shared: ordering key: pk (table and primary key, also under REPLICA IDENTITY FULL), table, or none."`
	HoldSlot      bool          `name:"hold-slot" help:"Hold the replication slot for the group: PostgreSQL keeps what it has not committed, so losing pgq's disk loses none of it (see pgq run --hold-slot-max-lag)."`
	OutputFlag
}

// Run creates the group and prints it.
func (c *GroupsCreateCmd) Run(ctx context.Context) error {
	req := api.CreateRequest{Name: c.Name, From: c.From, Tables: splitList(c.Tables), Ops: splitList(c.Ops),
		AckWait: api.Duration(c.AckWait), MaxDeliver: c.MaxDeliver, MaxAckPending: c.MaxAckPending, HoldSlot: c.HoldSlot}
	switch {
	case c.Mode == "shared":
		req.Mode, req.Key = "shared", c.Key
	case c.Key != "pk":
		// --key defaults to pk, the shared groups' default; another key
		// for an exclusive group is refused as the API refuses it.
		return usage(errors.New("--key applies to shared groups (--mode shared) only"))
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	for _, b := range splitList(c.Backoff) {
		d, err := time.ParseDuration(b)
		if err != nil {
			return usage(fmt.Errorf("--backoff %q: %w", b, err))
		}
		req.Backoff = append(req.Backoff, api.Duration(d))
	}
	heading := "created group " + c.Name
	gi, err := cl.CreateGroup(ctx, req)
	if errors.Is(err, api.ErrExists) && c.IfNotExists {
		heading = "group " + c.Name + " exists already (--if-not-exists)"
		gi, err = cl.Group(ctx, c.Name)
	}
	if err != nil {
		return err
	}
	return c.showFields(heading, gi)
}

// GroupsListCmd is `pgq groups list`.
type GroupsListCmd struct {
	APIFlags
	OutputFlag
}

// Run lists the groups: a table, or the API's {"groups":[...]}.
func (c *GroupsListCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	gs, err := cl.Groups(ctx)
	if err != nil {
		return err
	}
	if gs == nil {
		gs = []api.GroupInfo{}
	}
	return c.show(api.ListResponse{Groups: gs}, func(w io.Writer) error { return groupsTable(w, gs) })
}

// groupsTable prints a row per group (pgq groups list, pgq status).
func groupsTable(w io.Writer, gs []api.GroupInfo) error {
	rows := make([][]string, 0, len(gs))
	for _, g := range gs {
		hold := "-"
		switch {
		case g.HoldReleased:
			hold = "released"
		case g.HoldSlot:
			hold = "yes"
		}
		rows = append(rows, []string{g.Name, orDash(g.Mode), fmt.Sprint(g.CommittedOffset), fmt.Sprint(g.Lag.Records), fmt.Sprint(g.Lag.Bytes),
			fmt.Sprintf("%.1f", g.Lag.Seconds), fmt.Sprint(g.Lag.OutOfRange), orDash(g.Member), hold})
	}
	return table(w, []string{"GROUP", "MODE", "COMMITTED", "LAG", "LAG_BYTES", "LAG_SEC", "OUT_OF_RANGE", "MEMBER", "HOLD_SLOT"}, rows)
}

// GroupsInfoCmd is `pgq groups info`.
type GroupsInfoCmd struct {
	APIFlags
	Name string `arg:"" help:"Group name."`
	OutputFlag
}

// Run prints the group.
func (c *GroupsInfoCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	gi, err := cl.Group(ctx, c.Name)
	if err != nil {
		return err
	}
	return c.showFields("", gi)
}

// GroupsDeleteCmd is `pgq groups delete`.
type GroupsDeleteCmd struct {
	APIFlags
	Name string `arg:"" help:"Group name."`
	OutputFlag
}

// Run deletes the group and says so.
func (c *GroupsDeleteCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	if err := cl.DeleteGroup(ctx, c.Name); err != nil {
		return err
	}
	return c.show(api.OKResponse{OK: true}, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "deleted group %s\n", c.Name)
		return err
	})
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
	heading := fmt.Sprintf("reset group %s to %s: committed offset %d (was %d), next offset %d", c.Name, c.To, rr.CommittedOffset, rr.PreviousCommittedOffset, rr.NextOffset)
	if c.DryRun {
		heading = fmt.Sprintf("dry run: group %s would move to committed offset %d (now %d), next offset %d; nothing changed", c.Name, rr.CommittedOffset, rr.PreviousCommittedOffset, rr.NextOffset)
	}
	return c.showFields(heading, rr)
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

// Run lists the parked messages: a table, or the API's {"parked":[...]}.
func (c *GroupsParkedListCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	ps, err := cl.Parked(ctx, c.Name)
	if err != nil {
		return err
	}
	if ps == nil {
		ps = []api.ParkedMessage{}
	}
	return c.show(api.ParkedResponse{Parked: ps}, func(w io.Writer) error { return parkedTable(w, ps) })
}

// parkedTable prints a row per parked message; the change is named by
// its op and table (pgq groups parked list -o json has all of it).
func parkedTable(w io.Writer, ps []api.ParkedMessage) error {
	rows := make([][]string, 0, len(ps))
	for _, p := range ps {
		// Marshalled, not cast: the change's Go type is the API's
		// business, its JSON form is the contract.
		var ch struct{ Op, Schema, Table, Prefix string }
		if raw, err := json.Marshal(p.Change); err == nil {
			_ = json.Unmarshal(raw, &ch)
		}
		target := ch.Schema + "." + ch.Table
		if ch.Table == "" {
			target = orDash(ch.Prefix)
		}
		rows = append(rows, []string{p.AckID, fmt.Sprint(p.Offset), p.CommitLSN, orDash(ch.Op), target, fmt.Sprint(p.Delivery),
			p.Parked.UTC().Format(time.RFC3339), orDash(p.Reason)})
	}
	return table(w, []string{"ACK_ID", "OFFSET", "COMMIT_LSN", "OP", "TABLE", "DELIVERIES", "PARKED", "REASON"}, rows)
}

// GroupsParkedActionCmd are the arguments of `pgq groups parked requeue|drop`.
type GroupsParkedActionCmd struct {
	APIFlags
	Name   string   `arg:"" help:"Group name."`
	AckIDs []string `arg:"" optional:"" name:"ack-id" help:"Ack ids of parked messages (see pgq groups parked list)."`
	All    bool     `help:"Every parked message."`
	OutputFlag
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
	verb := "dropped"
	if requeue {
		verb = "requeued"
	}
	return c.show(api.AckResult{Count: n}, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s %d parked %s of group %s\n", verb, n, plural(n, "message", "messages"), c.Name)
		return err
	})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
