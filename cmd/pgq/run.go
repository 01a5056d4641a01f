package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/journal"
	"github.com/pgq-dev/pgq/server"
)

// RunCmd is `pgq run`.
type RunCmd struct {
	Config            ConfigFile `name:"config" env:"PGQ_CONFIG" type:"existingfile" placeholder:"pgq.yaml" help:"YAML or JSON file of run flags by name (pg-url: …). A flag beats its environment variable, which beats the file, which beats the default."`
	PGURL             string     `name:"pg-url" required:"" env:"PGQ_PG_URL" help:"PostgreSQL URL (sslmode/sslrootcert honoured)."`
	Slot              string     `required:"" env:"PGQ_SLOT" help:"Logical replication slot (pgoutput)."`
	Publication       string     `required:"" env:"PGQ_PUBLICATION" help:"Publication to stream."`
	DataDir           string     `name:"data-dir" required:"" env:"PGQ_DATA_DIR" type:"path" help:"Directory for the journal and index."`
	CreateSlot        bool       `name:"create-slot" env:"PGQ_CREATE_SLOT" help:"Create the slot when missing."`
	AcceptGap         bool       `name:"accept-gap" env:"PGQ_ACCEPT_GAP" help:"When the slot resumes past the journal's end (a new slot over an existing journal, a lost journal tail), journal a gap change naming the missing LSN range and go on, instead of refusing to start."`
	CreatePublication string     `name:"create-publication" env:"PGQ_CREATE_PUBLICATION" placeholder:"all|schema.table,..." help:"Create the publication when missing (an empty value is refused). FOR ALL TABLES makes UPDATE/DELETE fail in the application on tables without a primary key or replica identity (pgq warns naming them; see --skip-tables-without-key)."`
	Start             string     `default:"slot" env:"PGQ_START" placeholder:"slot|latest|lsn:X/Y" help:"Where a brand-new journal begins: the slot's position (slot), the server's current WAL (latest), or an LSN the slot can still serve. Ignored once the journal has records."`
	SlotLifecycle     string     `name:"slot-lifecycle" default:"keep" enum:"keep,drop-on-exit,temporary" env:"PGQ_SLOT_LIFECYCLE" help:"keep: the slot outlives pgq. drop-on-exit: dropped after a clean shutdown (changes made while pgq is stopped are lost). temporary: a TEMPORARY slot per connection (every reconnect loses changes; for throwaway runs)."`
	SlotFailover      string     `name:"slot-failover" default:"auto" enum:"auto,on,off" env:"PGQ_SLOT_FAILOVER" help:"--create-slot makes a failover slot, which PostgreSQL 17+ standbys with sync_replication_slots keep across a promotion. auto: where the server supports it. on: required (refused below PostgreSQL 17, with --slot-lifecycle temporary, or over an existing slot that is not one). off: never."`
	InitialLoad       string     `name:"initial-load" env:"PGQ_INITIAL_LOAD" placeholder:"schema.table,..." help:"Load these tables' rows first, under the snapshot of the slot pgq creates (as pg_dump does), then stream: exactly the rows at the slot's start, no overlap. Only into a slot pgq creates over an empty journal; an interrupted load cannot resume (drop the slot and start again); a restart after a finished load just streams. The slot holds WAL until the load is journaled."`
	InitialLoadPar    int        `name:"initial-load-parallelism" env:"PGQ_INITIAL_LOAD_PARALLELISM" help:"Connections reading the --initial-load tables, each under the slot's snapshot (0: twice the CPUs, up to 4; at most 16)."`
	ReconnectGiveUp   Duration   `name:"reconnect-give-up" env:"PGQ_RECONNECT_GIVE_UP" help:"Exit non-zero with the last error once reconnecting failed for this long without progress (0: never): a session that journals nothing and fails inside the same transaction again counts as failing."`
	NoReconnect       bool       `name:"no-reconnect" env:"PGQ_NO_RECONNECT" help:"Exit non-zero at the first interruption instead of reconnecting."`
	SkipKeyless       bool       `name:"skip-tables-without-key" env:"PGQ_SKIP_TABLES_WITHOUT_KEY" help:"With --create-publication all: publish only tables with a primary key or replica identity (UPDATE/DELETE of the others would fail in the application)."`
	Listen            string     `default:"127.0.0.1:5480" env:"PGQ_LISTEN" help:"HTTP address for /healthz, /v1/status, /metrics and the API."`
	ReconnectMin      Duration   `name:"reconnect-min" default:"500ms" env:"PGQ_RECONNECT_MIN" help:"First reconnect delay."`
	ReconnectMax      Duration   `name:"reconnect-max" default:"30s" env:"PGQ_RECONNECT_MAX" help:"Longest reconnect delay."`
	StatusInterval    Duration   `name:"status-interval" default:"10s" env:"PGQ_STATUS_INTERVAL" help:"Longest time between standby status updates."`
	ReceiveCoalesce   Duration   `name:"receive-coalesce" default:"500us" env:"PGQ_RECEIVE_COALESCE" help:"While PostgreSQL streams at full speed (over 32 messages per millisecond), let messages gather in the socket for up to this long before reading them: far less CPU per message, at most this much added latency, and only at that speed (0: off; at most 10ms)."`
	SegmentSize       ByteSize   `name:"segment-size" default:"16MiB" env:"PGQ_SEGMENT_SIZE" help:"Journal segment size (bytes, or with a unit: 16MiB; the tail segment is held in memory): 4KiB to 1GiB."`
	ScrubRate         ByteSize   `name:"scrub-rate" default:"16MiB" env:"PGQ_SCRUB_RATE" help:"Read rate (bytes per second) of the background scrub that verifies sealed journal segments against their checksums; 0 turns it off."`
	MaxRecordBytes    ByteSize   `name:"max-record-bytes" default:"8MiB" env:"PGQ_MAX_RECORD_BYTES" help:"Record size limit: a larger transaction is journaled as several records (parts): 4KiB to 1GiB."`
	MemoryLimit       ByteSize   `name:"memory-limit" default:"192MiB" env:"PGQ_MEMORY_LIMIT" help:"Soft memory limit of the Go runtime (0: none); the GOMEMLIMIT environment variable takes precedence."`
	AuthToken         string     `name:"auth-token" env:"PGQ_AUTH_TOKEN" help:"Require 'Authorization: Bearer <token>' on every HTTP call except /healthz."`
	InsecureNoAuth    bool       `name:"insecure-no-auth" env:"PGQ_INSECURE_NO_AUTH" help:"Let --listen be a non-loopback address without --auth-token or --tls-client-ca (refused otherwise): anyone who can reach it can read every change and move every group. Warned at every start."`
	AllowedHosts      string     `name:"allowed-hosts" env:"PGQ_ALLOWED_HOSTS" placeholder:"NAME[,NAME]" help:"Host names (besides IP addresses and localhost) that API requests without a token may name in their Host header ('*.example.com': its subdomains); others answer 421 (DNS rebinding). /healthz, /readyz and /metrics answer any."`
	AllowedOrigins    string     `name:"allowed-origins" env:"PGQ_ALLOWED_ORIGINS" placeholder:"ORIGIN[,ORIGIN]" help:"Origins (https://console.example:8443) whose cross-site browser requests the API serves, with CORS headers; a request from any other origin than its Host answers 403."`
	ProbeListen       string     `name:"probe-listen" env:"PGQ_PROBE_LISTEN" placeholder:"HOST:PORT" help:"Also serve /healthz, /readyz and /metrics, without the token, on this address (probes and scrapes keep answering whatever clients of --listen do)."`
	HTTPMaxConns      int        `name:"http-max-conns" default:"256" env:"PGQ_HTTP_MAX_CONNS" help:"Concurrent API connections; beyond them 8 more answer only /healthz and /readyz, and the rest wait to be accepted (lowered to fit the open-file limit, keeping pgq's own files)."`
	HTTPBodyTimeout   Duration   `name:"http-body-timeout" default:"30s" env:"PGQ_HTTP_BODY_TIMEOUT" help:"Longest time to read a request body."`
	HTTPIdleTimeout   Duration   `name:"http-idle-timeout" default:"60s" env:"PGQ_HTTP_IDLE_TIMEOUT" help:"Close keep-alive connections idle this long."`
	HTTPWriteTimeout  Duration   `name:"http-write-timeout" default:"30s" env:"PGQ_HTTP_WRITE_TIMEOUT" help:"Longest time to write an answer (a fetch gets its longest wait on top)."`
	RetainMinAge      Duration   `name:"retain-min-age" env:"PGQ_RETAIN_MIN_AGE" help:"Keep journal records younger than this even when every group committed them (e.g. 1h, 7d)."`
	RetainMaxAge      Duration   `name:"retain-max-age" env:"PGQ_RETAIN_MAX_AGE" help:"Drop journal records older than this, even if a group still needs them (0: no cap; e.g. 7d)."`
	RetainMaxBytes    ByteSize   `name:"retain-max-bytes" env:"PGQ_RETAIN_MAX_BYTES" help:"Drop the oldest segments while the journal is larger than this, regardless of groups (0: no cap; e.g. 50GiB)."`
	RetainInterval    Duration   `name:"retain-interval" default:"10s" env:"PGQ_RETAIN_INTERVAL" help:"Time between retention passes."`
	HoldSlotFor       string     `name:"hold-slot-for" env:"PGQ_HOLD_SLOT_FOR" placeholder:"NAME[,NAME]" help:"Groups the slot is held for: created if missing (exclusive, no filter, from earliest) and marked hold_slot before streaming, so PostgreSQL keeps what they have not committed and a new pgq on an empty data dir reads it again (costs the primary WAL and catalog_xmin)."`
	HoldSlotMaxLag    ByteSize   `name:"hold-slot-max-lag" default:"16GiB" env:"PGQ_HOLD_SLOT_MAX_LAG" help:"Stop holding the slot for a hold_slot group more than this much WAL behind the journal's end (WARN, pgq_hold_slot_released, hold_released), so a stuck consumer cannot fill the database's disk; it holds again once back within. 1MiB to 1PiB."`
	ServerTLSFlags
}

