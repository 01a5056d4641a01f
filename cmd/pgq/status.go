package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
)

// StatusCmd is `pgq status`.
type StatusCmd struct {
	APIFlags
	OutputFlag
}

// statusDoc is what `pgq status -o json` prints: the three API documents
// it reads, each unchanged.
type statusDoc struct {
	// Status is GET /v1/status.
	Status api.Status `json:"status"`
	// Groups is GET /v1/groups's "groups".
	Groups []api.GroupInfo `json:"groups"`
	// Backfills is GET /v1/backfills.
	Backfills []client.Backfill `json:"backfills"`
}

// Run reads the status, the groups and the backfills and prints them.
func (c *StatusCmd) Run(ctx context.Context) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	var doc statusDoc
	if doc.Status, err = cl.Status(ctx); err != nil {
		return err
	}
	if doc.Groups, err = cl.Groups(ctx); err != nil {
		return err
	}
	doc.Backfills, err = cl.Backfills(ctx)
	// A server embedding pgq without backfills does not mount them.
	if err != nil && !errors.Is(err, api.ErrNotFound) {
		return err
	}
	if doc.Groups == nil {
		doc.Groups = []api.GroupInfo{}
	}
	if doc.Backfills == nil {
		doc.Backfills = []client.Backfill{}
	}
	return c.show(doc, func(w io.Writer) error { return statusTable(w, doc) })
}

// statusTable prints the status at a glance: ingest and the slot, the
// journal and the index, then a table of the groups and, when there are
// any, of the backfills.
func statusTable(w io.Writer, doc statusDoc) error {
	st := doc.Status
	state := "streaming"
	switch {
	case !st.Running:
		state = "stopped"
	case !st.Connected:
		state = "not connected"
	}
	rows := [][]string{
		{"ingest", state},
		{"slot", fmt.Sprintf("%s (publication %s, protocol %d, failover %t)", st.Slot, st.Publication, st.ProtoVersion, st.SlotFailover)},
		{"confirmed_lsn", st.ConfirmedLSN.String()},
		{"server_wal_end", st.ServerWALEnd.String()},
		{"last_message", ago(st.LastMessageAt)},
		{"last_error", orDashP(st.LastError) + agoSuffix(st.LastErrorAt)},
		{"reconnects", fmt.Sprint(st.Reconnects)},
		{"journal", fmt.Sprintf("offsets %d..%d, ends at %s, covers %s", st.JournalFirstOffset, st.JournalLastOffset, st.JournalLastEndLSN, st.CoveredLSN)},
		{"written", fmt.Sprintf("%d records, %d changes", st.RecordsWritten, st.ChangesWritten)},
		{"journal_error", orDashP(st.JournalError)},
		{"spill_error", orDashP(st.SpillError)},
		{"index", indexState(st.Index)},
	}
	if err := table(w, nil, rows); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	if err := groupsTable(w, doc.Groups); err != nil {
		return err
	}
	if len(doc.Backfills) == 0 {
		return nil // no header over nothing: most pgqs never backfill
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	return backfillsTable(w, doc.Backfills)
}

func indexState(ix api.IndexStatus) string {
	s := "ok"
	if ix.Stale {
		s = "stale (being healed)"
	}
	s += fmt.Sprintf(", %d failed updates, %d heals", ix.FailedUpdates, ix.Heals)
	if ix.LastError != nil {
		s += ", last error: " + *ix.LastError
	}
	return s
}

func orDashP(s *string) string {
	if s == nil {
		return "-"
	}
	return orDash(*s)
}

// now is the clock of the status table (tests fix it).
var now = time.Now

// ago renders a time as RFC 3339 and how long ago it was.
func ago(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339) + " (" + now().Sub(*t).Round(time.Second).String() + " ago)"
}

func agoSuffix(t *time.Time) string {
	if t == nil {
		return ""
	}
	return " at " + ago(t)
}

// HealthcheckCmd is `pgq healthcheck`: a container's HEALTHCHECK (the
// distroless image has no shell or curl).
type HealthcheckCmd struct {
	APIFlags
	ProbeListen string        `name:"probe-listen" env:"PGQ_PROBE_LISTEN" placeholder:"HOST:PORT" help:"pgq run's --probe-listen (plain HTTP): when set, /readyz is asked there, without the token; else the API at --addr (without --addr and PGQ_ADDR: at PGQ_LISTEN when set, as in pgq's container)."`
	Timeout     time.Duration `default:"5s" help:"Give up after this long."`
}

// Run exits 0 when GET /readyz answers 200, else returns the reason
// (exit 1). It does not retry: the container runtime asks again.
func (c *HealthcheckCmd) Run(ctx context.Context) error {
	if err := c.check(ctx); err != nil {
		return &healthError{err: err}
	}
	_, err := fmt.Fprintln(stdout, "ready")
	return err
}

func (c *HealthcheckCmd) check(ctx context.Context) error {
	// No retries: the container runtime asks again.
	noRetry := client.RetryOptions{GiveUp: -1}
	flags := c.APIFlags
	if listen, ok := os.LookupEnv("PGQ_LISTEN"); ok && flags.Addr == defaultAddr && os.Getenv("PGQ_ADDR") == "" {
		// In pgq's container the healthcheck shares pgq run's
		// environment: its --listen is where the API is.
		flags.Addr = dialable(listen)
		if os.Getenv("PGQ_TLS_CERT") != "" {
			flags.Addr = "https://" + flags.Addr // pgq run serves TLS there
		}
	}
	cl, err := flags.clientWith(noRetry)
	if c.ProbeListen != "" {
		cl, err = client.New(dialable(c.ProbeListen), client.Options{Retry: noRetry})
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	if err := cl.Ready(ctx); err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	return nil
}

// defaultAddr is APIFlags.Addr's default (its tag's literal).
const defaultAddr = "127.0.0.1:5480"

// dialable turns a listen address into one to dial: a wildcard or empty
// host (":8081", "0.0.0.0:8081", "[::]:8081") is this machine.
func dialable(listen string) string {
	if strings.Contains(listen, "://") {
		return listen
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
