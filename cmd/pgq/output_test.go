package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// captureCLI runs one pgq command line and returns what it printed.
func captureCLI(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	old := stdout
	stdout = &buf
	defer func() { stdout = old }()
	err := runCLI(t, args...)
	return buf.Bytes(), err
}

// golden compares got with testdata/name.golden (go test -update
// rewrites it).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to write it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: output differs from %s:\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

// render captures what fn prints to stdout.
func render(t *testing.T, fn func() error) []byte {
	t.Helper()
	var buf bytes.Buffer
	old := stdout
	stdout = &buf
	defer func() { stdout = old }()
	if err := fn(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Fixed documents, as the API answers them, for the table goldens.
var (
	t0     = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	lease  = t0.Add(30 * time.Second)
	errMsg = "backfill: table public.gone does not exist"
	eta    = 5.9

	exclusiveGroup = api.GroupInfo{Name: "orders", From: "earliest", Tables: []string{"public.orders", "audit.*"}, Ops: []string{"insert", "update"},
		CommittedOffset: 120, Delivered: 130, Created: t0, Updated: t0.Add(time.Minute), Member: "worker-1", LeaseExpires: &lease,
		Lag: api.Lag{Records: 42, Bytes: 8123, Seconds: 12.5}, Mode: "exclusive", HoldSlot: true}
	sharedGroup = api.GroupInfo{Name: "jobs", From: "latest", Tables: []string{}, Ops: []string{}, CommittedOffset: 7, Delivered: 9, Created: t0, Updated: t0,
		Lag: api.Lag{Records: 3, Bytes: 900, Seconds: 0.25}, Mode: "shared",
		Shared: &api.SharedInfo{AckWait: api.Duration(30 * time.Second), MaxDeliver: 5, Backoff: []api.Duration{api.Duration(time.Second), api.Duration(5 * time.Second)},
			MaxAckPending: 1000, Key: "pk", InFlight: 2, Pending: 1, Parked: 1, Redeliveries: 4}}
	outOfRange = api.GroupInfo{Name: "stale", From: "earliest", Tables: []string{}, Ops: []string{}, Created: t0, Updated: t0,
		Lag: api.Lag{Records: 0, OutOfRange: true}, Mode: "exclusive", HoldSlot: true, HoldReleased: true}

	backfills = []client.Backfill{
		{ID: "bf1", State: "running", Tables: []string{"public.orders", "public.items"}, ChunkSize: 10000, MaxRate: 20000, Table: "public.orders",
			Rows: 52000, RowsEstimate: 100000, Dropped: 12, Chunks: 6, Rate: 8100.5, ETA: &eta, KeyColumns: []string{"id"},
			LastKey: map[string]string{"id": "52013"}, Parallelism: 2, CreatedAt: t0},
		{ID: "bf2", State: "failed", Tables: []string{"public.gone"}, ChunkSize: 10000, Table: "public.gone", Error: &errMsg, CreatedAt: t0.Add(time.Hour)},
	}
)

func parkedDoc() []api.ParkedMessage {
	return []api.ParkedMessage{
		{Message: api.Message{Offset: 7, Xid: 745, CommitLSN: "0/1A2B3C8", CommitTime: t0, Index: 0,
			Change: json.RawMessage(`{"op":"insert","ordinal":0,"schema":"public","table":"orders","new":{"id":1},"old":null}`), Delivery: 5, AckID: "7.0.5.1"},
			Parked: t0.Add(time.Minute), Reason: "max_deliver"},
		{Message: api.Message{Offset: 9, Xid: 750, CommitLSN: "0/1A2C000", CommitTime: t0, Index: 1,
			Change: json.RawMessage(`{"op":"message","ordinal":1,"prefix":"audit","content":"x","content_encoding":"utf8","transactional":true}`), Delivery: 1, AckID: "9.1.1.1"},
			Parked: t0.Add(2 * time.Minute), Reason: "term"},
	}
}

func statusFixture() statusDoc {
	lastErr := "replication connect: connection refused"
	lastErrAt, lastMsg := t0.Add(-time.Hour), t0.Add(-2*time.Second)
	return statusDoc{
		Status: api.Status{Running: true, Connected: true, LastErrorAt: &lastErrAt, LastMessageAt: &lastMsg, ChangesWritten: 1234, LastError: &lastErr,
			Slot: "pgq", Publication: "pgq", ProtoVersion: 2, Streaming: true, SlotFailover: true,
			LastReceivedLSN: 0x1A2B3F0, ServerWALEnd: 0x1A2B3F0, ConfirmedLSN: 0x1A2B3F0, JournalFirstOffset: 1, JournalLastOffset: 130,
			JournalLastEndLSN: 0x1A2B3F0, CoveredLSN: 0x1A2B3F0, RecordsWritten: 130, Reconnects: 1,
			Groups: map[string]api.GroupStatus{"orders": {CommittedOffset: 120, Member: "worker-1", Lag: exclusiveGroup.Lag}}},
		Groups:    []api.GroupInfo{sharedGroup, exclusiveGroup, outOfRange},
		Backfills: backfills,
	}
}

// TestOutputGolden: each table pgq prints, from fixed API documents,
// against testdata/*.golden: real columns, no JSON in any cell.
func TestOutputGolden(t *testing.T) {
	defer func(f func() time.Time) { now = f }(now)
	now = func() time.Time { return t0 }
	tbl := OutputFlag{Output: "table"}
	cases := []struct {
		name string
		fn   func() error
	}{
		{"groups-list", func() error {
			gs := []api.GroupInfo{sharedGroup, exclusiveGroup, outOfRange}
			return tbl.show(api.ListResponse{Groups: gs}, func(w io.Writer) error { return groupsTable(w, gs) })
		}},
		{"groups-info-exclusive", func() error { return tbl.showFields("", exclusiveGroup) }},
		{"groups-create-shared", func() error { return tbl.showFields("created group jobs", sharedGroup) }},
		{"groups-parked-list", func() error { return parkedTable(stdout, parkedDoc()) }},
		{"backfill-list", func() error { return backfillsTable(stdout, backfills) }},
		{"backfill-status", func() error { return tbl.showFields("", backfills[0]) }},
		{"status", func() error { return statusTable(stdout, statusFixture()) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := render(t, tc.fn)
			if bytes.Contains(out, []byte("{")) || bytes.Contains(out, []byte("[")) {
				t.Errorf("a cell holds JSON:\n%s", out)
			}
			golden(t, tc.name, out)
		})
	}
}

// cliAPI serves the real HTTP API over a journal of three transactions
// (one of them a message) and a status document.
func cliAPI(t *testing.T, status func() api.Status) string {
	t.Helper()
	dir, log := t.TempDir(), slog.New(slog.DiscardHandler)
	j, err := journal.Open(journal.Options{Dir: dir + "/journal", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	ix, err := index.Open(index.Options{Dir: dir + "/index", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	m, err := consumers.NewManager(consumers.ManagerOptions{Journal: j, Index: ix, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	cols := []pgq.Column{{Name: "id", TypeOID: 20, Key: true}}
	var txs []*pgq.Transaction
	for i := range 3 {
		txs = append(txs, &pgq.Transaction{Xid: uint32(i + 1), CommitLSN: pgq.LSN(100 * (i + 1)), EndLSN: pgq.LSN(100*(i+1) + 10),
			CommitTime: time.Now().UTC().Truncate(time.Microsecond), Final: true,
			Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: cols, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}}}}})
	}
	if err := j.Append(txs); err != nil {
		t.Fatal(err)
	}
	mux, err := httpapi.New(httpapi.Options{Groups: m, Status: status, NotReady: func() string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// getJSON is the API's own document at path, decoded generically.
func getJSON(t *testing.T, url string) any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return v
}

// withoutSeconds drops every "seconds" field (a lag's age, which grows
// between two requests) from a decoded document.
func withoutSeconds(v any) any {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "seconds")
		for _, e := range x {
			withoutSeconds(e)
		}
	case []any:
		for _, e := range x {
			withoutSeconds(e)
		}
	}
	return v
}

// sameJSON fails unless out is one line of JSON equal to want (lag ages
// aside).
func sameJSON(t *testing.T, what string, out []byte, want any) {
	t.Helper()
	if bytes.Count(out, []byte("\n")) != 1 {
		t.Fatalf("%s: not one line of JSON: %q", what, out)
	}
	var got any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v: %q", what, err, out)
	}
	if !reflect.DeepEqual(withoutSeconds(got), withoutSeconds(want)) {
		t.Fatalf("%s: printed\n%s\nthe API answers\n%v", what, out, want)
	}
}

// TestJSONOutputIsTheAPIDocument: -o json prints exactly what the API
// answers (groups list: {"groups":[...]}, parked list: {"parked":[...]}),
// mutating commands print what they did, and tables hold no JSON.
func TestJSONOutputIsTheAPIDocument(t *testing.T) {
	// The status document of a real pgq (server.Status), as JSON.
	statusJSON := `{"running":true,"connected":false,"last_error_at":null,"last_message_at":null,"changes_written":3,"last_error":null,` +
		`"slot":"pgq","database":"app","publication":"pgq","proto_version":2,"streaming":true,"slot_failover":false,"last_received_lsn":"0/136",` +
		`"server_wal_end":"0/136","confirmed_lsn":"0/136","journal_first_offset":1,"journal_last_offset":3,"journal_last_end_lsn":"0/136",` +
		`"covered_lsn":"0/136","records_written":3,"reconnects":0,"initial_load":null,"spill_error":null,"groups":{},"journal_error":null,` +
		`"index":{"stale":false,"failed_updates":0,"heals":0,"last_error":null},"journal_corrupt":null,` +
		`"journal_scrub":{"running":false,"passes":0,"segments_verified":0,"bytes_verified":0,"sums_written":0,"last_pass_end":null}}`
	var status api.Status
	if err := json.Unmarshal([]byte(statusJSON), &status); err != nil {
		t.Fatal(err)
	}
	url := cliAPI(t, func() api.Status { return status })
	addr := "--addr=" + url
	run := func(args ...string) []byte {
		t.Helper()
		out, err := captureCLI(t, append(args, addr)...)
		if err != nil {
			t.Fatalf("pgq %v: %v", args, err)
		}
		return out
	}
	run("groups", "create", "a", "--from=earliest", "-o", "json")
	run("groups", "create", "s", "--from=earliest", "--mode=shared", "-o", "json")

	sameJSON(t, "groups list", run("groups", "list", "-o", "json"), getJSON(t, url+"/v1/groups"))
	sameJSON(t, "groups info", run("groups", "info", "a", "-o", "json"), getJSON(t, url+"/v1/groups/a"))
	sameJSON(t, "groups parked list", run("groups", "parked", "list", "s", "-o", "json"), getJSON(t, url+"/v1/groups/s/parked"))
	var st any
	_ = json.Unmarshal([]byte(statusJSON), &st)
	var doc map[string]any
	out := run("status", "-o", "json")
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(doc["status"], st) || !reflect.DeepEqual(withoutSeconds(doc["groups"]), withoutSeconds(getJSON(t, url+"/v1/groups").(map[string]any)["groups"])) ||
		!reflect.DeepEqual(doc["backfills"], []any{}) {
		t.Fatalf("pgq status -o json printed %s", out)
	}

	// Tables: real columns, never JSON.
	for _, args := range [][]string{{"groups", "list"}, {"groups", "info", "s"}, {"groups", "parked", "list", "s"}, {"status"}} {
		out := run(append(args, "-o", "table")...)
		if bytes.ContainsAny(out, "{[") {
			t.Errorf("pgq %v -o table holds JSON:\n%s", args, out)
		}
	}
	if out := string(run("groups", "list", "-o", "table")); !strings.HasPrefix(out, "GROUP ") || !strings.Contains(out, "\na ") || !strings.Contains(out, "\ns ") {
		t.Errorf("groups list table:\n%s", out)
	}

	// Mutating commands say what they did; -o json is the API's answer.
	if out := string(run("groups", "parked", "requeue", "s", "--all", "-o", "table")); out != "requeued 0 parked messages of group s\n" {
		t.Errorf("parked requeue printed %q", out)
	}
	sameJSON(t, "parked drop", run("groups", "parked", "drop", "s", "--all", "-o", "json"), map[string]any{"count": float64(0)})
	if out := string(run("groups", "reset", "a", "--to=latest", "-o", "table")); !strings.HasPrefix(out, "reset group a to latest: committed offset 3 (was 0), next offset 4\nFIELD ") {
		t.Errorf("groups reset printed %q", out)
	}
	if out := string(run("groups", "delete", "a", "-o", "table")); out != "deleted group a\n" {
		t.Errorf("groups delete printed %q", out)
	}
	sameJSON(t, "groups delete", run("groups", "delete", "s", "-o", "json"), map[string]any{"ok": true})

	// pgq healthcheck: ready through the API.
	if out := string(run("healthcheck")); out != "ready\n" {
		t.Errorf("healthcheck printed %q", out)
	}
}
