package record

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// TestBackfillRecord: a record with a backfill id round-trips (10-element
// body), renders "backfill" and "op":"read" like an insert; a record without
// one keeps the 9-element body; Restamp keeps the id.
func TestBackfillRecord(t *testing.T) {
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "v", TypeOID: 25}}
	tx := &pgq.Transaction{Xid: 7, CommitLSN: 100, EndLSN: 120, CommitTime: time.UnixMicro(1_700_000_000_000_000).UTC(), Final: true,
		Backfill: "bf1", Changes: []pgq.Change{{Op: pgq.OpRead, Schema: "public", Table: "t", Columns: cols,
			New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}, {Kind: pgq.ValueText, Data: []byte("a")}}}}}
	rec := Append(nil, tx)
	var got pgq.Transaction
	if err := Decode(rec, &got); err != nil {
		t.Fatal(err)
	}
	if got.Backfill != "bf1" || len(got.Changes) != 1 || got.Changes[0].Op != pgq.OpRead {
		t.Fatalf("decoded %+v", got)
	}
	if ri, err := Peek(rec); err != nil || ri.EndLSN != 120 {
		t.Fatalf("peek: %+v %v", ri, err)
	}
	line := string(format.AppendJSON(nil, &got))
	if !strings.Contains(line, `"backfill":"bf1"`) || !strings.Contains(line, `{"op":"read","ordinal":0,"schema":"public","table":"t","new":{"id":1,"v":"a"},"old":null}`) {
		t.Fatalf("json: %s", line)
	}
	ins := got
	ins.Backfill = ""
	ins.Changes = []pgq.Change{got.Changes[0]}
	ins.Changes[0].Op = pgq.OpInsert
	plain := Append(nil, &ins)
	if plain[HeaderSize] != 0x99 {
		t.Fatalf("record without backfill: body array 0x%02x, want 9 elements", plain[HeaderSize])
	}
	hdr := &pgq.Transaction{Xid: 9, CommitLSN: 200, EndLSN: 220, CommitTime: tx.CommitTime, Part: 1, Final: true}
	re, n, err := Restamp(nil, rec, hdr)
	if err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if err := Decode(re, &got); err != nil || got.Backfill != "bf1" || got.EndLSN != 220 {
		t.Fatalf("restamped: %+v %v", got, err)
	}
	if op, err := pgq.ParseOp("read"); err != nil || op != pgq.OpRead {
		t.Fatal(op, err)
	}
	if !bytes.Equal(Append(nil, &ins), plain) {
		t.Fatal("not deterministic")
	}
}
