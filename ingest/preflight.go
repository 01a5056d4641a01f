package ingest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/opterr"
)

// Sentinel errors callers tell apart. Every one of them is fatal: ingest
// stops instead of reconnecting.
var (
	ErrConfig      = errors.New("configuration error")
	ErrUnreachable = errors.New("server unreachable")
	// ErrAuth: the server refused the connection's credentials (a wrong
	// password, no pg_hba.conf entry, no such role).
	ErrAuth        = errors.New("authentication failed")
	ErrWALLevel    = errors.New("wal_level is not logical")
	ErrSlotMissing = errors.New("replication slot does not exist")
	ErrSlotPlugin  = errors.New("replication slot uses another plugin")
	ErrSlotInUse   = errors.New("replication slot is in use")
	ErrPubMissing  = errors.New("publication does not exist")
	ErrPrivilege   = errors.New("insufficient privilege")
	// ErrGap: the slot would resume past the journal's end, so changes in
	// between would be missing (see Options.AcceptGap).
	ErrGap = errors.New("journal and slot disagree")
)

// FatalError marks an error ingest must not retry.
type FatalError struct{ Err error }

func (e *FatalError) Error() string { return e.Err.Error() }
func (e *FatalError) Unwrap() error { return e.Err }

func fatalf(sentinel error, format string, args ...any) error {
	return &FatalError{Err: fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))}
}

// fatalOpt is fatalf for a message that names options (opterr.New).
func fatalOpt(sentinel error, text string, opts []opterr.Option, args ...any) error {
	return &FatalError{Err: opterr.New(sentinel, text, opts, args...)}
}

// IsFatal reports whether err must stop ingest.
func IsFatal(err error) bool {
	var f *FatalError
	return errors.As(err, &f)
}

var slotNameRE = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// ValidateSlotName enforces PostgreSQL's rule for replication slot names:
// lower-case letters, digits and underscores, at most 63 characters. pgq
// relies on it because START_REPLICATION cannot take the name as a
// parameter.
func ValidateSlotName(name string) error {
	if !slotNameRE.MatchString(name) {
		return fmt.Errorf("%w: invalid slot name %q: use 1-63 lower-case letters, digits or underscores", ErrConfig, name)
	}
	return nil
}

// ServerInfo is what preflight learned about the server.
type ServerInfo struct {
	VersionNum int // e.g. 150004
	Database   string
	// SlotConfirmed is the slot's confirmed_flush_lsn: where PostgreSQL
	// resumes streaming. SlotCreated is true when preflight created it.
	SlotConfirmed pgq.LSN
	SlotCreated   bool
	// SlotFailover: the slot is a failover slot (PostgreSQL 17+), which
	// standbys with sync_replication_slots keep so it survives promotion.
	SlotFailover bool
	// exportSlot: the slot is missing and the initial load creates it on
	// the replication connection, exporting its snapshot
	// (prepareInitialLoad).
	exportSlot bool
	// CurrentWAL is pg_current_wal_insert_lsn() at preflight: past every
	// commit so far (the write position can lag with asynchronous commit).
	CurrentWAL pgq.LSN
	// Keyless are published tables that cannot replicate UPDATE/DELETE (no
	// primary key or replica identity); Unpublished are tables named in
	// CreatePublication that the existing publication does not publish.
	Keyless, Unpublished []string
}

