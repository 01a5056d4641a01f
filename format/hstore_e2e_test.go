package format_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/journal"
	"github.com/pgq-dev/pgq/record"
)

// hstoreEvent renders change c (alone in a transaction) as a Debezium
// event with schemas in hstore mode m, checks it with checkConnect, and
// returns its "after" and the schemas of columns cols.
func hstoreEvent(t *testing.T, m format.HstoreMode, c pgq.Change, cols ...string) (after map[string]json.RawMessage, schemas []map[string]any) {
	t.Helper()
	r, err := format.New(format.Debezium, format.Options{Schemas: true, Hstore: m})
	if err != nil {
		t.Fatal(err)
	}
	ev := r.AppendEvent(nil, testTx(c), 0, 0)
	checkConnect(t, ev)
	var e struct {
		Payload struct{ After map[string]json.RawMessage }
	}
	if err := json.Unmarshal(ev, &e); err != nil {
		t.Fatalf("%v: %s", err, ev)
	}
	for _, col := range cols {
		schemas = append(schemas, fieldSchema(t, ev, col))
	}
	return e.Payload.After, schemas
}

// TestDebeziumHstore: an hstore column (its type name read from a real
// PostgreSQL as ingest reads it) renders as Debezium's default
// hstore.handling.mode=json writes it, a string of a JSON object with
// schema io.debezium.data.Json (the value of Debezium's
// schemaAndValueFieldForJsonEncodedHStoreTypeWithNullValues), an
// hstore[] as an array of such strings (array of optional Json), an
// unchanged TOASTed hstore as PostgresValueConverter's JSON of
// UnchangedToastedPlaceholder's hstore, the map of the placeholder to
// itself, and an unchanged TOASTed hstore[] as the placeholder of an
// array of strings (UnchangedToastedPlaceholder.getArrayValue). Every
// event passes checkConnect.
func TestDebeziumHstore(t *testing.T) {
	row := pgRow(t, "hstore_cols", "hs hstore, hsa hstore[]",
		`INSERT INTO hstore_cols (hs, hsa) VALUES ('"key1" => "val1","key2" => NULL', array['"key4" => "val4","key5" => NULL'::hstore, NULL])`,
		"CREATE EXTENSION hstore")
	if row.Columns[1].TypeName != "hstore" || row.Columns[2].TypeName != "hstore[]" {
		t.Fatalf("columns %+v: want the type names hstore, hstore[]", row.Columns)
	}
	after, schemas := hstoreEvent(t, format.HstoreJSON, row, "hs", "hsa")
	want := map[string]string{
		"hs":  `"{\"key1\":\"val1\",\"key2\":null}"`,
		"hsa": `["{\"key5\":null,\"key4\":\"val4\"}",null]`,
	}
	for col, w := range want {
		if got := string(after[col]); got != w {
			t.Errorf("insert: %s = %s, want %s", col, got, w)
		}
	}
	if s := schemas[0]; s["type"] != "string" || s["name"] != "io.debezium.data.Json" || s["version"] != 1.0 || s["optional"] != true {
		t.Errorf("hs schema %v, want an optional io.debezium.data.Json string", s)
	}
	items, _ := schemas[1]["items"].(map[string]any)
	if schemas[1]["type"] != "array" || items["type"] != "string" || items["name"] != "io.debezium.data.Json" || items["optional"] != true {
		t.Errorf("hsa schema %v, want an array of optional io.debezium.data.Json", schemas[1])
	}

	upd := row
	upd.Op = pgq.OpUpdate
	upd.New = []pgq.Value{row.New[0], {Kind: pgq.ValueUnchangedTOAST}, {Kind: pgq.ValueUnchangedTOAST}}
	after, _ = hstoreEvent(t, format.HstoreJSON, upd)
	want = map[string]string{
		"hs":  `"{\"__debezium_unavailable_value\":\"__debezium_unavailable_value\"}"`,
		"hsa": `["__debezium_unavailable_value"]`,
	}
	for col, w := range want {
		if got := string(after[col]); got != w {
			t.Errorf("unchanged TOAST: %s = %s, want %s", col, got, w)
		}
	}

	// hstore.handling.mode=map: Connect's map (Debezium's
	// schemaAndValueFieldForMapEncodedHStoreType...: map of required
	// string keys to optional strings), which the JSON converter writes
	// as an object; the unchanged TOASTed hstore is the placeholder map
	// itself, an hstore[] an array of it (Debezium has no placeholder of
	// an array of maps).
	after, schemas = hstoreEvent(t, format.HstoreMap, row, "hs", "hsa")
	want = map[string]string{
		"hs":  `{"key1":"val1","key2":null}`,
		"hsa": `[{"key5":null,"key4":"val4"},null]`,
	}
	for col, w := range want {
		if got := string(after[col]); got != w {
			t.Errorf("map mode: %s = %s, want %s", col, got, w)
		}
	}
	keys, _ := schemas[0]["keys"].(map[string]any)
	values, _ := schemas[0]["values"].(map[string]any)
	if schemas[0]["type"] != "map" || keys["type"] != "string" || keys["optional"] != false || values["type"] != "string" || values["optional"] != true {
		t.Errorf("map mode: hs schema %v, want a map of string to optional string", schemas[0])
	}
	if items, _ := schemas[1]["items"].(map[string]any); items["type"] != "map" || items["optional"] != true {
		t.Errorf("map mode: hsa schema %v, want an array of optional maps", schemas[1])
	}
	after, _ = hstoreEvent(t, format.HstoreMap, upd)
	want = map[string]string{
		"hs":  `{"__debezium_unavailable_value":"__debezium_unavailable_value"}`,
		"hsa": `[{"__debezium_unavailable_value":"__debezium_unavailable_value"}]`,
	}
	for col, w := range want {
		if got := string(after[col]); got != w {
			t.Errorf("map mode, unchanged TOAST: %s = %s, want %s", col, got, w)
		}
	}
	if _, err := format.ParseHstoreMode("hash"); err == nil {
		t.Error("ParseHstoreMode accepts hash")
	}
	if _, err := format.New(format.Debezium, format.Options{Hstore: format.HstoreMap + 1}); err == nil {
		t.Error("Options.Validate accepts an unknown hstore mode")
	}
	if m, err := format.ParseHstoreMode(""); err != nil || m != format.HstoreJSON || format.HstoreMap.String() != "map" {
		t.Errorf("ParseHstoreMode(\"\") = %v, %v", m, err)
	}
}

