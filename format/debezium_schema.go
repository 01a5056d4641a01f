package format

import (
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq"
)

// This file writes Debezium events in the form Kafka Connect's JSON
// converter gives them with schemas.enable=true (its default):
// {"schema":<the Connect schema of the value>,"payload":<the event>},
// and keys as {"schema":<the key's>,"payload":<the key>}. The schemas
// are Debezium's: the envelope <name>.<schema>.<table>.Envelope, the
// row <name>.<schema>.<table>.Value and key .Key, the source
// io.debezium.connector.postgresql.Source, the transaction block
// event.block, and per column the Connect type and semantic type name
// Debezium's PostgresValueConverter gives the column's type in the
// renderer's value modes (columnSchema).

// connectSchema is a Kafka Connect schema as the JSON converter writes
// it (JsonConverter.asJsonSchema).
type connectSchema struct {
	// typ is Connect's type: int8, int16, int32, int64, float32,
	// float64, boolean, string, bytes, array, map or struct.
	typ      string
	optional bool
	// name is the schema's (semantic) name; "" for none.
	name string
	// version is the schema's version; 0 for none.
	version int
	doc     string
	// params are the schema's parameters, in order.
	params [][2]string
	// def is the JSON of the default value; "" for none.
	def    string
	fields []connectField
	items  *connectSchema
	// keys and values are a map's schemas.
	keys, values *connectSchema
}

type connectField struct {
	name   string
	schema connectSchema
}

// appendJSON appends s as the JSON converter writes a schema, with
// "field" set for a struct's field (field "" leaves it out).
func (s *connectSchema) appendJSON(b []byte, field string) []byte {
	b = append(b, `{"type":"`...)
	b = append(b, s.typ...)
	b = append(b, '"')
	if s.typ == "struct" {
		b = append(b, `,"fields":[`...)
		for i := range s.fields {
			if i > 0 {
				b = append(b, ',')
			}
			b = s.fields[i].schema.appendJSON(b, s.fields[i].name)
		}
		b = append(b, ']')
	}
	if s.items != nil {
		b = append(b, `,"items":`...)
		b = s.items.appendJSON(b, "")
	}
	if s.keys != nil {
		b = append(b, `,"keys":`...)
		b = s.keys.appendJSON(b, "")
		b = append(b, `,"values":`...)
		b = s.values.appendJSON(b, "")
	}
	b = append(b, `,"optional":`...)
	b = strconv.AppendBool(b, s.optional)
	if s.name != "" {
		b = append(b, `,"name":`...)
		b = appendString(b, s.name)
	}
	if s.version != 0 {
		b = append(b, `,"version":`...)
		b = strconv.AppendInt(b, int64(s.version), 10)
	}
	if s.doc != "" {
		b = append(b, `,"doc":`...)
		b = appendString(b, s.doc)
	}
	if len(s.params) > 0 {
		b = append(b, `,"parameters":{`...)
		for i, p := range s.params {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, p[0])
			b = append(b, ':')
			b = appendString(b, p[1])
		}
		b = append(b, '}')
	}
	if s.def != "" {
		b = append(b, `,"default":`...)
		b = append(b, s.def...)
	}
	if field != "" {
		b = append(b, `,"field":`...)
		b = appendString(b, field)
	}
	return append(b, '}')
}

// Connect's primitive schemas, as Debezium names them (Schema.INT64_SCHEMA,
// OPTIONAL_INT64_SCHEMA, …).
func prim(typ string, optional bool) connectSchema {
	return connectSchema{typ: typ, optional: optional}
}

// named is a schema of a Debezium semantic type: version 1, as all of
// Debezium's (io.debezium.time.*, io.debezium.data.*) are.
func named(typ, name string) connectSchema {
	return connectSchema{typ: typ, name: name, version: 1}
}

// sourceSchema is io.debezium.connector.postgresql.Source: the common
// fields of Debezium's SchemaFactory.sourceInfoSchemaBuilder, then the
// PostgreSQL connector's. origin (optional) is pgq's: the replication
// origin of a transaction that has one, which the converter would drop
// were it not in the schema.
func sourceSchema() connectSchema {
	snapshot := named("string", "io.debezium.data.Enum")
	snapshot.optional = true
	snapshot.params = [][2]string{{"allowed", "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"}}
	snapshot.def = `"false"`
	return connectSchema{typ: "struct", name: "io.debezium.connector.postgresql.Source", version: 1, fields: []connectField{
		{"version", prim("string", false)},
		{"connector", prim("string", false)},
		{"name", prim("string", false)},
		{"ts_ms", prim("int64", false)},
		{"snapshot", snapshot},
		{"db", prim("string", false)},
		{"sequence", prim("string", true)},
		{"ts_us", prim("int64", true)},
		{"ts_ns", prim("int64", true)},
		{"schema", prim("string", false)},
		{"table", prim("string", false)},
		{"txId", prim("int64", true)},
		{"lsn", prim("int64", true)},
		{"xmin", prim("int64", true)},
		{"origin", prim("string", true)},
	}}
}

