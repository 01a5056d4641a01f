package httpapi_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// Example consumes a group with the handler style and decodes values with
// pgtype. The server side here is an in-process Manager over a journal
// with two transactions; against `pgq run`, only Dial's address differs.
func Example() {
	dir, _ := os.MkdirTemp("", "pgq-example")
	defer os.RemoveAll(dir)
	j, _ := journal.Open(journal.Options{Dir: filepath.Join(dir, "journal"), NoSync: true})
	defer j.Close()
	ix, _ := index.Open(index.Options{Dir: filepath.Join(dir, "index")})
	defer ix.Close()
	cols := []pgq.Column{{Name: "id", TypeOID: pgtype.Int8OID, Key: true}, {Name: "total", TypeOID: pgtype.NumericOID}}
	var txs []*pgq.Transaction
	for i, total := range []string{"9.90", "12.50"} {
		txs = append(txs, &pgq.Transaction{Xid: uint32(700 + i), CommitLSN: pgq.LSN(0x1000 + i), EndLSN: pgq.LSN(0x1001 + i),
			CommitTime: time.Unix(1700000000, 0).UTC(), Final: true,
			Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: "orders", Columns: cols,
				New: []pgq.Value{{Kind: pgq.ValueText, Data: fmt.Appendf(nil, "%d", i+1)}, {Kind: pgq.ValueText, Data: []byte(total)}}}}})
	}
	_ = j.Append(txs)
	for i, tx := range txs {
		tx.Offset = pgq.Offset(i + 1)
		_ = ix.Add([]index.Entry{index.EntryOf(tx, 100, len(tx.Changes))})
	}
	m, _ := consumers.NewManager(consumers.ManagerOptions{Journal: j, Index: ix})
	defer m.Close()
	h, _ := httpapi.New(httpapi.Options{Groups: m})
	srv := httptest.NewServer(h)
	defer srv.Close()

	// The client side.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _ := client.New(srv.URL, client.Options{Retry: client.RetryOptions{GiveUp: -1}})
	if _, err := c.CreateGroup(ctx, consumers.CreateRequest{Name: "orders", From: "earliest", Tables: []string{"public.orders"}}); err != nil {
		fmt.Println(err)
		return
	}
	cs, _ := c.Consumer("orders", client.ConsumerOptions{Member: "worker-1", Wait: 100 * time.Millisecond})
	types := pgtype.NewMap()
	n := 0
	err := cs.Consume(ctx, func(ctx context.Context, tx *pgq.Transaction) error {
		for i := range tx.Changes {
			row, err := client.Values(types, &tx.Changes[i], client.NewImage)
			if err != nil {
				return err
			}
			total := row["total"].(pgtype.Numeric)
			f, _ := total.Float64Value()
			fmt.Printf("offset %d: order %d total %.2f\n", tx.Offset, row["id"], f.Float64)
		}
		if n++; n == 2 {
			cancel() // stop after two
		}
		return nil
	})
	fmt.Println("stopped:", err)
	_ = cs.Close(context.Background())
	gi, _ := c.Group(context.Background(), "orders")
	fmt.Println("committed:", gi.CommittedOffset)
	// Output:
	// offset 1: order 1 total 9.90
	// offset 2: order 2 total 12.50
	// stopped: context canceled
	// committed: 2
}
