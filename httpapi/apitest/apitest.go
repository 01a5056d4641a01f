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
//
// Every response of a documented operation with a documented status is
// also recorded, per test binary: Unobserved lists the documented
// (operation, status) pairs that no response of the binary had, so that a
// package whose tests drive the whole API (httpapi's TestMain) can hold
// the document to what the handlers really send, not only the reverse.
// The record is safe for concurrent use (parallel tests, handlers).
package apitest

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strconv"
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
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/pgq-dev/pgq/httpapi"
)

// contract is the document, built once per test binary.
type contract struct {
	mu        sync.Mutex // validators are used by one response at a time
	v         validator.Validator
	errSchema *base.Schema // components/schemas/ErrorBody
	schemas   schema_validation.SchemaValidator
	ops       []docOp // the document's operations, for recording

	seenMu sync.Mutex
	seen   map[string]bool // "METHOD /path status" answered so far
}

// docOp is one operation of the document and the statuses it lists.
type docOp struct {
	method, path string
	re           *regexp.Regexp // the path, {param} matching one segment
	params       int
	statuses     []int
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
		if c.ops, err = operations(&m.Model); err != nil {
			loadErr = err
			return
		}
		c.seen = map[string]bool{}
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
			if r.Method == http.MethodHead {
				return
			}
			c.record(r, rec.status())
			if done.Load() {
				return
			}
			for _, msg := range c.check(r, rec.response()) {
				t.Errorf("openapi: %s %s → %d: %s", r.Method, r.URL.Path, rec.status(), msg)
			}
		})
	}
}

// operations lists the document's operations, an operation of a literal
// path before those of templated ones (fewest parameters first), so that
// a request matches the most specific path.
func operations(d *v3.Document) ([]docOp, error) {
	var out []docOp
	for path, item := range d.Paths.PathItems.FromOldest() {
		re, err := regexp.Compile("^" + paramRE.ReplaceAllString(regexp.QuoteMeta(path), "[^/]+") + "$")
		if err != nil {
			return nil, fmt.Errorf("apitest: path %q: %w", path, err)
		}
		for method, op := range item.GetOperations().FromOldest() {
			o := docOp{method: strings.ToUpper(method), path: path, re: re, params: strings.Count(path, "{")}
			if op.Responses != nil {
				for code := range op.Responses.Codes.KeysFromOldest() {
					n, err := strconv.Atoi(code)
					if err != nil {
						return nil, fmt.Errorf("apitest: %s %s: response %q: list statuses one by one", o.method, path, code)
					}
					o.statuses = append(o.statuses, n)
				}
			}
			slices.Sort(o.statuses)
			out = append(out, o)
		}
	}
	slices.SortStableFunc(out, func(a, b docOp) int { return a.params - b.params })
	return out, nil
}

// paramRE is a {param} of a path, after regexp.QuoteMeta.
var paramRE = regexp.MustCompile(`\\\{[^/]+?\\\}`)

// record notes status as answered by the operation r reached, when the
// document lists the operation and the status.
func (c *contract) record(r *http.Request, status int) {
	for _, o := range c.ops {
		if o.method != r.Method || !o.re.MatchString(r.URL.Path) {
			continue
		}
		if slices.Contains(o.statuses, status) {
			c.seenMu.Lock()
			c.seen[pair(o.method, o.path, status)] = true
			c.seenMu.Unlock()
		}
		return
	}
}

func pair(method, path string, status int) string {
	return method + " " + path + " " + strconv.Itoa(status)
}

// Unobserved returns, sorted, each documented (operation, status) as
// "METHOD /path status" that no response checked by a Validator of this
// test binary has had, less the keys of allow: the pairs that are real but
// that no test can provoke (the values say why; they are not read). A key
// of allow that the document does not list is returned too, prefixed
// "allowlisted but not documented: ", so that the allowlist cannot outlive
// the statuses it excuses.
func Unobserved(allow map[string]string) ([]string, error) {
	c, err := load()
	if err != nil {
		return nil, err
	}
	c.seenMu.Lock()
	defer c.seenMu.Unlock()
	documented := map[string]bool{}
	var out []string
	for _, o := range c.ops {
		for _, s := range o.statuses {
			k := pair(o.method, o.path, s)
			documented[k] = true
			if _, ok := allow[k]; !ok && !c.seen[k] {
				out = append(out, k)
			}
		}
	}
	for k := range allow {
		if !documented[k] {
			out = append(out, "allowlisted but not documented: "+k)
		}
	}
	slices.Sort(out)
	return out, nil
}

// check returns what is wrong with resp, the answer to req.
func (c *contract) check(req *http.Request, resp *http.Response) []string {
	// The validator reads only the request's method and URL; the body was
	// the handler's.
	rq := req.Clone(req.Context())
	rq.Body = http.NoBody
	body, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(body))

	// A browser's CORS preflight is the HTTP layer's, like a 405: outside
	// the document. An allowed origin's is 204 with the CORS headers,
	// another's the 403 envelope (httpapi/origin.go).
	if req.Method == http.MethodOptions && req.Header.Get("Access-Control-Request-Method") != "" {
		if resp.StatusCode == http.StatusNoContent {
			if resp.Header.Get("Access-Control-Allow-Origin") == "" || resp.Header.Get("Access-Control-Allow-Methods") == "" {
				return []string{"a 204 preflight answer without Access-Control-Allow-Origin and -Methods"}
			}
			return nil
		}
		return c.checkMuxError(resp, body, http.StatusForbidden, "forbidden", "a preflight of an origin not allowed")
	}
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
