// Package format is the one package that turns pgq's changes into
// bytes: pgq's own JSON (a transaction as a line of `pgq journal dump`
// and `pgq consume`, AppendJSON; a change as the fetch answers and the
// bridges carry it, AppendChangeJSONOrdinal; values, AppendValueJSON),
// and the conventions of the pipelines users already run: Debezium's
// PostgreSQL change events and CloudEvents 1.0. The HTTP answers, the
// CLI and the bridges render with it; the root package holds the domain
// types only, and package consumers hands out changes, never their
// rendering.
//
// A Renderer renders change i of a pgq.Transaction as Events(tx, i)
// events (AppendEvent); AppendChangeEvents writes them as one JSON value
// (null for none, an array for several), AppendMessage as what a broker
// binding needs (payload, key, headers). Every id the formats carry
// derives from the commit LSN and the change's ordinal (ChangeID, the
// bridges' message id), never from a journal offset.
//
// # The table of formats
//
// formats.go holds the one list of formats, read by everything that
// names one (as Pebble's format_major_version.go is): Parse and String,
// ErrUnknown's text, the CLI's --format (its enum and help are built from
// Names and HelpList), the HTTP fetch's "format" and its error text
// (List), the test holding openapi.json's enum to Names, the bridges
// (Spec.Rewrites, Renderer.AppendMessage per binding) and the webhook's
// Content-Type (Spec.BatchContentType). A row (Spec) gives:
//
//	name         pgq          debezium                cloudevents
//	ContentType  app/json     app/json                app/cloudevents+json
//	batch        app/json     app/json                app/cloudevents-batch+json
//	events       1            0 (ddl, gap), 2 (key    1
//	                          update), 1 per table
//	                          (truncate), else 1
//	broker       the bridge's a message per event:    payload: the data (binary
//	message      own message  the event; key:         bindings) or the event
//	                          Debezium's (bridge's    (Structured); headers:
//	                          if null); none for no   ce-* / ce_* (binary)
//	                          event
//
// To add a format: a constant after the last (Format), a row in table
// (name, help, content types, and the functions that count and append
// its events and, when a bridge should carry it other than as pgq's
// message, build a broker message), the renderer in a file of its own,
// its tests here, and the docs (docs/http-api.md, the README, the enum
// of openapi.json, which TestOpenAPIFormats holds to the table). No
// other package changes: the CLI, the HTTP API and the bridges read the
// table.
//
// # pgq's own JSON
//
// A transaction's line: {"offset","xid","commit_lsn","end_lsn",
// "commit_time",["origin"],["backfill"],"part","final","changes":[…]}
// (AppendJSONHead is its envelope up to "changes"). A change: "op", its
// "ordinal" in the whole transaction (Transaction.Ordinal) when known,
// then by op: a row change's "schema", "table", "new", "old" (the key
// columns only for a key-only old image), "unchanged_toast" and
// "json_null"; a truncate's "tables", "cascade", "restart_identity"; a
// message's "prefix", "content" (utf8 or base64, "content_encoding"),
// "transactional"; a ddl's "command", "object", "schema",
// "object_type", "statement"; a gap's "from_lsn", "to_lsn". Values:
// integer types as JSON numbers (canonical ones), bool as true/false,
// json and jsonb embedded (JSONEmbedded) or as strings of their text
// (JSONAsText, the form the msgpack answers are converted from), NULL
// as null, binary values base64, every other type PostgreSQL's text; a
// domain by its base type. Commit times are RFC 3339 in UTC with up to
// six fraction digits (CommitTime). A bridge's message in pgq's format
// (its payload, the bridge's wire format) is the transaction's fields
// and one change with its index, ordinal and count
// (AppendPayloadHead, AppendPayloadChange).
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
// transaction is null unless Options.TransactionMetadata (Debezium's
// provide.transaction.metadata, off by default) asks for the block.
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
// Options.Database (pgq's HTTP fetch, pgq consume and the bridges give
// the database pgq reads, api.Status.Database, unless told another). The transaction block's id is "<xid>:<commit LSN>"
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
// int4, int8 and oid as numbers; float4/float8 as numbers in Java's
// form, as the converter writes them (3.0, 1.0E10; NaN and ±Infinity, no
// JSON numbers, as strings); bool; numeric and money by
// DecimalMode (default string, see DecimalString for why not Debezium's
// precise; in string mode numeric's NaN and ±Infinity are "NAN",
// "POSITIVE_INFINITY" and "NEGATIVE_INFINITY", Debezium's
// SpecialValueDecimal); date as days since the epoch; time as microseconds past
// midnight (MicroTime); timestamp as microseconds since the epoch
// (MicroTimestamp; both by TimePrecisionMode, below), ±infinity as
// the JDBC driver's values; timestamptz as ISO 8601 in UTC with six
// fraction digits (ZonedTimestamp); timetz as
// UTC time (ZonedTime); interval as microseconds with 365.25/12-day
// months (MicroDuration, saturated at the int64 range as Java's cast to
// long: '178000000 years' is 9223372036854775807), or by IntervalMode as
// "P1Y2M3DT4H5M6.78S"; point as Debezium's Point struct
// {"x":1.0,"y":1.0,"wkb":<OGC WKB, base64>,"srid":null} (doubles as
// Java writes them); bytea base64; bit(1) and one-bit values as
// booleans, longer bit strings as Debezium's Bits (little-endian bytes,
// base64); json, jsonb, xml, uuid, text types, ranges, network types and
// enums as strings; arrays as JSON arrays of their elements (one
// dimension: several are flattened; timetz[] too, which pgtype does not
// know; an array of an enum or of an extension type such as citext or
// ltree as strings, by the text[] ingest journals as its value type,
// pgq.Column.BaseTypeOID: records journaled before render it as text);
// an hstore (pgq.Column.TypeName, which ingest journals for columns of
// an extension's type) as Debezium's default hstore.handling.mode=json
// writes it: a string of a JSON object, {"key1":"val1","key2":null},
// its keys in the order java.util.HashMap iterates the map pgjdbc's
// HStoreConverter fills (hstore.go), strings escaped as Jackson escapes
// them, an hstore[] as a JSON array of such strings, an unchanged
// TOASTed hstore as the JSON of Debezium's placeholder map
// {"__debezium_unavailable_value":"__debezium_unavailable_value"}
// (records journaled before pgq recorded type names: hstore's text);
// with Options.Hstore HstoreMap (hstore.handling.mode=map) the JSON
// object itself, Kafka Connect's map as its JSON converter writes it
// (an unchanged TOASTed hstore[] an array of the placeholder map: Debezium
// has none for an array of maps);
// an unchanged TOAST value (unless a FULL old image holds it,
// above) as Debezium's placeholder "__debezium_unavailable_value" in the
// column's type (UnchangedToastedPlaceholder): bytea its bytes, an array
// of strings ["__debezium_unavailable_value"], an array of numbers or
// booleans one element per byte of the placeholder ([95,95,100,…]), of
// uuid the placeholder's name-based UUID; a domain as its
// base type; a binary-format value base64; anything else its text.
//
// A column's type modifier (pgq.Column.Typmod: its declared precision
// and scale) is read by two modes. DecimalPrecise writes a numeric
// declared with a scale as Kafka Connect's Decimal at that scale (bare
// base64 bytes) and one without as Debezium's VariableScaleDecimal
// struct. TimeAdaptive (Options.Time; Debezium's default
// time.precision.mode=adaptive, pgq's default is TimeMicroseconds) writes
// time(0-3) and timestamp(0-3) in milliseconds (Time, Timestamp) and
// every other time and timestamp in microseconds. Records journaled
// before pgq kept type modifiers have none (-1) and render as columns
// declared without one: a numeric of variable scale, microseconds. A
// timestamptz always has six fraction digits, and a bit varying value of
// one bit is a boolean. PostGIS types, whose OIDs are not fixed, are
// their text.
//
// # Debezium with Kafka Connect schemas
//
// With Options.Schemas each Debezium event is
// {"schema":<Connect schema>,"payload":<the event>} and each key
// {"schema":…,"payload":<the key>}, as Kafka Connect's JSON converter
// writes them with schemas.enable=true (debezium_schema.go). The value's
// schema is the struct <Name>.<schema>.<table>.Envelope: before and after
// the optional <Name>.<schema>.<table>.Value, source
// io.debezium.connector.postgresql.Source, transaction event.block, op,
// ts_ms, ts_us, ts_ns; the key's <Name>.<schema>.<table>.Key of the key
// columns; a message's io.debezium.connector.postgresql.MessageValue and
// MessageKey; a schema change event's (AppendSchemaChange)
// io.debezium.connector.postgresql.SchemaChangeValue and SchemaChangeKey,
// Debezium's schemas of a schema change topic named for the postgresql
// connector, with pgq's optional gap struct pgq.Gap
// (debezium_schema_change.go). Each column has the Connect type and semantic name
// Debezium's PostgresValueConverter gives its type in the value modes
// (columnSchema; an hstore by its pgq.Column.TypeName:
// io.debezium.data.Json, with HstoreMap a map of string to optional
// string); key columns are required, the others optional (the
// journal does not carry NOT NULL). A renderer caches each table's
// schemas and computes them again when the change's columns differ from
// the ones it computed them from (a DDL and its new Relation); a
// truncate takes the table's cached schema, else a row of no fields.
// The payload is the event as without Schemas, but that a numeric NaN or
// infinity in precise mode is null (no Decimal holds it).
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
