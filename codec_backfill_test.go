package pgq

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestBackfillRecord: a record with a backfill id round-trips (10-element
// body), renders "backfill" and "op":"read" like an insert; a record without
// one keeps the 9-element body; RestampRecord keeps the id.
func TestBackfillRecord(t *testing.T) {
	cols := []Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "v", TypeOID: 25}}
	tx := &Transaction{Xid: 7, CommitLSN: 100, EndLSN: 120, CommitTime: time.UnixMicro(1_700_000_000_000_000).UTC(), Final: true,
		Backfill: "bf1", Changes: []Change{{Op: OpRead, Schema: "public", Table: "t", Columns: cols,
			New: []Value{{Kind: ValueText, Data: []byte("1")}, {Kind: ValueText, Data: []byte("a")}}}}}
	rec := AppendRecord(nil, tx)
	var got Transaction
	if err := DecodeRecord(rec, &got); err != nil {
		t.Fatal(err)
	}
	if got.Backfill != "bf1" || len(got.Changes) != 1 || got.Changes[0].Op != OpRead {
		t.Fatalf("decoded %+v", got)
	}
	if ri, err := PeekRecord(rec); err != nil || ri.EndLSN != 120 {
		t.Fatalf("peek: %+v %v", ri, err)
	}
	line := string(AppendJSON(nil, &got))
	if !strings.Contains(line, `"backfill":"bf1"`) || !strings.Contains(line, `{"op":"read","schema":"public","table":"t","new":{"id":1,"v":"a"},"old":null}`) {
		t.Fatalf("json: %s", line)
	}
	ins := got
	ins.Backfill = ""
	ins.Changes = []Change{got.Changes[0]}
	ins.Changes[0].Op = OpInsert
	plain := AppendRecord(nil, &ins)
	if plain[RecordHeaderSize] != 0x99 {
		t.Fatalf("record without backfill: body array 0x%02x, want 9 elements", plain[RecordHeaderSize])
	}
	hdr := &Transaction{Xid: 9, CommitLSN: 200, EndLSN: 220, CommitTime: tx.CommitTime, Part: 1, Final: true}
	re, n, err := RestampRecord(nil, rec, hdr)
	if err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if err := DecodeRecord(re, &got); err != nil || got.Backfill != "bf1" || got.EndLSN != 220 {
		t.Fatalf("restamped: %+v %v", got, err)
	}
	if op, err := ParseOp("read"); err != nil || op != OpRead {
		t.Fatal(op, err)
	}
	if !bytes.Equal(AppendRecord(nil, &ins), plain) {
		t.Fatal("not deterministic")
	}
}
