package ingest_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/syncbuf"
	"github.com/pgq-dev/pgq/server"
)

func slotExists(t *testing.T, db *pgtest.DB, slot string) (exists, temporary bool) {
	t.Helper()
	var n int
	var temp bool
	db.QueryRow(t, "SELECT count(*), coalesce(bool_or(temporary), false) FROM pg_replication_slots WHERE slot_name = '"+slot+"'", &n, &temp)
	return n > 0, temp
}

// TestStartPosition: --start latest skips what the slot kept; lsn:X/Y
// below the slot's position is refused with a clear error.
func TestStartPosition(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	slot := slotName("pgq", db)
	db.Exec(t, `CREATE TABLE sp (id int PRIMARY KEY)`, `CREATE PUBLICATION pgq FOR ALL TABLES`,
		`SELECT pg_create_logical_replication_slot('`+slot+`', 'pgoutput')`, `INSERT INTO sp VALUES (1)`)
	confirmed := slotConfirmed(t, db, slot)

	r := startSidecar(t, db, t.TempDir(), func(o *server.Options) { o.Ingest.Start = "lsn:" + (confirmed - 8).String() })
	if err := r.runErr(t); !errors.Is(err, ingest.ErrConfig) || !strings.Contains(err.Error(), "can no longer serve") {
		t.Fatalf("--start below the slot: %v", err)
	}

	dir := t.TempDir()
	r = startSidecar(t, db, dir, func(o *server.Options) { o.Ingest.Start = "latest" })
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO sp VALUES (2)`)
	waitJournaled(t, dir, 1)
	time.Sleep(200 * time.Millisecond)
	if ids := idValues(t, records(t, dir)); len(ids) != 1 || ids[0] != float64(2) {
		t.Fatalf("--start latest journaled %v, want [2] (1 was in the slot's backlog)", ids)
	}
}

// TestSlotLifecycles: a temporary slot exists only while pgq runs and a
// second run over its journal is a gap; drop-on-exit drops the slot after
// a clean stop.
func TestSlotLifecycles(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE sl (id int PRIMARY KEY)`)
	slot := slotName("pgq", db)
	dir := t.TempDir()
	temporary := func(o *server.Options) { o.Ingest.SlotLifecycle = ingest.LifecycleTemporary }
	r := startSidecar(t, db, dir, temporary)
	r.waitStreaming(t)
	if ok, temp := slotExists(t, db, slot); !ok || !temp {
		t.Fatalf("temporary slot while running: exists %v temporary %v", ok, temp)
	}
	db.Exec(t, `INSERT INTO sl VALUES (1)`)
	waitJournaled(t, dir, 1)
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "temporary slot gone", func() bool { ok, _ := slotExists(t, db, slot); return !ok })
	r = startSidecar(t, db, dir, temporary)
	if err := r.runErr(t); !errors.Is(err, ingest.ErrGap) {
		t.Fatalf("temporary slot over a non-empty journal: %v, want ErrGap", err)
	}

	dir2 := t.TempDir()
	r = startSidecar(t, db, dir2, func(o *server.Options) { o.Ingest.SlotLifecycle = ingest.LifecycleDropOnExit })
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO sl VALUES (2)`)
	waitJournaled(t, dir2, 1)
	if ok, temp := slotExists(t, db, slot); !ok || temp {
		t.Fatalf("drop-on-exit slot while running: exists %v temporary %v", ok, temp)
	}
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	if ok, _ := slotExists(t, db, slot); ok {
		t.Fatal("drop-on-exit: the slot survived a clean stop")
	}
}

// TestReconnectGiveUpAndNoReconnect: with --no-reconnect the first
// interruption ends pgq with its error; with --reconnect-give-up pgq gives
// up once reconnecting failed that long.
func TestReconnectGiveUpAndNoReconnect(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE rg (id int PRIMARY KEY)`)
	slot := slotName("pgq", db)
	r := startSidecar(t, db, t.TempDir(), func(o *server.Options) { o.Ingest.NoReconnect = true })
	r.waitStreaming(t)
	waitSlotActive(t, db, slot)
	db.Exec(t, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '`+slot+`'`)
	if err := r.runErr(t); err == nil || !strings.Contains(err.Error(), "ingest.Options.NoReconnect") {
		t.Fatalf("--no-reconnect: %v", err)
	}

	r = startSidecar(t, db, t.TempDir(), func(o *server.Options) {
		o.Ingest.ReconnectGiveUp = time.Second
		o.Ingest.ReconnectMin, o.Ingest.ReconnectMax = 100*time.Millisecond, 200*time.Millisecond
	})
	r.waitStreaming(t)
	waitSlotActive(t, db, slot)
	if err := c.Exec(t.Context(), "postgres", `ALTER DATABASE `+db.Name+` ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Exec(context.Background(), "postgres", `ALTER DATABASE `+db.Name+` ALLOW_CONNECTIONS true`)
	})
	if err := c.Exec(t.Context(), "postgres", `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '`+slot+`'`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := r.runErr(t)
	if err == nil || !strings.Contains(err.Error(), "gave up reconnecting after 1s") || time.Since(start) < time.Second {
		t.Fatalf("--reconnect-give-up: %v after %s", err, time.Since(start))
	}
	if err := c.Exec(t.Context(), "postgres", `ALTER DATABASE `+db.Name+` ALLOW_CONNECTIONS true`); err != nil {
		t.Fatal(err)
	}
}

// TestKeylessTables: a published table without a key is named once in a
// warning; --skip-tables-without-key publishes only keyed tables, so an
// UPDATE of the keyless one keeps working.
func TestKeylessTables(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE kt_keyed (id int PRIMARY KEY)`, `CREATE TABLE kt_bare (v int)`, `INSERT INTO kt_bare VALUES (1)`)
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	r := startSidecar(t, db, t.TempDir(), func(o *server.Options) { o.Logger = logger })
	r.waitStreaming(t)
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	if l := logs.String(); strings.Count(l, "published tables without a primary key") != 1 || !strings.Contains(l, "public.kt_bare") || strings.Contains(l, "kt_keyed") {
		t.Fatalf("keyless warning:\n%s", l)
	}

	db2 := c.NewDB(t)
	db2.Exec(t, `CREATE TABLE kt_keyed (id int PRIMARY KEY)`, `CREATE TABLE kt_bare (v int)`, `INSERT INTO kt_bare VALUES (1)`)
	dir := t.TempDir()
	r = startSidecar(t, db2, dir, func(o *server.Options) { o.Ingest.SkipTablesWithoutKey = true })
	r.waitStreaming(t)
	db2.Exec(t, `UPDATE kt_bare SET v = 2`, `INSERT INTO kt_keyed VALUES (7)`) // would fail if kt_bare were published
	waitJournaled(t, dir, 1)
	for _, tx := range records(t, dir) {
		for _, ch := range tx.Changes {
			if ch.Op != pgq.OpGap && ch.Table != "kt_keyed" {
				t.Fatalf("journaled a change of %s", ch.Table)
			}
		}
	}
}
