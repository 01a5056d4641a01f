package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/opterr"
)

// DDLPrefix is the logical message prefix of captured schema changes.
const DDLPrefix = "pgq.ddl"

// The proof table: the capture trigger inserts a row into it right before
// each of its messages (see the package doc, "DDL capture").
const (
	ddlSchema     = "pgq_ddl"
	ddlProofTable = "proof"
	// ddlCaptureVersion is the comment of the current capture function;
	// an event trigger whose function has another one is an old capture
	// whose messages carry no proof.
	ddlCaptureVersion = "pgq ddl capture 2"
)

// ddlInstallSQL creates the proof table, the capture function and its two
// event triggers, and removes the function of the old capture (public.
// pgq_ddl_capture, which emitted messages without proof). The triggers
// are dropped first, so that the install's own DDL is not captured. Each
// DDL command
// (and each object a DROP names) becomes one proof row and one
// transactional logical message in the DDL's own transaction, so the
// journal orders schema changes with the data around them. The function
// is SECURITY DEFINER so that it may write the proof table, which no
// other role may (nothing is granted on the schema or the table), and
// runs with a fixed search_path so that no object of the DDL's role can
// stand in for the ones it calls. The row is deleted again at once: the
// table stays empty, and its insert reaches the slot all the same.
const ddlInstallSQL = `
DROP EVENT TRIGGER IF EXISTS pgq_ddl_end;
DROP EVENT TRIGGER IF EXISTS pgq_ddl_drop;
CREATE SCHEMA IF NOT EXISTS pgq_ddl;
REVOKE ALL ON SCHEMA pgq_ddl FROM PUBLIC;
CREATE TABLE IF NOT EXISTS pgq_ddl.proof (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY);
REVOKE ALL ON TABLE pgq_ddl.proof FROM PUBLIC;
CREATE OR REPLACE FUNCTION pgq_ddl.capture() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE r record; p bigint;
BEGIN
	IF tg_event = 'sql_drop' THEN
		FOR r IN SELECT * FROM pg_event_trigger_dropped_objects() WHERE original LOOP
			INSERT INTO pgq_ddl.proof DEFAULT VALUES RETURNING id INTO p;
			PERFORM pg_logical_emit_message(true, 'pgq.ddl', json_build_object(
				'command', tg_tag, 'object', r.object_identity, 'schema', r.schema_name,
				'object_type', r.object_type, 'statement', current_query(), 'proof', p)::text);
			DELETE FROM pgq_ddl.proof WHERE id = p;
		END LOOP;
	ELSE
		FOR r IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
			INSERT INTO pgq_ddl.proof DEFAULT VALUES RETURNING id INTO p;
			PERFORM pg_logical_emit_message(true, 'pgq.ddl', json_build_object(
				'command', r.command_tag, 'object', r.object_identity, 'schema', r.schema_name,
				'object_type', r.object_type, 'statement', current_query(), 'proof', p)::text);
			DELETE FROM pgq_ddl.proof WHERE id = p;
		END LOOP;
	END IF;
END
$fn$;
REVOKE ALL ON FUNCTION pgq_ddl.capture() FROM PUBLIC;
COMMENT ON FUNCTION pgq_ddl.capture() IS '` + ddlCaptureVersion + `';
DROP FUNCTION IF EXISTS public.pgq_ddl_capture();
`

// ddlTriggersSQL creates the event triggers, last: the install's own DDL
// (and the publication's change) is not captured.
const ddlTriggersSQL = `
CREATE EVENT TRIGGER pgq_ddl_end ON ddl_command_end EXECUTE FUNCTION pgq_ddl.capture();
CREATE EVENT TRIGGER pgq_ddl_drop ON sql_drop EXECUTE FUNCTION pgq_ddl.capture();
`

// ddlUninstallSQL keeps the (then empty) schema pgq_ddl: while it belongs
// to the installing role, no other role can create a table named
// pgq_ddl.proof, whose rows a later install would take for proof.
const ddlUninstallSQL = `
DROP EVENT TRIGGER IF EXISTS pgq_ddl_end;
DROP EVENT TRIGGER IF EXISTS pgq_ddl_drop;
DROP FUNCTION IF EXISTS pgq_ddl.capture();
DROP FUNCTION IF EXISTS public.pgq_ddl_capture();
DROP TABLE IF EXISTS pgq_ddl.proof;
`

// ErrDDLForeign: the schema pgq_ddl or its table exists and belongs to a
// role that is neither the installing one nor a superuser; such a role
// could forge proof rows, so pgq ddl install refuses.
var ErrDDLForeign = errors.New("pgq_ddl belongs to another role")

// InstallDDLCapture installs (or upgrades) the event triggers that capture
// DDL into the slot (pgq ddl install); it is idempotent. Event triggers
// need a superuser. When publication is not empty, the proof table is
// added to it unless it publishes it already (FOR ALL TABLES, or listed).
func InstallDDLCapture(ctx context.Context, url, publication string) error {
	return withAdminTx(ctx, url, "install DDL capture", func(tx pgx.Tx) error {
		if err := checkDDLOwner(ctx, tx); err != nil {
			return err
		}
		if err := execDDL(ctx, tx, "install DDL capture", ddlInstallSQL); err != nil {
			return err
		}
		if publication != "" {
			if err := publishProof(ctx, tx, publication); err != nil {
				return err
			}
		}
		return execDDL(ctx, tx, "install DDL capture", ddlTriggersSQL)
	})
}

