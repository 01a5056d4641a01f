package client

import (
	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
)

// What a consumer needs from pgq and pgq/api, re-exported so that one
// import (pgq/client) suffices: the types are aliases (a client.Change is
// a pgq.Change; code using either name mixes freely) and the errors the
// very values of package api (errors.Is works with either).

// Journal types: a delivered transaction, its changes and their values.
type (
	// Transaction is a delivered transaction (pgq.Transaction).
	Transaction = pgq.Transaction
	// Change is one change of a transaction (pgq.Change).
	Change = pgq.Change
	// Column describes a column of a row change (pgq.Column).
	Column = pgq.Column
	// Value is a column's value as PostgreSQL sent it (pgq.Value).
	Value = pgq.Value
	// ValueKind says whether a Value is text, binary, NULL or an
	// unchanged TOAST value (pgq.ValueKind).
	ValueKind = pgq.ValueKind
	// Op is the kind of a change (pgq.Op).
	Op = pgq.Op
	// OldKind says what the old image of an update or delete holds
	// (pgq.OldKind).
	OldKind = pgq.OldKind
	// Offset is a journal offset (pgq.Offset).
	Offset = pgq.Offset
	// LSN is a PostgreSQL WAL position (pgq.LSN).
	LSN = pgq.LSN
)

// Change kinds (pgq.Op).
const (
	OpInsert   = pgq.OpInsert
	OpUpdate   = pgq.OpUpdate
	OpDelete   = pgq.OpDelete
	OpTruncate = pgq.OpTruncate
	OpMessage  = pgq.OpMessage
	OpGap      = pgq.OpGap
	OpDDL      = pgq.OpDDL
	OpRead     = pgq.OpRead
)

// Value kinds (pgq.ValueKind) and old image kinds (pgq.OldKind).
const (
	ValueNull           = pgq.ValueNull
	ValueUnchangedTOAST = pgq.ValueUnchangedTOAST
	ValueText           = pgq.ValueText
	ValueBinary         = pgq.ValueBinary

	OldNone = pgq.OldNone
	OldKey  = pgq.OldKey
	OldFull = pgq.OldFull
)

// ParseLSN parses "X/Y" (pgq.ParseLSN).
func ParseLSN(s string) (LSN, error) { return pgq.ParseLSN(s) }

// API types: requests and answers of the group calls.
type (
	// CreateRequest creates a group (api.CreateRequest).
	CreateRequest = api.CreateRequest
	// GroupInfo describes a group (api.GroupInfo).
	GroupInfo = api.GroupInfo
	// SharedInfo is the state of a shared group (api.SharedInfo).
	SharedInfo = api.SharedInfo
	// Lag is how far a group is behind (api.Lag).
	Lag = api.Lag
	// ResetResult is the answer of ResetGroup (api.ResetResult).
	ResetResult = api.ResetResult
	// CommitResult is the answer of Commit (api.CommitResult).
	CommitResult = api.CommitResult
	// ParkedMessage is a parked message of a shared group, as JSON
	// (api.ParkedMessage).
	ParkedMessage = api.ParkedMessage
	// Duration is a duration written as "2s" on the wire (api.Duration).
	Duration = api.Duration
	// Error is an error answer of the API (api.Error): its Code says
	// which, and errors.Is matches it with the sentinels below.
	Error = api.Error
)

// Sentinel errors of the API (package api's own values): an error of a
// call matches one with errors.Is.
var (
	ErrBadRequest    = api.ErrBadRequest
	ErrInvalidName   = api.ErrInvalidName
	ErrBadPosition   = api.ErrBadPosition
	ErrNotFound      = api.ErrNotFound
	ErrExists        = api.ErrExists
	ErrConflict      = api.ErrConflict
	ErrFenced        = api.ErrFenced
	ErrInvalidCommit = api.ErrInvalidCommit
	ErrOutOfRange    = api.ErrOutOfRange
	ErrUnauthorized  = api.ErrUnauthorized
	ErrTooLarge      = api.ErrTooLarge
	ErrUnavailable   = api.ErrUnavailable
	ErrInternal      = api.ErrInternal
	// ErrJournalCorrupt: the journal record a fetch needed is corrupt
	// (the message names its offset); not transient.
	ErrJournalCorrupt = api.ErrJournalCorrupt
)
