package format

import (
	"strconv"
	"strings"

	"github.com/pgq-dev/pgq"
)

// SchemaChanges reports whether the format has schema change events
// (Renderer.AppendSchemaChange): Debezium's.
func (s Spec) SchemaChanges() bool { return s.schemaChange != nil }

// SchemaChange reports whether change i of tx goes to a schema-change
// topic in the renderer's format (AppendSchemaChange): a ddl or gap
// change in Debezium's format, which has no data event for it. A bridge
// publishes it there when one is configured and leaves it out otherwise,
// never onto a table's data topic.
func (r *Renderer) SchemaChange(tx *pgq.Transaction, i int) bool {
	if table[r.f].schemaChange == nil {
		return false
	}
	op := tx.Changes[i].Op
	return op == pgq.OpDDL || op == pgq.OpGap
}

// AppendSchemaChange appends change i of tx (SchemaChange true) as a
// message of a schema-change topic: in Debezium's format a schema change
// event, the shape of Debezium's MySQL, SQL Server and Oracle connectors
// (Debezium's PostgreSQL connector has no schema-change topic: this is
// pgq's extension). The value holds source (as a data event's, schema
// and table the DDL's object), ts_ms (when rendered), databaseName,
// schemaName, ddl (the statement) and tableChanges: for a table one
// entry with type (CREATE, ALTER or DROP, from the command tag) and id
// ("schema"."table"), no columns (pgq's DDL capture does not journal
// them); for another object none. A gap change has empty ddl and
// tableChanges and a "gap" object: fromLsn and toLsn, changes committed
// after fromLsn up to toLsn are missing from the journal. The key is
// {"databaseName":…}, as Debezium keys its schema change events, so
// all of a database's go to one partition, in order. With
// Options.Schemas value and key are {"schema":…,"payload":…} with
// Debezium's schemas of its schema change topic (schemaChangeSchemas).
func (r *Renderer) AppendSchemaChange(b []byte, tx *pgq.Transaction, i int) ([]byte, Message) {
	if !r.SchemaChange(tx, i) {
		return b, Message{}
	}
	return table[r.f].schemaChange(r, b, tx, i)
}

// ddlContent is the JSON pgq's capture trigger journals for a ddl change
// (pgq.OpDDL).
type ddlContent struct {
	Command    string `json:"command"`
	Object     string `json:"object"`
	Schema     string `json:"schema"`
	ObjectType string `json:"object_type"`
	Statement  string `json:"statement"`
}

func (r *Renderer) appendDebeziumSchemaChange(b []byte, tx *pgq.Transaction, i int) ([]byte, Message) {
	c := &tx.Changes[i]
	var d ddlContent
	if c.Op == pgq.OpDDL {
		_ = jsonUnmarshal(c.Content, &d) // a malformed payload renders empty fields
	}
	tbl := ddlTable(d)
	var m Message
	start := len(b)
	if r.o.Schemas {
		b = append(b, schemaChangeValuePrefix...)
	}
	b = append(b, `{"source":`...)
	b = r.appendSource(b, tx, i, d.Schema, tbl, false, true)
	b = append(b, `,"ts_ms":`...)
	b = strconv.AppendInt(b, r.o.Now().UnixMilli(), 10)
	b = append(b, `,"databaseName":`...)
	b = appendString(b, r.o.Database)
	b = append(b, `,"schemaName":`...)
	b = appendString(b, d.Schema)
	b = append(b, `,"ddl":`...)
	b = appendString(b, d.Statement)
	b = append(b, `,"tableChanges":[`...)
	if typ := ddlChangeType(d.Command); typ != "" && tbl != "" {
		b = append(b, `{"type":"`...)
		b = append(b, typ...)
		b = append(b, `","id":`...)
		b = appendString(b, quoteIdent(d.Schema)+"."+quoteIdent(tbl))
		b = append(b, '}')
	}
	b = append(b, ']')
	if c.Op == pgq.OpGap {
		b = append(b, `,"gap":{"fromLsn":`...)
		b = strconv.AppendUint(b, uint64(c.FromLSN), 10)
		b = append(b, `,"toLsn":`...)
		b = strconv.AppendUint(b, uint64(c.ToLSN), 10)
		b = append(b, '}')
	}
	b = append(b, '}')
	if r.o.Schemas {
		b = append(b, '}')
	}
	m.Payload = b[start:len(b):len(b)]
	start = len(b)
	if r.o.Schemas {
		b = append(b, schemaChangeKeyPrefix...)
	}
	b = append(b, `{"databaseName":`...)
	b = appendString(b, r.o.Database)
	b = append(b, '}')
	if r.o.Schemas {
		b = append(b, '}')
	}
	m.Key = b[start:len(b):len(b)]
	return b, m
}

