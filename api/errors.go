package api

import (
	"errors"
	"fmt"
	"net/http"
)

// Error codes of the HTTP API ({"error":{"code":...}}).
const (
	CodeBadRequest    = "bad_request"            // malformed body, unknown field, bad value
	CodeInvalidName   = "invalid_name"           // group name not [A-Za-z0-9_.-]{1,128}, or "." / ".."
	CodeBadPosition   = "bad_position"           // unparsable start position
	CodeNotFound      = "not_found"              // no such group (or route)
	CodeMethod        = "method_not_allowed"     // the route exists, not with this method (see Allow)
	CodeExists        = "already_exists"         // group exists
	CodeConflict      = "conflict"               // another member holds the lease
	CodeFenced        = "fenced"                 // the member's lease expired or was taken over
	CodeInvalidCommit = "invalid_commit"         // commit backwards, beyond delivered, or inside a transaction
	CodeOutOfRange    = "out_of_range"           // cursor or position below the journal start (or past its end)
	CodeUnauthorized  = "unauthorized"           // missing or wrong bearer token
	CodeTooLarge      = "too_large"              // request body over the limit
	CodeForbidden     = "forbidden"              // a browser's cross-origin request from an origin not allowed
	CodeMisdirected   = "misdirected_request"    // the Host header names neither pgq nor an allowed host (DNS rebinding)
	CodeMediaType     = "unsupported_media_type" // a request body that is not labelled application/json
	CodeUnavailable   = "unavailable"            // server shutting down or restarting
	// CodeJournalCorrupt: the journal record the request needed is
	// corrupt (the message names its offset). Not the request's fault and
	// not transient: the same request answers the same until an operator
	// repairs the journal or moves the group past the offset.
	CodeJournalCorrupt = "journal_corrupt"
	CodeInternal       = "internal" // anything else
)

// Sentinel errors: errors of the server and of the client wrap them.
var (
	ErrBadRequest    = errors.New("consumers: bad request")
	ErrInvalidName   = errors.New("consumers: invalid group name")
	ErrBadPosition   = errors.New("consumers: bad position")
	ErrNotFound      = errors.New("consumers: group not found")
	ErrMethod        = errors.New("consumers: method not allowed")
	ErrExists        = errors.New("consumers: group already exists")
	ErrConflict      = errors.New("consumers: group is leased by another member")
	ErrFenced        = errors.New("consumers: member was fenced (lease expired or taken over)")
	ErrInvalidCommit = errors.New("consumers: invalid commit")
	ErrOutOfRange    = errors.New("consumers: offset out of range")
	ErrUnauthorized  = errors.New("consumers: unauthorized")
	ErrTooLarge      = errors.New("consumers: request too large")
	ErrForbidden     = errors.New("consumers: origin not allowed")
	ErrMisdirected   = errors.New("consumers: host not allowed")
	ErrMediaType     = errors.New("consumers: unsupported media type")
	ErrUnavailable   = errors.New("consumers: unavailable")
	// ErrJournalCorrupt: a journal record the call needed is corrupt.
	ErrJournalCorrupt = errors.New("consumers: journal record corrupt")
	ErrInternal       = errors.New("consumers: internal error")
	// ErrClosed is returned by a closed server or client.
	ErrClosed = errors.New("consumers: closed")
)

// codes maps each code to its sentinel and HTTP status.
var codes = []struct {
	code   string
	err    error
	status int
}{
	{CodeBadRequest, ErrBadRequest, http.StatusBadRequest},
	{CodeInvalidName, ErrInvalidName, http.StatusBadRequest},
	{CodeBadPosition, ErrBadPosition, http.StatusBadRequest},
	{CodeNotFound, ErrNotFound, http.StatusNotFound},
	{CodeMethod, ErrMethod, http.StatusMethodNotAllowed},
	{CodeExists, ErrExists, http.StatusConflict},
	{CodeConflict, ErrConflict, http.StatusConflict},
	{CodeFenced, ErrFenced, http.StatusConflict},
	{CodeInvalidCommit, ErrInvalidCommit, http.StatusConflict},
	{CodeOutOfRange, ErrOutOfRange, http.StatusRequestedRangeNotSatisfiable},
	{CodeUnauthorized, ErrUnauthorized, http.StatusUnauthorized},
	{CodeTooLarge, ErrTooLarge, http.StatusRequestEntityTooLarge},
	{CodeForbidden, ErrForbidden, http.StatusForbidden},
	{CodeMisdirected, ErrMisdirected, http.StatusMisdirectedRequest},
	{CodeMediaType, ErrMediaType, http.StatusUnsupportedMediaType},
	{CodeUnavailable, ErrUnavailable, http.StatusServiceUnavailable},
	// 500, not 503: 503 means "try again later" to clients and proxies
	// (the Go client retries unavailable), and retrying never helps here.
	{CodeJournalCorrupt, ErrJournalCorrupt, http.StatusInternalServerError},
	{CodeInternal, ErrInternal, http.StatusInternalServerError},
}

// Error is an API error: the body {"error":{"code":...,"message":...}} of
// a 4xx/5xx response. errors.Is(err, ErrConflict) etc. works on it.
type Error struct {
	Code    string `json:"code" msgpack:"code"`
	Message string `json:"message" msgpack:"message"`
	// Status is the HTTP status (client side only).
	Status int `json:"-" msgpack:"-"`
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "consumers: " + e.Code
	}
	return e.Message
}

// Is matches the sentinel of e.Code.
func (e *Error) Is(target error) bool {
	for _, c := range codes {
		if c.code == e.Code {
			return c.err == target
		}
	}
	return false
}

// Classify returns the code and HTTP status of err: those of the first
// sentinel it wraps, unavailable for ErrClosed, internal otherwise.
func Classify(err error) (code string, status int) {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code, c.status
		}
	}
	if errors.Is(err, ErrClosed) {
		return CodeUnavailable, http.StatusServiceUnavailable
	}
	return CodeInternal, http.StatusInternalServerError
}

// Errorf returns an error of sentinel's code whose message is the
// formatted text alone: the sentinel names the code (errors.Is, Classify),
// the text says what happened (`backfill "bf9" not found`), so the API's
// message is not the code's generic wording. A %w in format wraps as in
// fmt.Errorf.
func Errorf(sentinel error, format string, args ...any) error {
	return &codedError{code: sentinel, err: fmt.Errorf(format, args...)}
}

// codedError is an error with its own message and the sentinel of its code.
type codedError struct {
	code error // one of the sentinels above
	err  error // the message, and what it wraps
}

func (e *codedError) Error() string   { return e.err.Error() }
func (e *codedError) Unwrap() []error { return []error{e.code, e.err} }

// ErrorBody is the body of an error response.
type ErrorBody struct {
	Error Error `json:"error" msgpack:"error"`
}
