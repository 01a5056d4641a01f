package format_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// flinkRow is a row Flink's debezium-json format emits: its RowKind
// (+I, -U, +U, -D) and its fields.
type flinkRow struct {
	kind   string
	fields map[string]json.RawMessage
}

// errFlinkReplicaIdentity is the error Flink's debezium-json raises for
// an update or delete without a before image
// (DebeziumJsonDeserializationSchema.REPLICA_IDENTITY_EXCEPTION).
var errFlinkReplicaIdentity = errors.New(`the "before" field is null: the table needs REPLICA IDENTITY FULL`)

// flinkDebezium decodes a message as Flink's debezium-json format does
// (DebeziumJsonDeserializationSchema.deserialize): an empty message (a
// Kafka tombstone) is skipped; the message is a JSON object, with
// 'debezium-json.schema-include' (here: when it has a payload, the JSON
// converter's envelope with schemas) its "payload"; "op" c and r emit
// "after" as an insert, u "before" and "after" as an update's two rows
// (before required: Flink's replica identity error), d "before" as a
// delete (before required); any other op is an error. A row image must
// be an object (Flink reads it as the table's ROW type). Go's decoder is
// at least as strict as Flink's Jackson: no NaN tokens, no trailing
// data.
func flinkDebezium(msg []byte) ([]flinkRow, error) {
	if len(msg) == 0 {
		return nil, nil
	}
	p, err := debeziumPayload(msg)
	if err != nil {
		return nil, fmt.Errorf("corrupt Debezium JSON message: %w", err)
	}
	image := func(name string) (map[string]json.RawMessage, error) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(p[name], &m); len(p[name]) > 0 && err != nil {
			return nil, fmt.Errorf("corrupt Debezium JSON message: %s is no row: %w", name, err)
		}
		return m, nil
	}
	before, err := image("before")
	if err != nil {
		return nil, err
	}
	after, err := image("after")
	if err != nil {
		return nil, err
	}
	var op string
	if err := json.Unmarshal(p["op"], &op); err != nil {
		return nil, fmt.Errorf("corrupt Debezium JSON message: op %s: %w", p["op"], err)
	}
	switch op {
	case "c", "r":
		if after == nil {
			return nil, errors.New("corrupt Debezium JSON message: an insert without after")
		}
		return []flinkRow{{"+I", after}}, nil
	case "u":
		if before == nil {
			return nil, errFlinkReplicaIdentity
		}
		if after == nil {
			return nil, errors.New("corrupt Debezium JSON message: an update without after")
		}
		return []flinkRow{{"-U", before}, {"+U", after}}, nil
	case "d":
		if before == nil {
			return nil, errFlinkReplicaIdentity
		}
		return []flinkRow{{"-D", before}}, nil
	}
	return nil, fmt.Errorf("unknown \"op\" value %q", op)
}

// checkFlinkDecodes decodes every message as Flink's debezium-json
// does: none may fail, and the corpus' inserts, its update and its
// delete each give their rows.
func checkFlinkDecodes(t *testing.T, msgs [][]byte) {
	t.Helper()
	kinds := map[string]int{}
	for _, m := range msgs {
		rows, err := flinkDebezium(m)
		if err != nil {
			t.Errorf("Flink's debezium-json refuses %s: %v", m, err)
			continue
		}
		for _, r := range rows {
			kinds[r.kind]++
			if len(r.fields) == 0 {
				t.Errorf("%s row without fields from %s", r.kind, m)
			}
		}
	}
	if kinds["+I"] != len(msgs)-2 || kinds["-U"] != 1 || kinds["+U"] != 1 || kinds["-D"] != 1 {
		t.Errorf("rows by kind %v from %d messages, want an insert per message but the update's and the delete's", kinds, len(msgs))
	}
}

// TestFlinkDebeziumDecoder: the Flink-style decoder the corpus run is
// held to refuses what Flink refuses (an update without a before image,
// as pgq and Debezium write one under REPLICA IDENTITY DEFAULT; an
// unknown op; a non-object) and reads an event inside the JSON
// converter's schema envelope.
func TestFlinkDebeziumDecoder(t *testing.T) {
	r, err := format.New(format.Debezium, debeziumDefaults())
	if err != nil {
		t.Fatal(err)
	}
	cols := []pgq.Column{{Name: "id", TypeOID: pgtype.Int4OID, Key: true}, {Name: "v", TypeOID: pgtype.TextOID}}
	text := func(s string) pgq.Value { return pgq.Value{Kind: pgq.ValueText, Data: []byte(s)} }
	update := pgq.Change{Op: pgq.OpUpdate, Schema: "public", Table: "t", Columns: cols, New: []pgq.Value{text("1"), text("b")}}
	ev := r.AppendEvent(nil, testTx(update), 0, 0)
	if _, err := flinkDebezium(ev); !errors.Is(err, errFlinkReplicaIdentity) {
		t.Errorf("update without before %s: %v, want Flink's replica identity error", ev, err)
	}
	update.Old, update.OldKind = []pgq.Value{text("1"), text("a")}, pgq.OldFull
	ev = r.AppendEvent(nil, testTx(update), 0, 0)
	rows, err := flinkDebezium(ev)
	if err != nil || len(rows) != 2 || string(rows[0].fields["v"]) != `"a"` || string(rows[1].fields["v"]) != `"b"` {
		t.Errorf("update with before %s: %v %v, want -U v=a, +U v=b", ev, rows, err)
	}
	wrapped := []byte(`{"schema":{"type":"struct"},"payload":` + string(ev) + `}`)
	if rows, err := flinkDebezium(wrapped); err != nil || len(rows) != 2 {
		t.Errorf("event in a payload: %v %v, want the update's two rows", rows, err)
	}
	for _, bad := range []string{`{"before":null,"after":{"id":1},"op":"x"}`, `[1]`, `{"before":null,"after":1,"op":"c"}`, `{"after":{"r":NaN},"op":"c"}`} {
		if _, err := flinkDebezium([]byte(bad)); err == nil || strings.Contains(err.Error(), "replica") {
			t.Errorf("%s: %v, want Flink's corrupt-message or unknown-op error", bad, err)
		}
	}
	if rows, err := flinkDebezium(nil); err != nil || rows != nil {
		t.Errorf("tombstone: %v %v, want skipped", rows, err)
	}
}
