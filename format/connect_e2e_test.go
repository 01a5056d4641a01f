package format_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/internal/pgqbin"
)

// TestConnectSchemasEndToEnd: inserts, updates (one of the key),
// deletes and a truncate of the table of many column types, through a
// real PostgreSQL, `pgq run` and `pgq consume --format debezium
// --schemas` in pgq's and Debezium's value modes, and `pgq bridge
// webhook --schemas`: every event printed or delivered is what Kafka
// Connect's JSON converter with schemas reads (checkConnect).
func TestConnectSchemasEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, err := cluster.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Exec(ctx, db, "CREATE TABLE schema_types (pk serial PRIMARY KEY, "+schemaTypesDDL+")"); err != nil {
		t.Fatal(err)
	}
	run := startRun(t, db)
	run.Out(t, "groups", "create", "g", "--from", "earliest")
	if err := cluster.Exec(ctx, db,
		schemaTypesInsert,
		"INSERT INTO schema_types (b) VALUES (false)",
		"UPDATE schema_types SET i4 = -1, txt = 'x', n = 'NaN' WHERE pk = 1",
		"UPDATE schema_types SET pk = 10 WHERE pk = 2",
		"DELETE FROM schema_types WHERE pk = 10",
		"TRUNCATE schema_types",
	); err != nil {
		t.Fatal(err)
	}
	const want = 7 // 2 creates, an update, a delete and a create, a delete, a truncate
	for _, m := range [][]string{nil, {"--decimal-handling-mode", "precise", "--time-precision-mode", "adaptive", "--interval-handling-mode", "string"}} {
		var lines []string
		for deadline := time.Now().Add(60 * time.Second); len(lines) < want; time.Sleep(200 * time.Millisecond) {
			out := run.Out(t, append([]string{"consume", "--group", "g", "--no-commit", "--format", "debezium", "--schemas"}, m...)...)
			lines = strings.Split(strings.TrimSpace(string(out)), "\n")
			if time.Now().After(deadline) {
				t.Fatalf("%v: %d events, want %d:\n%s", m, len(lines), want, out)
			}
		}
		ops := ""
		for _, l := range lines {
			checkConnect(t, []byte(l))
			if i := strings.LastIndex(l, `"op":"`); i >= 0 {
				ops += l[i+6 : i+7]
			}
		}
		if ops != "ccudcdt" {
			t.Errorf("%v: ops %q, want ccudcdt", m, ops)
		}
	}
	// The bridges embed the same flags: pgq bridge webhook --schemas.
	run.Out(t, "groups", "create", "hook", "--from", "earliest")
	evs := run.WebhookEvents(t, want, "--group", "hook", "--format", "debezium", "--schemas", "--decimal-handling-mode", "precise")
	if len(evs) != want {
		t.Errorf("webhook: %d events, want %d", len(evs), want)
	}
	for _, ev := range evs {
		checkConnect(t, ev)
	}
}

// startRun starts `pgq run` on db publishing schema_types and returns
// it once ready.
func startRun(t *testing.T, db string) *pgqbin.Run {
	t.Helper()
	return startRunTables(t, db, "public.schema_types")
}

// startRunTables is startRun publishing tables (--create-publication).
func startRunTables(t *testing.T, db, tables string) *pgqbin.Run {
	t.Helper()
	slot := "s_" + db
	return pgqbin.StartRun(t, pgqbin.RunOptions{PGURL: cluster.URL(db), Slot: slot, Publication: "p_" + db, Tables: tables,
		Stopped: func() { _ = cluster.Exec(context.Background(), db, "SELECT pg_drop_replication_slot('"+slot+"')") }})
}
