package apitest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTB records Errorf instead of failing the test; everything else is
// the real t's.
type fakeTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) reported() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.errs...)
}

const groupInfo = `{"name":"orders","from":"earliest","tables":[],"ops":[],"committed_offset":0,"delivered_offset":0,` +
	`"created":"2025-01-01T00:00:00Z","updated":"2025-01-01T00:00:00.5Z",` +
	`"lag":{"records":42,"bytes":8123,"seconds":12.5,"out_of_range":false},"mode":"exclusive"}`

// canned answers: one per case, chosen by the X-Case request header.
var canned = map[string]struct {
	status int
	ct     string
	header map[string]string
	body   string
}{
	"info":             {200, "application/json", nil, groupInfo},
	"info-no-lag":      {200, "application/json", nil, strings.Replace(groupInfo, `,"lag":{"records":42,"bytes":8123,"seconds":12.5,"out_of_range":false}`, "", 1)},
	"info-string-off":  {200, "application/json", nil, strings.Replace(groupInfo, `"committed_offset":0`, `"committed_offset":"0"`, 1)},
	"info-extra-field": {200, "application/json", nil, strings.Replace(groupInfo, `"mode":"exclusive"`, `"mode":"exclusive","surprise":1`, 1)},
	"info-bad-time":    {200, "application/json", nil, strings.Replace(groupInfo, `"2025-01-01T00:00:00Z"`, `"2025-01-01 00:00:00"`, 1)},
	"info-msgpack":     {200, "application/msgpack", nil, "\x81\xa4name\xa6orders"},
	"info-teapot":      {418, "application/json", nil, `{"error":{"code":"internal","message":"teapot"}}`},
	"not-found":        {404, "application/json", nil, `{"error":{"code":"not_found","message":"group \"x\" not found"}}`},
	"not-found-bad":    {404, "application/json", nil, `{"error":"not found"}`},
	"bad-code":         {404, "application/json", nil, `{"error":{"code":"missing","message":"x"}}`},
	"text-error":       {404, "text/plain; charset=utf-8", nil, "404 page not found\n"},
	"no-route":         {404, "application/json", nil, `{"error":{"code":"not_found","message":"no route GET /v1/nope"}}`},
	"no-route-200":     {200, "application/json", nil, `{}`},
	"method":           {405, "application/json", map[string]string{"Allow": "GET, DELETE"}, `{"error":{"code":"method_not_allowed","message":"PUT /v1/groups/x: allowed: GET, DELETE"}}`},
	"method-no-allow":  {405, "application/json", nil, `{"error":{"code":"method_not_allowed","message":"x"}}`},
	"healthz":          {200, "text/plain", nil, "ok\n"},
	"healthz-500":      {500, "text/plain", nil, "boom\n"},
	"unauthorized":     {401, "application/json", map[string]string{"WWW-Authenticate": `Bearer realm="pgq"`}, `{"error":{"code":"unauthorized","message":"missing or wrong bearer token"}}`},
	"fetch-exclusive": {200, "application/json", nil, `{"transactions":[{"offset":101,"xid":750,"commit_lsn":"0/1A2B3C8","end_lsn":"0/1A2B3F0",` +
		`"commit_time":"2025-01-01T00:00:01.5Z","part":0,"final":true,"changes":[{"op":"insert","ordinal":0,"schema":"public","table":"orders",` +
		`"new":{"id":1,"total":"9.90"},"old":null}]}],"next_offset":102,"committed_offset":100,"last_offset":180,` +
		`"lease_expires":"2025-01-01T00:00:31Z","generation":7}`},
	"fetch-shared": {200, "application/json", nil, `{"messages":[{"offset":101,"xid":750,"commit_lsn":"0/1A2B3C8",` +
		`"commit_time":"2025-01-01T00:00:01.5Z","index":0,"change":{"op":"truncate","ordinal":0,"tables":["public.orders"],"cascade":false,` +
		`"restart_identity":false},"delivery":1,"ack_id":"101.0.1.k3x9q2a"}]}`},
	"fetch-mixed":   {200, "application/json", nil, `{"messages":[],"next_offset":1}`},
	"fetch-bad-lsn": {200, "application/json", nil, `{"messages":[{"offset":1,"xid":1,"commit_lsn":"0/1a","commit_time":"2025-01-01T00:00:00Z","index":0,"change":{"op":"gap","ordinal":0,"from_lsn":"0/1","to_lsn":"0/2"},"delivery":1,"ack_id":"a"}]}`},
	"fetch-records": {200, "application/vnd.pgq.records+msgpack", nil, "\x80"},
	"fetch-xml":     {200, "application/xml", nil, "<x/>"},
	"too-large":     {413, "application/json", nil, `{"error":{"code":"too_large","message":"request body over 1048576 bytes"}}`},
	"backfills":     {200, "application/json", nil, `[]`},
	"backfills-obj": {200, "application/json", nil, `{"backfills":[]}`},
}

// server serves the canned answers through Validator(tb).
func server(t *testing.T, tb testing.TB) *httptest.Server {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c, ok := canned[r.Header.Get("X-Case")]
		if !ok {
			t.Errorf("no case %q", r.Header.Get("X-Case"))
			return
		}
		for k, v := range c.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", c.ct)
		w.WriteHeader(c.status)
		_, _ = io.WriteString(w, c.body[:len(c.body)/2])
		// Streaming goes on through the recorder, and a
		// ResponseController reaches the connection through Unwrap.
		rc := http.NewResponseController(w)
		if err := rc.Flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline through the recorder: %v", err)
		}
		_, _ = io.WriteString(w, c.body[len(c.body)/2:])
	})
	srv := httptest.NewServer(Validator(tb)(h))
	t.Cleanup(srv.Close)
	return srv
}

