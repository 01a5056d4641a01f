package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/backfill"
	"github.com/pgq-dev/pgq/console"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/format"
)

// MaxRequestBytes is the largest request body the API reads.
const MaxRequestBytes = 1 << 20

// Options configures the API. Groups is required; every other part is
// optional, and the routes of a part that is nil are not mounted (a test
// serving only groups answers not_found for /v1/backfills).
type Options struct {
	// Groups serves /v1/groups (exclusive and shared groups). Required.
	Groups *consumers.Manager
	// Backfills serves /v1/backfills; nil: not mounted.
	Backfills *backfill.Manager
	// Status returns the document of GET /v1/status (encoded as JSON,
	// see statusJSON); nil: not mounted.
	Status func() api.Status
	// History returns the document of GET /v1/status/history (the
	// console's samples, encoded as JSON); nil: not mounted.
	History func() console.StatusHistory
	// NotReady returns why pgq cannot take changes, "" when it can: GET
	// /readyz answers 503 with it, else 200. nil: /readyz is not mounted.
	NotReady func() string
	// Metrics serves GET /metrics (Prometheus text); nil: not mounted.
	Metrics http.Handler
	// AuthToken, when set, is required as "Authorization: Bearer <token>"
	// on every route but GET /healthz and the console's static files under
	// /ui (compared in constant time).
	AuthToken string
	// ClientCertificates reports that every connection presented a
	// client certificate (mutual TLS): like AuthToken, it turns the Host
	// check off (origin.go).
	ClientCertificates bool
	// AllowedHosts are the names, besides IP literals and localhost, that
	// a request's Host header may carry when neither AuthToken nor
	// ClientCertificates is set ("*.example.com": its subdomains; "*":
	// any). Others answer 421 misdirected_request (DNS rebinding).
	AllowedHosts []string
	// AllowedOrigins are the origins ("https://console.example:8443";
	// "*": any) whose cross-origin browser requests are served, with CORS
	// headers. A request from another origin than its Host answers 403
	// forbidden.
	AllowedOrigins []string
	// Formats configures the renderings a fetch's "format" asks for
	// (database and slot named by Debezium's source and CloudEvents'
	// source). Its Now and JSONValues are set per answer.
	Formats format.Options
}

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	if o.Groups == nil {
		return errors.New("httpapi: Options.Groups is required")
	}
	if err := CheckAllowed(o.AllowedHosts, o.AllowedOrigins); err != nil {
		return fmt.Errorf("httpapi: %w", err)
	}
	return nil
}

// API is pgq's HTTP API: an http.Handler.
type API struct {
	o       Options
	handler http.Handler
}

// New returns the API over the domain parts in o.
func New(o Options) (*API, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	a := &API{o: o}
	mux := http.NewServeMux()
	for _, rt := range a.routes() {
		if a.has(rt.part) {
			mux.Handle(rt.Method+" "+rt.Pattern, rt.handler)
		}
	}
	a.handler = guardOrigin(o, requireBearer(o.AuthToken, jsonMuxErrors(mux)))
	return a, nil
}

// ProbeHandler serves only GET /healthz, GET /readyz and GET /metrics,
// without a token: the handler of the probe listener (--probe-listen),
// which a flood of the API's port cannot reach and which Kubernetes
// probes and Prometheus scrapes use without carrying the token.
func (a *API) ProbeHandler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range a.routes() {
		if rt.probe && a.has(rt.part) {
			mux.Handle(rt.Method+" "+rt.Pattern, rt.handler)
		}
	}
	return jsonMuxErrors(mux)
}

// ServeHTTP serves the API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

// Route is one endpoint of the API as openapi.json documents it.
type Route struct {
	Method string
	// Pattern is the path with {name}-style parameters.
	Pattern string
	// Statuses are every HTTP status the route answers with.
	Statuses []int
	// Body is a pointer to a zero value of the route's JSON request body
	// type (nil: the route reads no body): what its handler decodes
	// strictly (strict.go) and openapi.json's requestBody describes.
	Body  any
	part  part
	probe bool // also served by ProbeHandler
	// static: the console's files, served without a token and left out
	// of Routes (and so of openapi.json): they are a page, not API
	// (docs/http-api.md names them).
	static  bool
	handler http.HandlerFunc
}

