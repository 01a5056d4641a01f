package httpapi_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/httpapi"
)

// TestErrorsCarryTheirOwnMessage: the code comes from the table in api,
// the message says what happened (not the code's generic wording).
func TestErrorsCarryTheirOwnMessage(t *testing.T) {
	e := start(t, "")
	e.add(1)
	for _, tc := range []struct {
		method, path, body string
		status             int
		code, message      string
	}{
		{"GET", "/v1/backfills/bf9", "", 404, api.CodeNotFound, `backfill "bf9" not found`},
		{"DELETE", "/v1/backfills/bf9", "", 404, api.CodeNotFound, `backfill "bf9" not found`},
		{"PATCH", "/v1/backfills/bf9", `{"max_rate":5}`, 404, api.CodeNotFound, `backfill "bf9" not found`},
		{"PATCH", "/v1/backfills/bf9", `{}`, 400, api.CodeBadRequest, `invalid JSON body: missing required key "max_rate"`},
		{"POST", "/v1/backfills", `{"tables":[]}`, 400, api.CodeBadRequest, `backfill: at least one table is required`},
		{"GET", "/v1/nope", "", 404, api.CodeNotFound, `no route GET /v1/nope`},
		{"GET", "/v1/groups/nope", "", 404, api.CodeNotFound, `group "nope" not found`},
		{"POST", "/v1/groups/nope/ack", `{"ack_ids":["1.0.1"]}`, 404, api.CodeNotFound, `group "nope" not found`},
		{"POST", "/v1/groups", `{"name":"bad name"}`, 400, api.CodeInvalidName, `invalid group name "bad name": want 1 to 128 of A-Z a-z 0-9 _ . -`},
		{"POST", "/v1/groups", `{"name":"g","from":"nowhere"}`, 400, api.CodeBadPosition, `position "nowhere": want earliest, latest, offset:N, lsn:X/Y or time:RFC3339`},
		{"PUT", "/v1/groups/g", "", 405, api.CodeMethod, `PUT /v1/groups/g: allowed: DELETE, GET, HEAD`},
	} {
		resp, _, apiErr := e.do(tc.method, tc.path, tc.body)
		if resp.StatusCode != tc.status || apiErr.Code != tc.code || apiErr.Message != tc.message {
			t.Errorf("%s %s: %d %q %q\nwant %d %q %q", tc.method, tc.path, resp.StatusCode, apiErr.Code, apiErr.Message, tc.status, tc.code, tc.message)
		}
	}

	// Two errors that used to read as their code's wording: an existing
	// group, and acking a parked message of a shared group (a conflict,
	// not "leased by another member").
	if resp, _, _ := e.do("POST", "/v1/groups", `{"name":"s","mode":"shared","from":"earliest"}`); resp.StatusCode != 201 {
		t.Fatalf("create shared: %d", resp.StatusCode)
	}
	if _, _, apiErr := e.do("POST", "/v1/groups", `{"name":"s","mode":"shared"}`); apiErr.Code != api.CodeExists || apiErr.Message != `group "s" already exists` {
		t.Errorf("create twice: %+v", apiErr)
	}
	_, b, _ := e.do("POST", "/v1/groups/s/fetch", `{"member":"m1","max":1}`)
	i := bytes.Index(b, []byte(`"ack_id":"`))
	if i < 0 {
		t.Fatalf("fetch: no message: %s", b)
	}
	ackID := string(b[i+10 : i+10+bytes.IndexByte(b[i+10:], '"')])
	if resp, b, _ := e.do("POST", "/v1/groups/s/term", fmt.Sprintf(`{"ack_ids":[%q]}`, ackID)); resp.StatusCode != 200 {
		t.Fatalf("term: %d %s", resp.StatusCode, b)
	}
	resp, _, apiErr := e.do("POST", "/v1/groups/s/ack", fmt.Sprintf(`{"ack_ids":[%q]}`, ackID))
	if resp.StatusCode != 409 || apiErr.Code != api.CodeConflict || !strings.HasSuffix(apiErr.Message, "the message is parked") || strings.Contains(apiErr.Message, "leased") {
		t.Errorf("ack of a parked message: %d %+v", resp.StatusCode, apiErr)
	}
}

