package client_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// order is a row of public.orders as the consumer's code wants it.
type order struct {
	ID     int64
	Total  string // numeric, exact
	Placed time.Time
	Tags   []string
	Meta   map[string]any
	Note   *string
}

// orderEvent is what the consumer's business logic makes of one change.
type orderEvent struct {
	ID       string // commit LSN and ordinal: the same in both modes
	Op       string
	New, Old order
}

// handleOrder is all the decoding a consumer of public.orders has. It
// takes a *client.Change, which an exclusive group's transactions and a
// shared group's messages both carry, so it serves both modes unchanged.
func handleOrder(commitLSN client.LSN, ordinal uint32, c *client.Change) (orderEvent, error) {
	ev := orderEvent{ID: fmt.Sprintf("%s/%d", commitLSN, ordinal), Op: c.Op.String()}
	if err := client.Scan(c, client.NewImage, &ev.New); err != nil {
		return ev, err
	}
	if c.Op == client.OpUpdate || c.Op == client.OpDelete {
		if err := client.Scan(c, client.OldImage, &ev.Old); err != nil {
			return ev, err
		}
	}
	return ev, nil
}

// Example_exclusive reads public.orders from an exclusive group: one
// member at a time, whole transactions, cumulative commits.
func Example_exclusive() {
	ctx := context.Background()
	c, err := client.New("localhost:7070", client.Options{})
	if err != nil {
		return
	}
	cs, err := c.Consumer("orders", client.ConsumerOptions{})
	if err != nil {
		return
	}
	_ = cs.Consume(ctx, func(ctx context.Context, tx *client.Transaction) error {
		for i := range tx.Changes {
			ev, err := handleOrder(tx.CommitLSN, tx.Ordinal(i), &tx.Changes[i])
			if err != nil {
				return err
			}
			fmt.Println(ev.ID, ev.Op, ev.New.ID, ev.New.Total)
		}
		return nil
	})
}

// Example_shared reads the same table from a shared group: many members,
// single changes, each acked on its own. Only the loop around
// handleOrder changed.
func Example_shared() {
	ctx := context.Background()
	c, err := client.New("localhost:7070", client.Options{})
	if err != nil {
		return
	}
	sc, err := c.SharedConsumer("orders-shared", client.SharedConsumerOptions{Concurrency: 8})
	if err != nil {
		return
	}
	_ = sc.Consume(ctx, func(ctx context.Context, m client.Message) error {
		ev, err := handleOrder(m.CommitLSN, m.Ordinal, m.Change)
		if err != nil {
			return client.Term(err) // cannot be decoded: park it
		}
		fmt.Println(ev.ID, ev.Op, ev.New.ID, ev.New.Total)
		return nil
	})
}

