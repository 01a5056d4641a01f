package httpapi_test

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/httpapi/apitest"
)

// unprovoked are the documented (operation, status) pairs that are real
// but that no test of this package can provoke, each with why. Keep it
// short: a pair a test can provoke belongs in TestEveryRouteStatus.
var unprovoked = map[string]string{
	// A failing disk under the index or the journal: the handlers pass
	// the storage error on as internal. Nothing here can make the index
	// or the journal fail a write or read on demand (a closed Pebble
	// panics instead of failing).
	"POST /v1/groups 500":                       "the index fails to store the new group",
	"DELETE /v1/groups/{name} 500":              "the index fails to delete the group",
	"POST /v1/groups/{name}/reset 500":          "the index fails to store the cursor or the shared state",
	"POST /v1/groups/{name}/fetch 500":          "the journal fails to read a record, or the index to store the lease or shared state",
	"POST /v1/groups/{name}/commit 500":         "the index fails to store the cursor",
	"POST /v1/groups/{name}/release 500":        "the index fails to store the released lease",
	"POST /v1/groups/{name}/ack 500":            "the index fails to store the shared state",
	"POST /v1/groups/{name}/nak 500":            "the index fails to store the shared state",
	"POST /v1/groups/{name}/term 500":           "the index fails to store the shared state",
	"POST /v1/groups/{name}/progress 500":       "the index fails to store the shared state",
	"GET /v1/groups/{name}/parked 500":          "the journal fails to read a parked message's record",
	"POST /v1/groups/{name}/parked/requeue 500": "the journal fails to read a record, or the index to store the shared state",
	"POST /v1/groups/{name}/parked/drop 500":    "the index fails to store the shared state",
	// Backfills need PostgreSQL, which this package's tests do not
	// start (env's connection string points nowhere: a start answers
	// 503); backfill's and server's tests run them.
	"POST /v1/backfills 201":        "a started backfill needs PostgreSQL",
	"POST /v1/backfills 404":        "a table that does not exist is learnt from PostgreSQL",
	"POST /v1/backfills 500":        "PostgreSQL fails a catalog query, or the backfill store a write that did not mark it failed",
	"GET /v1/backfills/{id} 200":    "a backfill exists only once started against PostgreSQL",
	"PATCH /v1/backfills/{id} 200":  "a backfill exists only once started against PostgreSQL",
	"PATCH /v1/backfills/{id} 500":  "a backfill exists only once started against PostgreSQL; then the backfill store fails a commit",
	"DELETE /v1/backfills/{id} 200": "a backfill exists only once started against PostgreSQL",
	"DELETE /v1/backfills/{id} 500": "a backfill exists only once started against PostgreSQL; then the backfill store fails a commit",
}

// TestMain holds openapi.json to what the handlers send: after a run of
// the whole package (no -run, -skip or -short), every status the document
// lists for an operation must have been answered by that operation in
// some test (apitest records every response its Validator checks), or be
// in unprovoked. The reverse, that every status answered is documented,
// is the Validator's own check.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && wholeRun() {
		missing, err := apitest.Unobserved(unprovoked)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
		if len(missing) > 0 {
			fmt.Fprintln(os.Stderr, "FAIL: openapi.json documents these (operation, status) pairs, which no test answered:")
			fmt.Fprintln(os.Stderr, "provoke each in TestEveryRouteStatus, or drop it from the route table (httpapi.go) and the document, or add it to unprovoked with the reason")
			for _, k := range missing {
				fmt.Fprintln(os.Stderr, "\t"+k)
			}
			code = 1
		}
	}
	os.Exit(code)
}

// wholeRun reports whether every test of the package ran.
func wholeRun() bool {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return !testing.Short()
}

// bodyRoutes are the routes that read a JSON body, each with a valid one.
var bodyRoutes = map[string]string{
	"POST /v1/groups":                       `{"name":"x","from":"earliest"}`,
	"POST /v1/groups/{name}/reset":          `{"to":"earliest"}`,
	"POST /v1/groups/{name}/fetch":          `{"member":"m1","max":1}`,
	"POST /v1/groups/{name}/commit":         `{"member":"m1","offset":1}`,
	"POST /v1/groups/{name}/heartbeat":      `{"member":"m1"}`,
	"POST /v1/groups/{name}/release":        `{"member":"m1"}`,
	"POST /v1/groups/{name}/ack":            `{"ack_ids":["1.0.1"]}`,
	"POST /v1/groups/{name}/nak":            `{"ack_ids":["1.0.1"]}`,
	"POST /v1/groups/{name}/term":           `{"ack_ids":["1.0.1"]}`,
	"POST /v1/groups/{name}/progress":       `{"ack_ids":["1.0.1"]}`,
	"POST /v1/groups/{name}/parked/requeue": `{"all":true}`,
	"POST /v1/groups/{name}/parked/drop":    `{"all":true}`,
	"POST /v1/backfills":                    `{"tables":["public.t"]}`,
	"PATCH /v1/backfills/{id}":              `{"max_rate":1}`,
}

