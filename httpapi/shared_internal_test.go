package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/format"
)

// The hand-written fetch answer is byte for byte json.Marshal's.
func TestAppendMessagesJSON(t *testing.T) {
	c := pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "t",
		Columns: []pgq.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "v", TypeOID: 25}},
		New:     []pgq.Value{{Kind: pgq.ValueText, Data: []byte("7")}, {Kind: pgq.ValueText, Data: []byte("x")}}}
	c.New[1].Data = []byte("quote \" and \\ and \n and ü")
	change := format.AppendChangeJSON(nil, &c)
	for _, msgs := range [][]api.Message{{}, {
		{Offset: 12, Xid: 4000000000, CommitLSN: "0/1A2B3C8", CommitTime: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC), Index: 3, Change: change, Delivery: 2, AckID: "12.3.2.k3x9q2a"},
		{Offset: 13, CommitLSN: "16/0", CommitTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Change: []byte("null"), Delivery: 1, AckID: "13.0.1.z"},
	}} {
		want, err := json.Marshal(api.MessagesResponse{Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendMessagesJSON(nil, msgs); string(got) != string(want)+"\n" {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	}
}