// preflight checks the server and the slot and publication before
// streaming, creating them when asked. It returns a FatalError for every
// configuration problem and a plain error for transient ones.
//
// cfg is the parsed --pg-url; preflight sets its query mode. On success
// the connection stays open for publicationTables; the caller closes it.
func preflight(ctx context.Context, cfg *pgx.ConnConfig, o *Options, firstStart bool) (_ ServerInfo, _ *pgx.Conn, err error) {
	var info ServerInfo
	// One round trip per query instead of two (parse, then execute): each
	// costs a start.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		var pgErr *pgconn.PgError
		if firstStart || errors.As(err, &pgErr) && (pgErr.Code == "28P01" || pgErr.Code == "28000" || pgErr.Code == "3D000") {
			return info, nil, connectError(err, cfg.ConnString())
		}
		return info, nil, fmt.Errorf("ingest: connect: %w", err)
	}
	defer func() {
		if err != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	if err := checkEncoding(conn); err != nil {
		return info, nil, err
	}

	var level, version, current string
	if err := conn.QueryRow(ctx, "SELECT current_setting('wal_level'), current_setting('server_version_num'), current_database(), pg_current_wal_insert_lsn()::text").Scan(&level, &version, &info.Database, &current); err != nil {
		return info, nil, fmt.Errorf("ingest: read server settings: %w", err)
	}
	info.CurrentWAL, _ = pgq.ParseLSN(current)
	info.VersionNum, _ = strconv.Atoi(version)
	if level != "logical" {
		return info, nil, fatalf(ErrWALLevel, "wal_level is %q; set wal_level = logical and restart PostgreSQL", level)
	}
	var canReplicate bool
	if err := conn.QueryRow(ctx, "SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&canReplicate); err != nil {
		return info, nil, fmt.Errorf("ingest: read role: %w", err)
	}
	if !canReplicate {
		return info, nil, fatalf(ErrPrivilege, "role lacks REPLICATION (ALTER ROLE ... REPLICATION; %s)", privilegeHelp)
	}
	if o.SlotFailover == FailoverOn && info.VersionNum < failoverMinVersion {
		return info, nil, fatalOpt(ErrConfig, "{} on needs PostgreSQL 17 or later, and the server is %s", opterr.Of("ingest.Options.SlotFailover"), version)
	}

	if err := checkPublication(ctx, conn, o, firstStart); err != nil {
		return info, nil, err
	}
	if err := checkSlot(ctx, conn, o, &info, firstStart); err != nil {
		return info, nil, err
	}
	return info, conn, nil
}

// checkEncoding refuses a database whose text PostgreSQL cannot convert
// to UTF-8. pgq asks for client_encoding UTF8 on its connections (see
// session), so pgoutput sends every other encoding converted; SQL_ASCII
// declares no encoding at all: its bytes pass through unconverted, and
// the server accepts any client_encoding without checking them. Without
// this check such a start failed on every query ("simple protocol queries
// must be run with client_encoding=UTF8") and was retried forever.
func checkEncoding(conn *pgx.Conn) error {
	server := conn.PgConn().ParameterStatus("server_encoding")
	if server == "SQL_ASCII" {
		return fatalf(ErrConfig, "database %q has encoding SQL_ASCII, which PostgreSQL cannot convert to UTF-8 (pgq journals UTF-8 text): use a database with a real encoding, e.g. UTF8",
			conn.Config().Database)
	}
	if client := conn.PgConn().ParameterStatus("client_encoding"); client != "UTF8" {
		return fatalf(ErrConfig, "database %q (encoding %s) answers in client_encoding %s: pgq needs UTF8", conn.Config().Database, server, client)
	}
	return nil
}

func unwrapConnectErr(err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		if u := errors.Unwrap(ce); u != nil {
			return u
		}
	}
	return err
}

// privilegeHelp ends the privilege errors of the preflight: where the SQL
// of a least-privilege role and publication is.
const privilegeHelp = `the SQL for a least-privilege role and publication: docs/running.md, "A least-privilege role"`

func checkPublication(ctx context.Context, conn *pgx.Conn, o *Options, firstStart bool) error {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", o.Publication).Scan(&exists); err != nil {
		return fmt.Errorf("ingest: read publication: %w", err)
	}
	if exists {
		return nil
	}
	if o.CreatePublication == "" || !firstStart {
		return fatalOpt(ErrPubMissing, "publication %q does not exist (create it, or pass {} all|schema.table,...)", opterr.Of("ingest.Options.CreatePublication"), o.Publication)
	}
	sql := "CREATE PUBLICATION " + pgx.Identifier{o.Publication}.Sanitize()
	switch {
	case o.CreatePublication == "all" && o.SkipTablesWithoutKey:
		tables, err := tablesWithKey(ctx, conn)
		if err != nil {
			return err
		}
		if len(tables) == 0 {
			return fatalOpt(ErrConfig, "{}: no table has a primary key or replica identity to publish", opterr.Of("ingest.Options.SkipTablesWithoutKey"))
		}
		sql += " FOR TABLE " + strings.Join(tables, ", ")
	case o.CreatePublication == "all":
		sql += " FOR ALL TABLES"
	default:
		tables, err := ParseTableList(o.CreatePublication)
		if err != nil {
			return &FatalError{Err: err}
		}
		parts := make([]string, len(tables))
		for i, t := range tables {
			parts[i] = t.Sanitize()
		}
		sql += " FOR TABLE " + strings.Join(parts, ", ")
	}
	if _, err := conn.Exec(ctx, sql); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			return fatalf(ErrPrivilege, "cannot create publication %q: %s (FOR ALL TABLES needs a superuser, a table list the tables' owner with CREATE on the database; %s)", o.Publication, pgErr.Message, privilegeHelp)
		}
		if errors.As(err, &pgErr) && pgErr.Code == "42710" { // created concurrently
			return nil
		}
		return &FatalError{Err: fmt.Errorf("%w: create publication %q: %v", ErrConfig, o.Publication, err)}
	}
	o.Logger.Info("created publication", "publication", o.Publication, "tables", o.CreatePublication)
	return nil
}

