package format_test

import (
	"encoding/json"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// TestDebeziumFullUpdate: an update under REPLICA IDENTITY FULL that
// leaves the key alone is one "u" keyed by the key columns, and an
// unchanged TOAST value of its new image takes the old image's value
// (Debezium since DBZ-7193); a key-only old image has none to give.
func TestDebeziumFullUpdate(t *testing.T) {
	r, err := format.New(format.Debezium, format.Options{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	full := pgq.Change{Op: pgq.OpUpdate, Schema: "public", Table: "customers", Columns: customers, OldKind: pgq.OldFull,
		Old: customer("1", "Anne"), New: []pgq.Value{tv("1"), tv("Anne Marie"), tv("Kretchmar"), {Kind: pgq.ValueUnchangedTOAST}}}
	key := full
	key.OldKind, key.Old = pgq.OldKey, []pgq.Value{tv("1"), null, null, null}
	tx := testTx(full, key)
	for i, want := range []string{"annek@noanswer.org", "__debezium_unavailable_value"} {
		if n := r.Events(tx, i); n != 1 {
			t.Fatalf("change %d: %d events, want 1", i, n)
		}
		var ev struct {
			Op    string
			After map[string]any
		}
		if b := r.AppendChangeEvents(nil, tx, i); json.Unmarshal(b, &ev) != nil || ev.Op != "u" || ev.After["email"] != want || ev.After["first_name"] != "Anne Marie" {
			t.Errorf("change %d: %s, want one u with email %q", i, b, want)
		}
		if k := r.AppendDebeziumKey(nil, tx, i, 0); string(k) != `{"id":1}` {
			t.Errorf("change %d: key %s", i, k)
		}
	}
}
