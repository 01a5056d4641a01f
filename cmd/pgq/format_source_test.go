package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/internal/pgqbin"
)

// TestFormatSourceAgrees: without --format-db and --format-slot, `pgq
// consume`, `pgq bridge webhook` and the HTTP fetch name the same source
// for the same change: the database and slot pgq reads, which its status
// reports (CloudEvents source /pgq/<database>/<slot>, Debezium's
// source.db). Before, consume and the bridges said /pgq// and "", so
// deduplication by CloudEvents source+id saw two sources. A CloudEvent is
// the same bytes on every path; a Debezium event the same but for its
// top-level ts_* (when it was rendered). A ddl change is a CloudEvent on
// every path and left out of every path in Debezium's format (issue 33
// item 5: no null a Connect sink would take for a tombstone).
func TestFormatSourceAgrees(t *testing.T) {
	r := startFormatRun(t, "fs")
	for _, g := range []string{"consume", "fetch-debezium", "fetch-cloudevents", "webhook-debezium", "webhook-cloudevents"} {
		r.Out(t, "groups", "create", g, "--from", "earliest")
	}
	r.db.Exec(t, `INSERT INTO fs VALUES (1, 'a')`)
	// A ddl change: Debezium has no event for it, CloudEvents has.
	pgqbin.Output(t, "ddl", "install", "--pg-url", r.db.URL, "--publication", "fs_pub")
	r.db.Exec(t, `ALTER TABLE fs ADD note text`)

	st, _ := getJSON(t, "http://"+r.Addr+"/v1/status").(map[string]any)
	if st["database"] != r.db.Name || st["slot"] != r.slot {
		t.Fatalf("status: database %v slot %v, want %q %q", st["database"], st["slot"], r.db.Name, r.slot)
	}

	// The insert's event, and the ddl change's in CloudEvents only: in
	// Debezium's format it is left out on every path (a null there is a
	// tombstone to a Kafka Connect sink, corrupt to Flink).
	for f, want := range map[string]int{"cloudevents": 2, "debezium": 1} {
		var consumed []string
		for deadline := time.Now().Add(30 * time.Second); len(consumed) < 2; time.Sleep(100 * time.Millisecond) {
			consumed = strings.Split(strings.TrimSuffix(string(r.Out(t, "consume", "--group", "consume", "--no-commit")), "\n"), "\n")
			if time.Now().After(deadline) {
				t.Fatalf("consume printed %q, want the insert's and the ddl's transactions", consumed)
			}
		}
		consumed = strings.Split(strings.TrimSuffix(string(r.Out(t, "consume", "--group", "consume", "--no-commit", "--format", f)), "\n"), "\n")
		fetched := fetchFormat(t, r.Addr, "fetch-"+f, f)
		posted := r.WebhookEvents(t, want, "--group", "webhook-"+f, "--format", f)
		if len(consumed) != want || len(fetched) != want || len(posted) != want {
			t.Fatalf("%s: consume %d, fetch %d, webhook %d events, want %d each:\n%q\n%q\n%q", f, len(consumed), len(fetched), len(posted), want, consumed, fetched, posted)
		}
		for i := range want {
			agree(t, f, r, consumed[i], string(fetched[i]), string(posted[i]))
		}
	}
}

// agree checks that the events consume, the HTTP fetch and the webhook
// gave for one change in format f are the same and name the source the
// status reports.
func agree(t *testing.T, f string, r *formatRun, consumed, fetched, posted string) {
	t.Helper()
	wantSource := "/pgq/" + r.db.Name + "/" + r.slot
	paths := map[string]string{"consume": consumed, "fetch": fetched, "webhook": posted}
	for path, ev := range paths {
		var e struct {
			Source json.RawMessage `json:"source"`
		}
		if err := json.Unmarshal([]byte(ev), &e); err != nil {
			t.Fatalf("%s %s: %v\n%s", f, path, err, ev)
		}
		if f == "cloudevents" {
			var src string
			if err := json.Unmarshal(e.Source, &src); err != nil || src != wantSource {
				t.Errorf("%s %s: source %s, want %q", f, path, e.Source, wantSource)
			}
		} else {
			var src struct{ DB string }
			if err := json.Unmarshal(e.Source, &src); err != nil || src.DB != r.db.Name {
				t.Errorf("%s %s: source %s, want db %q", f, path, e.Source, r.db.Name)
			}
		}
		if got, want := withoutRenderTime(t, ev), withoutRenderTime(t, paths["consume"]); got != want {
			t.Errorf("%s: %s renders\n%s\nconsume\n%s", f, path, got, want)
		}
	}
}

// withoutRenderTime is event ev with Debezium's top-level ts_ms, ts_us and
// ts_ns (the time of rendering) left out, as compact JSON with sorted keys.
func withoutRenderTime(t *testing.T, ev string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(ev), &m); err != nil {
		t.Fatalf("%v\n%s", err, ev)
	}
	delete(m, "ts_ms")
	delete(m, "ts_us")
	delete(m, "ts_ns")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fetchFormat fetches group g (without committing) in format f over the
// HTTP API until it answers a change, and returns the events of its
// changes (one JSON value each, as the answer holds them).
func fetchFormat(t *testing.T, addr, g, f string) []json.RawMessage {
	t.Helper()
	body := `{"member":"m","max":100,"format":"` + f + `"}`
	resp, err := http.Post("http://"+addr+"/v1/groups/"+g+"/fetch", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct {
		Transactions []struct {
			Changes []json.RawMessage `json:"changes"`
		} `json:"transactions"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("fetch %s: %s %s", f, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		t.Fatal(err)
	}
	var evs []json.RawMessage
	for _, tx := range ans.Transactions {
		evs = append(evs, tx.Changes...)
	}
	return evs
}
