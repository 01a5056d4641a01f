package bridge

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
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
		if want := "0/1A2B3C8." + string(rune('0'+i)); m.ID != want {
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

// TestMessageIDsIndependentOfJournal: a change's id is its commit LSN and
// its ordinal in the whole transaction, whatever the journal offset, part
// or group filter: the same change read from another journal (a fresh
// data dir numbers records from 1 again), from a later part, or after a
// filter dropped changes before it gets the same id, and two changes of
// one transaction never share one.
func TestMessageIDsIndependentOfJournal(t *testing.T) {
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}}
	ch := func(id string) pgq.Change {
		return pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: cols, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte(id)}}}
	}
	whole := &pgq.Transaction{Offset: 900, Xid: 5, CommitLSN: 0x16_B374_D848, Final: true,
		Changes: []pgq.Change{ch("1"), ch("2"), ch("3"), ch("4")}}
	ids := map[string]string{} // id → row
	for _, m := range AppendMessages(nil, whole) {
		if _, dup := ids[m.ID]; dup {
			t.Fatalf("id %s given twice", m.ID)
		}
		ids[m.ID] = string(m.Payload)
	}
	// The same transaction journaled as two parts in a fresh journal.
	p0 := &pgq.Transaction{Offset: 1, Xid: 5, CommitLSN: whole.CommitLSN, Changes: whole.Changes[:2]}
	p1 := &pgq.Transaction{Offset: 2, Xid: 5, CommitLSN: whole.CommitLSN, Part: 1, Final: true, FirstOrdinal: 2, Changes: whole.Changes[2:]}
	// And as a filtered answer keeping rows 2 and 4.
	filtered := &pgq.Transaction{Offset: 3, Xid: 5, CommitLSN: whole.CommitLSN, Final: true, FirstOrdinal: 1,
		Ordinals: []uint32{1, 3}, Changes: []pgq.Change{ch("2"), ch("4")}}
	want := map[string]string{"16/B374D848.0": "1", "16/B374D848.1": "2", "16/B374D848.2": "3", "16/B374D848.3": "4"}
	for _, tx := range []*pgq.Transaction{whole, p0, p1, filtered} {
		for _, m := range AppendMessages(nil, tx) {
			var p struct {
				Ordinal uint32 `json:"ordinal"`
				Change  struct {
					New struct {
						ID int `json:"id"`
					} `json:"new"`
				} `json:"change"`
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if row := want[m.ID]; row == "" || row != strconv.Itoa(p.Change.New.ID) || m.ID != MessageID(whole.CommitLSN, p.Ordinal, "") {
				t.Fatalf("offset %d part %d: id %s for row %d (ordinal %d)", tx.Offset, tx.Part, m.ID, p.Change.New.ID, p.Ordinal)
			}
		}
	}
	if a, b := MessageID(whole.CommitLSN, 0, "bf1"), MessageID(whole.CommitLSN, 0, ""); a == b {
		t.Fatalf("a backfill row and a change share id %s", a)
	}
}

// TestMessageIDIsChangeID: a broker message's id is the change's stable
// id that format renders (a CloudEvent's id, a Debezium source's), for a
// change and for a backfill row: the assertion format's
// TestCloudEventsSchema made against MessageID before format's tests
// stopped importing bridge.
func TestMessageIDIsChangeID(t *testing.T) {
	for _, c := range []struct {
		commit   pgq.LSN
		ord      uint32
		backfill string
	}{{0x16_B374_D848, 3, ""}, {0, 0, ""}, {0x1_0000_0000, 1 << 31, ""}, {0x16_B374_D848, 7, "bf1"}} {
		if got, want := MessageID(c.commit, c.ord, c.backfill), format.ChangeID(c.commit, c.ord, c.backfill); got != want {
			t.Errorf("MessageID(%s, %d, %q) = %q, format.ChangeID %q", c.commit, c.ord, c.backfill, got, want)
		}
	}
}
