package consumers

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// TestAnswersCarryOrdinals: a filtered group's answers name each change
// by its ordinal in the whole transaction, not by its index after the
// filter: a shared group's messages and parked list (their filtered
// record keeps the ordinals), and an exclusive group's transactions as
// they render (the JSON and msgpack fetch answers, `pgq consume`).
func TestAnswersCarryOrdinals(t *testing.T) {
	e := newSharedEnv(t, 0)
	e.add([]pgq.Change{row("t", 1), row("u", 1), row("t", 2), row("u", 2)})
	e.create(CreateRequest{Tables: []string{"public.u"}})
	ctx := context.Background()
	ordinal := func(raw []byte) int {
		var c struct {
			Ordinal *int `json:"ordinal"`
		}
		if err := json.Unmarshal(raw, &c); err != nil || c.Ordinal == nil {
			t.Fatalf("change without ordinal: %s (%v)", raw, err)
		}
		return *c.Ordinal
	}
	msgs := e.fetch(10)
	var got []int
	for _, m := range msgs {
		got = append(got, m.Index, int(m.Tx.Ordinal(m.Index)))
	}
	if !slices.Equal(got, []int{0, 1, 1, 3}) {
		t.Fatalf("shared messages (index, ordinal): %v", got)
	}
	n, err := e.m.Term(ctx, "jobs", []string{msgs[1].AckID})
	mustCount(t, n, err, 1)
	parked, err := e.m.Parked(ctx, "jobs")
	if err != nil || len(parked) != 1 || parked[0].Index != 1 || parked[0].Tx.Ordinal(parked[0].Index) != 3 {
		t.Fatalf("parked: %+v, %v", parked, err)
	}

	if _, err := e.m.Create(ctx, CreateRequest{Name: "excl", From: "earliest", Tables: []string{"public.u"}}); err != nil {
		t.Fatal(err)
	}
	res, err := e.m.Fetch(ctx, "excl", FetchRequest{Member: "m"})
	if err != nil || len(res.Transactions) != 1 {
		t.Fatalf("fetch: %+v, %v", res, err)
	}
	var tx struct {
		Changes []json.RawMessage `json:"changes"`
	}
	line := format.AppendJSON(nil, res.Transactions[0])
	if err := json.Unmarshal(line, &tx); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	got = got[:0]
	for _, c := range tx.Changes {
		got = append(got, ordinal(c))
	}
	if !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("exclusive fetch ordinals %v: %s", got, line)
	}
}
