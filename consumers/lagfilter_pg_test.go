package consumers_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/server"
)

// groupLag reads a group's lag over the API.
func groupLag(t *testing.T, e *env, name string) api.Lag {
	t.Helper()
	gi, err := e.C.Group(ctxT(t), name)
	if err != nil {
		t.Fatalf("group %s: %v", name, err)
	}
	return gi.Lag
}

// recordsOf sums the journaled size of the records at offs, as the index
// keeps it.
func recordsOf(t *testing.T, e *env, offs []pgq.Offset) int64 {
	t.Helper()
	var n int64
	for _, off := range offs {
		en, err := serverparts.Of(e.S).Index.EntryAt(off)
		if err != nil {
			t.Fatal(err)
		}
		n += int64(en.Bytes)
	}
	return n
}

// offsetsOf lists the offsets in (after, last] holding a change of table.
func offsetsOf(t *testing.T, e *env, after pgq.Offset, table string, op pgq.Op) []pgq.Offset {
	t.Helper()
	var out []pgq.Offset
	for off := after + 1; off <= serverparts.Of(e.S).Journal.LastOffset(); off++ {
		tx, err := serverparts.Of(e.S).Journal.Read(off)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range tx.Changes {
			if c.Table == table && (op == 0 || c.Op == op) {
				out = append(out, off)
				break
			}
		}
	}
	return out
}

