package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/httpapi"
)

// TestCrossSiteRequestsRefused replays what a web page could do to a pgq
// on loopback without a token: "simple" cross-site POSTs (text/plain, no
// preflight) that moved a cursor and created a slot-holding group, and a
// DNS-rebinding read of the group list under the attacker's host name.
// Each is refused and changes nothing.
func TestCrossSiteRequestsRefused(t *testing.T) {
	e := start(t, "")
	e.add(1, 2, 3)
	e.expect(http.StatusCreated, "POST", "/v1/groups", `{"name":"victim","from":"earliest"}`)
	e.expect(http.StatusOK, "POST", "/v1/groups/victim/fetch", `{"member":"m","max":3}`)
	e.expect(http.StatusOK, "POST", "/v1/groups/victim/commit", `{"member":"m","offset":3}`)
	e.expect(http.StatusOK, "POST", "/v1/groups/victim/release", `{"member":"m"}`)

	page := []string{"Origin", "http://evil.example", "Content-Type", "text/plain"}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/groups/victim/reset", `{"to":"earliest"}`},
		{"POST", "/v1/groups", `{"name":"evil","from":"earliest","hold_slot":true}`},
		{"POST", "/v1/backfills", `{"tables":["public.t"]}`},
		{"DELETE", "/v1/groups/victim", ""},
	} {
		resp, b, apiErr := e.do(c.method, c.path, c.body, page...)
		if resp.StatusCode != http.StatusForbidden || apiErr.Code != api.CodeForbidden {
			t.Errorf("%s %s from a cross-site page: %d %s, want 403 forbidden", c.method, c.path, resp.StatusCode, b)
		}
	}
	// Labelled application/json (which needs a preflight the page never
	// gets through) it is refused all the same.
	e.expect(http.StatusForbidden, "POST", "/v1/groups/victim/reset", `{"to":"earliest"}`, "Origin", "http://evil.example")
	// A sandboxed frame or a file: page sends Origin: null.
	e.expect(http.StatusForbidden, "POST", "/v1/groups/victim/reset", `{"to":"earliest"}`, "Origin", "null")

	var g struct {
		CommittedOffset int64 `json:"committed_offset"`
	}
	if err := json.Unmarshal(e.expect(http.StatusOK, "GET", "/v1/groups/victim", ""), &g); err != nil || g.CommittedOffset != 3 {
		t.Errorf("victim's cursor after the refused reset: %d (%v), want 3", g.CommittedOffset, err)
	}
	e.expect(http.StatusNotFound, "GET", "/v1/groups/evil", "")

	// DNS rebinding: the page's own name resolves to 127.0.0.1; the
	// browser sends that name as Host, same-origin with the page.
	resp, b, apiErr := e.do("GET", "/v1/groups", "", "Host", "attacker.example:"+port(e.Addr))
	if resp.StatusCode != http.StatusMisdirectedRequest || apiErr.Code != api.CodeMisdirected || strings.Contains(string(b), "victim") {
		t.Errorf("GET /v1/groups under a rebinding name: %d %s, want 421 misdirected_request and no data", resp.StatusCode, b)
	}
	e.expect(http.StatusMisdirectedRequest, "POST", "/v1/groups/victim/reset", `{"to":"earliest"}`,
		"Host", "attacker.example:"+port(e.Addr), "Origin", "http://attacker.example:"+port(e.Addr))
}

// TestSameOriginAndProbes: what must keep working without a token. The
// console is same-origin (its Origin names the Host it was loaded from,
// also through a proxy or kubectl port-forward); IP literals and
// localhost are pgq's names; the probes answer any Host and Origin, as
// kubelets and scrapers use pod IPs and Service names.
func TestSameOriginAndProbes(t *testing.T) {
	e := start(t, "")
	p := port(e.Addr)
	for _, h := range [][]string{
		{"Origin", "http://" + e.Addr},
		{"Host", "localhost:" + p, "Origin", "http://localhost:" + p},
		{"Host", "LOCALHOST:" + p, "Origin", "http://localhost:" + p},
		{"Host", "localhost:8080", "Origin", "http://localhost:8080"}, // port-forward
		{"Host", "[::1]:" + p, "Origin", "http://[::1]:" + p},
		{"Host", "10.0.0.7", "Origin", "http://10.0.0.7:80"},
	} {
		e.expect(http.StatusOK, "GET", "/v1/groups", "", h...)
	}
	e.expect(http.StatusCreated, "POST", "/v1/groups", `{"name":"c"}`, "Origin", "http://"+e.Addr)
	// Same host, another port is another origin.
	e.expect(http.StatusForbidden, "GET", "/v1/groups", "", "Origin", "http://127.0.0.1:1")
	for _, probe := range []string{"/healthz", "/readyz", "/metrics"} {
		e.expect(http.StatusOK, "GET", probe, "", "Host", "pgq.pgq.svc.cluster.local:5480", "Origin", "http://evil.example")
	}
	e.expect(http.StatusMisdirectedRequest, "GET", "/v1/status", "", "Host", "pgq.pgq.svc.cluster.local:5480")
}

// TestAllowedHostsAndOrigins: the flags' lists. A listed origin gets the
// CORS headers a browser needs, its preflight included; a listed host
// name (or a subdomain of a "*." entry) is served.
func TestAllowedHostsAndOrigins(t *testing.T) {
	e := startWith(t, "", httpapi.Limits{}, func(o *httpapi.Options) {
		o.AllowedHosts = []string{"pgq.pgq.svc", "*.corp.example"}
		o.AllowedOrigins = []string{"https://console.corp.example"}
	})
	e.expect(http.StatusOK, "GET", "/v1/groups", "", "Host", "pgq.pgq.svc:5480")
	e.expect(http.StatusOK, "GET", "/v1/groups", "", "Host", "pgq.eu.corp.example")
	e.expect(http.StatusMisdirectedRequest, "GET", "/v1/groups", "", "Host", "corp.example")
	e.expect(http.StatusMisdirectedRequest, "GET", "/v1/groups", "", "Host", "evilcorp.example")

	resp, _, _ := e.do("POST", "/v1/groups", `{"name":"x"}`, "Origin", "https://console.corp.example")
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Access-Control-Allow-Origin") != "https://console.corp.example" {
		t.Errorf("allowed origin: %d, Access-Control-Allow-Origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	e.expect(http.StatusForbidden, "POST", "/v1/groups", `{"name":"y"}`, "Origin", "https://other.corp.example")

	pre := func(origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, e.Base+"/v1/groups", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type, authorization")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := pre("https://console.corp.example"); r.StatusCode != http.StatusNoContent ||
		!strings.Contains(r.Header.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(strings.ToLower(r.Header.Get("Access-Control-Allow-Headers")), "content-type") {
		t.Errorf("preflight of an allowed origin: %d %v", r.StatusCode, r.Header)
	}
	if r := pre("https://evil.example"); r.StatusCode != http.StatusForbidden || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin: %d %v", r.StatusCode, r.Header)
	}
}

// TestTokenTurnsHostCheckOff: a bearer token is what a page cannot add,
// so with one any Host name is served (a load balancer's name needs no
// list); a cross-site Origin is still refused unless allowed.
func TestTokenTurnsHostCheckOff(t *testing.T) {
	e := start(t, "s3cret")
	auth := "Bearer s3cret"
	e.expect(http.StatusOK, "GET", "/v1/groups", "", "Authorization", auth, "Host", "pgq.example.net")
	e.expect(http.StatusForbidden, "GET", "/v1/groups", "", "Authorization", auth, "Origin", "http://evil.example")
}

func port(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
