package ingest

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/feedback"
	"github.com/pgq-dev/pgq/internal/vfsutil"
	"github.com/pgq-dev/pgq/journal"
	"github.com/pgq-dev/pgq/opterr"
)

// DefaultMaxRecordBytes is the record size limit when
// Options.MaxRecordBytes is zero.
const DefaultMaxRecordBytes = 8 << 20

// MinMaxRecordBytes and MaxMaxRecordBytes bound Options.MaxRecordBytes. A
// record's header is 43 bytes and an ordinary row change with its column
// names and types a few hundred (a ten-column update with old and new
// values about 1 KiB), so below 4 KiB nearly every change would be a
// record of its own, and the spill buffer, at most this size, would write
// a change at a time. Above 1 GiB, PostgreSQL's own limit for one value, a
// transaction would be assembled in that much memory before it spills.
const (
	MinMaxRecordBytes = 4 << 10
	MaxMaxRecordBytes = 1 << 30
)

// Options configures an Ingester. Zero values get the defaults noted.
type Options struct {
	// PGURL is a libpq-style URL or DSN; sslmode and sslrootcert are
	// honoured (verify-full included). Required.
	PGURL string
	// Slot is the logical replication slot (pgoutput). Required.
	Slot string
	// Publication is the pgoutput publication. Required.
	Publication string
	// CreateSlot creates the slot when it is missing.
	CreateSlot bool
	// CreatePublication, when not empty, creates a missing publication:
	// "all" for FOR ALL TABLES, or "schema.table,schema.table".
	CreatePublication string
	// ReconnectMin and ReconnectMax bound the exponential reconnect
	// backoff. Zero → 500ms and 30s.
	ReconnectMin, ReconnectMax time.Duration
	// StatusInterval is the longest time between standby status updates.
	// Zero → 10s (as pg_recvlogical).
	StatusInterval time.Duration
	// ReceiveCoalesce is the longest a received message may wait in the
	// socket while the server streams at full speed (more than 32
	// messages within a millisecond): the receive loop then wakes once
	// per window or per 64 KiB instead of once per message, which frees
	// the CPU the walsender needs. A slower stream is read as it comes.
	// Zero → DefaultReceiveCoalesce (500µs); negative → never; at most
	// MaxReceiveCoalesce. Only on Unix sockets (SO_RCVLOWAT).
	ReceiveCoalesce time.Duration
	// Journal receives the records (required); Committer group-commits
	// into it (required, and its Run must be running).
	Journal   *journal.Journal
	Committer *journal.Committer
	// SpillDir is where in-progress transactions are spilled: the changes
	// of a transaction PostgreSQL streams before its commit (protocol v2,
	// PostgreSQL 14+), and of any transaction whose changes exceed
	// MaxRecordBytes before its commit. The sidecar uses DataDir/spill.
	// Leftover spill files (*.spill) are removed by New. Empty: streaming
	// is not requested and every transaction is assembled in memory.
	SpillDir string
	// MaxRecordBytes bounds the (estimated) size of a journal record: a
	// larger transaction is journaled as several consecutive records
	// (parts). Zero → DefaultMaxRecordBytes; else MinMaxRecordBytes to
	// MaxMaxRecordBytes.
	MaxRecordBytes int
	// Start says where a brand-new journal (empty, no coverage file)
	// begins: "" or "slot" → the slot's confirmed position (everything the
	// slot kept); "latest" → the server's current WAL position (skip the
	// slot's backlog); "lsn:X/Y" → that LSN, refused when the slot can no
	// longer serve it. Ignored once the journal has records.
	Start string
	// SlotLifecycle is "keep" (zero: the slot outlives pgq), "drop-on-exit"
	// (dropped after a clean shutdown: changes committed while pgq is
	// stopped are lost, and the next start over the journal is a gap) or
	// "temporary" (a TEMPORARY slot that dies with each connection: every
	// reconnect is a gap; refused over a non-empty journal without
	// AcceptGap).
	SlotLifecycle string
	// SlotFailover says whether --create-slot makes a failover slot, one
	// that PostgreSQL 17+ synchronizes to standbys (sync_replication_slots)
	// so that it survives a promotion: "auto" (zero: where the server
	// supports it), "on" (refused below 17 and with the temporary
	// lifecycle, whose slot cannot fail over) or "off".
	SlotFailover string
	// ReconnectGiveUp ends Run with the last error once sessions have
	// failed without progress for this long (see session.progressed: a
	// session that journals nothing and fails inside a transaction counts
	// as failing however long it streamed); zero → never.
	ReconnectGiveUp time.Duration
	// NoReconnect ends Run with the error of the first interruption.
	NoReconnect bool
	// SkipTablesWithoutKey: with CreatePublication "all", publish only the
	// tables that can replicate UPDATE and DELETE (a primary key or a
	// replica identity), so the others keep working in the application.
	SkipTablesWithoutKey bool
	// AcceptGap lets ingest go on when the slot would resume past the
	// journal's end (see the package documentation, "Continuity"): it
	// journals one gap change naming the missing LSN range and streams on.
	// Without it such a start fails with ErrGap.
	AcceptGap bool
	// CoveragePath is the coverage file (see feedback.Coverage); empty →
	// Journal.Dir()/COVERAGE.
	CoveragePath string
	// FS does the coverage file's and the spill files' I/O; nil →
	// vfs.Default. It is wrapped in vfsutil.OwnerOnly (directories 0700,
	// files 0600). Tests fault it.
	FS vfs.FS
	// Logger; zero → slog.Default().
	Logger *slog.Logger
	// Metrics; zero → metrics registered nowhere.
	Metrics *Metrics
	// HoldFloor, when set, caps the LSN confirmed to the slot (see
	// feedback.Tracker.SetHold): it returns the hold floor of the groups
	// that hold the slot (consumers.Manager.HoldFloor), ok false when none
	// does. It is called on every status update with the tracker's lock
	// held: it must be cheap.
	HoldFloor func() (pgq.LSN, bool)
	// InitialLoad, when it names tables, loads them under the exported
	// snapshot of the slot it creates before streaming (see the package
	// documentation, "Initial load"); zero: none.
	InitialLoad InitialLoad
	// Backfills is the registry of backfill chunks (see backfill.go and
	// package backfill); zero → an empty one.
	Backfills *Backfills
}

