package consumers

import (
	"errors"
	"fmt"
	"net/http"
)

// Error codes of the HTTP API ({"error":{"code":...}}). Each code has a
// sentinel error below; an *Error matches its sentinel with errors.Is on
// both sides of the wire.
const (
	CodeBadRequest    = "bad_request"        // malformed body, unknown field, bad value
	CodeInvalidName   = "invalid_name"       // group name not [A-Za-z0-9_.-]{1,128}
	CodeBadPosition   = "bad_position"       // unparsable start position
	CodeNotFound      = "not_found"          // no such group (or route)
	CodeExists        = "already_exists"     // group exists
	CodeConflict      = "conflict"           // another member holds the lease
	CodeFenced        = "fenced"             // the member's lease expired or was taken over
	CodeInvalidCommit = "invalid_commit"     // commit backwards, beyond delivered, or inside a transaction
	CodeOutOfRange    = "out_of_range"       // cursor or position below the journal start (or past its end)
	CodeUnauthorized  = "unauthorized"       // missing or wrong bearer token
	CodeMethod        = "method_not_allowed" // the route exists, not with this method (see Allow)
	CodeTooLarge      = "too_large"          // request body over the limit
	CodeUnavailable   = "unavailable"        // server shutting down
	CodeInternal      = "internal"           // anything else
)

// Sentinel errors; errors returned by the Manager and the Client wrap them.
var (
	ErrBadRequest    = errors.New("consumers: bad request")
	ErrInvalidName   = errors.New("consumers: invalid group name")
	ErrBadPosition   = errors.New("consumers: bad position")
	ErrNotFound      = errors.New("consumers: group not found")
	ErrExists        = errors.New("consumers: group already exists")
	ErrConflict      = errors.New("consumers: group is leased by another member")
	ErrFenced        = errors.New("consumers: member was fenced (lease expired or taken over)")
	ErrInvalidCommit = errors.New("consumers: invalid commit")
	ErrOutOfRange    = errors.New("consumers: offset out of range")
	ErrUnauthorized  = errors.New("consumers: unauthorized")
	ErrMethod        = errors.New("consumers: method not allowed")
	ErrTooLarge      = errors.New("consumers: request too large")
	ErrUnavailable   = errors.New("consumers: unavailable")
	ErrInternal      = errors.New("consumers: internal error")
	// ErrClosed is returned by a closed Manager or Client.
	ErrClosed = errors.New("consumers: closed")
)

var codes = []struct {
	code   string
	err    error
	status int
}{
	{CodeBadRequest, ErrBadRequest, http.StatusBadRequest},
	{CodeInvalidName, ErrInvalidName, http.StatusBadRequest},
	{CodeBadPosition, ErrBadPosition, http.StatusBadRequest},
	{CodeNotFound, ErrNotFound, http.StatusNotFound},
	{CodeExists, ErrExists, http.StatusConflict},
	{CodeConflict, ErrConflict, http.StatusConflict},
	{CodeFenced, ErrFenced, http.StatusConflict},
	{CodeInvalidCommit, ErrInvalidCommit, http.StatusConflict},
	{CodeOutOfRange, ErrOutOfRange, http.StatusRequestedRangeNotSatisfiable},
	{CodeUnauthorized, ErrUnauthorized, http.StatusUnauthorized},
	{CodeMethod, ErrMethod, http.StatusMethodNotAllowed},
	{CodeTooLarge, ErrTooLarge, http.StatusRequestEntityTooLarge},
	{CodeUnavailable, ErrUnavailable, http.StatusServiceUnavailable},
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

// classify returns the code and HTTP status of err.
func classify(err error) (string, int) {
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

func errf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}