// transactionSchema is Debezium's transaction block, event.block.
func transactionSchema() connectSchema {
	return connectSchema{typ: "struct", optional: true, name: "event.block", version: 1, fields: []connectField{
		{"id", prim("string", false)},
		{"total_order", prim("int64", false)},
		{"data_collection_order", prim("int64", false)},
	}}
}

// envelopeTail is the envelope's fields after before and after, in the
// order pgq writes them.
func envelopeTail() []connectField {
	return []connectField{
		{"source", sourceSchema()},
		{"transaction", transactionSchema()},
		{"op", prim("string", false)},
		{"ts_ms", prim("int64", true)},
		{"ts_us", prim("int64", true)},
		{"ts_ns", prim("int64", true)},
	}
}

// tableSchema is what the renderer keeps of one table's schemas: the
// columns they were computed from (a change whose columns differ, after
// a DDL and the new Relation PostgreSQL sends, computes them again), the
// value's prefix up to the payload and the key's.
type tableSchema struct {
	cols []pgq.Column
	// value is `{"schema":<envelope>,"payload":`.
	value []byte
	// key is `{"schema":<key struct>,"payload":`; nil for a table
	// without key columns.
	key []byte
}

// sameColumns reports whether a and b describe the same row: the
// schema's inputs (name, type, base type, type modifier, key).
func sameColumns(a, b []pgq.Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// tableSchemaOf returns the schemas of schema.table with columns cols,
// from the renderer's cache when cols are the ones it computed them
// from: a hot path renders a table's changes without building its
// schema again.
func (r *Renderer) tableSchemaOf(schema, table string, cols []pgq.Column) *tableSchema {
	id := schema + "." + table
	if ts, ok := r.schemas[id]; ok && sameColumns(ts.cols, cols) {
		return ts
	}
	ts := r.buildTableSchema(schema, table, cols)
	if r.schemas == nil {
		r.schemas = map[string]*tableSchema{}
	}
	r.schemas[id] = ts
	return ts
}

// truncateSchema is the schemas of a truncated table: the ones of its
// last change the renderer saw (a truncate carries no columns), else a
// row of no fields (before and after are null in a truncate's event).
func (r *Renderer) truncateSchema(schema, table string) *tableSchema {
	if ts, ok := r.schemas[schema+"."+table]; ok {
		return ts
	}
	return r.buildTableSchema(schema, table, nil)
}

func (r *Renderer) buildTableSchema(schema, table string, cols []pgq.Column) *tableSchema {
	prefix := r.o.Name + "." + schema + "." + table
	row := connectSchema{typ: "struct", optional: true, name: prefix + ".Value"}
	key := connectSchema{typ: "struct", name: prefix + ".Key"}
	for i := range cols {
		c := &cols[i]
		s := r.columnSchemaOf(c)
		// A key column is the primary key's (or the replica identity
		// index's): NOT NULL in PostgreSQL. The journal does not record
		// the other columns' NOT NULL: they are optional, as Debezium
		// has a column whose nullability it does not know.
		s.optional = !c.Key
		row.fields = append(row.fields, connectField{c.Name, s})
		if c.Key {
			key.fields = append(key.fields, connectField{c.Name, s})
		}
	}
	env := connectSchema{typ: "struct", name: prefix + ".Envelope", version: 2,
		fields: append([]connectField{{"before", row}, {"after", row}}, envelopeTail()...)}
	ts := &tableSchema{cols: append([]pgq.Column(nil), cols...)}
	ts.value = env.appendJSON(append([]byte(nil), `{"schema":`...), "")
	ts.value = append(ts.value, `,"payload":`...)
	if len(key.fields) > 0 {
		ts.key = key.appendJSON(append([]byte(nil), `{"schema":`...), "")
		ts.key = append(ts.key, `,"payload":`...)
	}
	return ts
}

// messageSchemas are the value's and key's prefixes of a logical
// decoding message's event (Debezium's MessageValue and MessageKey),
// the same for every message.
func (r *Renderer) messageSchemas() (value, key []byte) {
	if r.msgSchema == nil {
		content := connectField{"message", connectSchema{typ: "struct", name: "io.debezium.connector.postgresql.Message", fields: []connectField{
			{"prefix", prim("string", true)},
			{"content", prim("bytes", true)},
		}}}
		env := connectSchema{typ: "struct", name: "io.debezium.connector.postgresql.MessageValue", fields: []connectField{
			{"source", sourceSchema()},
			{"op", prim("string", false)},
			{"ts_ms", prim("int64", true)},
			{"ts_us", prim("int64", true)},
			{"ts_ns", prim("int64", true)},
			content,
		}}
		k := connectSchema{typ: "struct", name: "io.debezium.connector.postgresql.MessageKey", fields: []connectField{
			{"prefix", prim("string", true)},
		}}
		r.msgSchema = append(env.appendJSON([]byte(`{"schema":`), ""), `,"payload":`...)
		r.msgKeySchema = append(k.appendJSON([]byte(`{"schema":`), ""), `,"payload":`...)
	}
	return r.msgSchema, r.msgKeySchema
}

// columnSchemaOf is the Connect schema of column c, required (the caller
// sets optional): an hstore's (pgq.Column.TypeName) as Debezium gives it
// in the hstore mode (hstoreSchema), an hstore[] an array of optional
// such; any other by its value type.
func (r *Renderer) columnSchemaOf(c *pgq.Column) connectSchema {
	switch c.TypeName {
	case hstoreName:
		return r.hstoreSchema()
	case hstoreArrayName:
		items := r.hstoreSchema()
		items.optional = true
		return connectSchema{typ: "array", items: &items}
	}
	return r.columnSchema(c.ValueType(), c.Typmod())
}

// hstoreSchema is an hstore's schema in the hstore mode
// (PostgresValueConverter.hstoreSchema): io.debezium.data.Json, or a map
// of required string keys to optional string values.
func (r *Renderer) hstoreSchema() connectSchema {
	if r.o.Hstore == HstoreMap {
		k, v := prim("string", false), prim("string", true)
		return connectSchema{typ: "map", keys: &k, values: &v}
	}
	return named("string", "io.debezium.data.Json")
}

// columnSchema is the Connect schema of a column of value type typ and
// type modifier typmod (-1 for none or unknown) as Debezium's
// PostgresValueConverter gives it in the renderer's value modes,
// required (the caller sets optional). Types it has no semantic type for
// (text, varchar, inet, an enum, …) are strings, as pgq renders
// them. Records journaled before pgq kept type modifiers have none: a
// numeric is then a VariableScaleDecimal in precise mode and a time or
// timestamp micro in adaptive mode, as their values render.
func (r *Renderer) columnSchema(typ uint32, typmod int32) connectSchema {
	switch typ {
	case pgtype.BoolOID:
		return prim("boolean", false)
	case pgtype.Int2OID:
		return prim("int16", false)
	case pgtype.Int4OID:
		return prim("int32", false)
	case pgtype.Int8OID, pgtype.OIDOID:
		return prim("int64", false)
	case pgtype.Float4OID:
		return prim("float32", false)
	case pgtype.Float8OID:
		return prim("float64", false)
	case pgtype.NumericOID:
		return r.numericSchema(typmod)
	case moneyOID:
		switch r.o.Decimal {
		case DecimalPrecise:
			return decimalSchema(2, -1)
		case DecimalDouble:
			return prim("float64", false)
		}
		return prim("string", false)
	case pgtype.DateOID:
		return named("int32", "io.debezium.time.Date")
	case pgtype.TimeOID:
		if r.milliTime(typmod) {
			return named("int32", "io.debezium.time.Time")
		}
		return named("int64", "io.debezium.time.MicroTime")
	case timetzOID:
		return named("string", "io.debezium.time.ZonedTime")
	case pgtype.TimestampOID:
		if r.milliTime(typmod) {
			return named("int64", "io.debezium.time.Timestamp")
		}
		return named("int64", "io.debezium.time.MicroTimestamp")
	case pgtype.TimestamptzOID:
		return named("string", "io.debezium.time.ZonedTimestamp")
	case pgtype.IntervalOID:
		if r.o.Interval == IntervalString {
			return named("string", "io.debezium.time.Interval")
		}
		return named("int64", "io.debezium.time.MicroDuration")
	case pgtype.UUIDOID:
		return named("string", "io.debezium.data.Uuid")
	case pgtype.JSONOID, pgtype.JSONBOID:
		return named("string", "io.debezium.data.Json")
	case xmlOID:
		return named("string", "io.debezium.data.Xml")
	case pgtype.ByteaOID:
		return prim("bytes", false)
	case pgtype.PointOID:
		return pointSchema()
	case bitOID, varbitOID:
		if oneBit(typ, typmod) {
			return prim("boolean", false)
		}
		s := named("bytes", "io.debezium.data.Bits")
		length := "2147483647" // varbit without a length: Integer.MAX_VALUE
		if typmod > 0 {
			length = strconv.Itoa(int(typmod))
		}
		s.params = [][2]string{{"length", length}}
		return s
	}
	if elem, ok := r.arrayElem(typ); ok {
		items := r.columnSchema(elem, typmod)
		items.optional = true
		return connectSchema{typ: "array", items: &items}
	}
	return prim("string", false)
}

// xmlOID is xml's type OID.
const xmlOID = 142

// numericSchema is numeric's schema in the decimal mode: in precise
// mode Connect's Decimal where the type modifier declares a scale
// (numericScale), else Debezium's VariableScaleDecimal.
func (r *Renderer) numericSchema(typmod int32) connectSchema {
	switch r.o.Decimal {
	case DecimalDouble:
		return prim("float64", false)
	case DecimalString:
		return prim("string", false)
	}
	if scale, ok := numericScale(typmod); ok {
		return decimalSchema(scale, int((typmod-4)>>16&0xffff))
	}
	return connectSchema{typ: "struct", name: "io.debezium.data.VariableScaleDecimal", version: 1, doc: "Variable scaled decimal",
		fields: []connectField{{"scale", prim("int32", false)}, {"value", prim("bytes", false)}}}
}

// decimalSchema is Connect's Decimal of scale (and precision, where
// known: precision < 0 leaves it out, as Debezium does for money).
func decimalSchema(scale, precision int) connectSchema {
	s := named("bytes", "org.apache.kafka.connect.data.Decimal")
	s.params = [][2]string{{"scale", strconv.Itoa(scale)}}
	if precision >= 0 {
		s.params = append(s.params, [2]string{"connect.decimal.precision", strconv.Itoa(precision)})
	}
	return s
}

// pointSchema is io.debezium.data.geometry.Point.
func pointSchema() connectSchema {
	return connectSchema{typ: "struct", name: "io.debezium.data.geometry.Point", version: 1, doc: "Geometry (POINT)",
		fields: []connectField{
			{"x", prim("float64", false)},
			{"y", prim("float64", false)},
			{"wkb", prim("bytes", true)},
			{"srid", prim("int32", true)},
		}}
}

// milliTime reports whether a time or timestamp of type modifier typmod
// renders in milliseconds: a declared precision of 0 to 3 in adaptive
// mode (Debezium's Time and Timestamp).
func (r *Renderer) milliTime(typmod int32) bool {
	return r.o.Time == TimeAdaptive && typmod >= 0 && typmod <= 3
}

// oneBit reports whether a bit or bit varying column is Debezium's
// boolean: a declared length of 1 (PostgresValueConverter: a length
// above 1 is Bits), bit without a length being bit(1). A record
// journaled before pgq kept type modifiers has no length: its bit is
// taken as bit(1), its bit varying as of unlimited length.
func oneBit(typ uint32, typmod int32) bool {
	return typmod == 1 || (typ == bitOID && typmod < 0)
}

// appendDebeziumEvent appends event k of change i of tx as the Debezium
// format's event: the envelope alone, or with Options.Schemas
// {"schema":…,"payload":<the envelope>}.
func (r *Renderer) appendDebeziumEvent(b []byte, tx *pgq.Transaction, i, k int) []byte {
	if !r.o.Schemas {
		return r.appendDebezium(b, tx, i, k)
	}
	c := &tx.Changes[i]
	switch c.Op {
	case pgq.OpMessage:
		v, _ := r.messageSchemas()
		b = append(b, v...)
	case pgq.OpTruncate:
		schema, table, _ := strings.Cut(eventTable(c, k), ".")
		b = append(b, r.truncateSchema(schema, table).value...)
	default:
		b = append(b, r.tableSchemaOf(c.Schema, c.Table, c.Columns).value...)
	}
	b = r.appendDebezium(b, tx, i, k)
	return append(b, '}')
}

// appendDebeziumKeyEvent appends the key of event k of change i of tx
// (AppendDebeziumKey), with Options.Schemas as
// {"schema":…,"payload":<the key>}; a null key stays null (the JSON
// converter writes no schema for a null key without one).
func (r *Renderer) appendDebeziumKeyEvent(b []byte, tx *pgq.Transaction, i, k int) []byte {
	if !r.o.Schemas {
		return r.AppendDebeziumKey(b, tx, i, k)
	}
	c := &tx.Changes[i]
	var prefix []byte
	switch c.Op {
	case pgq.OpMessage:
		_, prefix = r.messageSchemas()
	case pgq.OpInsert, pgq.OpUpdate, pgq.OpDelete, pgq.OpRead:
		prefix = r.tableSchemaOf(c.Schema, c.Table, c.Columns).key
	}
	if prefix == nil {
		return r.AppendDebeziumKey(b, tx, i, k)
	}
	b = append(b, prefix...)
	b = r.AppendDebeziumKey(b, tx, i, k)
	return append(b, '}')
}