// path fills a route's pattern with a group name and a backfill id.
func path(pattern, name, id string) string {
	return strings.ReplaceAll(strings.ReplaceAll(pattern, "{name}", name), "{id}", id)
}

// expect sends a request and wants status.
func (e *env) expect(status int, method, path, body string, hdr ...string) []byte {
	e.t.Helper()
	resp, b, _ := e.do(method, path, body, hdr...)
	if resp.StatusCode != status {
		e.t.Errorf("%s %s %s: %d, want %d: %s", method, path, body, resp.StatusCode, status, b)
	}
	return b
}

// TestEveryRouteStatus provokes each status the route table lists for
// each route that a request can provoke without PostgreSQL or a failing
// disk (TestMain then finds every documented pair answered): the
// middleware's (401, 403 and 421 of a browser's cross-site request, 413,
// 415 and 400 of a body, 503 of an overflow connection) on every route,
// and each handler's own.
func TestEveryRouteStatus(t *testing.T) {
	routes := httpapi.Routes(true)

	t.Run("unauthorized", func(t *testing.T) {
		e := start(t, "s3cret")
		for _, rt := range routes {
			if slices.Contains(rt.Statuses, http.StatusUnauthorized) {
				e.expect(http.StatusUnauthorized, rt.Method, path(rt.Pattern, "g", "bf1"), bodyRoutes[rt.Method+" "+rt.Pattern])
			}
		}
	})

	// A web page's requests without a token (origin.go): a cross-site
	// Origin (403), a rebinding Host name (421), a body labelled as what
	// a page can send without a preflight (415).
	t.Run("cross-site", func(t *testing.T) {
		e := start(t, "")
		for _, rt := range routes {
			p, b := path(rt.Pattern, "g", "bf1"), bodyRoutes[rt.Method+" "+rt.Pattern]
			if slices.Contains(rt.Statuses, http.StatusForbidden) {
				e.expect(http.StatusForbidden, rt.Method, p, b, "Origin", "http://evil.example")
			}
			if slices.Contains(rt.Statuses, http.StatusMisdirectedRequest) {
				e.expect(http.StatusMisdirectedRequest, rt.Method, p, b, "Host", "attacker.example:5480")
			}
			if slices.Contains(rt.Statuses, http.StatusUnsupportedMediaType) {
				e.expect(http.StatusUnsupportedMediaType, rt.Method, p, b, "Content-Type", "text/plain")
			}
		}
	})

	t.Run("body", func(t *testing.T) {
		e := start(t, "")
		big := `{"name":"` + strings.Repeat("x", httpapi.MaxRequestBytes) + `"}`
		for _, rt := range routes {
			if _, ok := bodyRoutes[rt.Method+" "+rt.Pattern]; !ok {
				continue
			}
			e.expect(http.StatusBadRequest, rt.Method, path(rt.Pattern, "g", "bf1"), `{`)
			e.expect(http.StatusRequestEntityTooLarge, rt.Method, path(rt.Pattern, "g", "bf1"), big)
		}
	})

	t.Run("overflow connection", func(t *testing.T) {
		e := startLimited(t, "", httpapi.Limits{MaxConns: 1, ProbeConns: 1})
		// hold takes the one ordinary slot: its answered request proves
		// it was accepted, and it stays open (idle) for the test.
		hold := e.dial()
		fmt.Fprintf(hold, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(hold), nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("hold: %v %v", resp, err)
		}
		for _, rt := range routes {
			if rt.Pattern == "/readyz" || !slices.Contains(rt.Statuses, http.StatusServiceUnavailable) {
				continue // readyz is answered there; its 503 is below
			}
			c := e.dial()
			b := bodyRoutes[rt.Method+" "+rt.Pattern]
			fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", rt.Method, path(rt.Pattern, "g", "bf1"), len(b), b)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("%s %s on an overflow connection: %v %v", rt.Method, rt.Pattern, resp, err)
			}
			_ = c.Close()
		}
	})

	t.Run("handlers", func(t *testing.T) {
		e := start(t, "")
		e.add(1, 2, 3, 4)
		e.ready = "not connected to PostgreSQL"
		e.expect(http.StatusServiceUnavailable, "GET", "/readyz", "")
		e.unencodable.Store(true)
		e.expect(http.StatusInternalServerError, "GET", "/v1/status", "")
		e.expect(http.StatusInternalServerError, "GET", "/v1/status/history", "")
		e.unencodable.Store(false)

		// Names: invalid ("a b") and unknown, on every group route.
		for _, rt := range routes {
			if !strings.Contains(rt.Pattern, "{name}") {
				continue
			}
			b := bodyRoutes[rt.Method+" "+rt.Pattern]
			e.expect(http.StatusBadRequest, rt.Method, path(rt.Pattern, "a%20b", ""), b)
			e.expect(http.StatusNotFound, rt.Method, path(rt.Pattern, "nope", ""), b)
		}
		for _, m := range []string{"GET", "PATCH", "DELETE"} {
			e.expect(http.StatusNotFound, m, "/v1/backfills/bf9", bodyRoutes[m+" /v1/backfills/{id}"])
		}

		// Exclusive: exists, out of range, another member's lease.
		e.expect(http.StatusCreated, "POST", "/v1/groups", `{"name":"g","from":"earliest"}`)
		e.expect(http.StatusConflict, "POST", "/v1/groups", `{"name":"g"}`)
		e.expect(http.StatusRequestedRangeNotSatisfiable, "POST", "/v1/groups", `{"name":"h","from":"offset:99"}`)
		e.expect(http.StatusRequestedRangeNotSatisfiable, "POST", "/v1/groups/g/reset", `{"to":"offset:99"}`)
		e.expect(http.StatusOK, "POST", "/v1/groups/g/fetch", `{"member":"m1","max":1}`)
		e.expect(http.StatusConflict, "POST", "/v1/groups/g/fetch", `{"member":"m2","fail_fast":true}`)
		e.expect(http.StatusConflict, "POST", "/v1/groups/g/commit", `{"member":"m2","offset":1}`)
		e.expect(http.StatusConflict, "POST", "/v1/groups/g/heartbeat", `{"member":"m2"}`)
		// Exclusive groups have no parked messages.
		e.expect(http.StatusBadRequest, "GET", "/v1/groups/g/parked", "")

		// Shared: settling a parked message is a conflict; nak and
		// progress of a delivered one succeed.
		e.expect(http.StatusCreated, "POST", "/v1/groups", `{"name":"s","mode":"shared","from":"earliest"}`)
		ids := ackIDs(t, e.expect(http.StatusOK, "POST", "/v1/groups/s/fetch", `{"member":"w","max":3}`))
		if len(ids) != 3 {
			t.Fatalf("shared fetch: %d messages, want 3", len(ids))
		}
		e.expect(http.StatusOK, "POST", "/v1/groups/s/progress", fmt.Sprintf(`{"ack_ids":[%q]}`, ids[1]))
		e.expect(http.StatusOK, "POST", "/v1/groups/s/nak", fmt.Sprintf(`{"ack_ids":[%q]}`, ids[1]))
		e.expect(http.StatusOK, "POST", "/v1/groups/s/term", fmt.Sprintf(`{"ack_ids":[%q]}`, ids[0]))
		for _, op := range []string{"ack", "nak", "term", "progress"} {
			e.expect(http.StatusConflict, "POST", "/v1/groups/s/"+op, fmt.Sprintf(`{"ack_ids":[%q]}`, ids[0]))
		}

		// Retention removes offsets 1 and 2: the exclusive group's cursor
		// (0) and the parked message (offset 1) are gone.
		if err := e.j.TruncateFront(3); err != nil {
			t.Fatal(err)
		}
		e.expect(http.StatusOK, "POST", "/v1/groups/g/release", `{"member":"m1"}`)
		e.expect(http.StatusRequestedRangeNotSatisfiable, "POST", "/v1/groups/g/fetch", `{"member":"m1","max":1}`)
		e.expect(http.StatusRequestedRangeNotSatisfiable, "POST", "/v1/groups/s/parked/requeue", `{"all":true}`)
	})
}

// ackIDs returns the ack ids of a shared fetch's answer.
func ackIDs(t *testing.T, b []byte) []string {
	t.Helper()
	var r struct {
		Messages []struct {
			AckID string `json:"ack_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("shared fetch: %v: %s", err, b)
	}
	var out []string
	for _, m := range r.Messages {
		out = append(out, m.AckID)
	}
	return out
}