// Status sets of the routes: each route's success status joins those its
// handler can send (openapi.json lists exactly these, and httpapi's
// TestMain fails when a test run never saw one of them).
var (
	// busy is what every route but GET /healthz can answer: 503 on an
	// overflow connection (Limits), and 503 for a domain call cut by pgq
	// shutting down (WriteError of a canceled context, ErrClosed).
	busy = []int{http.StatusServiceUnavailable}
	// internal is a storage or journal error the handler's domain call
	// can return (not an encoding error of pgq's own wire types, which
	// cannot fail).
	internal = []int{http.StatusInternalServerError}
	// body is what decoding a JSON body answers (bad_request, too_large,
	// unsupported_media_type).
	body = []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType}
	// guarded is what every route but the probes answers to a browser's
	// cross-origin request (forbidden) and to a Host header that is not
	// pgq's (misdirected_request): origin.go.
	guarded = []int{http.StatusForbidden, http.StatusMisdirectedRequest}
	// named is a group name in the path: invalid_name, or no such group.
	named = []int{http.StatusBadRequest, http.StatusNotFound}
	// missing is no such backfill (ids are not validated: any id that is
	// not one is not_found).
	missing    = []int{http.StatusNotFound}
	conflict   = []int{http.StatusConflict}
	outOfRange = []int{http.StatusRequestedRangeNotSatisfiable}
)

func statuses(ok int, sets ...[]int) []int {
	out := []int{ok}
	for _, s := range sets {
		for _, c := range s {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// part is the domain part a route needs (Options); a route whose part is
// missing is not mounted.
type part int

const (
	always part = iota
	partGroups
	partBackfills
	partStatus
	partReady
	partMetrics
	partHistory
)

func (a *API) has(p part) bool {
	switch p {
	case partGroups:
		return a.o.Groups != nil
	case partBackfills:
		return a.o.Backfills != nil
	case partStatus:
		return a.o.Status != nil
	case partReady:
		return a.o.NotReady != nil
	case partMetrics:
		return a.o.Metrics != nil
	case partHistory:
		return a.o.History != nil
	}
	return true
}

// routes is the route table: what New mounts and Routes documents. (The
// handlers of a missing part are method values on nil and never called.)
func (a *API) routes() []Route {
	var (
		g = &groups{m: a.o.Groups, formats: a.o.Formats}
		b = &backfills{m: a.o.Backfills}
	)
	rt := func(method, pattern string, p part, st []int, h http.HandlerFunc) Route {
		return Route{Method: method, Pattern: pattern, Statuses: st, part: p, handler: h}
	}
	probe := func(r Route) Route { r.probe = true; return r }
	reads := func(v any, r Route) Route { r.Body = v; return r }
	page := console.Handler().ServeHTTP
	static := func(pattern string) Route {
		return Route{Method: "GET", Pattern: pattern, Statuses: []int{http.StatusOK}, static: true, handler: page}
	}
	rs := []Route{
		probe(rt("GET", "/healthz", always, []int{http.StatusOK}, healthz)),
		probe(rt("GET", "/readyz", partReady, statuses(http.StatusOK, busy), a.ready)),
		probe(rt("GET", "/metrics", partMetrics, statuses(http.StatusOK, busy), a.metrics)),
		// Status and History return any document: encoding it can fail.
		rt("GET", "/v1/status", partStatus, statuses(http.StatusOK, internal, busy), a.status),
		rt("GET", "/v1/status/history", partHistory, statuses(http.StatusOK, internal, busy), a.history),
		rt("GET", "/v1/openapi.json", always, statuses(http.StatusOK, busy), openapi),
		static("/ui"),
		static(console.Prefix),

		reads(&api.CreateRequest{}, rt("POST", "/v1/groups", partGroups, statuses(http.StatusCreated, body, conflict, outOfRange, internal, busy), g.create)),
		rt("GET", "/v1/groups", partGroups, statuses(http.StatusOK, busy), g.list),
		rt("GET", "/v1/groups/{name}", partGroups, statuses(http.StatusOK, named, busy), g.get),
		rt("DELETE", "/v1/groups/{name}", partGroups, statuses(http.StatusOK, named, internal, busy), g.delete),
		reads(&api.ResetBody{}, rt("POST", "/v1/groups/{name}/reset", partGroups, statuses(http.StatusOK, body, named, outOfRange, internal, busy), g.reset)),
		reads(&api.FetchBody{}, rt("POST", "/v1/groups/{name}/fetch", partGroups, statuses(http.StatusOK, body, named, conflict, outOfRange, internal, busy), g.fetch)),
		reads(&api.CommitBody{}, rt("POST", "/v1/groups/{name}/commit", partGroups, statuses(http.StatusOK, body, named, conflict, internal, busy), g.commit)),
		// A heartbeat writes nothing: no internal error.
		reads(&api.MemberBody{}, rt("POST", "/v1/groups/{name}/heartbeat", partGroups, statuses(http.StatusOK, body, named, conflict, busy), g.heartbeat)),
		// Releasing a lease the member does not hold is a no-op: no conflict.
		reads(&api.MemberBody{}, rt("POST", "/v1/groups/{name}/release", partGroups, statuses(http.StatusOK, body, named, internal, busy), g.release)),
		reads(&api.AckBody{}, rt("POST", "/v1/groups/{name}/ack", partGroups, statuses(http.StatusOK, body, named, conflict, internal, busy), g.settle(settleAck))),
		reads(&api.AckBody{}, rt("POST", "/v1/groups/{name}/nak", partGroups, statuses(http.StatusOK, body, named, conflict, internal, busy), g.settle(settleNak))),
		reads(&api.AckBody{}, rt("POST", "/v1/groups/{name}/term", partGroups, statuses(http.StatusOK, body, named, conflict, internal, busy), g.settle(settleTerm))),
		reads(&api.AckBody{}, rt("POST", "/v1/groups/{name}/progress", partGroups, statuses(http.StatusOK, body, named, conflict, internal, busy), g.settle(settleProgress))),
		// A parked message whose record retention removed is listed with a
		// null change, not refused.
		rt("GET", "/v1/groups/{name}/parked", partGroups, statuses(http.StatusOK, named, internal, busy), g.parked),
		// Requeueing a message whose record retention removed is
		// out_of_range (drop it instead).
		reads(&api.AckBody{}, rt("POST", "/v1/groups/{name}/parked/requeue", partGroups, statuses(http.StatusOK, body, named, outOfRange, internal, busy), g.parkedAction(true))),
		reads(&api.AckBody{}, rt("POST", "/v1/groups/{name}/parked/drop", partGroups, statuses(http.StatusOK, body, named, internal, busy), g.parkedAction(false))),

		// 404: a table that does not exist; 503: PostgreSQL unreachable.
		reads(&api.BackfillRequest{}, rt("POST", "/v1/backfills", partBackfills, statuses(http.StatusCreated, body, missing, internal, busy), b.start)),
		rt("GET", "/v1/backfills", partBackfills, statuses(http.StatusOK, busy), b.list),
		rt("GET", "/v1/backfills/{id}", partBackfills, statuses(http.StatusOK, missing, busy), b.get),
		reads(&api.BackfillUpdate{}, rt("PATCH", "/v1/backfills/{id}", partBackfills, statuses(http.StatusOK, body, missing, internal, busy), b.update)),
		rt("DELETE", "/v1/backfills/{id}", partBackfills, statuses(http.StatusOK, missing, internal, busy), b.cancel),
	}
	for i := range rs {
		if !rs[i].probe && !rs[i].static {
			rs[i].Statuses = statuses(rs[i].Statuses[0], rs[i].Statuses[1:], guarded)
		}
	}
	return rs
}

// Routes lists every route of a fully configured API with the statuses it
// answers with; with authRequired (an AuthToken is set) every route but
// GET /healthz may also answer 401. Every route answers 405 to another
// method on its path. openapi.json documents exactly these (a test checks).
func Routes(authRequired bool) []Route {
	a := &API{o: Options{}}
	var rs []Route
	for _, r := range a.routes() {
		if r.static {
			continue // the console's page and files: not API
		}
		r.handler = nil
		if authRequired && r.Pattern != "/healthz" {
			r.Statuses = append(r.Statuses, http.StatusUnauthorized)
		}
		rs = append(rs, r)
	}
	return rs
}

// jsonMuxErrors wraps a ServeMux so that its own replies for an unknown
// route (404) and a known route with another method (405, with Allow) are
// JSON errors like every other: not_found and method_not_allowed.
func jsonMuxErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&muxErrorWriter{ResponseWriter: w, r: r}, r)
	})
}

