package format_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// schemaTypesDDL is a table of many column types (pk serial PRIMARY KEY
// first, pgRow's): every type columnSchema names, with and without type
// modifiers.
const schemaTypesDDL = "b bool NOT NULL, i2 int2, i4 int4, i8 int8, o oid, f4 float4, f8 float8, " +
	"n numeric, n103 numeric(10,3), n4 numeric(4), nnan numeric(6,2), m money, " +
	"d date, t time, t3 time(3), ttz timetz, ts timestamp, ts0 timestamp(0), tstz timestamptz, " +
	"iv interval, u uuid, j json, jb jsonb, x xml, by bytea, p point, " +
	"bt bit, b8 bit(8), vb varbit, vb1 varbit(4), txt text, vc varchar(10), inet inet, " +
	"ia int4[], na numeric(5,2)[], ta text[], tsa timestamp[], ba bool[], nul text"

const schemaTypesInsert = "INSERT INTO schema_types (b, i2, i4, i8, o, f4, f8, n, n103, n4, nnan, m, d, t, t3, ttz, ts, ts0, tstz, " +
	"iv, u, j, jb, x, by, p, bt, b8, vb, vb1, txt, vc, inet, ia, na, ta, tsa, ba) VALUES (" +
	"true, -32768, 2147483647, -9223372036854775808, 4294967295, 1.5, 'NaN', " +
	"'-12.3400', 1234567.891, 9999, 'NaN', -1234.56, " +
	"'2026-12-04', '13:14:15.123456', '13:14:15.123', '13:14:15+02', '2026-12-04 13:14:15.123456', '2026-12-04 13:14:15', '2026-12-04 13:14:15.5+01', " +
	"'1 year 2 mons 3 days 04:05:06.78', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"a\":[1,2]}', '{\"b\":null}', '<a>x</a>', '\\x00ff', '(1.5,-2)', " +
	"B'1', B'10100101', B'1', B'101', 'héllo \"q\"', 'vc', '10.1.2.3/32', " +
	"'{1,NULL,3}', '{1.5,-2.25}', '{a,\"b c\"}', '{\"2026-12-04 00:00:01\"}', '{true,false}')"

// schemaModes are the value modes the schema test renders in: pgq's
// defaults (transaction null) and Debezium's (precise, adaptive;
// intervals as strings) with transaction metadata, so that the
// transaction block's schema is held to its values too.
var schemaModes = []struct {
	name string
	o    format.Options
}{
	{"default", format.Options{}},
	{"debezium", format.Options{Decimal: format.DecimalPrecise, Time: format.TimeAdaptive, Interval: format.IntervalString, TransactionMetadata: true}},
}

// schemaChanges are an insert, an update of the row's key (a delete and
// a create), an update, a delete of a key-only old image and a truncate
// of the table of row.
func schemaChanges(row pgq.Change) []pgq.Change {
	ins := row
	upd := row
	upd.Op = pgq.OpUpdate
	upd.New = append([]pgq.Value(nil), row.New...)
	upd.New[1] = pgq.Value{Kind: pgq.ValueText, Data: []byte("f")}
	keyOnly := make([]pgq.Value, len(row.New))
	for i := range keyOnly {
		keyOnly[i] = pgq.Value{Kind: pgq.ValueNull}
	}
	keyOnly[0] = row.New[0]
	moved := upd
	moved.Old, moved.OldKind = keyOnly, pgq.OldKey
	moved.New = append([]pgq.Value(nil), upd.New...)
	moved.New[0] = pgq.Value{Kind: pgq.ValueText, Data: []byte("2")}
	del := row
	del.Op, del.New, del.Old, del.OldKind = pgq.OpDelete, nil, keyOnly, pgq.OldKey
	trunc := pgq.Change{Op: pgq.OpTruncate, Tables: []string{row.Schema + "." + row.Table, "public.never_seen"}}
	msg := pgq.Change{Op: pgq.OpMessage, Prefix: "p", Content: []byte("hi"), Transactional: true}
	return []pgq.Change{ins, moved, upd, del, trunc, msg}
}

// TestDebeziumSchemas renders a table of column types, read back from a
// real PostgreSQL, in both forms (payload only, schema and payload) and
// both value modes: every event and key of the schema form passes
// checkConnect and its payload is the payload-only form's event, and
// both are held to golden files (go test -update rewrites them).
func TestDebeziumSchemas(t *testing.T) {
	row := pgRow(t, "schema_types", schemaTypesDDL, schemaTypesInsert)
	for _, m := range schemaModes {
		t.Run(m.name, func(t *testing.T) {
			plain, schemas := renderSchemaForms(t, m.o, schemaChanges(row))
			golden(t, filepath.Join("testdata", "debezium_schema", m.name+"-payload.json"), plain)
			golden(t, filepath.Join("testdata", "debezium_schema", m.name+"-schemas.json"), schemas)
		})
	}
}

