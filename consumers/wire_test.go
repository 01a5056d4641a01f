package consumers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/consumers"
)

// TestFetchWireForms checks that the three ways to fetch deliver the same
// transactions: Manager.Fetch (decoded), the Go client (msgpack: records
// passing the filter unchanged are spliced from the journal, the others
// re-encoded) and JSON (each transaction exactly a `pgq journal dump` line),
// for groups without filter, with partial filters and across a multi-part
// transaction.
func TestFetchWireForms(t *testing.T) {
	e := newBenchEnv(t)
	ctx := ctxT(t)
	tcols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "v", TypeOID: 25}}
	ucols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}}
	ct := time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)
	row := func(op pgq.Op, table string, v string) pgq.Change {
		c := pgq.Change{Op: op, Schema: "public", Table: table, Columns: tcols, New: []pgq.Value{text("1"), text(v)}}
		if table == "u" {
			c.Columns, c.New = ucols, []pgq.Value{text(v)}
		}
		if op == pgq.OpDelete {
			c.Old, c.New, c.OldKind = c.New, nil, pgq.OldKey
		}
		return c
	}
	txs := []*pgq.Transaction{
		benchTx(1, ct),
		{Xid: 2, CommitLSN: 200, EndLSN: 290, CommitTime: ct, Part: 0, Final: false,
			Changes: []pgq.Change{row(pgq.OpInsert, "t", "a"), row(pgq.OpInsert, "t", "b")}},
		{Xid: 2, CommitLSN: 200, EndLSN: 290, CommitTime: ct, Part: 1, Final: true,
			Changes: []pgq.Change{row(pgq.OpUpdate, "t", "c"), row(pgq.OpInsert, "u", "7"), row(pgq.OpDelete, "t", "d")}},
		{Xid: 3, CommitLSN: 300, EndLSN: 390, CommitTime: ct, Origin: "elsewhere", Final: true,
			Changes: []pgq.Change{row(pgq.OpInsert, "u", "8")}},
		{Xid: 4, CommitLSN: 400, EndLSN: 490, CommitTime: ct, Final: true,
			Changes: []pgq.Change{{Op: pgq.OpTruncate, Tables: []string{"public.t"}, Cascade: true}, {Op: pgq.OpMessage, Prefix: "p", Content: []byte{0, 1}, Transactional: true}}},
		benchTx(5, ct),
	}
	e.append(t, txs...)

	filters := map[string]consumers.CreateRequest{
		"all":    {},
		"events": {Tables: []string{"public.bench_events"}},
		"t":      {Tables: []string{"public.t"}},
		"ins":    {Ops: []string{"insert"}},
		"u":      {Tables: []string{"public.u"}, Ops: []string{"insert", "delete"}},
	}
	for name, f := range filters {
		t.Run(name, func(t *testing.T) {
			for _, form := range []string{"go", "mp", "json"} {
				f.Name, f.From = name+"_"+form, "earliest"
				if _, err := e.M.Create(ctx, f); err != nil {
					t.Fatal(err)
				}
			}
			req := consumers.FetchRequest{Member: "m", Max: 100}
			want, err := e.M.Fetch(ctx, name+"_go", req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.C.Fetch(ctx, name+"_mp", req)
			if err != nil {
				t.Fatal(err)
			}
			if got.NextOffset != want.NextOffset || got.LastOffset != want.LastOffset || got.Committed != want.Committed {
				t.Errorf("msgpack offsets: next %d last %d committed %d, want %d %d %d", got.NextOffset, got.LastOffset, got.Committed, want.NextOffset, want.LastOffset, want.Committed)
			}
			if !got.LeaseExpires.After(time.Now()) || got.LeaseExpires.Location() != time.UTC {
				t.Errorf("msgpack lease_expires %v", got.LeaseExpires)
			}
			if len(got.Transactions) != len(want.Transactions) {
				t.Fatalf("msgpack: %d transactions, want %d", len(got.Transactions), len(want.Transactions))
			}
			for i := range want.Transactions {
				if !reflect.DeepEqual(got.Transactions[i], want.Transactions[i]) {
					t.Errorf("msgpack transaction %d:\n got %+v\nwant %+v", i, got.Transactions[i], want.Transactions[i])
				}
			}

			body := `{"member":"m","max":100}`
			r, err := http.NewRequest(http.MethodPost, e.URL+"/v1/groups/"+name+"_json/fetch", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("JSON fetch: %v %d %s", err, resp.StatusCode, raw)
			}
			var jr struct {
				Transactions []json.RawMessage `json:"transactions"`
				NextOffset   pgq.Offset        `json:"next_offset"`
			}
			if err := json.Unmarshal(raw, &jr); err != nil {
				t.Fatal(err)
			}
			if jr.NextOffset != want.NextOffset || len(jr.Transactions) != len(want.Transactions) {
				t.Fatalf("JSON: next %d, %d transactions; want %d, %d", jr.NextOffset, len(jr.Transactions), want.NextOffset, len(want.Transactions))
			}
			for i, tx := range want.Transactions {
				if line := pgq.AppendJSON(nil, tx); !bytes.Equal(jr.Transactions[i], line) {
					t.Errorf("JSON transaction %d:\n got %s\nwant %s", i, jr.Transactions[i], line)
				}
			}
			if got := resp.Header.Get("Content-Length"); got != fmt.Sprint(len(raw)) {
				t.Errorf("Content-Length %q for %d bytes", got, len(raw))
			}
		})
	}
}
