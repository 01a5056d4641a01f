package ingest_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// committedTx is a workload transaction as the client saw it: its xid and
// an upper bound of its end LSN (pg_current_wal_insert_lsn after COMMIT).
type committedTx struct {
	xid   uint32
	upper pgq.LSN
}

// writeLoop commits single-row transactions into t_crash until ctx ends,
// recording each one.
func writeLoop(ctx context.Context, t *testing.T, url string, out *[]committedTx, mu *sync.Mutex) error {
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for i := 0; ctx.Err() == nil; i++ {
		tx, err := conn.Begin(context.Background())
		if err != nil {
			return err
		}
		var xid uint32
		if err := tx.QueryRow(context.Background(), "INSERT INTO t_crash (n) VALUES ($1) RETURNING txid_current()::text::int", i).Scan(&xid); err != nil {
			return err
		}
		if err := tx.Commit(context.Background()); err != nil {
			return err
		}
		var upper string
		if err := conn.QueryRow(context.Background(), "SELECT pg_current_wal_insert_lsn()::text").Scan(&upper); err != nil {
			return err
		}
		l, err := pgq.ParseLSN(upper)
		if err != nil {
			return err
		}
		mu.Lock()
		*out = append(*out, committedTx{xid: xid, upper: l})
		mu.Unlock()
	}
	return nil
}

func slotConfirmed(t *testing.T, db *pgtest.DB, slot string) pgq.LSN {
	t.Helper()
	var s *string
	db.QueryRow(t, fmt.Sprintf("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '%s'", slot), &s)
	if s == nil {
		return 0
	}
	l, err := pgq.ParseLSN(*s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestCrashRestartExactlyOnce kills pgq with SIGKILL several times while a
// workload commits transactions, restarts it, and checks that every
// committed transaction is in the journal exactly once, in commit order.
// While writing it samples the slot's confirmed_flush_lsn and checks the
// durability rule: every transaction whose end is at or below the
// confirmed LSN is already in the journal.
func TestCrashRestartExactlyOnce(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE t_crash (id bigserial PRIMARY KEY, n int)`, `CREATE PUBLICATION p_crash FOR TABLE t_crash`)
	dir := t.TempDir()
	slot := slotName("crash", db)
	args := []string{"run", "--pg-url", db.URL, "--slot", slot, "--publication", "p_crash", "--data-dir", dir,
		"--create-slot", "--listen", "127.0.0.1:0", "--reconnect-min", "50ms", "--status-interval", "200ms"}

	var (
		mu        sync.Mutex
		committed []committedTx
	)
	ctx, stop := context.WithCancel(context.Background())
	writerErr := make(chan error, 1)
	var wroteStarted atomic.Bool

	var checked, violations int
	checkDurability := func() {
		conf := slotConfirmed(t, db, slot)
		mu.Lock()
		snapshot := append([]committedTx(nil), committed...)
		mu.Unlock()
		inJournal := map[uint32]bool{}
		for _, tx := range records(t, dir) {
			inJournal[tx.Xid] = true
		}
		for _, ct := range snapshot {
			if ct.upper <= conf {
				checked++
				if !inJournal[ct.xid] {
					violations++
					t.Errorf("slot confirmed %s but transaction xid %d (end ≤ %s) is not in the journal", conf, ct.xid, ct.upper)
				}
			}
		}
	}

	for round := 0; round < 4; round++ {
		p := startPgq(t, args...)
		if !wroteStarted.Swap(true) {
			// The slot exists once pgq has streamed; then start writing.
			waitSlotActive(t, db, slot)
			go func() { writerErr <- writeLoop(ctx, t, db.URL, &committed, &mu) }()
		}
		for i := 0; i < 5; i++ {
			time.Sleep(150 * time.Millisecond)
			checkDurability()
		}
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		p.wait(t, 10*time.Second)
		checkDurability()
	}
	stop()
	if err := <-writerErr; err != nil {
		t.Fatalf("workload: %v", err)
	}
	// Final clean run: catch up and stop with SIGTERM (exit 0).
	p := startPgq(t, args...)
	mu.Lock()
	want := append([]committedTx(nil), committed...)
	mu.Unlock()
	waitFor(t, 30*time.Second, "journal to catch up", func() bool {
		txs := records(t, dir)
		return len(txs) > 0 && txs[len(txs)-1].Xid == want[len(want)-1].xid
	})
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code, stderr := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("SIGTERM exit code %d; stderr:\n%s", code, stderr)
	}

	txs := records(t, dir)
	if len(txs) != len(want) {
		t.Errorf("journal has %d records, workload committed %d", len(txs), len(want))
	}
	seen := map[uint32]int{}
	for i, tx := range txs {
		seen[tx.Xid]++
		if i < len(want) && tx.Xid != want[i].xid {
			t.Fatalf("record %d is xid %d, want xid %d (commit order)", i+1, tx.Xid, want[i].xid)
		}
		if tx.Offset != pgq.Offset(i+1) {
			t.Fatalf("record %d has offset %d", i+1, tx.Offset)
		}
	}
	for xid, n := range seen {
		if n != 1 {
			t.Errorf("xid %d journaled %d times", xid, n)
		}
	}
	// After a clean stop the slot is confirmed exactly to the journal end
	// or beyond (idle WAL), never behind it.
	if conf, last := slotConfirmed(t, db, slot), txs[len(txs)-1].EndLSN; conf < last {
		t.Errorf("after SIGTERM the slot confirmed %s, journal ends at %s", conf, last)
	}
	if checked == 0 {
		t.Fatal("durability rule was never exercised")
	}
	t.Logf("%d transactions, 4 SIGKILLs, %d durability checks, %d violations", len(want), checked, violations)
}
