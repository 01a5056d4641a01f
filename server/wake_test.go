package server

import (
	"context"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// TestFilteredLongPollWakesFromAppends: the server feeds the consumer
// groups' wakers from its after-append hook (WakeFromAppends), so a
// filtered long poll waits through transactions on other tables and
// answers soon after one on its own, with that one only.
func TestFilteredLongPollWakesFromAppends(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE wa (id int PRIMARY KEY)`, `CREATE TABLE wb (id int PRIMARY KEY)`)
	s := startStreaming(t, db)
	ctx := context.Background()
	if _, err := s.consumers.Create(ctx, consumers.CreateRequest{Name: "b", Tables: []string{"public.wb"}}); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res *consumers.FetchResult
		err error
		at  time.Time
	}
	got := make(chan answer, 1)
	go func() {
		res, err := s.consumers.Fetch(ctx, "b", consumers.FetchRequest{Member: "m", Wait: time.Minute})
		got <- answer{res, err, time.Now()}
	}()
	for i := range 5 {
		db.Exec(t, `INSERT INTO wa VALUES (`+string(rune('1'+i))+`)`)
	}
	waitRecords(t, s, 5)
	select {
	case a := <-got:
		t.Fatalf("the poll of public.wb answered after transactions on public.wa: %+v, %v", a.res, a.err)
	case <-time.After(300 * time.Millisecond):
	}
	inserted := time.Now()
	db.Exec(t, `INSERT INTO wb VALUES (1)`)
	select {
	case a := <-got:
		if a.err != nil || a.res == nil || len(a.res.Transactions) != 1 || a.res.Transactions[0].Changes[0].Table != "wb" {
			t.Fatalf("answer %+v, %v; want the transaction on wb", a.res, a.err)
		}
		t.Logf("answered %v after the insert", a.at.Sub(inserted))
	case <-time.After(20 * time.Second):
		t.Fatal("the poll of public.wb was not woken by a transaction on it")
	}
}
