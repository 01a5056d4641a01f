package ingest_test

import (
	"errors"
	"testing"

	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/server"
)

// journalThenDropSlot leaves a data dir whose journal holds one record and
// whose slot is gone.
func journalThenDropSlot(t *testing.T, db *pgtest.DB, dir string) {
	t.Helper()
	r := startSidecar(t, db, dir, nil)
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO rs VALUES (1)`)
	waitJournaled(t, dir, 1)
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	if err := ingest.DropSlot(t.Context(), db.URL, slotName("pgq", db), true); err != nil {
		t.Fatal(err)
	}
}

// TestRefusedStartDropsCreatedSlot: a start that creates the slot and then
// refuses (the continuity check over a journal; a --start the new slot
// cannot serve) drops that slot before Run returns, with either
// lifecycle: it holds nothing the journal needs, and left behind it makes
// PostgreSQL keep WAL for a pgq that is not running.
func TestRefusedStartDropsCreatedSlot(t *testing.T) {
	c := pgtest.Shared(t)
	for _, lifecycle := range []string{ingest.LifecycleKeep, ingest.LifecycleDropOnExit} {
		t.Run(lifecycle, func(t *testing.T) {
			t.Run("continuity check", func(t *testing.T) {
				db := c.NewDB(t)
				db.Exec(t, `CREATE TABLE rs (id int PRIMARY KEY)`)
				dir := t.TempDir()
				journalThenDropSlot(t, db, dir)
				r := startSidecar(t, db, dir, func(o *server.Options) { o.Ingest.SlotLifecycle = lifecycle })
				if err := r.runErr(t); !errors.Is(err, ingest.ErrGap) {
					t.Fatalf("Run = %v, want the continuity refusal", err)
				}
				if ok, _ := slotExists(t, db, slotName("pgq", db)); ok {
					t.Fatal("the refused start left the slot it created behind")
				}
			})
			t.Run("start position", func(t *testing.T) {
				db := c.NewDB(t)
				r := startSidecar(t, db, t.TempDir(), func(o *server.Options) {
					o.Ingest.SlotLifecycle, o.Ingest.Start = lifecycle, "lsn:0/1"
				})
				if err := r.runErr(t); !errors.Is(err, ingest.ErrConfig) {
					t.Fatalf("Run = %v, want the --start refusal", err)
				}
				if ok, _ := slotExists(t, db, slotName("pgq", db)); ok {
					t.Fatal("the refused start left the slot it created behind")
				}
			})
		})
	}
}

// TestRefusedStartKeepsExistingSlot: a slot that existed before the start
// is never dropped when the start refuses, whatever the lifecycle.
func TestRefusedStartKeepsExistingSlot(t *testing.T) {
	c := pgtest.Shared(t)
	for _, lifecycle := range []string{ingest.LifecycleKeep, ingest.LifecycleDropOnExit} {
		t.Run(lifecycle, func(t *testing.T) {
			db := c.NewDB(t)
			db.Exec(t, `CREATE TABLE rs (id int PRIMARY KEY)`)
			dir := t.TempDir()
			journalThenDropSlot(t, db, dir)
			slot := slotName("pgq", db)
			db.Exec(t, `SELECT pg_create_logical_replication_slot('`+slot+`', 'pgoutput')`)
			r := startSidecar(t, db, dir, func(o *server.Options) { o.Ingest.SlotLifecycle = lifecycle })
			if err := r.runErr(t); !errors.Is(err, ingest.ErrGap) {
				t.Fatalf("Run = %v, want the continuity refusal", err)
			}
			if ok, _ := slotExists(t, db, slot); !ok {
				t.Fatal("a refused start dropped a slot it did not create")
			}
			// The same with --start on a fresh data dir: still kept.
			r = startSidecar(t, db, t.TempDir(), func(o *server.Options) {
				o.Ingest.SlotLifecycle, o.Ingest.Start = lifecycle, "lsn:0/1"
			})
			if err := r.runErr(t); !errors.Is(err, ingest.ErrConfig) {
				t.Fatalf("Run = %v, want the --start refusal", err)
			}
			if ok, _ := slotExists(t, db, slot); !ok {
				t.Fatal("a refused start dropped a slot it did not create")
			}
			db.Exec(t, `SELECT pg_drop_replication_slot('`+slot+`')`)
		})
	}
}