// UninstallDDLCapture removes them (pgq ddl uninstall).
func UninstallDDLCapture(ctx context.Context, url string) error {
	return withAdminTx(ctx, url, "uninstall DDL capture", func(tx pgx.Tx) error {
		return execDDL(ctx, tx, "uninstall DDL capture", ddlUninstallSQL)
	})
}

// checkDDLOwner refuses a schema pgq_ddl, or a table in it, that another
// ordinary role created before the install: it could write proof rows.
func checkDDLOwner(ctx context.Context, tx pgx.Tx) error {
	var owner string
	err := tx.QueryRow(ctx, `SELECT r.rolname FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner
		WHERE n.nspname = $1 AND NOT r.rolsuper AND r.rolname <> current_user
		UNION ALL SELECT r.rolname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_roles r ON r.oid = c.relowner
		WHERE n.nspname = $1 AND NOT r.rolsuper AND r.rolname <> current_user LIMIT 1`, ddlSchema).Scan(&owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("ingest: install DDL capture: read the owner of schema %s: %w", ddlSchema, err)
	}
	return &FatalError{Err: fmt.Errorf("%w: schema %s (or a table in it) belongs to role %q, which could forge DDL proof rows: drop it (DROP SCHEMA %s CASCADE) and install again",
		ErrDDLForeign, ddlSchema, owner, ddlSchema)}
}

// publishProof adds the proof table to publication when it does not
// publish it yet: ingest only sees proof rows of published tables.
func publishProof(ctx context.Context, tx pgx.Tx, publication string) error {
	var exists, inserts, published bool
	err := tx.QueryRow(ctx, `SELECT true, p.pubinsert, EXISTS (SELECT 1 FROM pg_publication_tables t
		WHERE t.pubname = p.pubname AND t.schemaname = $2 AND t.tablename = $3) FROM pg_publication p WHERE p.pubname = $1`,
		publication, ddlSchema, ddlProofTable).Scan(&exists, &inserts, &published)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fatalOpt(ErrPubMissing, "publication %q does not exist: create it first (or leave out {})", opterr.Of("ingest.InstallDDLCapture(publication)"), publication)
	case err != nil:
		return fmt.Errorf("ingest: install DDL capture: read publication %q: %w", publication, err)
	case !inserts:
		return fatalf(ErrConfig, "publication %q does not publish inserts: DDL capture needs the inserts into %s.%s", publication, ddlSchema, ddlProofTable)
	case published:
		return nil
	}
	sql := "ALTER PUBLICATION " + pgx.Identifier{publication}.Sanitize() + " ADD TABLE " + pgx.Identifier{ddlSchema, ddlProofTable}.Sanitize()
	return execDDL(ctx, tx, "add the DDL proof table to publication "+publication, sql)
}

func withAdminTx(ctx context.Context, url, what string, f func(pgx.Tx) error) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return connectError(err, url)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("ingest: %s: %w", what, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("ingest: %s: commit: %w", what, err)
	}
	return nil
}

func execDDL(ctx context.Context, tx pgx.Tx, what, sql string) error {
	if _, err := tx.Exec(ctx, sql); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			return fatalf(ErrPrivilege, "%s needs a superuser (event triggers): %s", what, pgErr.Message)
		}
		return fmt.Errorf("ingest: %s: %w", what, err)
	}
	return nil
}

// DDLCaptureState is what CheckDDLCapture found.
type DDLCaptureState int

const (
	// DDLNotInstalled: no capture trigger.
	DDLNotInstalled DDLCaptureState = iota
	// DDLCurrent: the capture of this pgq.
	DDLCurrent
	// DDLOld: a capture trigger of an older pgq, whose messages carry no
	// proof and are journaled as message changes; pgq ddl install
	// upgrades it.
	DDLOld
)

// checkDDLCapture reports the installed capture and, for the current one,
// whether publication publishes the proof table's inserts.
func checkDDLCapture(ctx context.Context, conn *pgx.Conn, publication string) (state DDLCaptureState, published bool, err error) {
	var triggers, current int
	err = conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE obj_description(e.evtfoid, 'pg_proc') = $1)
		FROM pg_event_trigger e WHERE e.evtname IN ('pgq_ddl_end', 'pgq_ddl_drop')`, ddlCaptureVersion).Scan(&triggers, &current)
	switch {
	case err != nil:
		return 0, false, fmt.Errorf("ingest: read the DDL capture's event triggers: %w", err)
	case triggers == 0:
		return DDLNotInstalled, false, nil
	case current < triggers:
		return DDLOld, false, nil
	}
	err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication p JOIN pg_publication_tables t ON t.pubname = p.pubname
		WHERE p.pubname = $1 AND p.pubinsert AND t.schemaname = $2 AND t.tablename = $3)`, publication, ddlSchema, ddlProofTable).Scan(&published)
	if err != nil {
		return 0, false, fmt.Errorf("ingest: read whether the publication publishes %s.%s: %w", ddlSchema, ddlProofTable, err)
	}
	return DDLCurrent, published, nil
}

