package httpapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/httpapi"
)

// TestWriteErrorHidesInternalDetail: a 500 names an error id, not the
// internal error text (paths, storage errors); a 4xx keeps its message.
func TestWriteErrorHidesInternalDetail(t *testing.T) {
	rec := httptest.NewRecorder()
	httpapi.WriteError(rec, errors.New("pebble: open /secret/path/index/000123.sst: input/output error"))
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", rec.Code)
	}
	var body struct{ Error api.Error }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Error.Code != api.CodeInternal || strings.Contains(body.Error.Message, "/secret/path") || !strings.Contains(body.Error.Message, "error_id=") {
		t.Fatalf("500 body leaks or lacks the error id: %+v", body.Error)
	}

	rec = httptest.NewRecorder()
	httpapi.WriteError(rec, api.Errorf(api.ErrNotFound, "group %q not found", "g1"))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"message":"group \"g1\" not found"`) {
		t.Fatalf("404 lost its message: %d %s", rec.Code, rec.Body.String())
	}
}

// TestHTTPErrorsAlwaysJSON: unknown routes are 404 not_found, a known route
// with another method 405 method_not_allowed with Allow, both JSON; a body
// not labelled application/json (curl -d labels it a form) is 415
// unsupported_media_type and changes nothing.
func TestHTTPErrorsAlwaysJSON(t *testing.T) {
	e := start(t, "")
	do := func(method, path, ct, body string) (*http.Response, api.Error) {
		t.Helper()
		req, err := http.NewRequest(method, e.Base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b struct{ Error api.Error }
		_ = json.NewDecoder(resp.Body).Decode(&b)
		return resp, b.Error
	}
	for _, tc := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/v1/nope", 404, api.CodeNotFound, ""},
		{"GET", "/nope", 404, api.CodeNotFound, ""},
		{"PUT", "/v1/groups/x", 405, api.CodeMethod, "DELETE, GET, HEAD"},
		{"GET", "/v1/groups/x/fetch", 405, api.CodeMethod, "POST"},
	} {
		resp, apiErr := do(tc.method, tc.path, "", "")
		if resp.StatusCode != tc.status || apiErr.Code != tc.code || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %q %q, want %d %q JSON", tc.method, tc.path, resp.StatusCode, apiErr.Code, resp.Header.Get("Content-Type"), tc.status, tc.code)
		}
		if tc.allow != "" && resp.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, resp.Header.Get("Allow"), tc.allow)
		}
	}
	// A body is read only when labelled application/json: a web page can
	// send text/plain, a form or multipart cross-site without a preflight.
	for i, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		resp, apiErr := do("POST", "/v1/groups", ct, fmt.Sprintf(`{"name":"g%d","from":"earliest"}`, i))
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("create with Content-Type %q: %d %+v", ct, resp.StatusCode, apiErr)
		}
	}
	for i, ct := range []string{"", "application/x-www-form-urlencoded", "text/plain", "text/plain; charset=utf-8", "multipart/form-data; boundary=x", "application/msgpack", "application/jsonx"} {
		name := fmt.Sprintf("bad%d", i)
		resp, apiErr := do("POST", "/v1/groups", ct, fmt.Sprintf(`{"name":%q,"from":"earliest"}`, name))
		if resp.StatusCode != http.StatusUnsupportedMediaType || apiErr.Code != api.CodeMediaType {
			t.Errorf("create with Content-Type %q: %d %+v, want 415 %s", ct, resp.StatusCode, apiErr, api.CodeMediaType)
		}
		if resp, _ := do("GET", "/v1/groups/"+name, "", ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("a create refused for its Content-Type %q made the group: %d", ct, resp.StatusCode)
		}
	}
}
