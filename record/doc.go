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
// backfill chunk carry a tenth element, the backfill id. A relation with
// a domain column carries a fourth element, the base type of each column
// (Column.BaseTypeOID, which values render and decode by); relations
// without one keep their three elements byte for byte, and records
// journaled before base types were recorded decode with BaseTypeOID 0 (a
// domain's values then render as text, as they did). A pgq older than
// the base types refuses a relation with four elements: do not go back to
// one once a domain column was journaled. A later part of a multi-part
// transaction carries an eleventh element, its first change's ordinal in
// the whole transaction (pgq.Transaction.Ordinal; the tenth, the backfill id,
// is then "" unless set), and a fetch answer whose filter dropped changes
// carries the ordinal of every change there: with the commit LSN the
// ordinal names a change the same way in every journal (bridge message
// ids). Records without it, all records journaled before, decode with
// ordinal = index, which is right for every single-record transaction
// and for the first part; later parts journaled before the ordinals were
// recorded decode with ordinals from 0 again (only their ids differ). A
// pgq older than the ordinals refuses an 11-element body. Truncate,
// message, ddl and gap changes have their own short forms.
//
// A column's key flag is the row's key (pgq.Column.Key): the primary key,
// or the replica identity index, also under REPLICA IDENTITY FULL, as
// ingest reads it from the catalog when PostgreSQL describes the table;
// the layout is unchanged. Records journaled before carry pgoutput's
// flags and decode with them as key, as before: under FULL every column
// (the whole row was the key), under NOTHING none. The version byte was
// not bumped: the bytes mean what they meant for every other table, and a
// new version would make older readers (the Go client's records form)
// refuse records they read correctly; a FULL table's relation simply
// becomes a new catalog entry. The decoder is
// bounds-checked and never panics on bad bytes (FuzzRecord). It reads
// with internal/msgp, pgq's one hand-written msgpack reader, which the Go
// client also uses for the fetch envelope around record bodies.
//
// The journal stores records in a compact form, VersionCompact: the
// relation table replaced by ids into the journal's relation catalog,
// the end LSN as a distance. Compact and Expand convert between the two
// forms by splicing bytes, without decoding the changes, and Expand gives
// back the Version 1 record byte for byte. A compact record does not
// decode alone; the journal expands every record it reads, so "any record
// decodes alone" still holds for every record a reader gets (fetch, the
// client, dump), and on disk it is replaced by "any record decodes with
// its journal's catalog". Check accepts Version 1 only; CheckStored
// either.
//
// The codec is hand-written rather than vmihailenco/msgpack:
// msgpack_bench_test.go encodes and decodes the same layout with the
// library's Encoder and Decoder (asserting the same bytes) for
// comparison: go test -run '^$' -bench 'Record(Encode|Decode)' -benchmem.
//
// Append never allocates for records touching up to 8 relations; Restamp
// rewrites a record's header (ingest turns spilled chunks into journal
// parts with it) without decoding its changes. A backfill chunk's record
// is encoded by ReadsEncoder as its rows arrive, before its header fields
// are known, with Headroom bytes in front; RestampInPlace then writes the
// header there without moving the changes. BodyDecoder caches the
// relations of earlier bodies for a stream of fetches.
//
// # Concurrency
//
// Functions are safe for concurrent use. A BodyDecoder is not: give each
// goroutine its own (or pool them).
package record
