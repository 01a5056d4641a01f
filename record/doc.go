// Package record is the journal's record codec: how one pgq.Transaction
// (a committed transaction, or one part of a large one) is framed and
// encoded on disk, and decoded again. The journal stores records, the
// spill files of ingest hold them, and the Go client's fast fetch path
// receives record bodies as stored.
//
// # Format
//
//	version (1 byte, Version) | CRC32C/Castagnoli of body (4 bytes LE) | body
//
// The body is one msgpack array (see the comment on Version for every
// element): xid, commit LSN, end LSN, commit time (Unix µs), origin,
// part, final, a relation table (schema, table and the flat name/type
// OID/key list of each relation used) and the changes, each referring to
// its relation by index, so any record decodes alone; records of a
// backfill chunk carry a tenth element, the backfill id. Truncate,
// message, ddl and gap changes have their own short forms. The decoder is
// bounds-checked and never panics on bad bytes (FuzzRecord). The Go
// client keeps a second, smaller reader for the fetch envelope around
// record bodies (client/wire.go): the msgpack library there halved fetch
// throughput.
//
// Append never allocates for records touching up to 8 relations; Restamp
// rewrites a record's header (ingest turns spilled chunks into journal
// parts with it) without decoding its changes. BodyDecoder caches the
// relations of earlier bodies for a stream of fetches.
//
// # Concurrency
//
// Functions are safe for concurrent use. A BodyDecoder is not: give each
// goroutine its own (or pool them).
package record