// TestHstoreJournaledBefore: records journaled before pgq recorded type
// names render an hstore as they did, its text, with a plain string
// schema. The hstore record of the golden journal v4 (with type names)
// renders as Debezium does; the same change as a pgq without type names
// journaled it (the relation of fewer elements: Append of the columns
// without TypeName, whose bytes older pgq wrote) renders hstore's text.
// The golden journals written before (v1 to v3) read with no type name.
func TestHstoreJournaledBefore(t *testing.T) {
	var h *pgq.Change
	for _, v := range []string{"v1", "v2", "v3", "v4"} {
		err := journal.Scan(filepath.Join("..", "testdata", "journal", v), 1, func(tx *pgq.Transaction) error {
			for i := range tx.Changes {
				c := &tx.Changes[i]
				for _, col := range c.Columns {
					if col.TypeName != "" && v != "v4" {
						t.Errorf("%s: %s.%s has type name %q", v, c.Table, col.Name, col.TypeName)
					}
				}
				if c.Table == "h" {
					h = c
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if h == nil || h.Columns[1].TypeName != "hstore" {
		t.Fatalf("no hstore change in the golden journal v4: %+v", h)
	}
	after, schemas := hstoreEvent(t, format.HstoreJSON, *h, "hs")
	if got := string(after["hs"]); got != `"{\"a\":\"b\"}"` || schemas[0]["name"] != "io.debezium.data.Json" {
		t.Errorf("v4: hs = %s, schema %v", got, schemas[0])
	}

	old := *h
	old.Columns = append([]pgq.Column(nil), h.Columns...)
	for i := range old.Columns {
		old.Columns[i].TypeName = ""
	}
	var tx pgq.Transaction
	if err := record.Decode(record.Append(nil, testTx(old)), &tx); err != nil {
		t.Fatal(err)
	}
	after, schemas = hstoreEvent(t, format.HstoreJSON, tx.Changes[0], "hs")
	if got := string(after["hs"]); got != `"\"a\"=>\"b\""` || schemas[0]["name"] != nil || schemas[0]["type"] != "string" {
		t.Errorf("journaled before: hs = %s, schema %v; want hstore's text, a plain string", got, schemas[0])
	}
}