// muxErrorWriter replaces the mux's plain-text 404 and 405 bodies.
type muxErrorWriter struct {
	http.ResponseWriter
	r        *http.Request
	replaced bool // the mux's body is being dropped
}

func (w *muxErrorWriter) WriteHeader(code int) {
	if (code == http.StatusNotFound || code == http.StatusMethodNotAllowed) &&
		strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.replaced = true
		err := api.Errorf(api.ErrNotFound, "no route %s %s", w.r.Method, w.r.URL.Path)
		if code == http.StatusMethodNotAllowed {
			err = api.Errorf(api.ErrMethod, "%s %s: allowed: %s", w.r.Method, w.r.URL.Path, w.Header().Get("Allow"))
		}
		WriteError(w.ResponseWriter, err)
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *muxErrorWriter) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *muxErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requireBearer wraps next so that every request except GET /healthz and
// the console's static files (GET /ui, /ui/...) needs "Authorization:
// Bearer <token>" (compared in constant time): the browser loads the page
// without a token, and the page then sends the token the user typed on
// its API calls. An empty token disables the check.
func requireBearer(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || isConsolePath(r) {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := bearer(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pgq"`)
			WriteError(w, api.Errorf(api.ErrUnauthorized, "missing or wrong bearer token"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearer returns the credentials of an Authorization header of the Bearer
// scheme, whose name is case-insensitive (RFC 7235 section 2.1).
func bearer(h string) (string, bool) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(cred, " "), true
}

// errEncode is an internal error of encoding a response.
func errEncode(err error) error {
	return fmt.Errorf("%w: encode response: %v", api.ErrInternal, err)
}

// isConsolePath reports a read of the console's static files.
func isConsolePath(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, console.Prefix))
}
