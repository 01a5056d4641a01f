package ingest_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/opterr"
	"github.com/pgq-dev/pgq/server"
)

// TestIdleAdvancesToWALEnd: writes to a table outside the publication make
// WAL but no records; the slot must still be confirmed up to the server's
// WAL end, so an idle pgq never makes PostgreSQL retain WAL.
func TestIdleAdvancesToWALEnd(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE pub_t (id int PRIMARY KEY)`, `CREATE TABLE other_t (id int PRIMARY KEY, pad text)`,
		`CREATE PUBLICATION idle_pub FOR TABLE pub_t`)
	r := startSidecar(t, db, t.TempDir(), func(o *server.Options) {
		o.Ingest.Slot, o.Ingest.Publication, o.Ingest.CreatePublication = slotName("idle", db), "idle_pub", ""
		o.Ingest.StatusInterval = 200 * time.Millisecond
	})
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO pub_t VALUES (1)`)
	for i := 0; i < 50; i++ {
		db.Exec(t, `INSERT INTO other_t SELECT g, repeat('x', 100) FROM generate_series(`+strconv.Itoa(i*100)+`, `+strconv.Itoa(i*100+99)+`) g`)
	}
	var current string
	db.QueryRow(t, "SELECT pg_current_wal_lsn()::text", &current)
	waitFor(t, 30*time.Second, "slot confirmed to the WAL end", func() bool {
		conf := slotConfirmed(t, db, slotName("idle", db))
		return !lsnLess(t, conf.String(), current)
	})
	if n := len(records(t, r.Dir)); n != 1 {
		t.Fatalf("journal has %d records, want 1 (only the published insert)", n)
	}
	st := r.status(t)
	if lsnLess(t, st["confirmed_lsn"].(string), current) {
		t.Fatalf("status confirmed_lsn %v behind %s", st["confirmed_lsn"], current)
	}
}

// TestReconnectAfterServerRestart restarts PostgreSQL under a running pgq:
// it reconnects with backoff and loses nothing.
func TestReconnectAfterServerRestart(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE rc (id int PRIMARY KEY)`, `CREATE PUBLICATION rc_pub FOR TABLE rc`)
	r := startSidecar(t, db, t.TempDir(), func(o *server.Options) {
		o.Ingest.Slot, o.Ingest.Publication, o.Ingest.CreatePublication = slotName("rc", db), "rc_pub", ""
	})
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO rc VALUES (1)`)
	waitFor(t, 10*time.Second, "first record", func() bool { return len(records(t, r.Dir)) == 1 })
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `INSERT INTO rc VALUES (2)`, `INSERT INTO rc VALUES (3)`)
	waitFor(t, 30*time.Second, "records after restart", func() bool { return len(records(t, r.Dir)) == 3 })
	st := r.status(t)
	if st["reconnects"].(float64) < 1 {
		t.Fatalf("reconnects = %v, want ≥ 1", st["reconnects"])
	}
	if st["running"] != true || st["last_error"] != nil {
		t.Fatalf("after reconnect: running %v last_error %v", st["running"], st["last_error"])
	}
	ids := []float64{}
	for _, ch := range changesOf(t, records(t, r.Dir)) {
		ids = append(ids, ch["new"].(map[string]any)["id"].(float64))
	}
	if len(ids) != 3 || ids[0] != 1 || ids[1] != 2 || ids[2] != 3 {
		t.Fatalf("ids = %v, want [1 2 3]", ids)
	}
}

// TestSlotDroppedIsFatal: a slot dropped under a running pgq stops it with
// a clear error instead of reconnecting forever.
func TestSlotDroppedIsFatal(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE sd (id int PRIMARY KEY)`, `CREATE PUBLICATION sd_pub FOR TABLE sd`)
	r := startSidecar(t, db, t.TempDir(), func(o *server.Options) {
		o.Ingest.Slot, o.Ingest.Publication, o.Ingest.CreatePublication = slotName("sd", db), "sd_pub", ""
		// Room to drop the slot while pgq waits to reconnect.
		o.Ingest.ReconnectMin, o.Ingest.ReconnectMax = 2*time.Second, 2*time.Second
	})
	r.waitStreaming(t)
	waitSlotActive(t, db, slotName("sd", db))
	if err := ingest.DropSlot(t.Context(), db.URL, slotName("sd", db), true); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.done:
		r.cancel()
		r.cancel = nil
		if !errors.Is(err, ingest.ErrSlotMissing) || !strings.Contains(err.Error(), `"`+slotName("sd", db)+`"`) {
			t.Fatalf("Run returned %v, want a slot-missing error", err)
		}
		// A slot lost by a failover looks the same: the error names the
		// way on, not only what is missing.
		oe, ok := opterr.Find(err)
		if !ok || !slices.Equal(oe.Options, opterr.Of("ingest.Options.CreateSlot", "ingest.Options.AcceptGap")) ||
			!strings.Contains(err.Error(), "ingest.Options.CreateSlot ingest.Options.AcceptGap") || !strings.Contains(err.Error(), "backfill") {
			t.Fatalf("Run returned %v, want the way on (CreateSlot and AcceptGap, then a backfill)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("pgq kept running after its slot was dropped")
	}
}

// TestTLSVerifyFull streams over TLS with sslmode=verify-full.
func TestTLSVerifyFull(t *testing.T) {
	c, err := pgtest.Start(pgtest.Options{TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE tls_t (id int PRIMARY KEY)`)
	tlsDB := &pgtest.DB{C: c, Name: db.Name, URL: c.TLSURL(db.Name)}
	r := startSidecar(t, tlsDB, t.TempDir(), nil)
	r.waitStreaming(t)
	db.Exec(t, `INSERT INTO tls_t VALUES (42)`)
	waitFor(t, 15*time.Second, "record over TLS", func() bool { return len(records(t, r.Dir)) == 1 })
	var ssl bool
	db.QueryRow(t, "SELECT bool_and(ssl) FROM pg_stat_ssl JOIN pg_stat_replication USING (pid)", &ssl)
	if !ssl {
		t.Fatal("replication connection is not using TLS")
	}
	// A burst read with coalescing on: the low-water mark is set on the
	// socket under TLS, and every row arrives.
	db.Exec(t, `INSERT INTO tls_t SELECT g FROM generate_series(1000, 20999) g`)
	waitFor(t, 30*time.Second, "the burst over TLS", func() bool {
		recs := records(t, r.Dir)
		return len(recs) == 2 && len(recs[1].Changes) == 20000
	})
	mfs, err := serverparts.Of(r.S).Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	windows := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "pgq_receive_coalesce_windows_total" {
			windows = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if windows <= 0 {
		t.Fatalf("20,000 rows sent at full speed over TLS, coalescing windows: %v", windows)
	}
}