// ParseTableList parses "schema.table,schema.table" (a bare name means
// schema public) into identifiers.
func ParseTableList(list string) ([]pgx.Identifier, error) {
	var out []pgx.Identifier
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		schema, table, ok := strings.Cut(item, ".")
		if !ok {
			schema, table = "public", item
		}
		if schema == "" || table == "" || strings.Contains(table, ".") {
			return nil, opterr.New(ErrConfig, "invalid table %q in {}: want schema.table", opterr.Of("ingest.Options.CreatePublication"), item)
		}
		out = append(out, pgx.Identifier{schema, table})
	}
	if len(out) == 0 {
		return nil, opterr.New(ErrConfig, "{} needs \"all\" or a list of schema.table", opterr.Of("ingest.Options.CreatePublication"))
	}
	return out, nil
}

// keylessCondition is true for a table (pg_class c) whose updates and
// deletes cannot replicate: replica identity nothing, or default without
// a primary key, or an index identity without its index.
const keylessCondition = `(c.relreplident = 'n'
	OR (c.relreplident = 'd' AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary))
	OR (c.relreplident = 'i' AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident)))`

// tablesWithKey lists the user tables that can replicate UPDATE and
// DELETE, quoted for SQL.
func tablesWithKey(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
		AND NOT `+keylessCondition+` ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("ingest: list tables: %w", err)
	}
	var out []string
	for rows.Next() {
		var schema, table string
		if err := rows.Scan(&schema, &table); err != nil {
			return nil, fmt.Errorf("ingest: list tables: %w", err)
		}
		out = append(out, pgx.Identifier{schema, table}.Sanitize())
	}
	return out, rows.Err()
}

// publicationTables fills info.Keyless (published tables whose updates
// and deletes cannot replicate, when the publication publishes them) and
// info.Unpublished (tables of CreatePublication missing from an existing
// publication). Only warnings come of them, so the session runs it while
// its replication connection starts.
func publicationTables(ctx context.Context, conn *pgx.Conn, o *Options, info *ServerInfo) error {
	rows, err := conn.Query(ctx, `SELECT pt.schemaname || '.' || pt.tablename FROM pg_publication p
		JOIN pg_publication_tables pt ON pt.pubname = p.pubname
		JOIN pg_namespace n ON n.nspname = pt.schemaname JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename
		WHERE p.pubname = $1 AND (p.pubupdate OR p.pubdelete) AND `+keylessCondition+` ORDER BY 1`, o.Publication)
	if err != nil {
		return fmt.Errorf("ingest: read publication tables: %w", err)
	}
	info.Keyless, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("ingest: read publication tables: %w", err)
	}
	if o.CreatePublication == "" || o.CreatePublication == "all" {
		return nil
	}
	tables, err := ParseTableList(o.CreatePublication)
	if err != nil {
		return &FatalError{Err: err}
	}
	for _, t := range tables {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3)",
			o.Publication, t[0], t[1]).Scan(&ok); err != nil {
			return fmt.Errorf("ingest: read publication tables: %w", err)
		}
		if !ok {
			info.Unpublished = append(info.Unpublished, t[0]+"."+t[1])
		}
	}
	return nil
}

// failoverMinVersion is the first server with failover slots.
const failoverMinVersion = 170000

// errSlotLost is the error of a reconnect that found no slot: what is
// gone cannot be re-read, so it names the way on instead of a retry.
func errSlotLost(slot string) error {
	return fatalOpt(ErrSlotMissing, "replication slot %q is gone from the server pgq reconnected to (a failover to a standby that did not have it — PostgreSQL 16 or older, a slot that was not a failover slot or not yet synchronized — or the slot was dropped): changes committed after the journal's end may be missing; to go on, restart with {} {} (the journal records the gap), then backfill the affected tables", opterr.Of("ingest.Options.CreateSlot", "ingest.Options.AcceptGap"), slot)
}