// warnDDLCapture warns, once per Ingester, about a capture whose DDL would
// be journaled as message changes: an old trigger, or a proof table the
// publication does not publish.
func (in *Ingester) warnDDLCapture(ctx context.Context, conn *pgx.Conn) {
	state, published, err := checkDDLCapture(ctx, conn, in.o.Publication)
	switch {
	case err != nil:
		in.o.Logger.Warn("cannot check the DDL capture", "error", err)
	case state == DDLOld && !in.warned["ddl-old"]:
		in.warned["ddl-old"] = true
		in.o.Logger.Warn("an old pgq DDL capture trigger is installed: its messages carry no proof and are journaled as message changes, not ddl; upgrade it with ingest.InstallDDLCapture on publication " + in.o.Publication)
	case state == DDLCurrent && !published && !in.warned["ddl-unpublished"]:
		in.warned["ddl-unpublished"] = true
		in.o.Logger.Warn("DDL capture is installed but the publication does not publish inserts into "+ddlSchema+"."+ddlProofTable+
			": captured DDL is journaled as message changes, not ddl; add it with ingest.InstallDDLCapture on publication "+in.o.Publication, "publication", in.o.Publication)
	}
}

// ddlProof is the DDL capture's state in one transaction: the proof row
// the trigger inserted right before its message, while that message is
// still to come. Nothing runs between the trigger's insert and its
// message, and no role but the trigger's may write the proof table, so a
// message with the DDL prefix is the trigger's exactly when the change
// right before it is the insert of a proof row whose id the message
// names. (Inside a stream the row carries its subtransaction's xid and the
// message the toplevel one, so xids are not compared; an aborted
// subtransaction resets the state, see reset.)
type ddlProof struct {
	id  string // the proof row's id as text, when has
	has bool
}

// reset forgets a proof row: its subtransaction was aborted.
func (p *ddlProof) reset() { *p = ddlProof{} }

// ddlVerdict is what ddlProof.observe made of a change.
type ddlVerdict struct {
	drop bool   // a change of the proof table: not journaled
	warn string // why a message with the DDL prefix stays a message
}

// observe classifies c in the order the slot sends a transaction's
// changes: a proof row is remembered and dropped, the trigger's message
// right after it becomes a ddl change, and any other message with the
// DDL prefix stays a message, with the reason to warn.
func (p *ddlProof) observe(c *pgq.Change) ddlVerdict {
	if c.Schema == ddlSchema && c.Table == ddlProofTable && c.Op != pgq.OpMessage {
		p.reset()
		if c.Op == pgq.OpInsert {
			p.id, p.has = proofID(c)
		}
		return ddlVerdict{drop: true}
	}
	id, has := p.id, p.has
	p.reset()
	if c.Op != pgq.OpMessage || c.Prefix != DDLPrefix {
		return ddlVerdict{}
	}
	if !c.Transactional {
		return ddlVerdict{warn: "a non-transactional message is never the capture trigger's"}
	}
	if !has {
		return ddlVerdict{warn: "no proof row of the capture trigger right before it (written by another role, by an old trigger, or the proof table is not published)"}
	}
	var d struct {
		Command string      `json:"command"`
		Proof   json.Number `json:"proof"`
	}
	if err := json.Unmarshal(c.Content, &d); err != nil {
		return ddlVerdict{warn: "malformed content: " + err.Error()}
	}
	if d.Command == "" || d.Proof.String() != id {
		return ddlVerdict{warn: "content without a command, or naming another proof row than the one before it"}
	}
	c.Op = pgq.OpDDL
	return ddlVerdict{}
}

// proofID is the id column of a proof row (text: pgq does not ask for
// binary values).
func proofID(c *pgq.Change) (string, bool) {
	for i, col := range c.Columns {
		if col.Name == "id" && i < len(c.New) && c.New[i].Kind == pgq.ValueText {
			return string(c.New[i].Data), true
		}
	}
	return "", false
}

// warnStandalone warns about a non-transactional message with one of
// pgq's prefixes: neither the capture trigger nor a backfill writes one,
// so it is journaled as the message it is.
func (s *session) warnStandalone(c *pgq.Change) {
	if c.Op == pgq.OpMessage && (c.Prefix == DDLPrefix || c.Prefix == WatermarkPrefix) {
		s.in.o.Logger.Warn("journaling a non-transactional message with one of pgq's prefixes as a message change", "prefix", c.Prefix)
	}
}

// checkDDL runs p.observe on c and warns about a message with the DDL
// prefix that stays a message. It reports whether c is to be dropped.
func (s *session) checkDDL(p *ddlProof, c *pgq.Change, xid uint32) bool {
	v := p.observe(c)
	if v.warn != "" {
		s.in.o.Logger.Warn("journaling a message with pgq's DDL prefix as a message change, not ddl", "xid", xid, "reason", v.warn)
	}
	return v.drop
}
