package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, pgtest.Options{})) }

func start(t *testing.T, db *pgtest.DB, dir string) (*Server, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Open(ctx, Options{DataDir: dir, Listen: "127.0.0.1:0", Ingest: ingest.Options{
		PGURL: db.URL, Slot: "sc_" + db.Name, Publication: "sc", CreateSlot: true, CreatePublication: "all",
	}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return s, func() error { cancel(); return <-done }
}

// startStreaming starts a server on db, stopped (its error reported) at
// the test's end, and waits until ingest streams.
func startStreaming(t *testing.T, db *pgtest.DB) *Server {
	t.Helper()
	s, stop := start(t, db, t.TempDir())
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for s.ingester.Status().ProtoVersion == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

func waitRecords(t *testing.T, s *Server, n pgq.Offset) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s.journal.LastOffset() < n {
		if time.Now().After(deadline) {
			t.Fatalf("journal has %d records, want %d", s.journal.LastOffset(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestIndexRebuiltAndHTTP: the index follows the journal while running, is
// rebuilt from the journal when its directory is lost, and the status,
// health and metrics endpoints answer.
func TestIndexRebuiltAndHTTP(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE ix (id int PRIMARY KEY)`)
	dir := t.TempDir()
	s, stop := start(t, db, dir)
	deadline := time.Now().Add(20 * time.Second)
	for s.ingester.Status().ProtoVersion == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for i := 1; i <= 5; i++ {
		db.Exec(t, `INSERT INTO ix VALUES (`+string(rune('0'+i))+`)`)
	}
	waitRecords(t, s, 5)
	for s.index.LastOffset() < 5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	third, err := s.journal.Read(3)
	if err != nil {
		t.Fatal(err)
	}
	if off, err := s.index.SeekLSN(third.CommitLSN); err != nil || off != 3 {
		t.Fatalf("SeekLSN(record 3) = %d, %v", off, err)
	}

	// Ingest counts records at its confirmation, after the batch's
	// gathered durable-point marker (up to 25 ms after they are
	// readable): /v1/status's records_written trails the journal by that.
	for s.ingester.Status().RecordsWritten < 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	base := "http://" + s.Addr()
	body := get(t, base+"/healthz")
	if strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz = %q", body)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(get(t, base+"/v1/status")), &st); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"running", "last_error", "last_received_lsn", "server_wal_end", "confirmed_lsn",
		"journal_first_offset", "journal_last_offset", "journal_last_end_lsn", "records_written", "reconnects"} {
		if _, ok := st[k]; !ok {
			t.Errorf("/v1/status lacks %q", k)
		}
	}
	if st["journal_last_offset"] != 5.0 || st["records_written"] != 5.0 || st["running"] != true {
		t.Errorf("/v1/status = %v", st)
	}
	if _, err := pgq.ParseLSN(st["confirmed_lsn"].(string)); err != nil {
		t.Errorf("confirmed_lsn not X/Y: %v", st["confirmed_lsn"])
	}
	m := get(t, base+"/metrics")
	for _, want := range []string{"pgq_records_written_total 5", "pgq_commit_to_durable_seconds_count 5"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	// Lose the index: the next start rebuilds it from the journal.
	if err := os.RemoveAll(filepath.Join(dir, "index")); err != nil {
		t.Fatal(err)
	}
	s2, stop2 := start(t, db, dir)
	defer stop2()
	if got := s2.index.LastOffset(); got != 5 {
		t.Fatalf("rebuilt index last offset %d, want 5", got)
	}
	if off, err := s2.index.SeekTime(third.CommitTime); err != nil || off != 3 {
		t.Fatalf("SeekTime after rebuild = %d, %v", off, err)
	}
	if _, err := s2.index.SeekLSN(third.EndLSN + 1<<40); !errors.Is(err, index.ErrNotFound) {
		t.Fatalf("SeekLSN past the end: %v", err)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// TestReadyzAndDurabilityMetrics: /readyz is 200 while streaming and 503
// with the reason while the replication connection is down; the received
// LSN and first-offset gauges are set.
func TestReadyzAndDurabilityMetrics(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE rz (id int PRIMARY KEY)`)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Open(ctx, Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Ingest: ingest.Options{
		PGURL: db.URL, Slot: "rz_" + db.Name, Publication: "rz", CreateSlot: true, CreatePublication: "all",
		ReconnectMin: 3 * time.Second, ReconnectMax: 3 * time.Second,
	}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + s.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitUntil("ready", func() bool { code, _ := get("/readyz"); return code == 200 })
	db.Exec(t, `INSERT INTO rz VALUES (1)`, `INSERT INTO rz VALUES (2)`)
	waitRecords(t, s, 2)
	// The gauges are set when ingest confirms a batch, after the journal's
	// durable-point marker, which may follow the records' readability by
	// up to the committer's marker delay (25 ms): wait for them.
	for _, name := range []string{"pgq_received_lsn", "pgq_journal_first_offset"} {
		waitUntil("metric "+name+" set", func() bool {
			_, metrics := get("/metrics")
			return strings.Contains(metrics, "\n"+name+" ") && !strings.Contains(metrics, "\n"+name+" 0\n")
		})
	}

	db.Exec(t, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = 'rz_`+db.Name+`'`)
	waitUntil("not ready", func() bool {
		code, body := get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "not connected to PostgreSQL")
	})
	waitUntil("ready again", func() bool { code, _ := get("/readyz"); return code == 200 })

	// PostgreSQL itself stops: not ready while it is down, ready once it
	// is back.
	if err := c.StopServer(); err != nil {
		t.Fatal(err)
	}
	waitUntil("not ready while PostgreSQL is down", func() bool {
		code, body := get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "not connected to PostgreSQL")
	})
	if err := c.StartServer(); err != nil {
		t.Fatal(err)
	}
	waitUntil("ready after PostgreSQL is back", func() bool { code, _ := get("/readyz"); return code == 200 })
}
