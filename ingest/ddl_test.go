package ingest_test

import (
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// TestDDLCapture: with pgq ddl install, a schema change is journaled as a
// ddl change in its own transaction, in order with the data; a DROP names
// the dropped table; after uninstall nothing is captured.
func TestDDLCapture(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE dd (id int PRIMARY KEY)`, `CREATE TABLE dd_gone (id int PRIMARY KEY)`)
	if err := ingest.InstallDDLCapture(t.Context(), db.URL); err != nil {
		t.Fatal(err)
	}
	if err := ingest.InstallDDLCapture(t.Context(), db.URL); err != nil {
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