// schemaChangeValuePrefix and schemaChangeKeyPrefix are a schema change
// event's value and key up to the payload with Options.Schemas:
// `{"schema":<schema>,"payload":`. They depend on no option (the
// connector is postgresql whatever Options.Name), so they are built once.
var schemaChangeValuePrefix, schemaChangeKeyPrefix = schemaChangeSchemas()

// schemaChangeSchemas are the Connect schemas Debezium gives the events
// of its schema change topic (SchemaFactory's
// schemaHistoryConnectorValueSchema and ...KeySchema, its
// ConnectTableChangeSerializer's Change, Table and Column), named for
// the postgresql connector as Debezium names them after the connector
// (io.debezium.connector.<connector>.SchemaChangeValue): value and key
// as `{"schema":<schema>,"payload":`. Debezium's table (columns, primary
// key) is in the schema, optional, though pgq never fills it, so that a
// consumer that knows Debezium's schema reads pgq's unchanged. The value
// has one field more, pgq's: gap, an optional struct pgq.Gap (fromLsn,
// toLsn), set in a gap change's event; a ddl change's has none, which
// the JSON converter reads as null, as it reads the table pgq leaves
// out of each tableChanges entry.
func schemaChangeSchemas() (value, key []byte) {
	optStrings := connectSchema{typ: "array", optional: true, items: &connectSchema{typ: "string"}}
	column := connectSchema{typ: "struct", name: "io.debezium.connector.schema.Column", version: 1, fields: []connectField{
		{"name", prim("string", false)},
		{"jdbcType", prim("int32", false)},
		{"nativeType", prim("int32", true)},
		{"typeName", prim("string", false)},
		{"typeExpression", prim("string", true)},
		{"charsetName", prim("string", true)},
		{"length", prim("int32", true)},
		{"scale", prim("int32", true)},
		{"position", prim("int32", false)},
		{"optional", prim("boolean", true)},
		{"autoIncremented", prim("boolean", true)},
		{"generated", prim("boolean", true)},
		{"comment", prim("string", true)},
		{"defaultValueExpression", prim("string", true)},
		{"enumValues", optStrings},
	}}
	tbl := connectSchema{typ: "struct", optional: true, name: "io.debezium.connector.schema.Table", version: 1, fields: []connectField{
		{"defaultCharsetName", prim("string", true)},
		{"primaryKeyColumnNames", optStrings},
		{"columns", connectSchema{typ: "array", items: &column}},
		{"comment", prim("string", true)},
	}}
	change := connectSchema{typ: "struct", name: "io.debezium.connector.schema.Change", version: 1, fields: []connectField{
		{"type", prim("string", false)},
		{"id", prim("string", false)},
		{"table", tbl},
	}}
	gap := connectSchema{typ: "struct", optional: true, name: "pgq.Gap", version: 1, fields: []connectField{
		{"fromLsn", prim("int64", false)},
		{"toLsn", prim("int64", false)},
	}}
	v := connectSchema{typ: "struct", name: "io.debezium.connector.postgresql.SchemaChangeValue", version: 1, fields: []connectField{
		{"source", sourceSchema()},
		{"ts_ms", prim("int64", false)},
		{"databaseName", prim("string", true)},
		{"schemaName", prim("string", true)},
		{"ddl", prim("string", true)},
		{"tableChanges", connectSchema{typ: "array", items: &change}},
		{"gap", gap},
	}}
	k := connectSchema{typ: "struct", name: "io.debezium.connector.postgresql.SchemaChangeKey", version: 1, fields: []connectField{
		{"databaseName", prim("string", false)},
	}}
	value = append(v.appendJSON([]byte(`{"schema":`), ""), `,"payload":`...)
	key = append(k.appendJSON([]byte(`{"schema":`), ""), `,"payload":`...)
	return value, key
}

// ddlTable is the table a ddl change names: its object without the
// schema, unquoted; "" for an object that is no table.
func ddlTable(d ddlContent) string {
	if d.ObjectType != "table" {
		return ""
	}
	t := d.Object
	for _, p := range []string{d.Schema + ".", quoteIdent(d.Schema) + "."} {
		if s, ok := strings.CutPrefix(t, p); ok {
			t = s
			break
		}
	}
	if len(t) >= 2 && t[0] == '"' && t[len(t)-1] == '"' {
		t = strings.ReplaceAll(t[1:len(t)-1], `""`, `"`)
	}
	return t
}

// ddlChangeType is Debezium's tableChanges type of a command tag:
// CREATE, ALTER or DROP; "" for another command.
func ddlChangeType(command string) string {
	switch {
	case strings.HasPrefix(command, "CREATE "), command == "SELECT INTO":
		return "CREATE"
	case strings.HasPrefix(command, "ALTER "):
		return "ALTER"
	case strings.HasPrefix(command, "DROP "):
		return "DROP"
	}
	return ""
}

// quoteIdent double-quotes s as PostgreSQL quotes an identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
