// Package httpapi is pgq's HTTP API: the one package that speaks HTTP for
// the server. It owns the mux and its route table (Routes), bearer-token
// authentication, content negotiation, body limits and strict decoding,
// the error envelope, the JSON answers to unknown routes (404) and wrong
// methods (405), and the handlers of groups (exclusive and shared),
// backfills, status, health and readiness, each a thin call into a domain
// package (consumers, backfill) or a function the composition root
// (package server) passes in. The domain packages import no net/http.
//
// # Contract
//
// openapi.json (embedded as OpenAPI, served at GET /v1/openapi.json) is
// the machine-readable contract; docs/http-api.md is the prose. Tests fail
// when a route, a path parameter or a status of the route table is missing
// from the document, and validate real JSON answers against it. The route
// table lists exactly the statuses each handler can send: a whole run of
// this package's tests fails (TestMain) when a listed status was never
// answered by its route and is not excused in statuses_test.go's
// unprovoked (a failing disk, a backfill without PostgreSQL).
//
// # Cross-site requests
//
// origin.go refuses a browser's cross-site request (an Origin that is not
// the Host's host[:port], 403 forbidden, unless Options.AllowedOrigins lists
// it, then with CORS headers) and, without a token or client certificates,
// a Host that is not an IP literal, localhost or in Options.AllowedHosts
// (421 misdirected_request: DNS rebinding). The probes are exempt.
//
// # Wire formats
//
// Request bodies are JSON labelled application/json (anything else,
// curl -d's form label included, is 415 unsupported_media_type: a web
// page sends text/plain, forms and multipart cross-site without a
// preflight): at most MaxRequestBytes (413 too_large beyond), then read
// strictly (strict.go, go-json-experiment/json) as openapi.json describes
// them, so that anything reading a body by the document sees the request
// pgq acts on: one object, keys matched case-sensitively, unknown,
// duplicate and null keys (null only where a field is tagged
// pgq:"nullable") and missing required keys (no omitempty) refused, every
// duration 0 or at least api.MinDuration; each refusal is 400 bad_request
// naming the key. Route.Body (RequestBodies) names each route's body
// type; tests hold it to the document's request schemas. Answers are JSON, or msgpack when the request says
// "Accept: application/msgpack": the same maps as the JSON, except that
// json and jsonb values of changes are strings holding their JSON text
// byte for byte (rendered with format.JSONAsText before the conversion, which
// would otherwise parse their numbers into float64). A fetch of an
// exclusive group renders each transaction as a line of `pgq journal
// dump` (format.AppendJSON), a shared group's fetch and parked list each
// message's change (consumers hands out changes: httpapi renders them,
// through package format, in the body's "format" with its Debezium value
// modes, decimal_handling_mode, time_precision_mode,
// interval_handling_mode and hstore_handling_mode, and
// provide_transaction_metadata, which the
// other formats ignore); with "Accept: application/vnd.pgq.records+msgpack"
// (the Go client) each is [offset, record body] with the journaled record
// body spliced verbatim. That answer is written as
// consumers.RecordStream reads the journal, one write per record, in
// every form (the msgpack forms take the array's count from the stream),
// so it holds one journal part at a time; a failure after the 200 aborts
// the handler (http.ErrAbortHandler) so that the body ends short of its
// end and no client takes it for complete. Errors are always JSON:
// {"error":{"code":"...","message":"..."}}, the code from api's table
// (api.Classify) and the message the error's own (api.Errorf); a 500 names
// an error id under which pgq logged the detail, never the detail.
// GET /v1/status answers Options.Status, an api.Status, typed end to end:
// statusJSON writes its keys (and the index's and each group's) in
// alphabetical order, the order the document has always had;
// GET /v1/status/history answers a console.StatusHistory.
//
// # Limits
//
// NewServer and Listener bound what clients hold (Limits): concurrent
// connections (beyond the cap a few probe connections answer only
// /healthz and /readyz, the rest wait in the kernel's queue), header,
// body and idle timeouts, and a write deadline set per request (a fetch
// gets its longest wait on top, so long polls are never cut). The body's
// read deadline is lifted once the body is read: net/http's watch for a
// closed connection would otherwise cancel a long poll at it.
// ProbeHandler serves /healthz, /readyz and /metrics alone, without the
// token, for a second listener.
// TLSListener serves TLS over a Listener (HTTP/1.1 only, so that a
// connection carries one request at a time as the caps assume); the
// overflow connections are recognized through it.
//
// # Concurrency
//
// An API is safe for concurrent use: it holds no state of its own beyond
// its options; response buffers come from a sync.Pool.
package httpapi
