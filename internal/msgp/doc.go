// Package msgp is pgq's one hand-written msgpack reader: a bounds-checked
// cursor over a byte slice that never panics on bad input. The record
// codec decodes journal record bodies with it, and the Go client reads the
// fetch envelope around record bodies with it; both are hot paths where
// the reflection of vmihailenco/msgpack costs too much (record's
// BenchmarkRecordDecodeLibrary shows how much).
//
// The error is sticky: after the first malformed element every method
// returns zero values and Err keeps the first error, wrapping the
// caller's sentinel (Reader.Wrap) with the byte position. Callers check
// Err once after a run of reads instead of after each one.
//
// # Concurrency
//
// A Reader is a value owned by one goroutine; the bytes it reads are
// never modified.
package msgp
