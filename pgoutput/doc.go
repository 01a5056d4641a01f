// Package pgoutput decodes the logical replication messages produced by
// PostgreSQL's built-in pgoutput plugin into typed values.
//
// It is a pure decoder: bytes in, messages out. It does no I/O, starts no
// goroutines and never panics, whatever the input; malformed or short input
// yields an error wrapping ErrTruncated, ErrUnknownMessage,
// ErrUnknownRelation or ErrMalformed, prefixed with the message kind.
//
// # Wire format
//
// Each XLogData payload of a pgoutput replication stream holds one message:
// a one-byte tag followed by big-endian fields. Integers are 1, 2, 4 or 8
// bytes, LSNs 8 bytes, timestamps int64 microseconds since 2000-01-01 UTC,
// strings NUL-terminated. The tags decoded are
//
//	'B' Begin        'C' Commit        'O' Origin      'R' Relation
//	'Y' Type         'I' Insert        'U' Update      'D' Delete
//	'T' Truncate     'M' Message       'S' StreamStart 'E' StreamStop
//	'c' StreamCommit 'A' StreamAbort
//
// Row messages carry TupleData: a column count, then per column a kind byte
// ('n' NULL, 'u' unchanged TOAST, 't' text, 'b' binary) and, for 't' and
// 'b', an int32 length and the bytes. Update and Delete may carry an old
// tuple marked 'K' (replica-identity key) or 'O' (REPLICA IDENTITY FULL)
// before the new tuple marked 'N'.
//
// Protocol version 1 (PostgreSQL 10+) and version 2 (PostgreSQL 14+,
// streaming of in-progress transactions) are supported. Between StreamStart
// and StreamStop, Relation, Type, Insert, Update, Delete, Truncate and
// Message carry a leading transaction id; the Decoder tracks that state
// itself, so the caller feeds it every message in order. StreamAbort is
// accepted in the short form (xid, subxid) and in the protocol version 4
// form with abort LSN and time.
//
// Row messages are resolved against the Decoder's relation cache (filled by
// Relation messages) into a ready pgq.Change; a row for a relation the
// Decoder has not seen is an ErrUnknownRelation error.
//
// # Ownership and concurrency
//
// Decoded values alias the input: Value.Data, Change.Content and the like
// point into the slice passed to Decode, so the caller must not reuse that
// buffer while the results are alive. Strings (names, prefixes) are copied.
// Rows share the cached relation's Columns slice: treat it as read-only.
//
// With Decoder.Reuse set, Decode returns the same *Row, *Begin and *Commit
// every time, overwritten by the next call, and tuples are carved from
// shared blocks of Values (each tuple's slice has capacity = length, so
// appending to one never reaches another): a row then costs no allocation.
// The caller copies what it keeps (a Change copied by value stays valid)
// before decoding the next message.
//
// A Decoder holds mutable state (the relation cache and the in-stream flag)
// and must be used by one goroutine at a time; it does no locking. Distinct
// Decoders are independent.
package pgoutput
