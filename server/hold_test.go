package server

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

func startHold(t *testing.T, db *pgtest.DB, dir string, hold []string) (*Server, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Open(ctx, Options{DataDir: dir, Listen: "127.0.0.1:0", HoldSlotFor: hold, Ingest: ingest.Options{
		PGURL: db.URL, Slot: "hs_" + db.Name, Publication: "hs", CreateSlot: true, CreatePublication: "all",
		StatusInterval: 100 * time.Millisecond,
	}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for s.ingester.Status().ProtoVersion == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // the slot exists once streaming
	}
	return s, func() error { cancel(); return <-done }
}

func slotConfirmed(t *testing.T, db *pgtest.DB) pgq.LSN {
	t.Helper()
	var s string
	db.QueryRow(t, fmt.Sprintf(`SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'hs_%s'`, db.Name), &s)
	lsn, err := pgq.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// TestHoldSlotNodeLoss: with --hold-slot-for h the slot is confirmed up to
// h's committed position and no further, although the journal holds (and
// fsynced) more and the server idles; losing the data dir and starting a
// new pgq on an empty one with the same flag journals again exactly the
// transactions h had not committed, in order, once each. Without a holder
// the slot goes to the journal's end (the control).
func TestHoldSlotNodeLoss(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE hs (id int PRIMARY KEY)`)
	dir := t.TempDir()
	s, stop := startHold(t, db, dir, []string{"h"})
	stopped := false
	defer func() {
		if !stopped {
			_ = stop()
		}
	}()
	for i := 1; i <= 10; i++ {
		db.Exec(t, fmt.Sprintf(`INSERT INTO hs VALUES (%d)`, i))
	}
	waitRecords(t, s, 10)
	ctx := context.Background()
	if _, err := s.consumers.Fetch(ctx, "h", consumers.FetchRequest{Member: "a", Max: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.consumers.Commit(ctx, "h", "a", 4, 0); err != nil {
		t.Fatal(err)
	}
	fourth, err := s.journal.Read(4)
	if err != nil {
		t.Fatal(err)
	}
	end := s.journal.LastEndLSN()
	deadline := time.Now().Add(15 * time.Second)
	for slotConfirmed(t, db) != fourth.EndLSN {
		if got := slotConfirmed(t, db); got > fourth.EndLSN || time.Now().After(deadline) {
			t.Fatalf("slot confirmed at %s; h committed record 4 ending at %s (journal end %s)", got, fourth.EndLSN, end)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // idle keepalives must not move it past the floor
	if got := slotConfirmed(t, db); got != fourth.EndLSN {
		t.Fatalf("idle: slot confirmed at %s, want the floor %s", got, fourth.EndLSN)
	}
	stopped = true
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// The node is lost with its disk.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	s2, stop2 := startHold(t, db, t.TempDir(), []string{"h"})
	defer stop2()
	waitRecords(t, s2, 6)
	t.Logf("node-loss replay: 6 transactions journaled %s after the new pgq opened", time.Since(began))
	time.Sleep(300 * time.Millisecond) // nothing more may come
	if n := s2.journal.LastOffset(); n != 6 {
		t.Fatalf("new journal has %d records, want 6 (ids 5..10)", n)
	}
	for off := pgq.Offset(1); off <= 6; off++ {
		tx, err := s2.journal.Read(off)
		if err != nil {
			t.Fatal(err)
		}
		if id := string(tx.Changes[0].New[0].Data); id != fmt.Sprint(off+4) || len(tx.Changes) != 1 {
			t.Fatalf("record %d holds id %s (%d changes), want %d", off, id, len(tx.Changes), off+4)
		}
	}
	if gi, err := s2.consumers.Info(ctx, "h"); err != nil || !gi.HoldSlot || gi.From != "earliest" {
		t.Fatalf("h on the new data dir: %+v %v", gi, err)
	}
}