// renderSchemaForms renders every event and key of changes in both
// forms, checks the schema form against the payload form and the
// checker, and returns each form's events and keys as one JSON array.
func renderSchemaForms(t *testing.T, o format.Options, changes []pgq.Change) (plain, schemas []byte) {
	t.Helper()
	rp, rs := schemaFormRenderers(t, o)
	tx := testTx(changes...)
	plain, schemas = []byte{'['}, []byte{'['}
	for i := range tx.Changes {
		for k := range rs.Events(tx, i) {
			var mp, ms format.Message
			var bp, bs []byte
			bp, mp = rp.AppendEventMessage(bp, tx, i, k, format.Kafka)
			bs, ms = rs.AppendEventMessage(bs, tx, i, k, format.Kafka)
			checkConnect(t, ms.Payload)
			samePayload(t, ms.Payload, mp.Payload)
			if ms.Key != nil {
				checkConnect(t, ms.Key)
				samePayload(t, ms.Key, mp.Key)
			} else if mp.Key != nil {
				t.Errorf("change %d event %d: key %s in the payload form, none with schemas", i, k, mp.Key)
			}
			if len(plain) > 1 {
				plain, schemas = append(plain, ','), append(schemas, ',')
			}
			plain = append(append(append(append(plain, `{"key":`...), orNull(mp.Key)...), `,"value":`...), mp.Payload...)
			schemas = append(append(append(append(schemas, `{"key":`...), orNull(ms.Key)...), `,"value":`...), ms.Payload...)
			plain, schemas = append(plain, '}'), append(schemas, '}')
		}
	}
	return append(plain, ']'), append(schemas, ']')
}

