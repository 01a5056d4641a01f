package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// runCLI parses and runs one pgq command line.
func runCLI(t *testing.T, args ...string) error {
	t.Helper()
	var cli CLI
	k, err := kong.New(&cli, kong.Name("pgq"), kongVars("test"))
	if err != nil {
		t.Fatal(err)
	}
	kctx, err := k.Parse(args)
	if err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	kctx.BindTo(context.Background(), (*context.Context)(nil))
	kctx.Bind(slog.New(slog.DiscardHandler))
	return kctx.Run()
}

// pgq groups create --mode shared … and pgq groups parked list|requeue|drop
// against an in-process API.
func TestGroupsSharedCLI(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	j, err := journal.Open(journal.Options{Dir: dir + "/journal", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ix, err := index.Open(index.Options{Dir: dir + "/index", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	m, err := consumers.NewManager(consumers.ManagerOptions{Journal: j, Index: ix, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	mux, err := httpapi.New(httpapi.Options{Groups: m})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cols := []pgq.Column{{Name: "id", TypeOID: 20, Key: true}}
	txs := []*pgq.Transaction{}
	for i := range 2 {
		txs = append(txs, &pgq.Transaction{Xid: uint32(i + 1), CommitLSN: pgq.LSN(100 * (i + 1)), EndLSN: pgq.LSN(100*(i+1) + 10), CommitTime: time.Now().UTC().Truncate(time.Microsecond), Final: true,
			Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: cols, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}}}}})
	}
	if err := j.Append(txs); err != nil {
		t.Fatal(err)
	}

	addr := "--addr=" + srv.URL
	if err := runCLI(t, "groups", "create", "jobs", addr, "--mode=shared", "--from=earliest", "--ack-wait=5s", "--max-deliver=3",
		"--backoff=1s,2s", "--max-ack-pending=10", "--key=table", "-o", "json"); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(srv.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gi, err := cl.Group(ctx, "jobs")
	if err != nil || gi.Mode != "shared" || gi.Shared.Key != "table" || gi.Shared.MaxDeliver != 3 || time.Duration(gi.Shared.AckWait) != 5*time.Second ||
		len(gi.Shared.Backoff) != 2 || gi.Shared.MaxAckPending != 10 {
		t.Fatalf("created: %+v %+v, %v", gi, gi.Shared, err)
	}
	if err := runCLI(t, "groups", "create", "bad", addr, "--max-deliver=3"); err == nil {
		t.Fatal("--max-deliver on an exclusive group was accepted")
	}
	for range 2 {
		msgs, err := cl.FetchMessages(ctx, "jobs", client.FetchRequest{Member: "m", Max: 5})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("fetch: %v, %v", msgs, err)
		}
		if _, err := cl.Term(ctx, "jobs", msgs[0].AckID); err != nil {
			t.Fatal(err)
		}
	}
	if err := runCLI(t, "groups", "parked", "list", "jobs", addr, "-o", "table"); err != nil {
		t.Fatal(err)
	}
	if err := runCLI(t, "groups", "parked", "drop", "jobs", addr); err == nil {
		t.Fatal("drop without ack ids or --all was accepted")
	}
	if err := runCLI(t, "groups", "parked", "requeue", "jobs", "1.0.1", addr); err != nil {
		t.Fatal(err)
	}
	if err := runCLI(t, "groups", "parked", "drop", "jobs", "--all", addr); err != nil {
		t.Fatal(err)
	}
	ps, err := cl.Parked(ctx, "jobs")
	if err != nil || len(ps) != 0 {
		t.Fatalf("parked: %+v, %v", ps, err)
	}
	msgs, err := cl.FetchMessages(ctx, "jobs", client.FetchRequest{Member: "m", Max: 5})
	if err != nil || len(msgs) != 1 || msgs[0].Offset != 1 {
		t.Fatalf("requeued: %+v, %v", msgs, err)
	}

	// pgq consume on a shared group prints the messages and acks them.
	if err := runCLI(t, "groups", "create", "jobs2", addr, "--mode=shared", "--from=earliest"); err != nil {
		t.Fatal(err)
	}
	data, err := captureCLI(t, "consume", "--group=jobs2", addr)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	// Offset 2 has the same key: delivered by the next fetch, after the ack.
	if len(lines) != 2 || !strings.Contains(lines[0], `"ack_id":"1.0.1.`) || !strings.Contains(lines[0], `"change":{"op":"insert"`) ||
		!strings.Contains(lines[1], `"ack_id":"2.0.1.`) {
		t.Fatalf("consume printed %q", data)
	}
	gi, err = cl.Group(ctx, "jobs2")
	if err != nil || gi.CommittedOffset != 2 || gi.Shared.InFlight != 0 {
		t.Fatalf("after consume: %+v, %v", gi, err)
	}
}
