package servertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/httpapi/apitest"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/server"
)

// Env is a running sidecar on a fresh database with table t(id serial, v text)
// and table u(id int).
type Env struct {
	S      *server.Server
	DB     *pgtest.DB
	C      *client.Client
	Base   string
	Token  string
	Cancel context.CancelFunc // stops the server (Run returns into Done)
	Done   chan error
}

// Start runs a server on a new database of c with tables t and u, and
// returns once a marker row reached its journal (it streams).
func Start(t *testing.T, c *pgtest.Cluster, mod func(*server.Options)) *Env {
	t.Helper()
	db := c.NewDB(t)
	db.Exec(t, "CREATE TABLE t (id serial PRIMARY KEY, v text)", "CREATE TABLE u (id int PRIMARY KEY)")
	slot := "s_" + strings.ToLower(db.Name)
	o := server.Options{
		DataDir: t.TempDir(),
		Listen:  "127.0.0.1:0",
		// Every answer of these integration tests is held to openapi.json.
		WrapHandler: apitest.Validator(t),
		Ingest: ingest.Options{
			PGURL: db.URL, Slot: slot, Publication: "pgq",
			CreateSlot: true, CreatePublication: "all",
			ReconnectMin: 100 * time.Millisecond, ReconnectMax: time.Second,
			StatusInterval: 200 * time.Millisecond,
		},
		Retention: consumers.RetentionOptions{Interval: 50 * time.Millisecond},
	}
	if mod != nil {
		mod(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := server.Open(ctx, o)
	if err != nil {
		cancel()
		t.Fatalf("server.Open: %v", err)
	}
	e := &Env{S: s, DB: db, Base: "http://" + s.Addr(), Token: o.AuthToken, Cancel: cancel, Done: make(chan error, 1)}
	go func() { e.Done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-e.Done:
		case <-time.After(30 * time.Second):
			t.Error("sidecar did not stop")
		}
		ctx, c2 := context.WithTimeout(context.Background(), 10*time.Second)
		defer c2()
		_ = db.C.Exec(ctx, db.Name, "SELECT pg_drop_replication_slot('"+slot+"')")
	})
	e.C, err = client.New(s.Addr(), client.Options{Token: o.AuthToken, Retry: client.RetryOptions{GiveUp: -1}})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until streaming: a marker transaction reaches the journal (one
	// written before the slot streams is not: write another after 2 s).
	// The wait is for the last marker written, so no earlier one lands
	// after a test's "latest" group is created.
	deadline := time.Now().Add(60 * time.Second)
	var marker string
	var wrote time.Time
	for n := 0; !e.lastIs(marker); {
		if time.Now().After(deadline) {
			t.Fatal("sidecar never streamed")
		}
		if serverparts.Of(e.S).Ingester.Status().Running && (n == 0 || time.Since(wrote) > 2*time.Second) {
			n++
			marker, wrote = fmt.Sprintf("marker %d", n), time.Now()
			db.Exec(t, "INSERT INTO t (v) VALUES ('"+marker+"')")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return e
}

// lastIs tells whether the journal's (and index's) last record inserts
// v = marker into t.
func (e *Env) lastIs(marker string) bool {
	last := serverparts.Of(e.S).Journal.LastOffset()
	if marker == "" || last == 0 || serverparts.Of(e.S).Index.LastOffset() < last {
		return false
	}
	tx, err := serverparts.Of(e.S).Journal.Read(last)
	if err != nil || len(tx.Changes) != 1 {
		return false
	}
	c := tx.Changes[0]
	return c.Table == "t" && len(c.New) == 2 && string(c.New[1].Data) == marker
}

// Insert writes n single-row transactions into t and waits until they
// are in the journal; it returns the offset of the last one.
func (e *Env) Insert(t *testing.T, n int) pgq.Offset {
	t.Helper()
	before := serverparts.Of(e.S).Journal.LastOffset()
	if n == 1 {
		e.DB.Exec(t, "INSERT INTO t (v) VALUES ('x')")
	} else {
		e.DB.Exec(t, fmt.Sprintf("DO $$ BEGIN FOR i IN 1..%d LOOP INSERT INTO t (v) VALUES ('r' || i); COMMIT; END LOOP; END $$", n))
	}
	return e.WaitLast(t, before+pgq.Offset(n))
}

func (e *Env) WaitLast(t *testing.T, off pgq.Offset) pgq.Offset {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for serverparts.Of(e.S).Journal.LastOffset() < off || serverparts.Of(e.S).Index.LastOffset() < off {
		if time.Now().After(deadline) {
			t.Fatalf("journal did not reach offset %d (at %d)", off, serverparts.Of(e.S).Journal.LastOffset())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return serverparts.Of(e.S).Journal.LastOffset()
}