// Slot lifecycles (Options.SlotLifecycle).
const (
	LifecycleKeep       = "keep"
	LifecycleDropOnExit = "drop-on-exit"
	LifecycleTemporary  = "temporary"
)

// Slot failover modes (Options.SlotFailover).
const (
	FailoverAuto = "auto"
	FailoverOn   = "on"
	FailoverOff  = "off"
)

// startPos is a parsed Options.Start.
type startPos struct {
	latest bool
	lsn    pgq.LSN
}

func parseStart(s string) (startPos, error) {
	switch {
	case s == "" || s == "slot":
		return startPos{}, nil
	case s == "latest":
		return startPos{latest: true}, nil
	case strings.HasPrefix(s, "lsn:"):
		lsn, err := pgq.ParseLSN(strings.TrimPrefix(s, "lsn:"))
		if err == nil && lsn > 0 {
			return startPos{lsn: lsn}, nil
		}
	}
	return startPos{}, opterr.New(ErrConfig, "{} %q: want slot, latest or lsn:X/Y", opterr.Of("ingest.Options.Start"), s)
}

// Validate checks required fields and fills defaults.
func (o *Options) Validate() error {
	for _, step := range []func() error{o.validateSlot, o.validateTiming} {
		if err := step(); err != nil {
			return err
		}
	}
	o.fillParts()
	return nil
}

// validateSlot checks what names the server side: URL, slot, publication,
// the slot's lifecycle and failover, the start position.
func (o *Options) validateSlot() error {
	switch {
	case o.PGURL == "":
		return opterr.New(ErrConfig, "a PostgreSQL URL is required ({+env})", opterr.Of("ingest.Options.PGURL"))
	case o.Slot == "":
		return opterr.New(ErrConfig, "a slot name is required ({+env})", opterr.Of("ingest.Options.Slot"))
	case o.Publication == "":
		return opterr.New(ErrConfig, "a publication name is required ({+env})", opterr.Of("ingest.Options.Publication"))
	case o.Journal == nil || o.Committer == nil:
		return fmt.Errorf("%w: ingest needs a journal and its committer", ErrConfig)
	}
	if err := ValidateSlotName(o.Slot); err != nil {
		return err
	}
	if o.CreatePublication != "" && o.CreatePublication != "all" {
		if _, err := ParseTableList(o.CreatePublication); err != nil {
			return err
		}
	}
	switch o.SlotLifecycle {
	case "":
		o.SlotLifecycle = LifecycleKeep
	case LifecycleKeep, LifecycleDropOnExit, LifecycleTemporary:
	default:
		return opterr.New(ErrConfig, "{} %q: want keep, drop-on-exit or temporary", opterr.Of("ingest.Options.SlotLifecycle"), o.SlotLifecycle)
	}
	if err := o.validateFailover(); err != nil {
		return err
	}
	if _, err := parseStart(o.Start); err != nil {
		return err
	}
	if o.ReconnectGiveUp < 0 {
		return opterr.New(ErrConfig, "{} is negative", opterr.Of("ingest.Options.ReconnectGiveUp"))
	}
	if err := o.InitialLoad.validate(o.SlotLifecycle, o.Start); err != nil {
		return err
	}
	if o.SkipTablesWithoutKey && o.CreatePublication != "all" {
		return opterr.New(ErrConfig, "{} goes with {} all", opterr.Of("ingest.Options.SkipTablesWithoutKey", "ingest.Options.CreatePublication"))
	}
	return nil
}