// schemaFormRenderers are the Debezium renderers of o without and with
// Options.Schemas, naming the database and server as Debezium's tests do.
func schemaFormRenderers(t *testing.T, o format.Options) (plain, schemas *format.Renderer) {
	t.Helper()
	o.Database, o.Name, o.Now = "postgres", "PostgreSQL_server", fixedNow
	plain, err := format.New(format.Debezium, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Schemas = true
	schemas, err = format.New(format.Debezium, o)
	if err != nil {
		t.Fatal(err)
	}
	return plain, schemas
}

func orNull(b []byte) []byte {
	if b == nil {
		return []byte("null")
	}
	return b
}

// samePayload fails unless withSchema's payload is plain, byte for
// byte, but for the one value the forms differ in: a numeric's NaN or
// infinity in precise mode, a string in the payload-only form, null with
// schemas (no Decimal holds it).
func samePayload(t *testing.T, withSchema, plain []byte) {
	t.Helper()
	var w struct{ Payload json.RawMessage }
	if err := json.Unmarshal(withSchema, &w); err != nil {
		t.Fatalf("invalid JSON %s: %v", withSchema, err)
	}
	if bytes.Equal(w.Payload, plain) {
		return
	}
	var a, b any
	if json.Unmarshal(w.Payload, &a) != nil || json.Unmarshal(plain, &b) != nil || !sameButSpecial(a, b) {
		t.Errorf("payload differs from the payload-only form:\n got %s\nwant %s", w.Payload, plain)
	}
}

func sameButSpecial(a, b any) bool {
	switch y := b.(type) {
	case string:
		if a == nil && (y == "NaN" || y == "Infinity" || y == "-Infinity") {
			return true
		}
	case map[string]any:
		x, ok := a.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range y {
			if !sameButSpecial(x[k], y[k]) {
				return false
			}
		}
		return true
	case []any:
		x, ok := a.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range y {
			if !sameButSpecial(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// fieldSchema returns the schema of field name of the row (the
// envelope's "after") in a schema-form event.
func fieldSchema(t *testing.T, ev []byte, name string) map[string]any {
	t.Helper()
	var e struct {
		Schema struct {
			Fields []struct {
				Field  string
				Fields []map[string]any
			}
		}
	}
	if err := json.Unmarshal(ev, &e); err != nil {
		t.Fatalf("invalid JSON %s: %v", ev, err)
	}
	for _, f := range e.Schema.Fields {
		if f.Field != "after" {
			continue
		}
		for _, c := range f.Fields {
			if c["field"] == name {
				return c
			}
		}
	}
	t.Fatalf("no field %s in %s", name, ev)
	return nil
}

// TestDebeziumSchemaTypes: the semantic types Debezium gives each column
// type per mode, and what records journaled before pgq kept type
// modifiers get (numeric: VariableScaleDecimal; time: micro).
func TestDebeziumSchemaTypes(t *testing.T) {
	row := pgRow(t, "schema_names", "n103 numeric(10,3), t3 time(3), ts0 timestamp(0), b8 bit(8), vb varbit", "INSERT INTO schema_names DEFAULT VALUES")
	old := row
	old.Columns = append([]pgq.Column(nil), row.Columns...)
	for i := range old.Columns {
		old.Columns[i].TypmodPlus1 = 0
	}
	o := schemaModes[1].o
	o.Schemas = true
	cases := []struct {
		c                 pgq.Change
		col, name, params string
	}{
		{row, "n103", "org.apache.kafka.connect.data.Decimal", `{"connect.decimal.precision":"10","scale":"3"}`},
		{old, "n103", "io.debezium.data.VariableScaleDecimal", ""},
		{row, "t3", "io.debezium.time.Time", ""},
		{old, "t3", "io.debezium.time.MicroTime", ""},
		{row, "ts0", "io.debezium.time.Timestamp", ""},
		{old, "ts0", "io.debezium.time.MicroTimestamp", ""},
		{row, "b8", "io.debezium.data.Bits", `{"length":"8"}`},
		{row, "vb", "io.debezium.data.Bits", `{"length":"2147483647"}`},
	}
	for _, tc := range cases {
		r, err := format.New(format.Debezium, o)
		if err != nil {
			t.Fatal(err)
		}
		ev := r.AppendEvent(nil, testTx(tc.c), 0, 0)
		checkConnect(t, ev)
		f := fieldSchema(t, ev, tc.col)
		if f["name"] != tc.name {
			t.Errorf("%s (typmod %d): name %v, want %s", tc.col, tc.c.Columns[0].Typmod(), f["name"], tc.name)
		}
		if tc.params != "" {
			if p, _ := json.Marshal(f["parameters"]); string(p) != tc.params {
				t.Errorf("%s: parameters %s, want %s", tc.col, p, tc.params)
			}
		}
		if f["optional"] != true {
			t.Errorf("%s: a column of unknown nullability is optional, got %v", tc.col, f["optional"])
		}
	}
	if f := fieldSchema(t, renderWith(t, o, row), "pk"); f["optional"] != false {
		t.Errorf("pk: a key column is required, got optional %v", f["optional"])
	}
}

func renderWith(t *testing.T, o format.Options, c pgq.Change) []byte {
	t.Helper()
	r, err := format.New(format.Debezium, o)
	if err != nil {
		t.Fatal(err)
	}
	return r.AppendEvent(nil, testTx(c), 0, 0)
}

// TestDebeziumSchemaFollowsColumns: a renderer computes a table's schema
// once and again when the table's columns change (a new Relation after
// a DDL), not from a stale cache.
func TestDebeziumSchemaFollowsColumns(t *testing.T) {
	cols := []pgq.Column{{Name: "id", TypeOID: pgtype.Int4OID, Key: true}}
	c := pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: cols, New: []pgq.Value{tv("1")}}
	r, err := format.New(format.Debezium, format.Options{Schemas: true, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	first := r.AppendEvent(nil, testTx(c), 0, 0)
	checkConnect(t, first)
	again := r.AppendEvent(nil, testTx(c), 0, 0)
	if !bytes.Equal(first, again) {
		t.Errorf("same columns, other event:\n%s\n%s", first, again)
	}
	// ALTER TABLE t ADD COLUMN v int8: PostgreSQL sends a new Relation.
	c2 := c
	c2.Columns = append(append([]pgq.Column(nil), cols...), pgq.Column{Name: "v", TypeOID: pgtype.Int8OID})
	c2.New = []pgq.Value{tv("2"), tv("9000000000")}
	ev := r.AppendEvent(nil, testTx(c2), 0, 0)
	checkConnect(t, ev)
	if f := fieldSchema(t, ev, "v"); f["type"] != "int64" {
		t.Errorf("new column v: %v", f)
	}
	// ALTER TABLE t ALTER v TYPE text.
	c3 := c2
	c3.Columns = append([]pgq.Column(nil), c2.Columns...)
	c3.Columns[1].TypeOID = pgtype.TextOID
	c3.New = []pgq.Value{tv("3"), tv("x")}
	ev = r.AppendEvent(nil, testTx(c3), 0, 0)
	checkConnect(t, ev)
	if f := fieldSchema(t, ev, "v"); f["type"] != "string" {
		t.Errorf("column v retyped: %v", f)
	}
	if !strings.Contains(string(ev), `"name":"pgq.public.t.Envelope"`) {
		t.Errorf("envelope name: %s", ev)
	}
}
