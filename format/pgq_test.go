package format_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

func BenchmarkAppendJSON(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("changes=%d", n), func(b *testing.B) {
			tx := benchTx(n)
			buf := format.AppendJSON(nil, tx)
			if !json.Valid(buf) {
				b.Fatalf("invalid JSON: %s", buf)
			}
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = format.AppendJSON(buf[:0], tx)
			}
		})
	}
}

func TestAppendChangeJSONGap(t *testing.T) {
	c := pgq.Change{Op: pgq.OpGap, FromLSN: 0x16_0000_0001, ToLSN: 0x16_B374_D848}
	got := string(format.AppendChangeJSON(nil, &c))
	want := `{"op":"gap","from_lsn":"16/1","to_lsn":"16/B374D848"}`
	if got != want {
		t.Fatalf("gap JSON\n got %s\nwant %s", got, want)
	}
	if op, err := pgq.ParseOp("gap"); err != nil || op != pgq.OpGap {
		t.Fatalf("ParseOp(gap) = %v, %v", op, err)
	}
}

func TestAppendChangeJSONDDL(t *testing.T) {
	c := pgq.Change{Op: pgq.OpDDL, Prefix: "pgq.ddl", Transactional: true,
		Content: []byte(`{"command":"ALTER TABLE","object":"public.orders","schema":"public","object_type":"table","statement":"ALTER TABLE orders ADD note text"}`)}
	got := string(format.AppendChangeJSON(nil, &c))
	want := `{"op":"ddl","command":"ALTER TABLE","object":"public.orders","schema":"public","object_type":"table","statement":"ALTER TABLE orders ADD note text"}`
	if got != want {
		t.Fatalf("ddl JSON\n got %s\nwant %s", got, want)
	}
}

// benchTx is a transaction of n key updates, as the record benchmarks use.
func benchTx(n int) *pgq.Transaction {
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "name", TypeOID: 25}, {Name: "payload", TypeOID: 17}, {Name: "note", TypeOID: 25}}
	text := func(s string) pgq.Value { return pgq.Value{Kind: pgq.ValueText, Data: []byte(s)} }
	tx := &pgq.Transaction{Xid: 1234, CommitLSN: 1 << 33, EndLSN: 1<<33 + 500, CommitTime: time.Now().UTC().Truncate(time.Microsecond), Final: true}
	for i := range n {
		tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpUpdate, Schema: "public", Table: "accounts", Columns: cols,
			New: []pgq.Value{text(fmt.Sprint(i)), text("some name"), {Kind: pgq.ValueBinary, Data: []byte("0123456789")}, {Kind: pgq.ValueNull}},
			Old: []pgq.Value{text(fmt.Sprint(i)), {Kind: pgq.ValueNull}, {Kind: pgq.ValueNull}, {Kind: pgq.ValueNull}}, OldKind: pgq.OldKey})
	}
	return tx
}

// TestAppendJSONOrdinals: every change of a dump line carries its ordinal
// in the whole transaction right after "op": counted from FirstOrdinal in
// a later part, taken from Ordinals where a filter dropped changes; a
// change rendered alone (format.AppendChangeJSON) has none.
func TestAppendJSONOrdinals(t *testing.T) {
	ins := func(id string) pgq.Change {
		return pgq.Change{Op: pgq.OpInsert, Schema: "s", Table: "t", Columns: []pgq.Column{{Name: "id", TypeOID: 23, Key: true}},
			New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte(id)}}}
	}
	gap := pgq.Change{Op: pgq.OpGap, FromLSN: 1, ToLSN: 2}
	for _, tc := range []struct {
		name string
		tx   pgq.Transaction
		want []string
	}{
		{"single", pgq.Transaction{Final: true, Changes: []pgq.Change{ins("1"), gap}},
			[]string{`{"op":"insert","ordinal":0,"schema":"s"`, `{"op":"gap","ordinal":1,"from_lsn":"0/1"`}},
		{"later part", pgq.Transaction{Part: 2, FirstOrdinal: 700, Changes: []pgq.Change{ins("1"), ins("2")}},
			[]string{`{"op":"insert","ordinal":700,`, `{"op":"insert","ordinal":701,`}},
		{"filtered", pgq.Transaction{Part: 1, FirstOrdinal: 41, Ordinals: []uint32{41, 4294967295}, Changes: []pgq.Change{ins("1"), ins("2")}},
			[]string{`{"op":"insert","ordinal":41,`, `{"op":"insert","ordinal":4294967295,`}},
	} {
		line := string(format.AppendJSON(nil, &tc.tx))
		if !json.Valid([]byte(line)) {
			t.Fatalf("%s: invalid JSON: %s", tc.name, line)
		}
		at := 0
		for _, w := range tc.want {
			i := strings.Index(line[at:], w)
			if i < 0 {
				t.Fatalf("%s: lacks %s after byte %d: %s", tc.name, w, at, line)
			}
			at += i + len(w)
		}
		if n := strings.Count(line, `"ordinal":`); n != len(tc.tx.Changes) {
			t.Fatalf("%s: %d ordinals for %d changes: %s", tc.name, n, len(tc.tx.Changes), line)
		}
	}
	if alone := string(format.AppendChangeJSON(nil, &gap)); strings.Contains(alone, "ordinal") {
		t.Fatalf("a change alone renders an ordinal: %s", alone)
	}
	if got := string(format.AppendChangeJSONOrdinal(nil, &gap, 9, format.JSONEmbedded)); got != `{"op":"gap","ordinal":9,"from_lsn":"0/1","to_lsn":"0/2"}` {
		t.Fatalf("AppendChangeJSONOrdinal = %s", got)
	}
}
