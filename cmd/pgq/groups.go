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
	Addr      string `default:"127.0.0.1:5480" env:"PGQ_ADDR" help:"Address of the pgq sidecar's HTTP API."`
	AuthToken string `name:"auth-token" env:"PGQ_AUTH_TOKEN" help:"Bearer token of the API."`
}

// client dials the API. Admin commands retry a restarting pgq for a
// short while, then report it unreachable.
func (f APIFlags) client() (*client.Client, error) {
	return client.Dial(f.Addr, client.Options{Token: f.AuthToken, Retry: client.RetryOptions{GiveUp: 5 * time.Second}})
}

// GroupsCmd is `pgq groups`.
type GroupsCmd struct {
	Create GroupsCreateCmd `cmd:"" help:"Create a consumer group."`
	List   GroupsListCmd   `cmd:"" help:"List consumer groups with their lag."`
	Info   GroupsInfoCmd   `cmd:"" help:"Show one consumer group."`
	Delete GroupsDeleteCmd `cmd:"" help:"Delete a consumer group."`
	Reset  GroupsResetCmd  `cmd:"" help:"Move a consumer group to a position."`
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
	OutputFlag
}

// Run creates the group.
func (c *GroupsCreateCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	gi, err := cl.CreateGroup(ctx, api.CreateRequest{Name: c.Name, From: c.From, Tables: splitList(c.Tables), Ops: splitList(c.Ops)})
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
		rows = append(rows, []string{g.Name, fmt.Sprint(g.Committed), fmt.Sprint(g.Lag.Records), fmt.Sprint(g.Lag.Bytes),
			fmt.Sprintf("%.1f", g.Lag.Seconds), fmt.Sprint(g.Lag.OutOfRange), member})
	}
	return table(os.Stdout, []string{"GROUP", "COMMITTED", "LAG", "LAG_BYTES", "LAG_SEC", "OUT_OF_RANGE", "MEMBER"}, rows)
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
