package consumers

import (
	"github.com/pgq-dev/pgq/api"
)

// Error codes of the HTTP API; see package api, which the client shares.
const (
	CodeBadRequest    = api.CodeBadRequest
	CodeInvalidName   = api.CodeInvalidName
	CodeBadPosition   = api.CodeBadPosition
	CodeNotFound      = api.CodeNotFound
	CodeMethod        = api.CodeMethod
	CodeExists        = api.CodeExists
	CodeConflict      = api.CodeConflict
	CodeFenced        = api.CodeFenced
	CodeInvalidCommit = api.CodeInvalidCommit
	CodeOutOfRange    = api.CodeOutOfRange
	CodeUnauthorized  = api.CodeUnauthorized
	CodeTooLarge      = api.CodeTooLarge
	CodeUnavailable   = api.CodeUnavailable
	CodeInternal      = api.CodeInternal
	// CodeJournalCorrupt: see api.CodeJournalCorrupt.
	CodeJournalCorrupt = api.CodeJournalCorrupt
)

// Sentinel errors (the api package's): errors returned by the Manager wrap
// them.
var (
	ErrBadRequest    = api.ErrBadRequest
	ErrInvalidName   = api.ErrInvalidName
	ErrBadPosition   = api.ErrBadPosition
	ErrNotFound      = api.ErrNotFound
	ErrMethod        = api.ErrMethod
	ErrExists        = api.ErrExists
	ErrConflict      = api.ErrConflict
	ErrFenced        = api.ErrFenced
	ErrInvalidCommit = api.ErrInvalidCommit
	ErrOutOfRange    = api.ErrOutOfRange
	ErrUnauthorized  = api.ErrUnauthorized
	ErrTooLarge      = api.ErrTooLarge
	ErrUnavailable   = api.ErrUnavailable
	ErrInternal      = api.ErrInternal
	// ErrJournalCorrupt: see api.ErrJournalCorrupt.
	ErrJournalCorrupt = api.ErrJournalCorrupt
	// ErrClosed is returned by a closed Manager.
	ErrClosed = api.ErrClosed
)

// Error is an API error (api.Error).
type Error = api.Error

// classify returns the code and HTTP status of err.
func classify(err error) (string, int) { return api.Classify(err) }

// errf is api.Errorf: the message is the text alone, the sentinel its code.
func errf(sentinel error, format string, args ...any) error {
	return api.Errorf(sentinel, format, args...)
}
