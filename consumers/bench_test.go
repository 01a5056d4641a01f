package consumers_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// benchEnv is a Manager over a real journal and index in a temporary
// directory, served by a real HTTP server: no sidecar, no PostgreSQL.
type benchEnv struct {
	J   *journal.Journal
	Ix  *index.Index
	M   *consumers.Manager
	C   *client.Client
	URL string
}

func newBenchEnv(b testing.TB) *benchEnv {
	b.Helper()
	log := slog.New(slog.DiscardHandler)
	j, err := journal.Open(journal.Options{Dir: b.TempDir(), SegmentSize: 16 << 20, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	ix, err := index.Open(index.Options{Dir: b.TempDir(), Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	m, err := consumers.NewManager(consumers.ManagerOptions{Journal: j, Index: ix, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	mux, err := httpapi.New(httpapi.Options{Groups: m})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	c, err := client.New(srv.URL, client.Options{Retry: client.RetryOptions{GiveUp: -1}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		srv.Close()
		_ = m.Close()
		_ = ix.Close()
		_ = j.Close()
	})
	return &benchEnv{J: j, Ix: ix, M: m, C: c, URL: srv.URL}
}

var (
	benchEventCols = []pgq.Column{
		{Name: "id", TypeOID: 20, Key: true}, {Name: "account", TypeOID: 23},
		{Name: "amount", TypeOID: 1700}, {Name: "note", TypeOID: 25}, {Name: "created", TypeOID: 1184},
	}
	benchAccountCols = []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "balance", TypeOID: 20}}
)

func text(s string) pgq.Value { return pgq.Value{Kind: pgq.ValueText, Data: []byte(s)} }

// benchTx is one transaction of pgqbench's small-transaction load: two
// inserts into bench_events and one update of bench_accounts.
func benchTx(i int, commit time.Time) *pgq.Transaction {
	ts := commit.Format("2006-01-02 15:04:05.999999-07")
	ins := func(id int) pgq.Change {
		return pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "bench_events", Columns: benchEventCols,
			New: []pgq.Value{text(strconv.Itoa(id)), text(strconv.Itoa(i % 1000)), text("9.99"), text("small transaction payload"), text(ts)}}
	}
	return &pgq.Transaction{
		Xid: uint32(1000 + i), CommitLSN: pgq.LSN(i*400 + 350), EndLSN: pgq.LSN(i*400 + 399),
		CommitTime: commit.Truncate(time.Microsecond).UTC(), Final: true,
		Changes: []pgq.Change{
			ins(2*i + 1), ins(2*i + 2),
			{Op: pgq.OpUpdate, Schema: "public", Table: "bench_accounts", Columns: benchAccountCols,
				New: []pgq.Value{text(strconv.Itoa(i % 1000)), text(strconv.Itoa(i))}},
		},
	}
}

// fill appends n benchTx records (and their index entries) in batches.
func (e *benchEnv) fill(b testing.TB, n int) {
	b.Helper()
	txs := make([]*pgq.Transaction, n)
	base := int(e.J.LastOffset())
	for i := range txs {
		txs[i] = benchTx(base+i+1, time.Now())
	}
	e.append(b, txs...)
}

// append journals txs (and their index entries) in batches of 500.
func (e *benchEnv) append(b testing.TB, txs ...*pgq.Transaction) {
	b.Helper()
	for len(txs) > 0 {
		batch := txs[:min(len(txs), 500)]
		txs = txs[len(batch):]
		recs := journal.Records(batch)
		if err := e.J.AppendRecords(recs); err != nil {
			b.Fatal(err)
		}
		entries := make([]index.Entry, len(batch))
		for k, r := range recs {
			entries[k] = index.EntryOf(r.Tx, r.Bytes, r.ChangeCount())
		}
		if err := e.Ix.Add(entries); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFetchHTTP replays a journal of 20,000 transactions (60,000
// changes) through the Go library over HTTP as pgqbench's replay row does:
// a fresh group at earliest per pass, msgpack, Poll(0) + Next, max 1000
// transactions / 4 MiB per fetch, commit after each fetch. One op is one
// pass.
func BenchmarkFetchHTTP(b *testing.B) {
	e := newBenchEnv(b)
	const records = 20_000
	e.fill(b, records)
	ctx := context.Background()
	changes, pass := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		pass++
		group := fmt.Sprintf("replay%d", pass)
		if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: group, From: "earliest"}); err != nil {
			b.Fatal(err)
		}
		cs, err := e.C.Consumer(group, client.ConsumerOptions{Member: "bench", Max: 1000, MaxBytes: 4 << 20})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			caughtUp, err := cs.Poll(ctx, 0)
			if err != nil {
				b.Fatal(err)
			}
			for cs.Buffered() > 0 {
				tx, err := cs.Next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				n += len(tx.Changes)
			}
			if err := cs.Commit(ctx); err != nil {
				b.Fatal(err)
			}
			if caughtUp {
				break
			}
		}
		if n != 3*records {
			b.Fatalf("pass %d read %d changes, want %d", pass, n, 3*records)
		}
		changes += n
		_ = cs.Close(ctx)
		_ = e.C.DeleteGroup(ctx, group)
	}
	b.ReportMetric(float64(changes)/b.Elapsed().Seconds(), "changes/s")
}

// BenchmarkFetchLatency measures journal → consumer latency: one writer
// appends one transaction per millisecond (at most 1,000 tx/s, as
// pgqbench's latency row; each Append fsyncs), a Consume of a group
// filtered to bench_events (commit after each batch) receives them; the
// latency is receive time minus the time Append returned. One op is one
// transaction.
func BenchmarkFetchLatency(b *testing.B) {
	e := newBenchEnv(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "latency", From: "latest", Tables: []string{"public.bench_events"}}); err != nil {
		b.Fatal(err)
	}
	cs, err := e.C.Consumer("latency", client.ConsumerOptions{Member: "bench", Wait: time.Second, Max: 1000})
	if err != nil {
		b.Fatal(err)
	}
	// Transaction i has xid 1000+i; the writer fills appended[i], the
	// consumer received[i] (UnixNano), read after both stopped.
	const maxTx = 1 << 20
	appended := make([]int64, maxTx)
	received := make([]int64, maxTx)
	var count atomic.Int64
	consumed := make(chan error, 1)
	go func() {
		consumed <- cs.Consume(ctx, func(_ context.Context, tx *pgq.Transaction) error {
			if i := int(tx.Xid) - 1000; i >= 0 && i < maxTx {
				received[i] = time.Now().UnixNano()
			}
			count.Add(1)
			return nil
		})
	}()
	// Warm up: the first fetch takes the lease.
	time.Sleep(50 * time.Millisecond)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	n := 0
	for b.Loop() {
		<-tick.C
		n++
		if n >= maxTx {
			b.Fatal("too many transactions")
		}
		if err := e.J.Append([]*pgq.Transaction{benchTx(n, time.Now())}); err != nil {
			b.Fatal(err)
		}
		appended[n] = time.Now().UnixNano()
	}
	b.StopTimer()
	deadline := time.Now().Add(10 * time.Second)
	for count.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-consumed; err != nil && !errors.Is(err, context.Canceled) {
		b.Fatal(err)
	}
	lats := make([]time.Duration, 0, n)
	for i := 1; i <= n; i++ {
		if received[i] != 0 {
			lats = append(lats, time.Duration(received[i]-appended[i]))
		}
	}
	if len(lats) != n {
		b.Fatalf("received %d of %d transactions", len(lats), n)
	}
	slices.Sort(lats)
	at := func(p float64) time.Duration { return lats[min(len(lats)-1, int(p/100*float64(len(lats))))] }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(at(50)), "p50-ms")
	b.ReportMetric(ms(at(99)), "p99-ms")
	b.ReportMetric(ms(lats[len(lats)-1]), "max-ms")
}
