package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/console"
)

// historyDoc is a GET /v1/status/history document as the server builds it
// (server/console.go), with two samples.
func historyDoc() console.StatusHistory {
	h, err := console.NewHistory(console.HistoryOptions{})
	if err != nil {
		panic(err) // default options are valid
	}
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	h.Add(console.Sample{Time: t0, Connected: true, SlotLagBytes: 1024, JournalBytes: 1 << 20, ChangesWritten: 10})
	h.Add(console.Sample{Time: t0.Add(h.Interval()), Connected: false, JournalBytes: 2 << 20, ChangesWritten: 30})
	return console.StatusHistory{Interval: h.Interval().String(), Window: h.Window().String(),
		Retention: console.HistoryRetention{MinAge: "0s", MaxAge: "24h0m0s", MaxBytes: 1 << 30},
		Samples:   h.Snapshot()}
}

// TestStatusHistory: GET /v1/status/history answers the samples (the
// validator checks the document against openapi.json) and needs the token.
func TestStatusHistory(t *testing.T) {
	e := start(t, "s3cret")
	resp, err := http.Get(e.Base + "/v1/status/history")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/status/history without the token: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", e.Base+"/v1/status/history", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Interval string           `json:"interval"`
		Samples  []console.Sample `json:"samples"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/status/history: %d, %v", resp.StatusCode, err)
	}
	if doc.Interval != "5s" || len(doc.Samples) != 2 || doc.Samples[0].SlotLagBytes != 1024 || doc.Samples[1].Connected {
		t.Fatalf("history = %+v", doc)
	}
}

// TestConsoleWithoutToken: the console's static files are served without
// the token (GET only), everything else under /v1 still needs it, and the
// page loads nothing from elsewhere (its Content-Security-Policy).
func TestConsoleWithoutToken(t *testing.T) {
	// The API without the contract's validator: the page is not API.
	srv := httptest.NewServer(start(t, "s3cret").api)
	defer srv.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		method, path string
		status       int
		contentType  string
		body         string
	}{
		{"GET", "/ui", http.StatusMovedPermanently, "", ""},
		{"GET", "/ui/", 200, "text/html", `<script src="console.js"`},
		{"GET", "/ui/console.js", 200, "text/javascript", "sessionStorage"},
		{"GET", "/ui/console.css", 200, "text/css", ".chart"},
		{"GET", "/ui/missing.js", 404, "application/json", "not_found"},
		{"POST", "/ui/", 401, "application/json", "unauthorized"},
		{"GET", "/uix", 401, "application/json", "unauthorized"},
		{"GET", "/v1/groups", 401, "application/json", "unauthorized"},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.contentType) || !strings.Contains(string(b), c.body) {
			t.Errorf("%s %s: %d %q %.80q, want %d %s containing %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), b, c.status, c.contentType, c.body)
		}
		if c.status == 200 && !strings.HasPrefix(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", c.path, resp.Header.Get("Content-Security-Policy"))
		}
	}
}
