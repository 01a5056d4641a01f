// Command pgq turns a PostgreSQL logical replication slot into a durable
// local queue. See the README for the quick start and docs/ for the HTTP
// API.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"
)

var version = "dev"

// CLI is the whole command line. Flags beat their environment variables.
type CLI struct {
	LogLevel  string `help:"Log level: debug, info, warn, error." default:"info" enum:"debug,info,warn,error" env:"PGQ_LOG_LEVEL"`
	LogFormat string `help:"Log format: text or json." default:"text" enum:"text,json" env:"PGQ_LOG_FORMAT"`

	Run     RunCmd     `cmd:"" help:"Stream a replication slot into the journal and serve the API."`
	Journal JournalCmd `cmd:"" help:"Inspect the journal."`
	Slot    SlotCmd    `cmd:"" help:"Inspect or drop the replication slot."`
	Groups  GroupsCmd  `cmd:"" help:"Manage consumer groups of a running pgq."`
	Consume ConsumeCmd `cmd:"" help:"Print a consumer group's transactions as NDJSON (as journal dump) and commit them."`
	Bridge  BridgeCmd  `cmd:"" help:"Publish a consumer group into NATS JetStream or Kafka, committing after the broker acknowledged."`
	DDL     DDLCmd     `cmd:"" name:"ddl" help:"Capture schema changes (DDL) into the journal."`
	Ver     VersionCmd `cmd:"" name:"version" help:"Print the version and the commit pgq was built from."`

	Backfill BackfillCmd `cmd:"" help:"Backfill existing rows into the journal while streaming goes on (start, list, status, cancel)."`

	VersionFlag kong.VersionFlag `name:"version" help:"Print the version and exit."`
}

func main() {
	var cli CLI
	kctx := kong.Parse(&cli,
		kong.Name("pgq"),
		kong.Description("A PostgreSQL logical replication slot as a durable local queue."),
		kong.UsageOnError(),
		kong.Vars{"version": versionString()},
	)
	logger := newLogger(cli.LogLevel, cli.LogFormat)
	slog.SetDefault(logger)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	kctx.BindTo(ctx, (*context.Context)(nil))
	kctx.Bind(logger)
	if err := kctx.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "pgq: "+errorLine(err))
		var ec interface{ ExitCode() int }
		if errors.As(err, &ec) {
			os.Exit(ec.ExitCode())
		}
		os.Exit(1)
	}
}

func newLogger(level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// oneLine keeps error output to a single line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ")), " ")
}

// innerPrefixes are package prefixes that add nothing after "pgq: " (the
// API's own errors arrive with them).
var innerPrefixes = []string{"pgq: ", "consumers: "}

// errorLine is the one line printed after "pgq: ": without repeated
// package prefixes ("pgq: consumers: bad request: pgq: unknown op" reads
// "pgq: bad request: unknown op").
func errorLine(err error) string {
	s := oneLine(err)
	for _, p := range innerPrefixes {
		s = strings.TrimPrefix(s, p)
		s = strings.ReplaceAll(s, ": "+p, ": ")
	}
	return s
}

// exitError carries a specific exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) ExitCode() int { return e.code }
