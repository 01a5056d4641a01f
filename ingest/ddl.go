package ingest

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgq-dev/pgq"
)

// DDLPrefix is the logical message prefix of captured schema changes.
const DDLPrefix = "pgq.ddl"

// ddlInstallSQL creates the capture function and its two event triggers.
// Each DDL command (and each object a DROP names) becomes one
// transactional logical message in the DDL's own transaction, so the
// journal orders schema changes with the data around them.
const ddlInstallSQL = `
CREATE OR REPLACE FUNCTION public.pgq_ddl_capture() RETURNS event_trigger
LANGUAGE plpgsql AS $fn$
DECLARE r record;
BEGIN
	IF tg_event = 'sql_drop' THEN
		FOR r IN SELECT * FROM pg_event_trigger_dropped_objects() WHERE original LOOP
			PERFORM pg_logical_emit_message(true, 'pgq.ddl', json_build_object(
				'command', tg_tag, 'object', r.object_identity, 'schema', r.schema_name,
				'object_type', r.object_type, 'statement', current_query())::text);
		END LOOP;
	ELSE
		FOR r IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
			PERFORM pg_logical_emit_message(true, 'pgq.ddl', json_build_object(
				'command', r.command_tag, 'object', r.object_identity, 'schema', r.schema_name,
				'object_type', r.object_type, 'statement', current_query())::text);
		END LOOP;
	END IF;
END
$fn$;
DROP EVENT TRIGGER IF EXISTS pgq_ddl_end;
DROP EVENT TRIGGER IF EXISTS pgq_ddl_drop;
CREATE EVENT TRIGGER pgq_ddl_end ON ddl_command_end EXECUTE FUNCTION public.pgq_ddl_capture();
CREATE EVENT TRIGGER pgq_ddl_drop ON sql_drop EXECUTE FUNCTION public.pgq_ddl_capture();
`

const ddlUninstallSQL = `
DROP EVENT TRIGGER IF EXISTS pgq_ddl_end;
DROP EVENT TRIGGER IF EXISTS pgq_ddl_drop;
DROP FUNCTION IF EXISTS public.pgq_ddl_capture();
`

// InstallDDLCapture installs the event triggers that capture DDL into the
// slot (pgq ddl install). Event triggers need a superuser.
func InstallDDLCapture(ctx context.Context, url string) error {
	return execAdmin(ctx, url, "install DDL capture", ddlInstallSQL)
}

// UninstallDDLCapture removes them (pgq ddl uninstall).
func UninstallDDLCapture(ctx context.Context, url string) error {
	return execAdmin(ctx, url, "uninstall DDL capture", ddlUninstallSQL)
}

func execAdmin(ctx context.Context, url, what, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fatalf(ErrUnreachable, "cannot connect to PostgreSQL: %v", unwrapConnectErr(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("ingest: %s: %w", what, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, sql); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			return fatalf(ErrPrivilege, "%s needs a superuser (event triggers): %s", what, pgErr.Message)
		}
		return fmt.Errorf("ingest: %s: %w", what, err)
	}
	return tx.Commit(ctx)
}

// asDDL turns a transactional logical message of the capture trigger into
// a ddl change.
func asDDL(c *pgq.Change) {
	if c.Op == pgq.OpMessage && c.Transactional && c.Prefix == DDLPrefix {
		c.Op = pgq.OpDDL
	}
}
