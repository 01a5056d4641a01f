package ingest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/internal/pgtest"
)

// lastLine is the final stderr line: pgq's one-line error.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func runExpectFailure(t *testing.T, want string, args ...string) {
	t.Helper()
	p := startPgq(t, args...)
	code, stderr := p.wait(t, 30*time.Second)
	line := lastLine(stderr)
	if code == 0 {
		t.Fatalf("exit code 0, want failure; stderr:\n%s", stderr)
	}
	if !strings.HasPrefix(line, "pgq: ") || !strings.Contains(line, want) {
		t.Fatalf("error line %q does not say %q (exit %d)", line, want, code)
	}
}

func TestPreflightErrors(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	other, ok, created, missing := slotName("pf_other", db), slotName("pf_ok", db), slotName("pf_new", db), slotName("pf_missing", db)
	noReplRole := slotName("pf_norepl", db) // roles are cluster-wide too
	replRole := slotName("pf_repl", db)
	db.Exec(t,
		`CREATE TABLE pf (id int PRIMARY KEY)`,
		`CREATE PUBLICATION pf_pub FOR TABLE pf`,
		`SELECT pg_create_logical_replication_slot('`+other+`', 'test_decoding')`,
		`SELECT pg_create_logical_replication_slot('`+ok+`', 'pgoutput')`,
		`CREATE ROLE `+noReplRole+` LOGIN`,
		`CREATE ROLE `+replRole+` LOGIN REPLICATION`,
	)
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	base := func(url, slot, pub string, extra ...string) []string {
		return append([]string{"run", "--pg-url", url, "--slot", slot, "--publication", pub, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, extra...)
	}
	noRepl := strings.Replace(db.URL, "postgres@", noReplRole+"@", 1)
	repl := strings.Replace(db.URL, "postgres@", replRole+"@", 1)
	noUser := strings.Replace(db.URL, "postgres@", "pf_nobody@", 1)
	cases := []struct {
		name, want string
		args       []string
	}{
		{"unreachable", "server unreachable", base(fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable&connect_timeout=2", port), ok, "pf_pub")},
		{"unknown role", `authentication failed: role "pf_nobody" does not exist`, base(noUser, ok, "pf_pub")},
		{"no replication privilege", `insufficient privilege: role lacks REPLICATION (ALTER ROLE ... REPLICATION; the SQL for a least-privilege role and publication: docs/running.md, "A least-privilege role")`, base(noRepl, ok, "pf_pub")},
		// FOR ALL TABLES needs a superuser: the error points to the docs.
		{"create publication, no privilege", `(FOR ALL TABLES needs a superuser, a table list the tables' owner with CREATE on the database; the SQL for a least-privilege role and publication: docs/running.md, "A least-privilege role")`, base(repl, ok, "pf_nopriv", "--create-publication", "all")},
		{"slot missing", `replication slot "` + missing + `" does not exist`, base(db.URL, missing, "pf_pub")},
		{"slot of another plugin", `plugin "test_decoding"`, base(db.URL, other, "pf_pub")},
		{"publication missing", `publication "pf_nopub" does not exist`, base(db.URL, ok, "pf_nopub")},
		{"invalid slot name", "invalid slot name", base(db.URL, "Bad-Slot;drop", "pf_pub")},
		{"bad create-publication list", "invalid table", base(db.URL, ok, created, "--create-publication", "a.b.c")},
		{"missing flag", "--slot", []string{"run", "--pg-url", db.URL, "--publication", "p", "--data-dir", t.TempDir()}},
		{"bad duration", "reconnect-min", base(db.URL, ok, "pf_pub", "--reconnect-min", "soon")},
		{"negative receive-coalesce", "--receive-coalesce is negative", base(db.URL, ok, "pf_pub", "--receive-coalesce=-1ms")},
		{"receive-coalesce too long", "--receive-coalesce 1s is above 10ms", base(db.URL, ok, "pf_pub", "--receive-coalesce", "1s")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runExpectFailure(t, tc.want, tc.args...) })
	}

	t.Run("slot in use and data dir locked", func(t *testing.T) {
		dir := t.TempDir()
		a := startPgq(t, "run", "--pg-url", db.URL, "--slot", ok, "--publication", "pf_pub", "--data-dir", dir, "--listen", "127.0.0.1:0")
		waitSlotActive(t, db, ok)
		runExpectFailure(t, "in use by another connection", base(db.URL, ok, "pf_pub")...)
		runExpectFailure(t, "locked", "run", "--pg-url", db.URL, "--slot", ok, "--publication", "pf_pub", "--data-dir", dir, "--listen", "127.0.0.1:0")
		_ = a.cmd.Process.Signal(interrupt)
		if code, stderr := a.wait(t, 20*time.Second); code != 0 {
			t.Fatalf("first pgq exit %d: %s", code, stderr)
		}
	})

	t.Run("create slot and publication", func(t *testing.T) {
		dir := t.TempDir()
		a := startPgq(t, "run", "--pg-url", db.URL, "--slot", created, "--publication", "pf_new_pub", "--data-dir", dir,
			"--listen", "127.0.0.1:0", "--create-slot", "--create-publication", "public.pf")
		waitSlotActive(t, db, created)
		var plugin string
		db.QueryRow(t, "SELECT plugin FROM pg_replication_slots WHERE slot_name = '"+created+"'", &plugin)
		if plugin != "pgoutput" {
			t.Fatalf("created slot uses plugin %q", plugin)
		}
		var tables string
		db.QueryRow(t, "SELECT string_agg(schemaname || '.' || tablename, ',') FROM pg_publication_tables WHERE pubname = 'pf_new_pub'", &tables)
		if tables != "public.pf" {
			t.Fatalf("publication tables = %q", tables)
		}
		_ = a.cmd.Process.Signal(interrupt)
		a.wait(t, 20*time.Second)
	})
}

// TestWrongWALLevel needs its own cluster with wal_level = replica.
func TestWrongWALLevel(t *testing.T) {
	c, err := pgtest.Start(pgtest.Options{Settings: []string{"wal_level = replica"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	runExpectFailure(t, "wal_level is \"replica\"", "run", "--pg-url", c.URL("postgres"), "--slot", "s", "--publication", "p",
		"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--create-slot")
}
