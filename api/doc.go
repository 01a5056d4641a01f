// Package api holds the wire types of pgq's HTTP API and its error codes:
// the one vocabulary the server (package consumers) and the Go client
// (package client) share. It imports nothing heavier than the standard
// library and the root pgq package, so a client program stays small.
//
// # Errors
//
// Every error response is {"error":{"code":…,"message":…}} with a 4xx/5xx
// status. Each code has a sentinel error; an *Error matches its sentinel
// with errors.Is on both sides of the wire.
//
// # Encodings
//
// Request bodies are JSON, read strictly by the server (keys as
// documented, exact case, none twice, no null). A Duration in a request is
// 0 (the default) or at least MinDuration; CheckDurations, which both the
// server and the client apply, refuses anything else. Responses are JSON, or msgpack when the request
// has "Accept: application/msgpack": the same maps with the same field
// names (docs/http-api.md describes both), except that a json or jsonb
// value in a change is a msgpack string holding its JSON text byte for
// byte (a msgpack number or map could not keep every JSON number, nor a
// json value's duplicate keys), and except the records form of fetch
// (api.MediaRecords), which carries journal record bodies (see package
// client).
//
// The package has no state; everything in it is safe for concurrent use.
package api
