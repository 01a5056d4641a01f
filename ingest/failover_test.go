package ingest_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/syncbuf"
	"github.com/pgq-dev/pgq/server"
)

func sharedMajor(t *testing.T) int {
	t.Helper()
	m, err := pgtest.Shared(t).Major()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSlotFailoverRefused: every setting that cannot give what it asks for
// is one line and a non-zero exit before anything streams.
func TestSlotFailoverRefused(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	plain := slotName("fo_plain", db)
	db.Exec(t, `CREATE TABLE fr (id int PRIMARY KEY)`, `CREATE PUBLICATION fr_pub FOR TABLE fr`,
		`SELECT pg_create_logical_replication_slot('`+plain+`', 'pgoutput')`)
	base := func(url, slot string, extra ...string) []string {
		return append([]string{"run", "--pg-url", url, "--slot", slot, "--publication", "fr_pub", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, extra...)
	}
	twoHosts := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable", c.Port, c.Port+1, db.Name)
	cases := []struct {
		name, want string
		args       []string
	}{
		{"bad value", "--slot-failover", base(db.URL, slotName("fo_new", db), "--slot-failover", "maybe")},
		{"on with temporary", "--slot-failover on does not go with --slot-lifecycle temporary",
			base(db.URL, slotName("fo_tmp", db), "--create-slot", "--slot-lifecycle", "temporary", "--slot-failover", "on")},
		{"multi-host without target_session_attrs", "needs target_session_attrs=primary", base(twoHosts, plain)},
		{"multi-host read-only", "needs target_session_attrs=primary", base(twoHosts+"&target_session_attrs=any", plain)},
	}
	if sharedMajor(t) < 17 {
		cases = append(cases, struct {
			name, want string
			args       []string
		}{"on below 17", "--slot-failover on needs PostgreSQL 17",
			base(db.URL, slotName("fo_new", db), "--create-slot", "--slot-failover", "on")})
	} else {
		cases = append(cases, struct {
			name, want string
			args       []string
		}{"on over a plain slot", "is not a failover slot",
			base(db.URL, plain, "--slot-failover", "on")})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runExpectFailure(t, tc.want, tc.args...) })
	}
}

// TestSlotFailoverCreated: --create-slot makes a failover slot where the
// server has them (auto), never with off, and /v1/status says which.
// Without a standby there is nothing to warn about.
func TestSlotFailoverCreated(t *testing.T) {
	c := pgtest.Shared(t)
	failover := sharedMajor(t) >= 17
	for _, mode := range []string{"auto", "off"} {
		t.Run(mode, func(t *testing.T) {
			db := c.NewDB(t)
			db.Exec(t, `CREATE TABLE fc (id int PRIMARY KEY)`)
			logs := &syncbuf.Buffer{}
			r := startSidecar(t, db, t.TempDir(), func(o *server.Options) {
				o.Ingest.SlotFailover = mode
				o.Logger = slog.New(slog.NewTextHandler(logs, nil))
			})
			r.waitStreaming(t)
			want := failover && mode == "auto"
			if got := r.status(t)["slot_failover"]; got != want {
				t.Fatalf("status slot_failover = %v, want %v", got, want)
			}
			if failover {
				var got bool
				db.QueryRow(t, `SELECT failover FROM pg_replication_slots WHERE slot_name = '`+slotName("pgq", db)+`'`, &got)
				if got != want {
					t.Fatalf("pg_replication_slots.failover = %v, want %v", got, want)
				}
			}
			time.Sleep(300 * time.Millisecond) // the warnings are checked while streaming starts
			if strings.Contains(logs.String(), "standby") {
				t.Fatalf("a failover warning without any standby:\n%s", logs)
			}
		})
	}
}

