// Package console is pgq's web console: the page served under /ui (HTML,
// CSS and JavaScript embedded in the binary with go:embed; no external CDN,
// no build step) and the in-memory History of ingest samples that its
// live charts draw.
//
// The page reads and acts only through pgq's HTTP API (GET /v1/status,
// GET /v1/status/history, /v1/groups, /v1/groups/{name}/parked and its
// requeue/drop, /v1/backfills with PATCH to throttle and DELETE to
// cancel): it holds no privilege of its own. Its static files are served
// without a bearer token (they contain no data); when pgq runs with
// --auth-token the page asks for the token once and keeps it in the tab's
// sessionStorage, sending it on every API call.
//
// History is a ring of Samples (ingest connected, slot lag, journal size,
// changes written) taken every Interval over Window (5 s over one hour by
// default: 720 samples, a few tens of KiB). It lives in memory only, so it
// survives page reloads but starts empty with each pgq process. Its methods
// are safe for concurrent use: Run adds samples from one goroutine while
// the HTTP handler reads Snapshot.
package console