// TestBearerToken: with a token every route but /healthz wants it, with
// the Bearer scheme in any case.
func TestBearerToken(t *testing.T) {
	e := start(t, "s3cret")
	if resp, _, _ := e.do("GET", "/healthz", ""); resp.StatusCode != 200 {
		t.Errorf("/healthz without a token: %d", resp.StatusCode)
	}
	for _, path := range []string{"/readyz", "/v1/groups", "/v1/status", "/v1/backfills", "/v1/openapi.json"} {
		resp, _, apiErr := e.do("GET", path, "")
		if resp.StatusCode != 401 || apiErr.Code != api.CodeUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("GET %s without a token: %d %+v", path, resp.StatusCode, apiErr)
		}
		if resp, _, _ := e.do("GET", path, "", "Authorization", "Bearer wrong"); resp.StatusCode != 401 {
			t.Errorf("GET %s with a wrong token: %d", path, resp.StatusCode)
		}
	}
	// The scheme's name is case-insensitive (RFC 7235 section 2.1).
	for _, h := range []string{"Bearer s3cret", "bearer s3cret", "BEARER s3cret", "bEaReR  s3cret"} {
		if resp, b, _ := e.do("GET", "/v1/groups", "", "Authorization", h); resp.StatusCode != 200 {
			t.Errorf("GET /v1/groups with %q: %d %s", h, resp.StatusCode, b)
		}
	}
	for _, h := range []string{"Basic s3cret", "Bearers3cret", "s3cret", "Bearer", "Bearer S3CRET"} {
		if resp, _, _ := e.do("GET", "/v1/groups", "", "Authorization", h); resp.StatusCode != 401 {
			t.Errorf("GET /v1/groups with %q: %d, want 401", h, resp.StatusCode)
		}
	}
}

// TestOpenAPIServed: /v1/openapi.json is the document kept in the repo.
func TestOpenAPIServed(t *testing.T) {
	e := start(t, "")
	resp, b, _ := e.do("GET", "/v1/openapi.json", "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(b, httpapi.OpenAPI) {
		t.Fatalf("GET /v1/openapi.json: %d %s, %d bytes (want the %d of openapi.json)", resp.StatusCode, resp.Header.Get("Content-Type"), len(b), len(httpapi.OpenAPI))
	}
}

// TestEveryRouteIsServed walks the route table: every route is mounted on
// a fully configured API (never the mux's "no route"), and answers a
// plausible request with one of the statuses it documents (the validator
// checks the body against openapi.json).
func TestEveryRouteIsServed(t *testing.T) {
	e := start(t, "")
	e.add(1, 2, 3)
	bodies := bodyRoutes
	for _, name := range []string{"g", "s"} {
		mode := map[string]string{"g": "exclusive", "s": "shared"}[name]
		if resp, b, _ := e.do("POST", "/v1/groups", fmt.Sprintf(`{"name":%q,"mode":%q,"from":"earliest"}`, name, mode)); resp.StatusCode != 201 {
			t.Fatalf("create %s: %d %s", name, resp.StatusCode, b)
		}
	}
	routes := httpapi.Routes(false)
	// DELETE last, so that the group is there for the others.
	for _, pass := range []bool{false, true} {
		for _, rt := range routes {
			if (rt.Method == "DELETE") != pass {
				continue
			}
			for _, group := range []string{"g", "s"} {
				path := strings.ReplaceAll(strings.ReplaceAll(rt.Pattern, "{name}", group), "{id}", "bf1")
				resp, b, apiErr := e.do(rt.Method, path, bodies[rt.Method+" "+rt.Pattern])
				if strings.HasPrefix(apiErr.Message, "no route ") {
					t.Errorf("%s %s is in the route table but not served", rt.Method, rt.Pattern)
				}
				ok := false
				for _, s := range rt.Statuses {
					ok = ok || s == resp.StatusCode
				}
				if !ok {
					t.Errorf("%s %s: status %d is not among the route's %v: %s", rt.Method, path, resp.StatusCode, rt.Statuses, b)
				}
				if !strings.Contains(rt.Pattern, "{name}") {
					break // one call is enough
				}
			}
		}
	}
}

// TestProbeHandler: the probe listener's handler answers /healthz,
// /readyz and /metrics without the API's token, and nothing else.
func TestProbeHandler(t *testing.T) {
	e := start(t, "s3cret")
	srv := httptest.NewServer(e.api.ProbeHandler())
	defer srv.Close()
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200, "/v1/groups": 404, "/v1/status": 404, "/v1/openapi.json": 404} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("probe listener GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	e.ready = "not connected to PostgreSQL"
	if resp, err := http.Get(srv.URL + "/readyz"); err != nil || resp.StatusCode != 503 {
		t.Errorf("probe listener /readyz while not ready: %v %v", resp, err)
	}
}
