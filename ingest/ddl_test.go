package ingest_test

import (
	"errors"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/syncbuf"
	"github.com/pgq-dev/pgq/server"
)

// TestDDLCapture: with pgq ddl install, a schema change is journaled as a
// ddl change in its own transaction, in order with the data; a DROP names
// the dropped table; after uninstall nothing is captured.
func TestDDLCapture(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE dd (id int PRIMARY KEY)`, `CREATE TABLE dd_gone (id int PRIMARY KEY)`)
	if err := ingest.InstallDDLCapture(t.Context(), db.URL, ""); err != nil {
		t.Fatal(err)
	}
	if err := ingest.InstallDDLCapture(t.Context(), db.URL, ""); err != nil {
		t.Fatalf("second install: %v", err)
	}
	dir := t.TempDir()
	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	db.Exec(t, `BEGIN; INSERT INTO dd VALUES (1); ALTER TABLE dd ADD COLUMN note text; INSERT INTO dd VALUES (2, 'x'); COMMIT`)
	db.Exec(t, `DROP TABLE dd_gone`)
	waitFor(t, 20*time.Second, "two records", func() bool { return len(records(t, dir)) >= 2 })
	txs := records(t, dir)
	lines := dumpLines(t, txs[:1])
	ch := lines[0]["changes"].([]any)
	if len(ch) != 3 {
		t.Fatalf("first record: %v", lines[0])
	}
	ddl := ch[1].(map[string]any)
	if ch[0].(map[string]any)["op"] != "insert" || ddl["op"] != "ddl" || ch[2].(map[string]any)["op"] != "insert" ||
		ddl["command"] != "ALTER TABLE" || ddl["object"] != "public.dd" || ddl["statement"] == "" {
		t.Fatalf("want insert, ddl ALTER TABLE public.dd, insert: %v", ch)
	}
	drop := changesOf(t, txs[1:2])
	if len(drop) != 1 || drop[0]["op"] != "ddl" || drop[0]["command"] != "DROP TABLE" || drop[0]["object"] != "public.dd_gone" {
		t.Fatalf("drop: %v", drop)
	}
	if txs[0].Changes[1].Op != pgq.OpDDL {
		t.Fatalf("op %v", txs[0].Changes[1].Op)
	}

	if err := ingest.UninstallDDLCapture(t.Context(), db.URL); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `ALTER TABLE dd ADD COLUMN more int`, `INSERT INTO dd VALUES (3)`)
	waitFor(t, 20*time.Second, "third record", func() bool { return len(records(t, dir)) >= 3 })
	time.Sleep(200 * time.Millisecond)
	for _, c := range changesOf(t, records(t, dir)[2:]) {
		if c["op"] == "ddl" {
			t.Fatalf("captured after uninstall: %v", c)
		}
	}
}

// spoofRole creates a role without privileges (but CREATE on schema
// public, so that it can run DDL of its own) and returns its URL.
func spoofRole(t *testing.T, db *pgtest.DB) (string, string) {
	t.Helper()
	role := "spoof_" + db.Name
	db.Exec(t, `CREATE ROLE `+role+` LOGIN NOSUPERUSER NOREPLICATION`, `GRANT CREATE ON SCHEMA public TO `+role)
	t.Cleanup(func() {
		db.Exec(t, `DROP OWNED BY `+role, `DROP ROLE `+role)
	})
	return role, strings.Replace(db.URL, "postgres://postgres@", "postgres://"+role+"@", 1)
}

// opsOf lists "op" or "op:prefix" (messages) of changes.
func opsOf(changes []map[string]any) []string {
	var out []string
	for _, c := range changes {
		op := c["op"].(string)
		if op == "message" {
			op += ":" + c["prefix"].(string)
		}
		out = append(out, op)
	}
	return out
}

// TestDDLSpoofed: a role without privileges cannot make a ddl change. Its
// messages with the DDL prefix (valid-looking JSON naming a proof id,
// malformed content, non-transactional, emitted next to a real DDL of its
// own, inside a streamed transaction) are journaled as message changes
// with a WARN; it cannot write the proof table; its real DDL, under the
// installed trigger, is a ddl change; the proof rows are never journaled.
func TestDDLSpoofed(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	if err := ingest.InstallDDLCapture(t.Context(), db.URL, ""); err != nil {
		t.Fatal(err)
	}
	role, url := spoofRole(t, db)
	var logs syncbuf.Buffer
	dir := t.TempDir()
	r := startSidecar(t, db, dir, func(o *server.Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	r.waitStreaming(t)

	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatalf("%s as %s: %v", sql, role, err)
		}
	}
	fake := `'{"command":"DROP TABLE","object":"public.orders","schema":"public","object_type":"table","statement":"DROP TABLE orders","proof":1}'`
	// 1: valid-looking JSON alone.
	exec(`SELECT pg_logical_emit_message(true, 'pgq.ddl', ` + fake + `)`)
	// 2: malformed content.
	exec(`SELECT pg_logical_emit_message(true, 'pgq.ddl', 'not json {')`)
	// 3: non-transactional.
	exec(`SELECT pg_logical_emit_message(false, 'pgq.ddl', ` + fake + `)`)
	// 4: next to a real DDL of the role, before and after it.
	exec(`BEGIN; SELECT pg_logical_emit_message(true, 'pgq.ddl', ` + fake + `); CREATE TABLE sp_t (id int); ` +
		`SELECT pg_logical_emit_message(true, 'pgq.ddl', ` + strings.ReplaceAll(fake, `"proof":1`, `"proof":2`) + `); COMMIT`)
	// The proof table is the trigger's alone.
	for _, sql := range []string{`INSERT INTO pgq_ddl.proof DEFAULT VALUES`, `SELECT count(*) FROM pgq_ddl.proof`} {
		if _, err := conn.Exec(t.Context(), sql); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("%s as %s: want permission denied, got %v", sql, role, err)
		}
	}
	// 5: a streamed transaction (more than logical_decoding_work_mem) with
	// a real DDL in a savepoint and a spoof right after it.
	exec(`BEGIN; INSERT INTO sp_t SELECT g FROM generate_series(1, 3000) g; SAVEPOINT s; ALTER TABLE sp_t ADD COLUMN note text; RELEASE s; ` +
		`SELECT pg_logical_emit_message(true, 'pgq.ddl', ` + fake + `); INSERT INTO sp_t SELECT g FROM generate_series(3001, 6000) g; COMMIT`)
	exec(`INSERT INTO sp_t VALUES (0)`) // the end marker

	waitFor(t, 30*time.Second, "the end marker", func() bool {
		for _, ch := range changesOf(t, records(t, dir)) {
			if n, _ := ch["new"].(map[string]any); ch["op"] == "insert" && n["id"] == float64(0) {
				return true
			}
		}
		return false
	})
	var ops []string
	for _, o := range opsOf(changesOf(t, records(t, dir))) {
		if o != "insert" {
			ops = append(ops, o)
		}
	}
	want := []string{"message:pgq.ddl", "message:pgq.ddl", "message:pgq.ddl", // 1, 2, 3
		"message:pgq.ddl", "ddl", "message:pgq.ddl", // 4
		"ddl", "message:pgq.ddl"} // 5
	if !slices.Equal(ops, want) {
		t.Fatalf("ops (inserts left out):\n got %v\nwant %v", ops, want)
	}
	for _, ch := range changesOf(t, records(t, dir)) {
		if ch["schema"] == "pgq_ddl" {
			t.Fatalf("a proof row was journaled: %v", ch)
		}
		if ch["op"] == "ddl" && (ch["command"] != "CREATE TABLE" && ch["command"] != "ALTER TABLE" || ch["object"] != "public.sp_t") {
			t.Fatalf("ddl: %v", ch)
		}
	}
	if n, nt := strings.Count(logs.String(), "journaling a message with pgq's DDL prefix as a message change"),
		strings.Count(logs.String(), "journaling a non-transactional message with one of pgq's prefixes"); n != 5 || nt != 1 {
		t.Fatalf("%d + %d WARNs, want 5 + 1:\n%s", n, nt, logs.String())
	}
}

// oldDDLInstallSQL is the capture of pgq before proof rows: its messages
// carry no proof.
const oldDDLInstallSQL = `
CREATE OR REPLACE FUNCTION public.pgq_ddl_capture() RETURNS event_trigger
LANGUAGE plpgsql AS $fn$
DECLARE r record;
BEGIN
	FOR r IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
		PERFORM pg_logical_emit_message(true, 'pgq.ddl', json_build_object(
			'command', r.command_tag, 'object', r.object_identity, 'schema', r.schema_name,
			'object_type', r.object_type, 'statement', current_query())::text);
	END LOOP;
END
$fn$;
CREATE EVENT TRIGGER pgq_ddl_end ON ddl_command_end EXECUTE FUNCTION public.pgq_ddl_capture();
`

// TestDDLUpgrade: with an old trigger, pgq warns at start and journals
// its DDL as messages; pgq ddl install --publication upgrades it (and adds
// the proof table to a publication of listed tables) and DDL is ddl
// again; a publication that does not publish the proof table is warned
// about; install is idempotent; a schema pgq_ddl of an ordinary role is
// refused.
func TestDDLUpgrade(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE up_t (id int PRIMARY KEY)`, `CREATE PUBLICATION pgq FOR TABLE up_t`, oldDDLInstallSQL)
	var logs syncbuf.Buffer
	dir := t.TempDir()
	start := func() *running {
		return startSidecar(t, db, dir, func(o *server.Options) {
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			o.Ingest.CreatePublication = ""
		})
	}
	r := start()
	r.waitStreaming(t)
	waitFor(t, 20*time.Second, "the old-trigger warning", func() bool {
		return strings.Contains(logs.String(), "an old pgq DDL capture trigger is installed")
	})
	db.Exec(t, `ALTER TABLE up_t ADD COLUMN a int`)
	waitFor(t, 20*time.Second, "a record", func() bool { return len(records(t, dir)) >= 1 })
	if ops := opsOf(changesOf(t, records(t, dir))); !slices.Equal(ops, []string{"message:pgq.ddl"}) {
		t.Fatalf("old trigger: %v", ops)
	}
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}

	// Installed without --publication over a publication of listed tables:
	// the proof rows do not reach pgq, which says so at start.
	if err := ingest.InstallDDLCapture(t.Context(), db.URL, ""); err != nil {
		t.Fatal(err)
	}
	r = start()
	waitFor(t, 20*time.Second, "the unpublished warning", func() bool {
		return strings.Contains(logs.String(), "the publication does not publish inserts into pgq_ddl.proof")
	})
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}

	for range 2 { // idempotent
		out, err := exec.Command(pgqbin.Path(t), "ddl", "install", "--pg-url", db.URL, "--publication", "pgq").CombinedOutput()
		if err != nil {
			t.Fatalf("pgq ddl install: %v\n%s", err, out)
		}
	}
	var fns string
	db.QueryRow(t, `SELECT string_agg(evtfoid::regproc::text, ',' ORDER BY evtname) FROM pg_event_trigger WHERE evtname LIKE 'pgq_ddl_%'`, &fns)
	var oldFn bool
	db.QueryRow(t, `SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'pgq_ddl_capture')`, &oldFn)
	if fns != "pgq_ddl.capture,pgq_ddl.capture" || oldFn {
		t.Fatalf("after upgrade: triggers' functions %q, old function left %v", fns, oldFn)
	}
	before := strings.Count(logs.String(), "an old pgq DDL capture trigger")
	n := len(records(t, dir)) // the install's own DDL is not captured
	if n != 1 {
		t.Fatalf("%d records before the DDL after the upgrade: %v", n, changesOf(t, records(t, dir)))
	}
	r = start()
	r.waitStreaming(t)
	db.Exec(t, `ALTER TABLE up_t ADD COLUMN b int`, `DROP TABLE up_t`)
	waitFor(t, 20*time.Second, "three records", func() bool { return len(records(t, dir)) >= 3 })
	chs := changesOf(t, records(t, dir)[1:])
	if ops := opsOf(chs); !slices.Equal(ops, []string{"ddl", "ddl"}) || chs[0]["command"] != "ALTER TABLE" || chs[1]["command"] != "DROP TABLE" {
		t.Fatalf("after upgrade: %v", chs)
	}
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	if strings.Count(logs.String(), "an old pgq DDL capture trigger") != before || strings.Count(logs.String(), "does not publish inserts into pgq_ddl.proof") != 1 {
		t.Fatalf("warnings after the upgrade:\n%s", logs.String())
	}

	// A schema pgq_ddl that an ordinary role made first is refused.
	db2 := c.NewDB(t)
	role, _ := spoofRole(t, db2)
	db2.Exec(t, `GRANT CREATE ON DATABASE `+db2.Name+` TO `+role, `CREATE SCHEMA pgq_ddl AUTHORIZATION `+role)
	err := ingest.InstallDDLCapture(t.Context(), db2.URL, "")
	if !errors.Is(err, ingest.ErrDDLForeign) || !strings.Contains(err.Error(), role) {
		t.Fatalf("install over a foreign schema: %v", err)
	}
}
