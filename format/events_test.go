package format_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

func tv(s string) pgq.Value { return pgq.Value{Kind: pgq.ValueText, Data: []byte(s)} }

var null = pgq.Value{Kind: pgq.ValueNull}

// customers is the table of Debezium's documentation examples.
var customers = []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "first_name", TypeOID: 1043},
	{Name: "last_name", TypeOID: 1043}, {Name: "email", TypeOID: 1043}}

func customer(id, first string) []pgq.Value {
	return []pgq.Value{tv(id), tv(first), tv("Kretchmar"), tv("annek@noanswer.org")}
}

// eventsTx is a transaction with every kind of change pgq journals.
func eventsTx() *pgq.Transaction {
	ch := func(op pgq.Op) pgq.Change {
		return pgq.Change{Op: op, Schema: "public", Table: "customers", Columns: customers}
	}
	ins := ch(pgq.OpInsert)
	ins.New = customer("1", "Anne")
	upd := ch(pgq.OpUpdate)
	upd.New = customer("1", "Anne Marie")
	full := ch(pgq.OpUpdate)
	full.OldKind, full.Old, full.New = pgq.OldFull, customer("1", "Anne Marie"), customer("1", "Anne M.")
	rekey := ch(pgq.OpUpdate)
	rekey.OldKind, rekey.Old, rekey.New = pgq.OldKey, []pgq.Value{tv("1"), null, null, null}, customer("2", "Anne M.")
	toast := ch(pgq.OpUpdate)
	toast.New = []pgq.Value{tv("2"), tv("Anne"), tv("Kretchmar"), {Kind: pgq.ValueUnchangedTOAST}}
	del := ch(pgq.OpDelete)
	del.OldKind, del.Old = pgq.OldKey, []pgq.Value{tv("2"), null, null, null}
	trunc := pgq.Change{Op: pgq.OpTruncate, Tables: []string{"public.customers", "public.orders"}}
	msg := pgq.Change{Op: pgq.OpMessage, Prefix: "foo", Content: []byte("bar"), Transactional: true}
	ddl := pgq.Change{Op: pgq.OpDDL, Content: []byte(`{"command":"ALTER TABLE","object":"public.customers","schema":"public","object_type":"table","statement":"ALTER TABLE customers ADD c int"}`)}
	gap := pgq.Change{Op: pgq.OpGap, FromLSN: 0x10, ToLSN: 0x20}
	return testTx(ins, upd, full, rekey, toast, del, trunc, msg, ddl, gap)
}