// TestFailoverToPromotedStandby: PostgreSQL 17+, a primary and a streaming
// standby that synchronizes slots, pgq on a multi-host URL. The primary
// dies (-m immediate) while rows are written, the standby is promoted, the
// writes go on there, and pgq follows: the journal holds exactly the
// promoted server's rows, each once, and no gap.
func TestFailoverToPromotedStandby(t *testing.T) {
	if m := sharedMajor(t); m < 17 {
		t.Skipf("failover slots need PostgreSQL 17+ (this run: %d; make test-matrix runs 17 and 18)", m)
	}
	ctx := t.Context()
	primary, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(primary.Stop)
	if err := primary.Exec(ctx, "postgres", `CREATE TABLE fo (id int PRIMARY KEY, v text)`); err != nil {
		t.Fatal(err)
	}
	standby, err := primary.StartStandby(ctx, "standby1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Stop)
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2&target_session_attrs=primary", primary.Port, standby.Port)
	db := &pgtest.DB{C: primary, Name: "postgres", URL: url}
	slot := slotName("pgq", db)

	// A slot that is not a failover slot, with a standby attached: warned.
	plainLogs := &syncbuf.Buffer{}
	plain := startSidecar(t, db, t.TempDir(), func(o *server.Options) {
		o.Ingest.Slot, o.Ingest.SlotFailover = "pgq_plain", "off"
		o.Logger = slog.New(slog.NewTextHandler(plainLogs, nil))
	})
	waitFor(t, 20*time.Second, "the warning about a non-failover slot", func() bool {
		return strings.Contains(plainLogs.String(), "physical standbys are attached but the slot is not a failover slot")
	})
	if err := plain.Stop(t); err != nil {
		t.Fatal(err)
	}
	if err := ingest.DropSlot(ctx, primary.URL("postgres"), "pgq_plain", true); err != nil {
		t.Fatal(err)
	}

	logs := &syncbuf.Buffer{}
	dir := t.TempDir()
	r := startSidecar(t, db, dir, func(o *server.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		o.Ingest.ReconnectMin, o.Ingest.ReconnectMax = 50*time.Millisecond, 200*time.Millisecond
	})
	r.waitStreaming(t)
	if r.status(t)["slot_failover"] != true {
		t.Fatalf("status: %v", r.status(t))
	}
	// A failover slot while synchronized_standby_slots is empty: warned,
	// once; then the primary sets it, as a failover-safe setup must.
	const unsynced = "synchronized_standby_slots is empty"
	waitFor(t, 20*time.Second, "the synchronized_standby_slots warning", func() bool { return strings.Contains(logs.String(), unsynced) })
	if err := primary.Exec(ctx, "postgres", `ALTER SYSTEM SET synchronized_standby_slots = 'standby1'`, `SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}

	w := startWriter(ctx, url)
	defer w.stop()
	waitFor(t, 60*time.Second, "rows journaled from the primary", func() bool { return len(journalIDs(t, dir)) >= 200 })
	waitFor(t, 60*time.Second, "pgq's slot synchronized on the standby", func() bool {
		var ok bool
		conn, err := standby.Connect(ctx, "postgres")
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		err = conn.QueryRow(ctx, `SELECT synced AND NOT temporary FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&ok)
		return err == nil && ok
	})

	stoppedAt := time.Now()
	if err := primary.StopImmediate(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	// Rows with an id from here on can only have been written to the
	// promoted server.
	firstAfter := w.next.Load()
	waitFor(t, 90*time.Second, "a change of the promoted server journaled", func() bool {
		ids := journalIDs(t, dir)
		for id := range ids {
			if id >= firstAfter {
				return true
			}
		}
		return false
	})
	t.Logf("failover: primary stopped -> first change of the promoted server journaled in %s", time.Since(stoppedAt).Round(time.Millisecond))
	waitFor(t, 60*time.Second, "more writes on the promoted server", func() bool { return w.next.Load() > firstAfter+200 })
	w.stop()

	var want []int64
	waitFor(t, 60*time.Second, "the journal to catch up with the promoted server", func() bool {
		conn, err := standby.Connect(ctx, "postgres")
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		rows, _ := conn.Query(ctx, `SELECT id FROM fo ORDER BY id`)
		want, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err == nil && len(journalIDs(t, dir)) >= len(want)
	})
	got := journalIDs(t, dir)
	for id, n := range got {
		if n != 1 {
			t.Errorf("row %d journaled %d times", id, n)
		}
	}
	for _, id := range want {
		if got[id] == 0 {
			t.Errorf("row %d of the promoted server is not in the journal", id)
		}
		delete(got, id)
	}
	for id := range got {
		t.Errorf("row %d is in the journal but not on the promoted server (a phantom)", id)
	}
	for _, ch := range changesOf(t, records(t, dir)) {
		if ch["op"] == "gap" {
			t.Fatalf("a gap was journaled: %v", ch)
		}
	}
	if n := strings.Count(logs.String(), unsynced); n != 1 {
		t.Errorf("the synchronized_standby_slots warning came %d times, want once:\n%s", n, logs)
	}
	t.Logf("%d rows on the promoted server, all journaled once", len(want))
}

// writer inserts rows with increasing ids through a (multi-host) URL,
// reconnecting on every error; an id is never reused, so a row whose
// commit was cut by the crash cannot collide with a later one.
type writer struct {
	next   atomic.Int64
	cancel context.CancelFunc
	done   chan struct{}
}

func startWriter(ctx context.Context, url string) *writer {
	ctx, cancel := context.WithCancel(ctx)
	w := &writer{cancel: cancel, done: make(chan struct{})}
	w.next.Store(1)
	go func() {
		defer close(w.done)
		var conn *pgx.Conn
		for ctx.Err() == nil {
			if conn == nil {
				c, err := pgx.Connect(ctx, url)
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				conn = c
			}
			id := w.next.Add(1) - 1
			if _, err := conn.Exec(ctx, `INSERT INTO fo VALUES ($1, 'v')`, id); err != nil {
				conn.Close(context.Background())
				conn = nil
				continue
			}
			time.Sleep(2 * time.Millisecond)
		}
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	return w
}

func (w *writer) stop() {
	w.cancel()
	<-w.done
}

// journalIDs counts the journaled inserts of table fo by id.
func journalIDs(t *testing.T, dir string) map[int64]int {
	out := map[int64]int{}
	for _, tx := range records(t, dir) {
		for _, ch := range tx.Changes {
			if ch.Op != pgq.OpInsert || ch.Table != "fo" {
				continue
			}
			var id int64
			fmt.Sscan(string(ch.New[0].Data), &id)
			out[id]++
		}
	}
	return out
}