func TestValidator(t *testing.T) {
	for _, tc := range []struct {
		method, path, cse string
		fails             string // "" when the response is valid; else a substring of the report
	}{
		{"GET", "/v1/groups/orders", "info", ""},
		{"GET", "/v1/groups/orders", "info-no-lag", "lag"},
		{"GET", "/v1/groups/orders", "info-string-off", "committed_offset"},
		{"GET", "/v1/groups/orders", "info-extra-field", "surprise"},
		{"GET", "/v1/groups/orders", "info-bad-time", "created"},
		{"GET", "/v1/groups/orders", "info-msgpack", ""}, // msgpack is not decoded
		{"GET", "/v1/groups/orders", "info-teapot", "418"},
		{"GET", "/v1/groups/orders", "not-found", ""},
		{"GET", "/v1/groups/orders", "not-found-bad", "error"},
		{"GET", "/v1/groups/orders", "bad-code", "code"},
		{"GET", "/v1/groups/orders", "text-error", "text/plain"},
		{"GET", "/v1/groups/orders", "unauthorized", ""},
		{"GET", "/v1/groups/bad%20name", "info", ""}, // an invalid name still finds its path
		{"GET", "/v1/nope", "no-route", ""},
		{"GET", "/v1/nope", "no-route-200", "404"},
		{"GET", "/v1/nope", "not-found-bad", "error envelope"},
		{"PUT", "/v1/groups/x", "method", ""},
		{"PUT", "/v1/groups/x", "method-no-allow", "Allow"},
		{"PUT", "/v1/groups/x", "info", "405"},
		{"GET", "/healthz", "healthz", ""},
		{"GET", "/healthz", "healthz-500", "500"},
		{"GET", "/healthz", "unauthorized", "401"}, // healthz never needs a token
		{"POST", "/v1/groups/orders/fetch", "fetch-exclusive", ""},
		{"POST", "/v1/groups/orders/fetch", "fetch-shared", ""},
		{"POST", "/v1/groups/orders/fetch", "fetch-mixed", "fetch"},
		{"POST", "/v1/groups/orders/fetch", "fetch-bad-lsn", "commit_lsn"},
		{"POST", "/v1/groups/orders/fetch", "fetch-records", ""},
		{"POST", "/v1/groups/orders/fetch", "fetch-xml", "application/xml"},
		{"POST", "/v1/groups/orders/fetch", "too-large", ""},
		{"GET", "/v1/groups/orders", "too-large", "413"}, // no body, no 413
		{"GET", "/v1/backfills", "backfills", ""},
		{"GET", "/v1/backfills", "backfills-obj", "backfills"},
	} {
		t.Run(tc.method+" "+tc.path+" "+tc.cse, func(t *testing.T) {
			tb := &fakeTB{TB: t}
			srv := server(t, tb)
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(`{"member":"w1"}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Case", tc.cse)
			req.Header.Set("Content-Type", "application/json")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := canned[tc.cse].body; string(got) != want {
				t.Errorf("the client got %q, want %q: the recorder must pass the body through", got, want)
			}
			srv.Close() // the handler has returned: its check is done
			errs := tb.reported()
			switch {
			case tc.fails == "" && len(errs) > 0:
				t.Errorf("a valid response was reported:\n%s", strings.Join(errs, "\n"))
			case tc.fails != "" && len(errs) == 0:
				t.Errorf("an invalid response (want a report naming %q) was not reported", tc.fails)
			case tc.fails != "" && !strings.Contains(strings.Join(errs, "\n"), tc.fails):
				t.Errorf("the report does not name %q:\n%s", tc.fails, strings.Join(errs, "\n"))
			}
			if len(errs) > 0 {
				t.Logf("reported: %s", strings.Join(errs, "\n"))
			}
		})
	}
}

// TestUnobserved: a documented (operation, status) is off the list once a
// checked response had it, a templated path counts for its operation, an
// undocumented status or a HEAD counts for nothing, and an allowlisted
// pair that the document lacks is reported.
func TestUnobserved(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/groups/orders":
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"group \"orders\" not found"}}`)
		default:
			w.WriteHeader(http.StatusTeapot)
			_, _ = io.WriteString(w, `{"error":{"code":"internal","message":"teapot"}}`)
		}
	})
	srv := httptest.NewServer(Validator(&fakeTB{TB: t})(h))
	defer srv.Close()
	for _, req := range []struct{ method, path string }{
		{"GET", "/v1/groups/orders"},        // documented 404
		{"DELETE", "/v1/groups/x"},          // 418: not documented, not recorded
		{"HEAD", "/v1/groups/orders/fetch"}, // HEAD: not checked
	} {
		rq, _ := http.NewRequest(req.method, srv.URL+req.path, nil)
		resp, err := http.DefaultClient.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	missing, err := Unobserved(map[string]string{"GET /v1/groups/{name} 400": "test", "GET /v1/nope 200": "test"})
	if err != nil {
		t.Fatal(err)
	}
	has := func(k string) bool {
		for _, m := range missing {
			if m == k {
				return true
			}
		}
		return false
	}
	for k, want := range map[string]bool{
		"GET /v1/groups/{name} 404":                                 false, // answered
		"GET /v1/groups/{name} 400":                                 false, // allowlisted
		"DELETE /v1/groups/{name} 404":                              true,
		"GET /v1/groups/{name}/parked 404":                          true, // the longer path is its own operation
		"allowlisted but not documented: GET /v1/nope 200":          true,
		"allowlisted but not documented: GET /v1/groups/{name} 400": false,
	} {
		if has(k) != want {
			t.Errorf("Unobserved lists %q: %v, want %v", k, has(k), want)
		}
	}
}
