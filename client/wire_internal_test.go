package client

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

func wireSample() []*pgq.Transaction {
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "v", TypeOID: 25}}
	ct := time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)
	return []*pgq.Transaction{
		{Offset: 7, Xid: 1, CommitLSN: 10, EndLSN: 20, CommitTime: ct, Final: true, Changes: []pgq.Change{
			{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: cols, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}, {Kind: pgq.ValueNull}}},
		}},
		{Offset: 1 << 40, Xid: 2, CommitLSN: 1 << 62, EndLSN: 1<<62 + 1, CommitTime: ct, Part: 3, Changes: []pgq.Change{
			{Op: pgq.OpMessage, Prefix: "p", Content: []byte{1, 2, 3}},
		}},
	}
}

// wireFetch and wireTx are the server's records form (httpapi/groups.go).
type wireFetch struct {
	Transactions []wireTx  `msgpack:"transactions"`
	NextOffset   uint64    `msgpack:"next_offset"`
	Committed    uint64    `msgpack:"committed_offset"`
	LastOffset   uint64    `msgpack:"last_offset"`
	LeaseExpires time.Time `msgpack:"lease_expires"`
	Generation   uint64    `msgpack:"generation"`
	Extra        []any     `msgpack:"extra"` // a field the client does not know
}

type wireTx struct {
	_msgpack struct{} `msgpack:",as_array"`
	Offset   uint64
	Body     msgpack.RawMessage
}

func TestDecodeFetch(t *testing.T) {
	txs := wireSample()
	// Committed is the deprecated copy of CommittedOffset: the decoder fills it.
	want := &FetchResult{Transactions: txs, NextOffset: 1<<40 + 1, CommittedOffset: 6, Committed: 6, LastOffset: 1 << 41}
	for name, exp := range map[string]time.Time{
		"ts64": time.Date(2025, 1, 1, 0, 0, 30, 123456789, time.UTC),
		"ts32": time.Date(2025, 1, 1, 0, 0, 30, 0, time.UTC),
		"ts96": time.Date(2700, 1, 1, 0, 0, 30, 5, time.UTC),
	} {
		want.LeaseExpires = exp
		// The server's form and the legacy form decode alike.
		wf := wireFetch{NextOffset: uint64(want.NextOffset), Committed: uint64(want.CommittedOffset), LastOffset: uint64(want.LastOffset), LeaseExpires: exp, Generation: 4}
		extra := wf
		extra.Extra = []any{"x", map[string]any{"k": 1.5}, []byte{1}, -3, nil, true}
		for _, tx := range txs {
			wf.Transactions = append(wf.Transactions, wireTx{Offset: uint64(tx.Offset), Body: record.Append(nil, tx)[record.HeaderSize:]})
		}
		extra.Transactions = wf.Transactions
		want.Generation = 4
		for form, v := range map[string]any{"server": &wf, "with an unknown field": &extra} {
			b, err := msgpack.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeFetch(b)
			if err != nil {
				t.Fatalf("%s %s: %v", name, form, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s:\n got %+v\nwant %+v", name, form, got, want)
			}
			// Every truncation fails cleanly.
			for n := range len(b) {
				if _, err := decodeFetch(b[:n]); err == nil {
					t.Fatalf("%s %s truncated to %d of %d bytes: no error", name, form, n, len(b))
				}
			}
			if _, err := decodeFetch(append(b, 0xc0)); !errors.Is(err, errWire) {
				t.Errorf("%s %s: trailing byte: %v", name, form, err)
			}
		}
	}
	// Empty and nil records.
	for _, v := range []any{
		map[string]any{"transactions": nil, "next_offset": 3},
		map[string]any{"transactions": []any{}, "next_offset": 3},
	} {
		b, _ := msgpack.Marshal(v)
		if got, err := decodeFetch(b); err != nil || len(got.Transactions) != 0 || got.NextOffset != 3 {
			t.Errorf("%v: %+v, %v", v, got, err)
		}
	}
	for _, v := range []any{
		map[string]any{"transactions": []any{[]any{1, nil}}},
		map[string]any{"transactions": []any{[]any{1}}},
		map[string]any{"next_offset": -1},
		map[string]any{"next_offset": "1"},
		[]any{1},
	} {
		b, _ := msgpack.Marshal(v)
		if _, err := decodeFetch(b); err == nil {
			t.Errorf("%v: no error", v)
		}
	}
}

func FuzzDecodeFetch(f *testing.F) {
	txs := wireSample()
	wf := wireFetch{NextOffset: 9, LeaseExpires: time.Unix(1, 2)}
	for _, tx := range txs {
		wf.Transactions = append(wf.Transactions, wireTx{Offset: uint64(tx.Offset), Body: record.Append(nil, tx)[record.HeaderSize:]})
	}
	b, _ := msgpack.Marshal(&wf)
	f.Add(b)
	f.Add([]byte{0x81, 0xa1, 'x', 0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeFetch(b) // must not panic
	})
}
