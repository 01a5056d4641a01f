// Command pgq turns a PostgreSQL logical replication slot into a durable
// local queue. See the README for the quick start and docs/ for the rest:
// running it, its flags, the HTTP API.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/ingest"
)

var version = "dev"

// CLI is the whole command line. Flags beat their environment variables.
type CLI struct {
	LogLevel  string `help:"Log level: debug, info, warn, error." default:"info" enum:"debug,info,warn,error" env:"PGQ_LOG_LEVEL"`
	LogFormat string `help:"Log format: text or json." default:"text" enum:"text,json" env:"PGQ_LOG_FORMAT"`

	Run     RunCmd     `cmd:"" help:"Stream a replication slot into the journal and serve the API."`
	Journal JournalCmd `cmd:"" help:"Inspect the journal."`
	Slot    SlotCmd    `cmd:"" help:"Inspect or drop the replication slot."`
	Status  StatusCmd  `cmd:"" help:"Show a running pgq at a glance: ingest, slot, journal, groups, backfills."`
	Groups  GroupsCmd  `cmd:"" help:"Manage consumer groups of a running pgq."`
	Consume ConsumeCmd `cmd:"" help:"Print a consumer group's transactions as NDJSON (as journal dump) and commit them."`
	Bridge  BridgeCmd  `cmd:"" help:"Publish a consumer group into NATS JetStream, Kafka or an HTTP receiver (webhook), committing after the broker or receiver acknowledged."`
	DDL     DDLCmd     `cmd:"" name:"ddl" help:"Capture schema changes (DDL) into the journal."`
	Ver     VersionCmd `cmd:"" name:"version" help:"Print the version and the commit pgq was built from."`

	Backfill BackfillCmd `cmd:"" help:"Backfill existing rows into the journal while streaming goes on (start, list, status, cancel)."`

	Healthcheck HealthcheckCmd `cmd:"" help:"Exit 0 when a running pgq is ready (GET /readyz), else 1: for a container's HEALTHCHECK."`

	VersionFlag kong.VersionFlag `name:"version" help:"Print the version and exit."`
}

// Exit statuses, the same for every command (docs/running.md, "Exit status").
const (
	// exitRuntime: a failure while working (an unreachable server, a full
	// disk, a corrupt journal, a gap, a lost lease): running again later
	// may succeed.
	exitRuntime = 1
	// exitUsage: the command line, the config file, the environment or
	// the database's setup is wrong: running the same again fails the
	// same way (a supervisor should not restart it).
	exitUsage = 2
)

const description = `A PostgreSQL logical replication slot as a durable local queue.

Exit status (every command): 0 done; 1 a runtime failure (unreachable server, full disk, corrupt journal, gap, lost lease: running again later may succeed); 2 a usage or configuration error (bad flag, config file or value; wal_level not logical, missing slot or publication, missing privilege; an API answer bad_request, invalid_name, bad_position or unauthorized; a TLS refusal): running the same again fails the same way.`

func main() {
	var cli CLI
	k, err := kong.New(&cli,
		kong.Name("pgq"),
		kong.Description(description),
		kongVars(versionString()),
	)
	if err != nil {
		exit(err, exitRuntime) // the CLI's own definition is broken
	}
	kctx, err := k.Parse(os.Args[1:])
	if err != nil {
		var pe *kong.ParseError
		if errors.As(err, &pe) {
			kctx = pe.Context
		}
		exitHint(err, exitUsage, kctx)
	}
	logger := newLogger(os.Stderr, cli.LogLevel, cli.LogFormat)
	slog.SetDefault(logger)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	kctx.BindTo(ctx, (*context.Context)(nil))
	kctx.Bind(logger)
	err = kctx.Run()
	stop()
	if err != nil {
		err = apiUnreachable(err, kctx)
		code := exitCode(err)
		if code == exitUsage {
			exitHint(err, code, kctx)
		}
		exit(err, code)
	}
}

// exit prints err as pgq's one error line and exits with code.
func exit(err error, code int) {
	fmt.Fprintln(os.Stderr, "pgq: "+errorLine(err))
	os.Exit(code)
}

// exitHint prints a usage error's one line and where to read more (the
// help of the command it was for), never the help itself, which would
// bury the error; then exits with code.
func exitHint(err error, code int, kctx *kong.Context) {
	line, path := errorLine(err), commandPath(kctx)
	if rest, ok := strings.CutPrefix(line, "unexpected argument "); ok && path == "pgq" {
		line = "unknown command " + rest // kong's words for it
	}
	fmt.Fprintf(os.Stderr, "pgq: %s (see %s --help)\n", line, path)
	os.Exit(code)
}

// commandPath is the command kctx selected, "pgq groups create", or
// "pgq" when none was (an unknown command).
func commandPath(kctx *kong.Context) string {
	var names []string
	if kctx != nil {
		for n := kctx.Selected(); n != nil; n = n.Parent {
			if n.Type == kong.CommandNode {
				names = append(names, n.Name)
			}
		}
	}
	slices.Reverse(names)
	return strings.Join(append([]string{"pgq"}, names...), " ")
}

