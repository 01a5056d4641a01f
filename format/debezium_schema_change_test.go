package format_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// TestDebeziumSchemaChange renders a ddl change and a gap change as
// Debezium's schema change events (the shape of its MySQL connector's
// schema change topic) and checks every field pgq fills, the key, that
// a data change is none, and that pgq's format has none.
func TestDebeziumSchemaChange(t *testing.T) {
	r, err := format.New(format.Debezium, format.Options{Database: "shop", Name: "srv", Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	tx := &pgq.Transaction{Xid: 77, CommitLSN: 0x1000, CommitTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Changes: []pgq.Change{
		{Op: pgq.OpDDL, Prefix: "pgq.ddl", Transactional: true, Content: []byte(
			`{"command":"ALTER TABLE","object":"public.\"Order\"","schema":"public","object_type":"table","statement":"ALTER TABLE \"Order\" ADD note text"}`)},
		{Op: pgq.OpDDL, Prefix: "pgq.ddl", Transactional: true, Content: []byte(
			`{"command":"CREATE INDEX","object":"public.o_idx","schema":"public","object_type":"index","statement":"CREATE INDEX o_idx ON t (v)"}`)},
		{Op: pgq.OpGap, FromLSN: 0x10, ToLSN: 0x20},
		{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: []pgq.Column{{Name: "id", TypeOID: 20, Key: true}},
			New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}}},
	}}
	src := func(ordinal, schema, table string) map[string]any {
		us := float64(tx.CommitTime.UnixMicro())
		return map[string]any{"version": "pgq", "connector": "postgresql", "name": "srv", "ts_ms": us / 1000, "snapshot": "false",
			"db": "shop", "sequence": `["4096","` + ordinal + `"]`, "ts_us": us, "ts_ns": us * 1000, "schema": schema, "table": table,
			"txId": float64(77), "lsn": float64(4096), "xmin": nil}
	}
	now := float64(fixedNow().UnixMilli())
	want := []map[string]any{{
		"source": src("0", "public", "Order"), "ts_ms": now, "databaseName": "shop", "schemaName": "public",
		"ddl":          `ALTER TABLE "Order" ADD note text`,
		"tableChanges": []any{map[string]any{"type": "ALTER", "id": `"public"."Order"`}},
	}, {
		"source": src("1", "public", ""), "ts_ms": now, "databaseName": "shop", "schemaName": "public",
		"ddl": "CREATE INDEX o_idx ON t (v)", "tableChanges": []any{},
	}, {
		"source": src("2", "", ""), "ts_ms": now, "databaseName": "shop", "schemaName": "", "ddl": "", "tableChanges": []any{},
		"gap": map[string]any{"fromLsn": float64(16), "toLsn": float64(32)},
	}}
	for i, w := range want {
		if !r.SchemaChange(tx, i) {
			t.Fatalf("change %d: no schema change", i)
		}
		if n := r.Events(tx, i); n != 0 {
			t.Errorf("change %d: %d data events, want none", i, n)
		}
		_, m := r.AppendSchemaChange(nil, tx, i)
		var got map[string]any
		if err := json.Unmarshal(m.Payload, &got); err != nil {
			t.Fatalf("change %d: %v: %s", i, err, m.Payload)
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("change %d:\n got %v\nwant %v", i, got, w)
		}
		if string(m.Key) != `{"databaseName":"shop"}` || m.NullKey {
			t.Errorf("change %d: key %s (null %v)", i, m.Key, m.NullKey)
		}
	}
	if r.SchemaChange(tx, 3) {
		t.Error("an insert is a schema change")
	}
	if b, m := r.AppendSchemaChange(nil, tx, 3); len(b) != 0 || m.Payload != nil {
		t.Errorf("an insert rendered as a schema change: %s", b)
	}
	if !format.Debezium.Spec().SchemaChanges() || format.PGQ.Spec().SchemaChanges() || format.CloudEvents.Spec().SchemaChanges() {
		t.Error("only Debezium's format has schema change events")
	}
}

// TestDebeziumSchemaChangeSchemas renders a table's ddl change, another
// object's and a gap change as schema change events in the schema form
// (Options.Schemas): value and key pass checkConnect, their payloads are
// the payload-only form's byte for byte, and both forms are held to a
// golden file (go test -update rewrites it): Debezium's schema names of
// the postgresql connector, its Change, Table and Column, pgq's gap.
func TestDebeziumSchemaChangeSchemas(t *testing.T) {
	rp, rs := schemaFormRenderers(t, format.Options{})
	tx := testTx(
		pgq.Change{Op: pgq.OpDDL, Prefix: "pgq.ddl", Transactional: true, Content: []byte(
			`{"command":"CREATE TABLE","object":"public.orders","schema":"public","object_type":"table","statement":"CREATE TABLE orders (id int PRIMARY KEY)"}`)},
		pgq.Change{Op: pgq.OpDDL, Prefix: "pgq.ddl", Transactional: true, Content: []byte(
			`{"command":"CREATE VIEW","object":"public.v","schema":"public","object_type":"view","statement":"CREATE VIEW v AS SELECT 1"}`)},
		pgq.Change{Op: pgq.OpGap, FromLSN: 0x16_B3000000, ToLSN: 0x16_B374D848},
	)
	plain, schemas := []byte{'['}, []byte{'['}
	for i := range tx.Changes {
		if !rs.SchemaChange(tx, i) {
			t.Fatalf("change %d: no schema change event with schemas", i)
		}
		_, mp := rp.AppendSchemaChange(nil, tx, i)
		_, ms := rs.AppendSchemaChange(nil, tx, i)
		for _, b := range [][]byte{ms.Payload, ms.Key} {
			checkConnect(t, b)
		}
		samePayload(t, ms.Payload, mp.Payload)
		samePayload(t, ms.Key, mp.Key)
		if i > 0 {
			plain, schemas = append(plain, ','), append(schemas, ',')
		}
		plain = fmt.Appendf(plain, `{"key":%s,"value":%s}`, mp.Key, mp.Payload)
		schemas = fmt.Appendf(schemas, `{"key":%s,"value":%s}`, ms.Key, ms.Payload)
	}
	golden(t, filepath.Join("testdata", "debezium_schema", "schema-change-payload.json"), append(plain, ']'))
	golden(t, filepath.Join("testdata", "debezium_schema", "schema-change-schemas.json"), append(schemas, ']'))
}
