// Package apitest holds pgq's HTTP server to its OpenAPI contract
// (httpapi.OpenAPI, httpapi/openapi.json) in tests.
//
// Validator wraps the real API handler of an integration test. Each
// response passes through to the client unchanged (streamed, flushed,
// http.ResponseController reaching the connection through Unwrap) and is
// recorded; when the handler returns, the response is checked with
// github.com/pb33f/libopenapi-validator against the document:
//
//   - its status must be documented for the operation (path and method);
//   - its Content-Type must be one the document lists for that status;
//   - a JSON body (application/json) must match the schema. msgpack and
//     text bodies are not decoded: for them only the status and the
//     media type are checked;
//   - a path the document does not have must answer 404 not_found, and a
//     documented path with an undocumented method 405 method_not_allowed,
//     both with the error envelope (components/schemas/ErrorBody).
//
// Every failure is reported with t.Errorf, naming the method, the path,
// the status and what the validator found. HEAD requests are not checked,
// nor are responses that end after the test has finished (their t would
// no longer accept errors).
package apitest

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"

	"github.com/pgq-dev/pgq/httpapi"
)

// contract is the document, built once per test binary.
type contract struct {
	mu        sync.Mutex // validators are used by one response at a time
	v         validator.Validator
	errSchema *base.Schema // components/schemas/ErrorBody
	schemas   schema_validation.SchemaValidator
}

var (
	loadOnce sync.Once
	loaded   *contract
	loadErr  error
)

func load() (*contract, error) {
	loadOnce.Do(func() {
		doc, err := libopenapi.NewDocument(httpapi.OpenAPI)
		if err != nil {
			loadErr = fmt.Errorf("apitest: parse httpapi.OpenAPI: %w", err)
			return
		}
		m, err := doc.BuildV3Model()
		if err != nil {
			loadErr = fmt.Errorf("apitest: build httpapi.OpenAPI: %w", err)
			return
		}
		// Formats are asserted: a time must be an RFC 3339 date-time.
		v := validator.NewValidatorFromV3Model(&m.Model, config.WithFormatAssertions())
		c := &contract{v: v, schemas: schema_validation.NewSchemaValidator(config.WithFormatAssertions())}
		if m.Model.Components != nil && m.Model.Components.Schemas != nil {
			if p := m.Model.Components.Schemas.GetOrZero("ErrorBody"); p != nil {
				c.errSchema = p.Schema()
			}
		}
		if c.errSchema == nil {
			loadErr = fmt.Errorf("apitest: httpapi.OpenAPI has no components/schemas/ErrorBody")
			return
		}
		loaded = c
	})
	return loaded, loadErr
}

// Validator returns a middleware that checks every response of the
// handler it wraps against httpapi.OpenAPI (see the package comment) and
// reports each mismatch with t.Errorf. Wrap the whole API handler, as a
// server serves it: Validator(t)(handler).
func Validator(t testing.TB) func(http.Handler) http.Handler {
	t.Helper()
	c, err := load()
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	t.Cleanup(func() { done.Store(true) })
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &recorder{ResponseWriter: w}
			next.ServeHTTP(rec, r)
			if r.Method == http.MethodHead || done.Load() {
				return
			}
			for _, msg := range c.check(r, rec.response()) {
				t.Errorf("openapi: %s %s → %d: %s", r.Method, r.URL.Path, rec.status(), msg)
			}
		})
	}
}

// check returns what is wrong with resp, the answer to req.
func (c *contract) check(req *http.Request, resp *http.Response) []string {
	// The validator reads only the request's method and URL; the body was
	// the handler's.
	rq := req.Clone(req.Context())
	rq.Body = http.NoBody
	body, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(body))

	c.mu.Lock()
	ok, verrs := c.v.ValidateHttpResponse(rq, resp)
	c.mu.Unlock()
	if ok {
		return nil
	}
	var out []string
	for _, e := range verrs {
		switch {
		case e.IsPathMissingError():
			return c.checkMuxError(resp, body, http.StatusNotFound, "not_found", "a path the document does not have")
		case e.IsOperationMissingError():
			return c.checkMuxError(resp, body, http.StatusMethodNotAllowed, "method_not_allowed", "a method the document does not list for this path")
		}
		out = append(out, describe(e))
	}
	if len(out) > 0 && isJSON(resp.Header.Get("Content-Type")) {
		out = append(out, "body: "+excerpt(body))
	}
	return out
}

// checkMuxError checks the answer to a route the document does not have:
// the mux's 404 or 405 with the error envelope.
func (c *contract) checkMuxError(resp *http.Response, body []byte, status int, code, what string) []string {
	var out []string
	if resp.StatusCode != status {
		out = append(out, fmt.Sprintf("%s must answer %d %s, not %d", what, status, code, resp.StatusCode))
	}
	if !isJSON(resp.Header.Get("Content-Type")) {
		return append(out, fmt.Sprintf("%s: Content-Type %q, want application/json (the error envelope)", what, resp.Header.Get("Content-Type")))
	}
	c.mu.Lock()
	ok, verrs := c.schemas.ValidateSchemaBytes(c.errSchema, body)
	c.mu.Unlock()
	if !ok {
		for _, e := range verrs {
			out = append(out, "error envelope: "+describe(e))
		}
		out = append(out, "body: "+excerpt(body))
	} else if !bytes.Contains(body, []byte(`"code":"`+code+`"`)) {
		out = append(out, fmt.Sprintf("%s: want code %s; body: %s", what, code, excerpt(body)))
	}
	if status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
		out = append(out, "405 without an Allow header")
	}
	return out
}

// describe renders a validation error with its schema failures.
func describe(e *liberrors.ValidationError) string {
	var b strings.Builder
	b.WriteString(e.Message)
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	for _, f := range e.SchemaValidationErrors {
		fmt.Fprintf(&b, "\n\t%s: %s", f.FieldPath, f.Reason)
	}
	return b.String()
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

func excerpt(b []byte) string {
	const max = 1024
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// recorder passes a response through to the real writer and keeps a copy
// of its status, header and body.
type recorder struct {
	http.ResponseWriter
	code   int
	header http.Header // snapshot at WriteHeader
	body   bytes.Buffer
}

func (w *recorder) WriteHeader(code int) {
	if w.code == 0 && code >= 200 { // 1xx are informational
		w.code = code
		w.header = w.ResponseWriter.Header().Clone()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

// Flush sends what is buffered to the client.
func (w *recorder) Flush() {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the real writer (deadlines,
// hijacking, full duplex).
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *recorder) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// response is the recorded response.
func (w *recorder) response() *http.Response {
	h := w.header
	if h == nil {
		h = w.ResponseWriter.Header().Clone()
	}
	return &http.Response{
		StatusCode: w.status(),
		Status:     http.StatusText(w.status()),
		Header:     h,
		Body:       io.NopCloser(bytes.NewReader(w.body.Bytes())),
	}
}
