// Package record is the journal's record codec: how one pgq.Transaction
// (a committed transaction, or one part of a large one) is framed and
// encoded on disk, and decoded again. The journal stores records, the
// spill files of ingest hold them, and the Go client's fast fetch path
// receives record bodies as stored.
//
// # Format
//
// This is the one description of the record layout; the journal's
// documentation (package journal) and the comments on Version and
// VersionCompact point here. A record (Version 1) is
//
//	version (1 byte, Version) | CRC32C/Castagnoli of body (4 bytes LE) | body
//
// and the body is one msgpack array of 9 elements (10 or 11, see below):
//
//	[0] xid           uint
//	[1] commit LSN    uint
//	[2] end LSN       uint
//	[3] commit time   int (microseconds since the Unix epoch, UTC)
//	[4] origin        str
//	[5] part          uint
//	[6] final         bool
//	[7] relations     array of [schema str, table str, columns array]
//	                  where columns is flat: name str, type OID uint, key bool, ...
//	                  A relation with a domain column whose base type is known
//	                  (or an array column read as text[]: Column.BaseTypeOID)
//	                  has a fourth element: base types, an array of one uint
//	                  per column (the base type's OID, 0 for no domain). Every
//	                  other relation keeps 3 elements, byte for byte as
//	                  before; a 3-element relation decodes with every
//	                  Column.BaseTypeOID 0.
//	                  A relation with a column that has a type modifier
//	                  (pg_attribute.atttypmod: numeric(10,3), timestamp(3),
//	                  varchar(8)) has a fifth element: type modifiers, an
//	                  array of one int per column, PostgreSQL's value (-1
//	                  for none); its fourth element is then the base types,
//	                  or nil when no column is a domain. A relation of 3 or
//	                  4 elements decodes with every Column.Typmod -1.
//	                  A relation with a column of an extension's type
//	                  (Column.TypeName: hstore, citext, "hstore[]") has a
//	                  sixth element: type names, an array of one str per
//	                  column ("" for none); its fourth and fifth elements
//	                  are then nil when they hold nothing. A relation of 3
//	                  to 5 elements decodes with every Column.TypeName "".
//	[8] changes       array of changes, each an array whose first element is the op:
//	    insert/update/delete (and any unknown op):
//	        [op, relation index uint, old kind uint, new values|nil, old values|nil]
//	    truncate: [op, tables array of str, flags uint (1 cascade, 2 restart identity)]
//	    message and ddl: [op, prefix str, content bin, transactional bool]
//	    gap:      [op, from LSN uint, to LSN uint]
//	[9] backfill      str, only in records of a backfill chunk (read
//	                  changes), or "" when [10] follows: the body is then an
//	                  array of 10 elements. Every other record keeps 9, byte
//	                  for byte as before.
//	[10] ordinals     the changes' ordinals within their whole transaction
//	                  (pgq.Transaction.Ordinal): a uint, the first change's (the
//	                  rest follow one by one), or an array of one uint per
//	                  change when they are not consecutive (a fetch answer
//	                  whose group filter dropped changes). Only when the
//	                  ordinals are not simply 0, 1, 2, ...: a later part of
//	                  a multi-part transaction, or a filtered answer. The
//	                  body then has 11 elements; a record of 9 or 10 decodes
//	                  with ordinal = index.
//
// A value is nil (NULL), false (unchanged TOAST), str (text form), bin
// (binary form), or [kind uint, data bin] for any other kind. Each relation
// (schema, table and column list) is stored once per record and referenced by
// index, so a transaction touching one table stores its column names once.
// The record offset is not encoded: it is the journal position.
//
// So any record decodes alone. Base types (Column.BaseTypeOID, which
// values render and decode by): records journaled before they were
// recorded decode with BaseTypeOID 0 (a domain's values then render as
// text, as they did), and a pgq older than them refuses a relation with
// four elements: do not go back to one once a domain column was
// journaled. Ordinals: with the commit LSN the ordinal names a change the
// same way in every journal (bridge message ids); records without them,
// all records journaled before, decode with ordinal = index, which is
// right for every single-record transaction and for the first part, and
// later parts journaled before the ordinals were recorded decode with
// ordinals from 0 again (only their ids differ). A pgq older than the
// ordinals refuses an 11-element body.
//
// Type modifiers (Column.Typmod: a numeric's precision and scale, a
// time's or timestamp's fractional precision): records journaled before
// they were recorded decode with Typmod -1, which is also PostgreSQL's
// "none", so they render as a column declared without one renders: a
// numeric as a variable-scale decimal, a time or timestamp with
// microseconds (package format). Nothing journaled changes meaning: a
// relation without a type modifier (every table of integers, text, or
// unconstrained numerics and timestamps) keeps its bytes, and a table
// with one becomes a new relation (a new catalog entry in the journal),
// which records journaled before do not refer to. A pgq older than type
// modifiers refuses a relation with five elements (as corrupt: do not go
// back to one once a table with a type modifier was journaled; testdata/
// journal/v3 is a journal written with them). The version byte stays 1
// (and 2 stored): what changed is the relation's element count, which
// says it, as it did for base types; the Go client receives record
// bodies without the version byte, so a new one would protect no reader
// and would make records without any type modifier, which every older
// reader reads correctly, unreadable to them.
//
// Type names (Column.TypeName, by which the Debezium format renders an
// hstore as Debezium does): records journaled before they were recorded
// decode with TypeName "", so their hstore values render as hstore's
// text, as they did. A relation without a column of an extension's type
// keeps its bytes; a table with one becomes a new relation (a new
// catalog entry), which records journaled before do not refer to. A
// pgq older than type names refuses a relation with six elements (as
// corrupt: do not go back to one once a table with an hstore, citext,
// ltree or other extension type column was journaled; testdata/journal/
// v4 is a journal written with them). The version byte stays, for the
// reasons given for type modifiers.
//
// The journal's stored form (VersionCompact) is
//
//	version (1 byte, 2) | CRC32C/Castagnoli of body (4 bytes LE) | body
//
// where the body is the Version 1 body with two elements changed:
//
//	[2] end LSN − commit LSN  uint
//	[7] relations             array of catalog ids (uint), in table order
//
// The changes (and a backfill id) are Version 1's, byte for byte, their
// relation indexes pointing into the id array as before into the table. A
// relation's schema, table and column list (about 70 bytes for a
// five-column table) is thus stored once per journal, in its relation
// catalog, instead of once per record. The journal stores compact records
// and its readers return expanded ones, so nothing above the journal
// (fetch, the client, dump, the bridge) sees Version 2.
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
// back the Version 1 record byte for byte. AppendCompact encodes a
// transaction straight into the compact form (what Compact makes of
// Append's record, byte for byte), so that the journal's append path
// encodes and checksums each record once. A compact record does not
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
// header there without moving the changes. RestampInPlace and
// CompactInPlace do not sum the changes again: the CRC32C of a body is
// that of its head combined with that of its changes (zlib's
// crc32_combine for the Castagnoli polynomial, crc.go), so they derive
// the changes' CRC from the stored one and the old head's and combine it
// with the new head's. A backfill chunk's megabyte record was summed four
// times on its way to the journal, 13 % of pgq's CPU in a backfill; it is
// now summed twice (ReadsEncoder.Finish, CompactInPlace's check). The
// stored checksum is carried, not recomputed, so a change damaged in
// memory after it was summed still fails the check of the record the
// journal stores. BodyDecoder caches the
// relations of earlier bodies for a stream of fetches.
//
// # Concurrency
//
// Functions are safe for concurrent use. A BodyDecoder is not: give each
// goroutine its own (or pool them).
package record