// Run runs the sidecar until SIGINT/SIGTERM. The flags were checked by
// Validate (runflags.go).
func (c *RunCmd) Run(ctx context.Context, logger *slog.Logger) error {
	coalesce := c.ReceiveCoalesce.D()
	if coalesce == 0 {
		coalesce = -1 // off; zero in ingest.Options means the default
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && c.MemoryLimit > 0 {
		// Large transactions stream through pgq in bounded memory; the
		// soft limit keeps the garbage collector from letting the heap
		// double on top of that.
		debug.SetMemoryLimit(int64(c.MemoryLimit))
	}
	s, err := server.Open(ctx, server.Options{
		DataDir:        c.DataDir,
		Listen:         c.Listen,
		SegmentSize:    int(c.SegmentSize),
		ScrubRate:      int64(c.ScrubRate),
		Logger:         logger,
		AuthToken:      c.AuthToken,
		InsecureNoAuth: c.InsecureNoAuth,
		AllowedHosts:   splitList(c.AllowedHosts),
		AllowedOrigins: splitList(c.AllowedOrigins),
		ProbeListen:    c.ProbeListen,
		TLS:            c.options(),
		HTTP: httpapi.Limits{MaxConns: c.HTTPMaxConns, BodyTimeout: c.HTTPBodyTimeout.D(), IdleTimeout: c.HTTPIdleTimeout.D(),
			WriteTimeout: c.HTTPWriteTimeout.D()},
		Retention:   consumers.RetentionOptions{MinAge: c.RetainMinAge.D(), MaxAge: c.RetainMaxAge.D(), MaxBytes: int64(c.RetainMaxBytes), Interval: c.RetainInterval.D()},
		Consumers:   consumers.ManagerOptions{HoldSlotMaxLag: int64(c.HoldSlotMaxLag)},
		HoldSlotFor: splitList(c.HoldSlotFor),
		Ingest: ingest.Options{
			PGURL: c.PGURL, Slot: c.Slot, Publication: c.Publication,
			CreateSlot: c.CreateSlot, CreatePublication: c.CreatePublication, AcceptGap: c.AcceptGap,
			Start: c.Start, SlotLifecycle: c.SlotLifecycle, SlotFailover: c.SlotFailover, ReconnectGiveUp: c.ReconnectGiveUp.D(), NoReconnect: c.NoReconnect,
			SkipTablesWithoutKey: c.SkipKeyless,
			ReconnectMin:         c.ReconnectMin.D(), ReconnectMax: c.ReconnectMax.D(), StatusInterval: c.StatusInterval.D(),
			ReceiveCoalesce: coalesce,
			MaxRecordBytes:  int(c.MaxRecordBytes),
			InitialLoad:     ingest.InitialLoad{Tables: splitList(c.InitialLoad), Parallelism: c.InitialLoadPar},
		},
	})
	if errors.Is(err, journal.ErrLocked) || errors.Is(err, index.ErrLocked) {
		logger.Debug("data dir locked", "error", err)
		return fmt.Errorf("another pgq uses this data dir (%s): stop it, or give this one its own --data-dir", c.DataDir)
	}
	var le *server.ListenError
	if errors.As(err, &le) {
		return fmt.Errorf("cannot listen on %s, the address of %s: %w", le.Addr, flagTerm(le.Option, true), le.Reason())
	}
	if err != nil {
		return err
	}
	defer reloadOnHangup(s, c.TLSCert != "")() // runflags.go
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return c.logRunning(logger, s, done)
}

// logRunning logs "pgq running" once ingest streams, that is after the
// startup checks (the server's setup, the slot, the publication, the
// journal's continuity) passed, and returns Run's result. The server
// offers no event for it, so its status is polled until then.
func (c *RunCmd) logRunning(logger *slog.Logger, s *server.Server, done <-chan error) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
		}
		if s.Status().Connected {
			logger.Info("pgq running", "listen", s.Addr(), "probe_listen", s.ProbeAddr(), "data_dir", c.DataDir)
			return <-done
		}
	}
}