// TestDebeziumEvents renders every kind of change and checks the mapping
// the package doc gives (ops, before/after, keys, the transaction block,
// what has no Debezium event), then the whole stream of key/value pairs
// against testdata/debezium/events.jsonl.
func TestDebeziumEvents(t *testing.T) {
	r, err := format.New(format.Debezium, format.Options{Database: "postgres", Name: "PostgreSQL_server", Now: fixedNow, TransactionMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	tx := eventsTx()
	bf := testTx(pgq.Change{Op: pgq.OpRead, Schema: "public", Table: "customers", Columns: customers, New: customer("3", "Bo")})
	bf.Backfill = "bf1"
	type event struct {
		Key   json.RawMessage `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	var lines bytes.Buffer
	var ops, dcos []string
	var totals []int
	for _, x := range []*pgq.Transaction{tx, bf} {
		for i := range x.Changes {
			for k := range r.Events(x, i) {
				key := r.AppendDebeziumKey(nil, x, i, k)
				val := r.AppendEvent(nil, x, i, k)
				var v struct {
					Op     string
					Before map[string]any
					After  map[string]any
					Source struct {
						Snapshot string
						Table    string
						TxID     *uint32 `json:"txId"`
						LSN      *uint64 `json:"lsn"`
					}
					Transaction *struct {
						ID    string
						Total int `json:"total_order"`
						DCO   int `json:"data_collection_order"`
					}
				}
				if err := json.Unmarshal(val, &v); err != nil {
					t.Fatalf("change %d event %d: %v\n%s", i, k, err, val)
				}
				if !json.Valid(key) {
					t.Fatalf("key %s", key)
				}
				ops = append(ops, v.Op+":"+string(key))
				if v.Transaction != nil {
					if v.Transaction.ID != "556:97500059720" {
						t.Errorf("transaction id %q", v.Transaction.ID)
					}
					dcos = append(dcos, v.Source.Table+"#"+itoa(v.Transaction.DCO))
					totals = append(totals, v.Transaction.Total)
				}
				if v.Op == "r" && (v.Source.Snapshot != "incremental" || v.Source.TxID != nil || v.Source.LSN != nil || v.Transaction != nil) {
					t.Errorf("read event: %s", val)
				}
				if v.Op != "r" && v.Op != "m" && (v.Source.Snapshot != "false" || v.Source.LSN == nil || *v.Source.LSN != uint64(tx.CommitLSN)) {
					t.Errorf("streamed event: %s", val)
				}
				line, _ := json.Marshal(event{Key: key, Value: val})
				lines.Write(line)
				lines.WriteByte('\n')
			}
		}
	}
	wantOps := []string{
		`c:{"id":1}`, `u:{"id":1}`, `u:{"id":1}`,
		`d:{"id":1}`, `c:{"id":2}`, // the key change: a delete of the old key, a create of the new
		`u:{"id":2}`, `d:{"id":2}`,
		`t:null`, `t:null`, // one per truncated table
		`m:{"prefix":"foo"}`, // ddl and gap: none
		`r:{"id":3}`,
	}
	if !reflect.DeepEqual(ops, wantOps) {
		t.Errorf("ops:keys\n got %q\nwant %q", ops, wantOps)
	}
	wantDCO := []string{"customers#1", "customers#2", "customers#3", "customers#4", "customers#5", "customers#6", "customers#7", "customers#8", "orders#1"}
	if !reflect.DeepEqual(dcos, wantDCO) {
		t.Errorf("data_collection_order\n got %q\nwant %q", dcos, wantDCO)
	}
	if want := []int{1, 2, 3, 4, 4, 5, 6, 7, 7}; !reflect.DeepEqual(totals, want) {
		t.Errorf("total_order %v, want %v", totals, want)
	}
	goldenLines(t, filepath.Join("testdata", "debezium", "events.jsonl"), lines.Bytes())
}

// TestDebeziumParts: data_collection_order continues across the parts of
// a transaction rendered in order, and restarts for a part seen alone.
func TestDebeziumParts(t *testing.T) {
	ins := func(id string) pgq.Change {
		return pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "customers", Columns: customers, New: customer(id, "x")}
	}
	p0 := testTx(ins("1"), ins("2"))
	p0.Final = false
	p1 := testTx(ins("3"))
	p1.Part, p1.FirstOrdinal, p1.Offset = 1, 2, 8
	dco := func(r *format.Renderer, tx *pgq.Transaction, i int) (int, int) {
		var v struct {
			Transaction struct {
				Total int `json:"total_order"`
				DCO   int `json:"data_collection_order"`
			}
		}
		if err := json.Unmarshal(r.AppendEvent(nil, tx, i, 0), &v); err != nil {
			t.Fatal(err)
		}
		return v.Transaction.Total, v.Transaction.DCO
	}
	r, _ := format.New(format.Debezium, format.Options{TransactionMetadata: true})
	dco(r, p0, 0)
	dco(r, p0, 1)
	if total, n := dco(r, p1, 0); total != 3 || n != 3 {
		t.Errorf("in order: total_order %d, data_collection_order %d; want 3, 3", total, n)
	}
	alone, _ := format.New(format.Debezium, format.Options{TransactionMetadata: true})
	if total, n := dco(alone, p1, 0); total != 3 || n != 1 {
		t.Errorf("alone: total_order %d, data_collection_order %d; want 3, 1", total, n)
	}
}

// TestDebeziumTransactionNull: without TransactionMetadata (Debezium's
// provide.transaction.metadata=false, its default) every event's
// transaction is null; with it every streamed change event has the block.
func TestDebeziumTransactionNull(t *testing.T) {
	tx := eventsTx()
	for _, meta := range []bool{false, true} {
		r, err := format.New(format.Debezium, format.Options{TransactionMetadata: meta})
		if err != nil {
			t.Fatal(err)
		}
		blocks := 0
		for i := range tx.Changes {
			for k := range r.Events(tx, i) {
				var v map[string]json.RawMessage
				if err := json.Unmarshal(r.AppendEvent(nil, tx, i, k), &v); err != nil {
					t.Fatal(err)
				}
				tr, ok := v["transaction"]
				switch {
				case v["op"] != nil && string(v["op"]) == `"m"`:
				case !ok:
					t.Fatalf("change %d event %d: no transaction key", i, k)
				case string(tr) != "null":
					blocks++
				}
			}
		}
		if want := map[bool]int{false: 0, true: 9}[meta]; blocks != want {
			t.Errorf("TransactionMetadata %v: %d transaction blocks, want %d", meta, blocks, want)
		}
	}
}

// TestDebeziumTombstonesAndNullKeys: Renderer.Tombstone marks the
// deletes Debezium follows with a tombstone (a delete, the d of a
// key-changing update; not its c, nor an insert or update, nor any
// event of pgq's format), and a truncate's message has no key (NullKey).
func TestDebeziumTombstonesAndNullKeys(t *testing.T) {
	tx := eventsTx()
	r, _ := format.New(format.Debezium, format.Options{})
	own, _ := format.New(format.PGQ, format.Options{})
	var got []string
	for i := range tx.Changes {
		for k := range r.Events(tx, i) {
			if own.Tombstone(tx, i, k) {
				t.Errorf("pgq format: change %d event %d has a tombstone", i, k)
			}
			_, m := r.AppendEventMessage(nil, tx, i, k, format.Kafka)
			var ev struct{ Op string }
			if err := json.Unmarshal(m.Payload, &ev); err != nil {
				t.Fatal(err)
			}
			tomb := ""
			if r.Tombstone(tx, i, k) {
				tomb = "+tombstone"
			}
			if m.NullKey != (m.Key == nil) || (ev.Op == "t") != m.NullKey {
				t.Errorf("change %d event %d (%s): key %q, NullKey %v", i, k, ev.Op, m.Key, m.NullKey)
			}
			got = append(got, ev.Op+tomb)
		}
	}
	want := []string{"c", "u", "u", "d+tombstone", "c", "u", "d+tombstone", "t", "t", "m"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events\n got %q\nwant %q", got, want)
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

func goldenLines(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	if len(gl) != len(wl) {
		t.Fatalf("%s: %d lines, want %d", path, len(gl), len(wl))
	}
	for i := range gl {
		if !bytes.Equal(gl[i], wl[i]) {
			t.Errorf("%s line %d:\n got %s\nwant %s", path, i+1, gl[i], wl[i])
		}
	}
}

// TestAppendTransaction: the envelope is pgq's line (same fields and
// values but "changes"), each change one JSON value: its event, an array
// for several, and left out for none (a ddl or gap change in Debezium's
// format: a null there is a tombstone to a Connect sink, corrupt to
// Flink); the pgq format is pgq's line byte for byte.
func TestAppendTransaction(t *testing.T) {
	tx := eventsTx()
	tx.Origin = "o1"
	own, _ := format.New(format.PGQ, format.Options{})
	if got, want := own.AppendTransaction(nil, tx), format.AppendJSON(nil, tx); !bytes.Equal(got, want) {
		t.Errorf("pgq format:\n got %s\nwant %s", got, want)
	}
	r, _ := format.New(format.Debezium, format.Options{Now: fixedNow})
	var got, want map[string]json.RawMessage
	if err := json.Unmarshal(r.AppendTransaction(nil, tx), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(format.AppendJSON(nil, tx), &want); err != nil {
		t.Fatal(err)
	}
	var changes []json.RawMessage
	if err := json.Unmarshal(got["changes"], &changes); err != nil {
		t.Fatal(err)
	}
	delete(got, "changes")
	delete(want, "changes")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("envelope\n got %v\nwant %v", got, want)
	}
	var with []int // the changes with an event
	for i := range tx.Changes {
		if r.Events(tx, i) > 0 {
			with = append(with, i)
		}
	}
	if len(with) == len(tx.Changes) {
		t.Fatal("eventsTx has no change without a Debezium event")
	}
	if len(changes) != len(with) {
		t.Fatalf("%d changes, want %d (those with an event)", len(changes), len(with))
	}
	for j, c := range changes {
		i := with[j]
		switch n := r.Events(tx, i); {
		case string(c) == "null":
			t.Errorf("change %d: null", i)
		case n == 1 && !bytes.Equal(c, r.AppendEvent(nil, tx, i, 0)):
			t.Errorf("change %d: %s", i, c)
		case n > 1:
			var evs []json.RawMessage
			if json.Unmarshal(c, &evs) != nil || len(evs) != n {
				t.Errorf("change %d: %s, want an array of %d events", i, c, n)
			}
		}
	}
}