// TestFilteredLagCountsOnlyItsRecords: against PostgreSQL, a group
// filtered to public.orders keeps lag 0 (records, bytes, seconds) while
// another table gets traffic and a backfill of it runs, whereas a group
// without filter counts all of it; then its lag counts exactly the
// records that touch orders (one shared with the other table), with their
// journaled size, and a group filtered to orders' deletes still counts
// nothing.
func TestFilteredLagCountsOnlyItsRecords(t *testing.T) {
	e := start(t, nil)
	ctx := ctxT(t)
	e.DB.Exec(t, "CREATE TABLE orders (id int PRIMARY KEY, v text)", "CREATE TABLE big (id int PRIMARY KEY, v text)",
		"INSERT INTO big SELECT i, repeat('x', 200) FROM generate_series(1, 3000) i")
	for _, g := range []api.CreateRequest{
		{Name: "orders", From: "latest", Tables: []string{"public.orders"}},
		{Name: "deletes", From: "latest", Tables: []string{"public.orders"}, Ops: []string{"delete"}},
		{Name: "all", From: "latest"},
		{Name: "bigreads", From: "latest", Tables: []string{"public.big"}, Ops: []string{"read"}},
	} {
		if _, err := e.C.CreateGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	start := serverparts.Of(e.S).Journal.LastOffset()
	e.DB.Exec(t, "DO $$ BEGIN FOR i IN 3001..3100 LOOP INSERT INTO big VALUES (i, 'y'); COMMIT; END LOOP; END $$")
	e.WaitLast(t, start+100)
	bf, err := e.C.StartBackfill(ctx, api.BackfillRequest{Tables: []string{"public.big"}, ChunkSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !bf.Finished() {
		if time.Now().After(deadline) {
			t.Fatalf("backfill not finished: %+v", bf)
		}
		time.Sleep(100 * time.Millisecond)
		if bf, err = e.C.Backfill(ctx, bf.ID); err != nil {
			t.Fatal(err)
		}
	}
	if bf.State != "done" || bf.Rows != 3100 {
		t.Fatalf("backfill %+v", bf)
	}
	e.WaitLast(t, serverparts.Of(e.S).Journal.LastOffset())
	reads := offsetsOf(t, e, start, "big", pgq.OpRead)
	if len(reads) < 6 {
		t.Fatalf("the backfill journaled %d read records, want its chunks", len(reads))
	}
	if l := groupLag(t, e, "orders"); l != (api.Lag{}) {
		t.Fatalf("orders group lag after other traffic and a backfill = %+v, want zero", l)
	}
	// The chunks' subjects come from their producer's word
	// (journal.Record.ReadsTable), not from their bytes: a group of big's
	// reads counts exactly them.
	if l := groupLag(t, e, "bigreads"); l.Records != uint64(len(reads)) || l.Bytes != recordsOf(t, e, reads) {
		t.Fatalf("big's reads group lag %+v, want the %d chunk records of %d bytes", l, len(reads), recordsOf(t, e, reads))
	}
	all := groupLag(t, e, "all")
	if all.Records < 106 || all.Bytes < 3000*200 {
		t.Fatalf("unfiltered lag %+v: want every record (100 inserts, the chunks) and the backfill's bytes", all)
	}

	before := serverparts.Of(e.S).Journal.LastOffset()
	e.DB.Exec(t, "INSERT INTO orders VALUES (1, 'a')", "INSERT INTO big VALUES (5000, 'z')", "INSERT INTO orders VALUES (2, 'b')",
		"BEGIN; INSERT INTO big VALUES (5001, 'z'); UPDATE orders SET v = 'c' WHERE id = 1; COMMIT",
		"INSERT INTO big VALUES (5002, 'z')")
	e.WaitLast(t, before+5)
	want := offsetsOf(t, e, before, "orders", 0)
	if len(want) != 3 {
		t.Fatalf("orders records %v, want 3", want)
	}
	l := groupLag(t, e, "orders")
	if l.Records != 3 || l.Bytes != recordsOf(t, e, want) || l.OutOfRange || l.Seconds <= 0 {
		t.Fatalf("orders lag %+v, want 3 records of %d bytes", l, recordsOf(t, e, want))
	}
	if l := groupLag(t, e, "deletes"); l.Records != 0 || l.Bytes != 0 {
		t.Fatalf("orders-deletes lag %+v, want zero", l)
	}
	// Consuming moves the lag as the cursor moves.
	r := fetch(t, e, "orders", "m", 1, 0)
	if len(r.Transactions) != 1 {
		t.Fatalf("fetch: %d transactions", len(r.Transactions))
	}
	if _, err := e.C.Commit(ctx, "orders", "m", r.NextOffset-1, 0); err != nil {
		t.Fatal(err)
	}
	if l := groupLag(t, e, "orders"); l.Records != 2 || l.Bytes != recordsOf(t, e, want[1:]) {
		t.Fatalf("orders lag after one commit %+v, want 2 records", l)
	}
}

// TestFilteredGroupRetentionOutOfRange: a size cap that drops records of
// another table moves a filtered group over them (no OUT_OF_RANGE, its
// fetch works and delivers what came after), while a group whose filter
// passes a dropped record goes out of range, as does one filtered to the
// other table.
func TestFilteredGroupRetentionOutOfRange(t *testing.T) {
	e := start(t, func(o *server.Options) {
		o.SegmentSize = 4096
		o.Retention.Interval = time.Hour // the test runs the passes
	})
	ctx := ctxT(t)
	e.DB.Exec(t, "CREATE TABLE orders (id int PRIMARY KEY, v text)", "CREATE TABLE big (id int PRIMARY KEY, v text)")
	for _, n := range []string{"lost", "bigs"} {
		tables := map[string][]string{"lost": {"public.orders"}, "bigs": {"public.big"}}[n]
		if _, err := e.C.CreateGroup(ctx, api.CreateRequest{Name: n, From: "latest", Tables: tables}); err != nil {
			t.Fatal(err)
		}
	}
	before := serverparts.Of(e.S).Journal.LastOffset()
	e.DB.Exec(t, "INSERT INTO orders VALUES (1, 'lost')")
	e.WaitLast(t, before+1)
	for _, mode := range []string{"", "shared"} {
		if _, err := e.C.CreateGroup(ctx, api.CreateRequest{Name: "kept" + mode, Mode: mode, From: "latest", Tables: []string{"public.orders"}}); err != nil {
			t.Fatal(err)
		}
	}
	before = serverparts.Of(e.S).Journal.LastOffset()
	e.DB.Exec(t, "DO $$ BEGIN FOR i IN 1..400 LOOP INSERT INTO big VALUES (i, repeat('x', 100)); COMMIT; END LOOP; END $$",
		"INSERT INTO orders VALUES (2, 'after')")
	e.WaitLast(t, before+401)
	segs, err := serverparts.Of(e.S).Journal.Segments()
	if err != nil || len(segs) < 5 {
		t.Fatalf("%d segments, %v: the test needs several", len(segs), err)
	}
	res, err := serverparts.Of(e.S).Consumers.Retain(ctx, consumers.RetentionOptions{MaxBytes: 2 * 4096})
	if err != nil {
		t.Fatal(err)
	}
	if res.First <= before+1 {
		t.Fatalf("the cap kept the first big records (first %d)", res.First)
	}
	lost := map[string]bool{}
	for _, l := range res.Lost {
		lost[l.Group] = true
	}
	if !lost["lost"] || !lost["bigs"] || lost["kept"] || lost["keptshared"] || len(lost) != 2 {
		t.Fatalf("groups reported lost: %+v, want lost and bigs", res.Lost)
	}
	for name, oor := range map[string]bool{"lost": true, "bigs": true, "kept": false, "keptshared": false} {
		if l := groupLag(t, e, name); l.OutOfRange != oor {
			t.Errorf("group %s: out_of_range %v, want %v (lag %+v)", name, l.OutOfRange, oor, l)
		}
	}
	if l := groupLag(t, e, "kept"); l.Records != 1 {
		t.Errorf("kept group lag %+v, want the one orders record after the drop", l)
	}
	r := fetch(t, e, "kept", "m", 10, 0)
	if len(r.Transactions) != 1 || string(r.Transactions[0].Changes[0].New[1].Data) != "after" {
		t.Fatalf("kept group fetched %+v, want the orders row inserted after the big ones", r.Transactions)
	}
	// The shared group, with no message outstanding, was moved the same
	// way: its next fetch is the orders row after the drop.
	msgs, err := e.C.FetchShared(ctx, "keptshared", client.FetchRequest{Member: "m", Max: 10})
	if err != nil || len(msgs) != 1 || string(msgs[0].Change.New[1].Data) != "after" {
		t.Fatalf("shared kept group fetched %+v, %v; want the orders row inserted after the big ones", msgs, err)
	}
	if _, err := e.C.Fetch(ctx, "lost", client.FetchRequest{Member: "m", Max: 10}); !errors.Is(err, api.ErrOutOfRange) {
		t.Fatalf("lost group fetch: %v, want out of range", err)
	}
}