func checkSlot(ctx context.Context, conn *pgx.Conn, o *Options, info *ServerInfo, firstStart bool) error {
	var (
		plugin, slotType string
		database         *string
		active           bool
		activePID        *int32
		confirmed        *string
	)
	failoverCol := "false"
	if info.VersionNum >= failoverMinVersion {
		failoverCol = "failover"
	}
	err := conn.QueryRow(ctx, "SELECT coalesce(plugin, ''), slot_type, database, active, active_pid, confirmed_flush_lsn::text, "+failoverCol+" FROM pg_replication_slots WHERE slot_name = $1", o.Slot).
		Scan(&plugin, &slotType, &database, &active, &activePID, &confirmed, &info.SlotFailover)
	if o.SlotLifecycle == LifecycleTemporary {
		// The slot is created on the replication connection itself.
		if err == nil {
			return fatalOpt(ErrConfig, "slot %q exists; {} temporary creates its own slot: use a name no slot has", opterr.Of("ingest.Options.SlotLifecycle"), o.Slot)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		if !firstStart {
			return errSlotLost(o.Slot)
		}
		if len(o.InitialLoad.Tables) > 0 {
			// Created on the replication connection, where it can
			// export its snapshot (SQL's function exports none).
			info.exportSlot = true
			return nil
		}
		if !o.CreateSlot {
			return fatalOpt(ErrSlotMissing, "replication slot %q does not exist (create it, or pass {}; if a failover lost it: {} {}, then a backfill)", opterr.Of("ingest.Options.CreateSlot", "ingest.Options.CreateSlot", "ingest.Options.AcceptGap"), o.Slot)
		}
		if err := createSlot(ctx, conn, o, info.VersionNum); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "42710" {
				return checkSlot(ctx, conn, o, info, false)
			}
			if errors.As(err, &pgErr) && pgErr.Code == "42501" {
				return fatalf(ErrPrivilege, "cannot create slot %q: %s (%s)", o.Slot, pgErr.Message, privilegeHelp)
			}
			return &FatalError{Err: fmt.Errorf("%w: create slot %q: %v", ErrConfig, o.Slot, err)}
		}
		// Set before the check: a start refused from here on drops it.
		info.SlotCreated = true
		if err := checkSlot(ctx, conn, o, info, false); err != nil {
			return err
		}
		o.Logger.Info("created replication slot", "slot", o.Slot, "confirmed_flush_lsn", info.SlotConfirmed)
		return nil
	}
	if err != nil {
		return fmt.Errorf("ingest: read slot: %w", err)
	}
	if confirmed != nil {
		lsn, err := pgq.ParseLSN(*confirmed)
		if err != nil {
			return fmt.Errorf("ingest: slot %q confirmed_flush_lsn: %w", o.Slot, err)
		}
		info.SlotConfirmed = lsn
	}
	if slotType != "logical" || plugin != "pgoutput" {
		return fatalf(ErrSlotPlugin, "slot %q is a %s slot with plugin %q; pgq needs a logical pgoutput slot", o.Slot, slotType, plugin)
	}
	if o.SlotFailover == FailoverOn && !info.SlotFailover {
		return fatalOpt(ErrConfig, "{} on: slot %q exists and is not a failover slot (make it one: ALTER_REPLICATION_SLOT %s (FAILOVER true) on a replication=database connection, or drop it and let {} make it)", opterr.Of("ingest.Options.SlotFailover", "ingest.Options.CreateSlot"), o.Slot, o.Slot)
	}
	if database != nil && *database != info.Database {
		return fatalf(ErrConfig, "slot %q belongs to database %q, but the URL connects to %q", o.Slot, *database, info.Database)
	}
	if active {
		pid := int32(0)
		if activePID != nil {
			pid = *activePID
		}
		// After a reconnect the old walsender can linger until it notices
		// the dead connection: that case is retried, not fatal.
		if !firstStart {
			return fmt.Errorf("ingest: slot %q still active (pid %d)", o.Slot, pid)
		}
		return fatalf(ErrSlotInUse, "slot %q is in use by another connection (pid %d)", o.Slot, pid)
	}
	return nil
}

// createSlot creates the logical slot, as a failover slot where the server
// has them and --slot-failover is not off.
func createSlot(ctx context.Context, conn *pgx.Conn, o *Options, versionNum int) error {
	if versionNum < failoverMinVersion {
		_, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", o.Slot)
		return err
	}
	// (name, plugin, temporary, two_phase, failover)
	_, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput', false, false, $2)", o.Slot, o.SlotFailover != FailoverOff)
	return err
}