// usageError marks an error of the command line or the configuration
// found while a command runs (a flag value only it can check).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usage marks err (nil stays nil) as a usage error: exitUsage.
func usage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err: err}
}

// configErrors are the refusals only a change of the configuration ends:
// ingest's preflight (the options, the server's wal_level, the slot, the
// publication, the role's privileges), the API's answers to a request
// built from bad flags, with a bad token or refused as cross-site (a Host
// name not in --allowed-hosts), and a TLS refusal (an
// untrusted certificate, a missing client certificate, http against
// https).
var configErrors = []error{
	ingest.ErrConfig, ingest.ErrWALLevel, ingest.ErrSlotMissing, ingest.ErrSlotPlugin, ingest.ErrPubMissing, ingest.ErrPrivilege,
	api.ErrBadRequest, api.ErrInvalidName, api.ErrBadPosition, api.ErrUnauthorized, api.ErrForbidden, api.ErrMisdirected, api.ErrMediaType, client.ErrTLS,
}

// healthError is pgq healthcheck's failure: exit status 1 whatever the
// cause, as a container runtime's HEALTHCHECK wants (Docker reserves 2).
type healthError struct{ err error }

func (e *healthError) Error() string { return e.err.Error() }
func (e *healthError) Unwrap() error { return e.err }

// exitCode is the exit status of a command's error.
func exitCode(err error) int {
	if h := (*healthError)(nil); errors.As(err, &h) {
		return exitRuntime
	}
	var u *usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	for _, c := range configErrors {
		if errors.Is(err, c) {
			return exitUsage
		}
	}
	return exitRuntime
}

// newLogger logs to w at level, as text or JSON.
func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		// slog's JSON handler writes durations as integer nanoseconds;
		// people and log tools read "1.5s" (as the text handler writes).
		opts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}
		return slog.New(flagTermsHandler{slog.NewJSONHandler(w, opts)})
	}
	return slog.New(flagTermsHandler{slog.NewTextHandler(w, opts)})
}

// oneLine keeps error output to a single line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(inFlagTerms(err), "\n", " ")), " ")
}

// innerPrefixes are the package names pgq's errors carry for its
// developers ("client: gave up …: client: GET …", "consumers: bad
// request: …"); a user reading "pgq: …" learns nothing from them.
var innerPrefixes = []string{"pgq: ", "consumers: ", "client: ", "ingest: ", "journal: ", "index: ", "server: ", "backfill: ", "httpapi: ", "feedback: ", "bridge: "}

// roundTripURL matches the client's "GET /v1/x: " followed by Go's own
// `Get "http://host/v1/x": `, which says the same twice.
// statPath matches os.Stat's ": stat PATH: " of a flag naming a missing
// file or directory: the operation's name says nothing to a user.
var statPath = regexp.MustCompile(`: stat (\S+): `)

var roundTripURL = regexp.MustCompile(`\b([A-Z]+) /\S*: [A-Z][a-z]+ "([^"]+)": `)

// errorLine is the one line printed after "pgq: ": without package
// prefixes ("pgq: consumers: bad request: pgq: unknown op" reads "pgq:
// bad request: unknown op"), a request named once with its URL.
func errorLine(err error) string {
	s := oneLine(err)
	for _, p := range innerPrefixes {
		s = strings.TrimPrefix(s, p)
		s = strings.ReplaceAll(s, ": "+p, ": ")
		s = strings.ReplaceAll(s, "("+p, "(")
	}
	s = roundTripURL.ReplaceAllString(s, "$1 $2: ")
	s = statPath.ReplaceAllString(s, ": $1: ")
	if te := (*client.TLSError)(nil); errors.As(err, &te) {
		s = strings.Replace(s, te.Hint(nil), te.Hint(flagTerm), 1)
	}
	return s
}

// apiUnreachable adds to a client command's error, when no pgq answered
// at its --addr (a refused or failed dial of that address), where the
// address comes from; other errors come back as they are.
func apiUnreachable(err error, kctx *kong.Context) error {
	addr, ok := flagValue(kctx, "addr")
	var ue *url.Error
	var op *net.OpError
	if !ok || !errors.As(err, &ue) || !errors.As(ue.Err, &op) || op.Op != "dial" {
		return err
	}
	u, perr := url.Parse(ue.URL)
	if perr != nil || u.Host != hostPort(addr) {
		return err // another server's (a webhook's)
	}
	return fmt.Errorf("%w (no pgq answers at %s: start it, or give its address with --addr or PGQ_ADDR)", err, u.Host)
}

// hostPort is the host:port of an --addr, a URL or host:port.
func hostPort(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		return u.Host
	}
	return addr
}

// flagValue is the value of the selected command's flag name, if it has
// one.
func flagValue(kctx *kong.Context, name string) (string, bool) {
	if kctx == nil {
		return "", false
	}
	for _, f := range kctx.Flags() {
		if f.Name == name {
			v, ok := kctx.FlagValue(f).(string)
			return v, ok
		}
	}
	return "", false
}
