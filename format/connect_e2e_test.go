package format_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
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
	addr := startRun(t, db)
	pgqOut(t, addr, "groups", "create", "g", "--from", "earliest")
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
			out := pgqOut(t, addr, append([]string{"consume", "--group", "g", "--no-commit", "--format", "debezium", "--schemas"}, m...)...)
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
	pgqOut(t, addr, "groups", "create", "hook", "--from", "earliest")
	evs := webhookEvents(t, addr, want, "--group", "hook", "--format", "debezium", "--schemas", "--decimal-handling-mode", "precise")
	if len(evs) != want {
		t.Errorf("webhook: %d events, want %d", len(evs), want)
	}
	for _, ev := range evs {
		checkConnect(t, ev)
	}
}

// webhookEvents runs `pgq bridge webhook` with args into a receiver
// until want events arrived and returns the events of its requests'
// bodies (JSON arrays of events).
func webhookEvents(t *testing.T, addr string, want int, args ...string) []json.RawMessage {
	t.Helper()
	var (
		mu  sync.Mutex
		evs []json.RawMessage
	)
	got := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var batch []json.RawMessage
		if err := json.Unmarshal(b, &batch); err != nil {
			t.Errorf("webhook body: %v\n%s", err, b)
		}
		mu.Lock()
		defer mu.Unlock()
		if evs = append(evs, batch...); len(evs) >= want {
			select {
			case got <- struct{}{}:
			default:
			}
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, pgqbin.Path(t), append([]string{"bridge", "webhook", "--url", srv.URL, "--addr", addr}, args...)...)
	cmd.Env = pgqbin.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-ctx.Done():
		t.Errorf("webhook: too few events; bridge:\n%s", stderr.String())
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	return evs
}

// startRun starts `pgq run` on db and returns its HTTP address once
// ready.
func startRun(t *testing.T, db string) string {
	t.Helper()
	return startRunTables(t, db, "public.schema_types")
}

// startRunTables is startRun publishing tables (--create-publication).
func startRunTables(t *testing.T, db, tables string) string {
	t.Helper()
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	slot := "s_" + db
	run := exec.Command(pgqbin.Path(t), "run", "--pg-url", cluster.URL(db), "--slot", slot, "--publication", "p_"+db, "--data-dir", t.TempDir(),
		"--create-slot", "--create-publication", tables, "--listen", addr)
	run.Env = pgqbin.Env()
	var stderr bytes.Buffer
	run.Stderr = &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = run.Process.Kill()
		_ = run.Wait()
		_ = cluster.Exec(context.Background(), db, "SELECT pg_drop_replication_slot('"+slot+"')")
	})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgq run not ready:\n%s", stderr.String())
		}
	}
}

// pgqOut runs pgq with args against the run at addr and returns its
// standard output.
func pgqOut(t *testing.T, addr string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(pgqbin.Path(t), append(args, "--addr", addr)...)
	cmd.Env = pgqbin.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pgq %v: %v\n%s", args, err, stderr.String())
	}
	return out
}
