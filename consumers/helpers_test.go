package consumers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/httpapi/apitest"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/server"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m, pgtest.Options{})
	pgqbin.Remove() // TestCLI's
	os.Exit(code)
}

// env is a running sidecar on a fresh database with table t(id serial, v text)
// and table u(id int).
type env struct {
	S      *server.Server
	DB     *pgtest.DB
	C      *client.Client
	Base   string
	Token  string
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, mod func(*server.Options)) *env {
	t.Helper()
	db := pgtest.Shared(t).NewDB(t)
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
	e := &env{S: s, DB: db, Base: "http://" + s.Addr(), Token: o.AuthToken, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-e.done:
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
func (e *env) lastIs(marker string) bool {
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

// insert writes n single-row transactions into t and waits until they
// are in the journal; it returns the offset of the last one.
func (e *env) insert(t *testing.T, n int) pgq.Offset {
	t.Helper()
	before := serverparts.Of(e.S).Journal.LastOffset()
	if n == 1 {
		e.DB.Exec(t, "INSERT INTO t (v) VALUES ('x')")
	} else {
		e.DB.Exec(t, fmt.Sprintf("DO $$ BEGIN FOR i IN 1..%d LOOP INSERT INTO t (v) VALUES ('r' || i); COMMIT; END LOOP; END $$", n))
	}
	return e.waitLast(t, before+pgq.Offset(n))
}

func (e *env) waitLast(t *testing.T, off pgq.Offset) pgq.Offset {
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

// call does an HTTP request with a raw body and returns status and body.
func (e *env) call(t *testing.T, method, path, body string, hdr ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.Base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if e.Token != "" {
		req.Header.Set("Authorization", "Bearer "+e.Token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// errCode returns the error code of a JSON error body ("" if none).
func errCode(t *testing.T, b []byte) string {
	t.Helper()
	var eb struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(b, &eb); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, b)
	}
	return eb.Error.Code
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func fetch(t *testing.T, e *env, group, member string, max int, wait time.Duration) *client.FetchResult {
	t.Helper()
	res, err := e.C.Fetch(ctxT(t), group, client.FetchRequest{Member: member, Max: max, Wait: wait})
	if err != nil {
		t.Fatalf("fetch %s as %s: %v", group, member, err)
	}
	return res
}

func offsets(txs []*pgq.Transaction) []pgq.Offset {
	out := make([]pgq.Offset, len(txs))
	for i, tx := range txs {
		out[i] = tx.Offset
	}
	return out
}

var _ = bytes.NewReader
