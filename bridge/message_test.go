package bridge

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
)

func TestAppendMessages(t *testing.T) {
	cols := []pgq.Column{{Name: "a", TypeOID: 25, Key: true}, {Name: "v", TypeOID: 20}, {Name: "b", TypeOID: 25, Key: true}}
	tx := &pgq.Transaction{Offset: 7, Xid: 42, CommitLSN: 0x1A2B3C8, EndLSN: 0x1A2B3F0, CommitTime: time.Date(2025, 1, 1, 0, 0, 1, 500000000, time.UTC), Final: true,
		Changes: []pgq.Change{
			{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: cols, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("x|y")}, {Kind: pgq.ValueText, Data: []byte("1")}, {Kind: pgq.ValueNull}}},
			{Op: pgq.OpDelete, Schema: "public", Table: "t", Columns: cols, OldKind: pgq.OldKey, Old: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("k")}, {Kind: pgq.ValueNull}, {Kind: pgq.ValueText, Data: []byte(`b\`)}}},
			{Op: pgq.OpTruncate, Tables: []string{"s.u"}},
		}}
	ms := AppendMessages(nil, tx)
	if len(ms) != 3 {
		t.Fatalf("%d messages", len(ms))
	}
	wantKeys := []string{`public.t|x\|y|`, `public.t|k|b\\`, "s.u"}
	for i, m := range ms {
		if string(m.Key) != wantKeys[i] {
			t.Errorf("key %d = %q, want %q", i, m.Key, wantKeys[i])
		}
		if want := "7." + string(rune('0'+i)); m.ID != want {
			t.Errorf("id %q, want %q", m.ID, want)
		}
		var p map[string]any
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			t.Fatalf("payload %s: %v", m.Payload, err)
		}
		if p["offset"] != 7.0 || p["xid"] != 42.0 || p["commit_lsn"] != "0/1A2B3C8" || p["index"] != float64(i) || p["count"] != 3.0 || p["commit_time"] != "2025-01-01T00:00:01.5Z" {
			t.Errorf("payload %s", m.Payload)
		}
		ch := p["change"].(map[string]any)
		if ch["op"] != m.Op {
			t.Errorf("change %v, op %s", ch, m.Op)
		}
	}
	if ms[2].Schema != "s" || ms[2].Table != "u" {
		t.Errorf("truncate table %s.%s", ms[2].Schema, ms[2].Table)
	}
	for i := range ms {
		if want := AppendPayload(nil, tx, i); string(ms[i].Payload) != string(want) {
			t.Errorf("payload %d from the shared array:\n%s\nwant\n%s", i, ms[i].Payload, want)
		}
		// Headers from the cached strings equal those computed from the
		// exported fields (a Message built by hand).
		byHand := Message{Offset: ms[i].Offset, Xid: ms[i].Xid, CommitLSN: ms[i].CommitLSN, Op: ms[i].Op, Schema: ms[i].Schema, Table: ms[i].Table}
		if got, want := ms[i].Headers(), byHand.Headers(); got != want {
			t.Errorf("headers %d: %v, by hand %v", i, got, want)
		}
	}
	// Payloads and keys share one array, each capped: appending to a key
	// does not overwrite the payload after it.
	before := string(ms[0].Payload)
	_ = append(ms[0].Key, "XXXXXXXX"...)
	if string(ms[0].Payload) != before {
		t.Errorf("appending to a key changed the payload: %s", ms[0].Payload)
	}
	if got := ms[2].Headers()[4]; got != [2]string{HeaderTable, "s.u"} {
		t.Errorf("truncate table header %v", got)
	}
	h := ms[0].Headers()
	if h[0] != [2]string{HeaderOffset, "7"} || h[1] != [2]string{HeaderXid, "42"} || h[2] != [2]string{HeaderLSN, "0/1A2B3C8"} || h[3] != [2]string{HeaderOp, "insert"} || h[4] != [2]string{HeaderTable, "public.t"} {
		t.Errorf("headers %v", h)
	}
}

func TestTemplate(t *testing.T) {
	tm, err := ParseTemplate("pgq.{schema}.{table}.{op}")
	if err != nil {
		t.Fatal(err)
	}
	m := &Message{Schema: "my schema", Table: "t", Op: "insert"}
	clean := func(s string) string {
		if s == "my schema" {
			return "my_schema"
		}
		return s
	}
	if got := tm.Render(m, clean); got != "pgq.my_schema.t.insert" {
		t.Errorf("render %q", got)
	}
	c := Cache{T: tm, Clean: clean}
	if c.Name(m) != "pgq.my_schema.t.insert" || c.Name(m) != "pgq.my_schema.t.insert" {
		t.Error("cache")
	}
	for _, bad := range []string{"", "pgq.{x}", "pgq.{schema", "pgq.}", "a}{table}"} {
		if _, err := ParseTemplate(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{}).Validate(); err == nil {
		t.Error("zero options accepted")
	}
}
