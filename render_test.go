package pgq

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func BenchmarkAppendJSON(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("changes=%d", n), func(b *testing.B) {
			tx := benchTx(n)
			buf := AppendJSON(nil, tx)
			if !json.Valid(buf) {
				b.Fatalf("invalid JSON: %s", buf)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendJSON(buf[:0], tx)
			}
		})
	}
}

func TestAppendChangeJSONGap(t *testing.T) {
	c := Change{Op: OpGap, FromLSN: 0x16_0000_0001, ToLSN: 0x16_B374_D848}
	got := string(AppendChangeJSON(nil, &c))
	want := `{"op":"gap","from_lsn":"16/1","to_lsn":"16/B374D848"}`
	if got != want {
		t.Fatalf("gap JSON\n got %s\nwant %s", got, want)
	}
	if op, err := ParseOp("gap"); err != nil || op != OpGap {
		t.Fatalf("ParseOp(gap) = %v, %v", op, err)
	}
}

func TestAppendChangeJSONDDL(t *testing.T) {
	c := Change{Op: OpDDL, Prefix: "pgq.ddl", Transactional: true,
		Content: []byte(`{"command":"ALTER TABLE","object":"public.orders","schema":"public","object_type":"table","statement":"ALTER TABLE orders ADD note text"}`)}
	got := string(AppendChangeJSON(nil, &c))
	want := `{"op":"ddl","command":"ALTER TABLE","object":"public.orders","schema":"public","object_type":"table","statement":"ALTER TABLE orders ADD note text"}`
	if got != want {
		t.Fatalf("ddl JSON\n got %s\nwant %s", got, want)
	}
}

// benchTx is a transaction of n key updates, as the record benchmarks use.
func benchTx(n int) *Transaction {
	cols := []Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "name", TypeOID: 25}, {Name: "payload", TypeOID: 17}, {Name: "note", TypeOID: 25}}
	text := func(s string) Value { return Value{Kind: ValueText, Data: []byte(s)} }
	tx := &Transaction{Xid: 1234, CommitLSN: 1 << 33, EndLSN: 1<<33 + 500, CommitTime: time.Now().UTC().Truncate(time.Microsecond), Final: true}
	for i := range n {
		tx.Changes = append(tx.Changes, Change{Op: OpUpdate, Schema: "public", Table: "accounts", Columns: cols,
			New: []Value{text(fmt.Sprint(i)), text("some name"), {Kind: ValueBinary, Data: []byte("0123456789")}, {Kind: ValueNull}},
			Old: []Value{text(fmt.Sprint(i)), {Kind: ValueNull}, {Kind: ValueNull}, {Kind: ValueNull}}, OldKind: OldKey})
	}
	return tx
}
