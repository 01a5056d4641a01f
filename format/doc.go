// Package format renders pgq's changes in the conventions of the
// pipelines users already run: pgq's own JSON (`pgq journal dump`),
// Debezium's PostgreSQL change events and CloudEvents 1.0. The HTTP
// fetch renders with it (its body field "format"); the bridges can.
//
// A Renderer renders change i of a pgq.Transaction as Events(tx, i)
// events (AppendEvent); AppendChangeEvents writes them as one JSON value
// (null for none, an array for several). Every id the formats carry
// derives from the commit LSN and the change's ordinal (ChangeID, the
// bridges' message id), never from a journal offset.
//
// # Debezium
//
// The value of the Debezium PostgreSQL connector's change event as Kafka
// Connect's JSON converter writes it with schemas disabled (no
// schema/payload wrapper):
//
//	{"before":…,"after":…,"source":{"version","connector":"postgresql",
//	 "name","ts_ms","snapshot","db","sequence","ts_us","ts_ns","schema",
//	 "table","txId","lsn","xmin"},"transaction":{"id","total_order",
//	 "data_collection_order"},"op":"c","ts_ms","ts_us","ts_ns"}
//
// Mapping of pgq's changes:
//   - insert → op "c"; update → "u", or, when it changed the row's key
//     (its primary key, or replica identity index: pgq.Column.Key, also
//     under REPLICA IDENTITY FULL, where PostgreSQL flags every column),
//     a delete ("d", old key) and a create ("c", new row), as Debezium
//     emits a primary-key update. Under FULL an unchanged TOAST value of
//     the update's new image takes its value from the old image, which
//     holds the whole row (Debezium does so since DBZ-7193); delete → "d"; truncate → "t", one event
//     per truncated table, before and after null; a backfill read → "r"
//     with source.snapshot "incremental" (pgq's backfill is the watermark
//     algorithm of Debezium's incremental snapshot), txId, lsn and
//     transaction null as Debezium writes them.
//   - message → Debezium's message event (op "m", message {prefix,
//     content base64}, schema and table "", txId null unless
//     transactional, no before/after/transaction).
//   - ddl and gap: Debezium has no such events; they render to none
//     (Events is 0; the HTTP fetch writes null in their place, the
//     transaction's envelope still says where they were). Read them in
//     pgq's format.
//
// Source: lsn is the transaction's commit LSN as a number (pgq keeps no
// per-change LSN); txId the xid; ts_ms/ts_us/ts_ns the commit time;
// sequence names the change (below); origin only when the transaction
// has one; version is
// Options.Version ("pgq"), name Options.Name ("pgq"), db
// Options.Database. The transaction block's id is "<xid>:<commit LSN>"
// (Debezium's form, with the one LSN pgq has, so stable across the
// transaction); total_order is the change's ordinal + 1 (shared by the
// events of one change); data_collection_order counts the transaction's
// events of the same table, across the parts of a multi-part transaction
// when the renderer sees its records in order (an exclusive fetch, a
// bridge), else from the record (a shared group's message of a later
// part). The top-level ts_ms/ts_us/ts_ns is the time of rendering
// (Options.Now), as Debezium's is the time it processed the event.
//
// source.sequence is, as in Debezium, a JSON string holding a JSON array
// of strings, but not Debezium's pair [last commit LSN, LSN]: pgq's is
// the commit LSN (a decimal number, as source.lsn) and the change's
// ordinal in its transaction, "[\"97500059720\",\"3\"]", and for a
// backfill row the backfill id as a third element: the change's place in
// PostgreSQL's history (ChangeID), so every event names its change even
// where transaction is null (a backfill read, a non-transactional
// message) or dropped by a pipeline. The two events of an update that
// changed the key share it (as they share total_order).
//
// Keys (AppendDebeziumKey): the row's key columns (primary key, also
// under REPLICA IDENTITY FULL) as an object ({"id":1}), from the old
// image for a delete; null for a table without a key (a FULL table
// without a primary key too) and for a truncate; {"prefix":…} for a message.
//
// Values follow the connector's defaults and the JSON converter: int2,
// int4, int8 and oid as numbers; float4/float8 as numbers (NaN and
// ±Infinity, no JSON numbers, as strings); bool; numeric and money by
// DecimalMode (default string, see DecimalString for why not Debezium's
// precise); date as days since the epoch; time as microseconds past
// midnight (MicroTime); timestamp as microseconds since the epoch
// (MicroTimestamp), ±infinity as the JDBC driver's values; timestamptz
// as ISO 8601 in UTC with six fraction digits (ZonedTimestamp); timetz as
// UTC time (ZonedTime); interval as microseconds with 365.25/12-day
// months (MicroDuration), or by IntervalMode as "P1Y2M3DT4H5M6.78S";
// bytea base64; bit(1) and one-bit values as
// booleans, longer bit strings as Debezium's Bits (little-endian bytes,
// base64); json, jsonb, xml, uuid, text types, ranges, network types and
// enums as strings; arrays as JSON arrays of their elements (one
// dimension: several are flattened); an unchanged TOAST value as
// Debezium's placeholder "__debezium_unavailable_value" (unless a FULL
// old image holds it, above); a domain as its
// base type; a binary-format value base64; anything else its text.
//
// pgq does not keep a column's type modifier, so where Debezium's
// rendering depends on the declared precision pgq renders as for the
// type's default: time(0-3) and timestamp(0-3) are microseconds (what
// Debezium's time.precision.mode=microseconds writes; its default
// "adaptive" writes milliseconds for them), a timestamptz always has six
// fraction digits, and a bit varying value of one bit is a boolean.
// hstore and PostGIS types, whose OIDs are not fixed, are their text.
//
// # CloudEvents
//
// CloudEvents 1.0 in the JSON format (structured mode, media type
// application/cloudevents+json):
//
//	{"specversion":"1.0","id":"16/B374D848.3","source":"/pgq/<db>/<slot>",
//	 "type":"pgq.insert","subject":"public.orders","time":"<commit time>",
//	 "datacontenttype":"application/json","pgqlsn":"16/B374D848",
//	 "pgqxid":771,"data":<the change in pgq's JSON>}
//
// id is ChangeID; source names the database and the slot (or
// Options.Source); subject is the table (see CloudEventAttributes); time
// the commit time; pgqlsn and pgqxid are extension attributes. For the
// binary mode (NATS, Kafka, HTTP) Attributes.Headers gives the ce-* (or
// Kafka's ce_*) headers and AppendCloudEventData the body.
//
// # Concurrency
//
// A Renderer is not safe for concurrent use (it keeps the per-table
// counts of the transaction it renders); use one per goroutine. Format,
// Options and Attributes are plain values.
package format
