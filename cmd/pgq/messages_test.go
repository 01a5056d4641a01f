package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq/internal/pgtest"
)

// authCluster starts a cluster that asks every role but postgres for its
// password over TCP, with the role pgq_pw (password "right", REPLICATION).
func authCluster(t *testing.T) (*pgtest.Cluster, *pgtest.DB) {
	t.Helper()
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	db := c.NewDB(t)
	db.Exec(t, `CREATE ROLE pgq_pw LOGIN REPLICATION PASSWORD 'right'`,
		`DO $$ BEGIN EXECUTE format('COPY (SELECT * FROM (VALUES (%L), (%L), (%L)) v) TO %L',
			'local all all trust', 'host all postgres 127.0.0.1/32 trust', 'host all all 127.0.0.1/32 scram-sha-256',
			current_setting('hba_file')); END $$`,
		`SELECT pg_reload_conf()`)
	return c, db
}

// TestConnectErrorsSayWhatToChange: a wrong password is an
// authentication failure naming the user and where the password came
// from, not "server unreachable"; a refused connection names its address
// and reason once.
func TestConnectErrorsSayWhatToChange(t *testing.T) {
	c, db := authCluster(t)
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	closed := fmt.Sprintf("127.0.0.1:%d", port)
	run := func(url string) []string {
		return []string{"run", "--pg-url", url, "--slot", "s", "--publication", "p", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--no-reconnect"}
	}
	wrong := fmt.Sprintf("postgres://pgq_pw:wrong@127.0.0.1:%d/%s?sslmode=disable", c.Port, db.Name)
	noPassword := fmt.Sprintf("postgres://pgq_pw@127.0.0.1:%d/%s?sslmode=disable", c.Port, db.Name)
	checkExits(t, []exitCase{
		{"wrong password in the URL", run(wrong), nil, exitRuntime, `authentication failed: password authentication failed for user "pgq_pw" (the password is the connection URL's)`},
		{"wrong password in PGPASSWORD", run(noPassword), []string{"PGPASSWORD=wrong"}, exitRuntime, `user "pgq_pw" (the password is PGPASSWORD's`},
		{"slot info, wrong password", []string{"slot", "info", "--pg-url", wrong, "--slot", "s"}, nil, exitRuntime, `authentication failed: password authentication failed for user "pgq_pw"`},
		{"refused", run("postgres://postgres@" + closed + "/x?sslmode=disable"), nil, exitRuntime, "server unreachable: cannot connect to PostgreSQL at " + closed + ": connection refused"},
	})
	t.Run("refused names the address once", func(t *testing.T) {
		_, line := runPgq(t, nil, run("postgres://postgres@"+closed+"/x?sslmode=disable")...)
		if n := strings.Count(line, closed); n != 1 {
			t.Fatalf("%q names %s %d times, want once", line, closed, n)
		}
	})
}