// The examples' claim, run: the same journal read through an exclusive
// and a shared group filtered to public.orders gives, through the one
// handleOrder, the same events (typed values of int8, numeric,
// timestamptz, text[], jsonb and a NULL; an update's key-only old image;
// the ordinal of a change after a filtered-out one).
func TestMoveExclusiveToShared(t *testing.T) {
	s := startServer(t, t.TempDir(), "127.0.0.1:0", nil)
	defer s.stop()
	ordersCols := []client.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "total", TypeOID: 1700}, {Name: "placed", TypeOID: 1184},
		{Name: "tags", TypeOID: 1009}, {Name: "meta", TypeOID: 3802}, {Name: "note", TypeOID: 25}}
	txt := func(s string) client.Value { return client.Value{Kind: client.ValueText, Data: []byte(s)} }
	row := func(id, total string) []client.Value {
		return []client.Value{txt(id), txt(total), txt("2026-12-04 10:11:12.345678+00"), txt(`{a,"b c"}`), txt(`{"n": 2.50}`), {Kind: client.ValueNull}}
	}
	var txs []*client.Transaction
	for i := range 3 {
		id := fmt.Sprint(i + 1)
		txs = append(txs, &client.Transaction{Xid: uint32(700 + i), CommitLSN: client.LSN(0x1000 * (i + 1)), EndLSN: client.LSN(0x1000*(i+1) + 8),
			CommitTime: time.Date(2026, 12, 4, 10, 0, i, 0, time.UTC), Final: true, Changes: []client.Change{
				{Op: client.OpInsert, Schema: "public", Table: "orders", Columns: ordersCols, New: row(id, "12.50")},
				{Op: client.OpInsert, Schema: "public", Table: "audit", Columns: []client.Column{{Name: "x", TypeOID: 25}}, New: []client.Value{txt("skip")}},
				{Op: client.OpUpdate, Schema: "public", Table: "orders", Columns: ordersCols, New: row(id, "99.99"), OldKind: client.OldKey,
					Old: []client.Value{txt(id), {Kind: client.ValueNull}, {Kind: client.ValueNull}, {Kind: client.ValueNull}, {Kind: client.ValueNull}, {Kind: client.ValueNull}}},
			}})
	}
	recs := journal.Records(txs)
	if err := s.j.AppendRecords(recs); err != nil {
		t.Fatal(err)
	}
	entries := make([]index.Entry, len(recs))
	for i, r := range recs {
		entries[i] = index.EntryOf(r.Tx, r.Bytes, r.ChangeCount())
	}
	if err := s.ix.Add(entries); err != nil {
		t.Fatal(err)
	}
	c := dial(t, s.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, mode := range []string{"exclusive", "shared"} {
		if _, err := c.CreateGroup(ctx, client.CreateRequest{Name: "orders-" + mode, Mode: mode, From: "earliest", Tables: []string{"public.orders"}}); err != nil {
			t.Fatal(err)
		}
	}
	const want = 6 // two changes of public.orders in each of three transactions

	var exclusive []orderEvent
	cs, err := c.Consumer("orders-exclusive", client.ConsumerOptions{Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for len(exclusive) < want {
		tx, err := cs.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range tx.Changes {
			ev, err := handleOrder(tx.CommitLSN, tx.Ordinal(i), &tx.Changes[i])
			if err != nil {
				t.Fatal(err)
			}
			exclusive = append(exclusive, ev)
		}
	}

	var (
		mu     sync.Mutex // guards shared
		shared []orderEvent
	)
	sc, err := c.SharedConsumer("orders-shared", client.SharedConsumerOptions{Concurrency: 3, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = consumeUntil(sc, func(_ context.Context, m client.Message) error {
		ev, err := handleOrder(m.CommitLSN, m.Ordinal, m.Change)
		if err != nil {
			return client.Term(err)
		}
		mu.Lock()
		shared = append(shared, ev)
		mu.Unlock()
		return nil
	}, func() bool { mu.Lock(); defer mu.Unlock(); return len(shared) >= want })
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(shared, func(i, j int) bool { return shared[i].ID < shared[j].ID })
	if len(shared) != want || len(exclusive) != want {
		t.Fatalf("%d shared, %d exclusive events, want %d each", len(shared), len(exclusive), want)
	}
	if !reflect.DeepEqual(shared, exclusive) {
		t.Fatalf("the modes decode differently:\nshared    %+v\nexclusive %+v", shared, exclusive)
	}
	first := exclusive[0]
	wantFirst := order{ID: 1, Total: "12.50", Placed: time.Date(2026, 12, 4, 10, 11, 12, 345678000, time.UTC), Tags: []string{"a", "b c"}, Meta: map[string]any{"n": 2.5}}
	first.New.Placed = first.New.Placed.UTC()
	if first.ID != "0/1000/0" || first.Op != "insert" || !reflect.DeepEqual(first.New, wantFirst) {
		t.Fatalf("first event %+v, want 0/1000/0 insert %+v", first, wantFirst)
	}
	// The update after the filtered-out audit row: ordinal 2, the key-only
	// old image fills the key alone.
	if upd := exclusive[1]; upd.ID != "0/1000/2" || upd.Op != "update" || upd.New.Total != "99.99" || upd.Old.ID != 1 || upd.Old.Total != "" {
		t.Fatalf("update event %+v", upd)
	}
	if _, err := handleOrder(1, 0, &client.Change{Op: client.OpInsert, Columns: ordersCols[:1], New: []client.Value{txt("x")}}); err == nil {
		t.Fatal("handleOrder decoded a bad int8")
	}
}