// validateTiming checks the reconnect, record size, status and receive
// settings, filling their defaults.
func (o *Options) validateTiming() error {
	if o.ReconnectMin <= 0 {
		o.ReconnectMin = 500 * time.Millisecond
	}
	if o.ReconnectMax <= 0 {
		o.ReconnectMax = 30 * time.Second
	}
	if o.ReconnectMax < o.ReconnectMin {
		return opterr.New(ErrConfig, "{} (%s) is below {} (%s)", opterr.Of("ingest.Options.ReconnectMax", "ingest.Options.ReconnectMin"), o.ReconnectMax, o.ReconnectMin)
	}
	switch {
	case o.MaxRecordBytes == 0:
		o.MaxRecordBytes = DefaultMaxRecordBytes
	case o.MaxRecordBytes < MinMaxRecordBytes || o.MaxRecordBytes > MaxMaxRecordBytes:
		return opterr.New(ErrConfig, "{} %d is out of range: want 4KiB to 1GiB", opterr.Of("ingest.Options.MaxRecordBytes"), o.MaxRecordBytes)
	}
	if o.StatusInterval <= 0 {
		o.StatusInterval = 10 * time.Second
	}
	switch {
	case o.ReceiveCoalesce > MaxReceiveCoalesce:
		return opterr.New(ErrConfig, "{} %s is above %s", opterr.Of("ingest.Options.ReceiveCoalesce"), o.ReceiveCoalesce, MaxReceiveCoalesce)
	case o.ReceiveCoalesce == 0:
		o.ReceiveCoalesce = DefaultReceiveCoalesce
	}
	return nil
}

// fillParts fills the defaults of the parts ingest works with.
func (o *Options) fillParts() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.FS = vfsutil.OwnerOnly(o.FS) // nil: vfs.Default
	if o.CoveragePath == "" {
		o.CoveragePath = filepath.Join(o.Journal.Dir(), feedback.CoverageFile)
	}
	if o.Backfills == nil {
		o.Backfills = NewBackfills()
	}
	if o.Metrics == nil {
		o.Metrics, _ = NewMetrics(nil) // registering nowhere cannot fail
	}
}

// validateFailover checks SlotFailover and the multi-host URL it goes
// with. Which server version supports failover slots is preflight's to
// check.
func (o *Options) validateFailover() error {
	switch o.SlotFailover {
	case "":
		o.SlotFailover = FailoverAuto
	case FailoverAuto, FailoverOff:
	case FailoverOn:
		if o.SlotLifecycle == LifecycleTemporary {
			return opterr.New(ErrConfig, "{} on does not go with {} temporary: a temporary slot is never synchronized to a standby", opterr.Of("ingest.Options.SlotFailover", "ingest.Options.SlotLifecycle"))
		}
	default:
		return opterr.New(ErrConfig, "{} %q: want auto, on or off", opterr.Of("ingest.Options.SlotFailover"), o.SlotFailover)
	}
	return checkMultiHost(o.PGURL)
}

// checkMultiHost refuses a multi-host --pg-url that may pick a standby:
// libpq's default target_session_attrs (any) takes the first host that
// answers, and after a failover that can be the old primary come back as a
// standby, where pgq's slot cannot stream.
func checkMultiHost(url string) error {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return opterr.New(ErrConfig, "invalid {}: %v", opterr.Of("ingest.Options.PGURL"), err)
	}
	hosts := map[string]bool{fmt.Sprintf("%s:%d", cfg.Host, cfg.Port): true}
	for _, f := range cfg.Fallbacks {
		hosts[fmt.Sprintf("%s:%d", f.Host, f.Port)] = true
	}
	if len(hosts) < 2 {
		return nil
	}
	// pgx turns target_session_attrs (URL or PGTARGETSESSIONATTRS) into
	// its ValidateConnect hook; the parameter itself is not kept.
	if v := cfg.ValidateConnect; v != nil {
		p := reflect.ValueOf(v).Pointer()
		if p == reflect.ValueOf(pgconn.ValidateConnectTargetSessionAttrsPrimary).Pointer() ||
			p == reflect.ValueOf(pgconn.ValidateConnectTargetSessionAttrsReadWrite).Pointer() {
			return nil
		}
	}
	return opterr.New(ErrConfig, "a {} with several hosts needs target_session_attrs=primary (or read-write), else pgq may connect to a standby", opterr.Of("ingest.Options.PGURL"))
}
