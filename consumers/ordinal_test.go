package consumers_test

import (
	"slices"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/record"
)

// TestFilterKeepsOrdinals: a filtered record names each kept change by
// its ordinal in the whole transaction (not its index after the filter),
// also for a later part, and the fetch answer's record body carries them.
func TestFilterKeepsOrdinals(t *testing.T) {
	ch := func(table string) pgq.Change {
		return pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: table,
			Columns: []pgq.Column{{Name: "id", TypeOID: 23, Key: true}},
			New:     []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}}}
	}
	f := consumers.Filter{Tables: []string{"public.b"}}
	for _, tc := range []struct {
		first uint32
		want  []uint32
	}{{0, []uint32{1, 3}}, {40, []uint32{41, 43}}} {
		tx := &pgq.Transaction{Xid: 7, CommitLSN: 100, EndLSN: 200, FirstOrdinal: tc.first, Part: 1,
			Changes: []pgq.Change{ch("a"), ch("b"), ch("a"), ch("b")}}
		out := f.Apply(tx)
		if out == nil || len(out.Changes) != 2 {
			t.Fatalf("Apply kept %v", out)
		}
		var got pgq.Transaction
		if err := record.Decode(record.Append(nil, out), &got); err != nil {
			t.Fatal(err)
		}
		for _, x := range []*pgq.Transaction{out, &got} {
			if o := []uint32{x.Ordinal(0), x.Ordinal(1)}; !slices.Equal(o, tc.want) {
				t.Fatalf("first %d: ordinals %v, want %v", tc.first, o, tc.want)
			}
		}
	}
}
