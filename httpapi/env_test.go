package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/backfill"
	"github.com/pgq-dev/pgq/console"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/httpapi/apitest"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/journal"
)

// env is the whole API over real parts (a journal and an index on disk, a
// consumer-group manager, a backfill store) served by a real HTTP server,
// every answer validated against openapi.json. No PostgreSQL: backfills
// are never started here, and their connection string points nowhere.
type env struct {
	t     *testing.T
	Base  string
	Addr  string // host:port of the listener
	j     *journal.Journal
	ix    *index.Index
	m     *consumers.Manager
	ready string // what NotReady answers
	// unencodable makes the documents of /v1/status and
	// /v1/status/history fail to encode (an internal error).
	unencodable atomic.Bool
	api         *httpapi.API
	last        pgq.LSN
}

func start(t *testing.T, token string) *env {
	t.Helper()
	return startLimited(t, token, httpapi.Limits{})
}

// startLimited is start with the HTTP limits l, served as pgq serves
// them (httpapi.NewServer over httpapi.Listener).
func startLimited(t *testing.T, token string, l httpapi.Limits) *env {
	t.Helper()
	return startWith(t, token, l, nil)
}

// startWith is startLimited with the API's options changed by set.
func startWith(t *testing.T, token string, l httpapi.Limits, set func(*httpapi.Options)) *env {
	t.Helper()
	dir := t.TempDir()
	j, err := journal.Open(journal.Options{Dir: filepath.Join(dir, "journal")})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(index.Options{Dir: filepath.Join(dir, "index")})
	if err != nil {
		t.Fatal(err)
	}
	m, err := consumers.NewManager(consumers.ManagerOptions{Journal: j, Index: ix})
	if err != nil {
		t.Fatal(err)
	}
	bf, err := backfill.Open(backfill.Options{PGURL: "postgres://127.0.0.1:1/none", Publication: "pgq", Dir: filepath.Join(dir, "backfill"),
		Registry: ingest.NewBackfills(), Durable: j.LastEndLSN})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, j: j, ix: ix, m: m, last: 0x1000}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.Collector())
	o := httpapi.Options{Groups: m, Backfills: bf, AuthToken: token,
		Status: func() api.Status {
			if e.unencodable.Load() {
				return api.Status{LastErrorAt: &unencodableTime}
			}
			return statusDoc(m)
		},
		History: func() console.StatusHistory {
			h := historyDoc()
			if e.unencodable.Load() {
				h.Samples[0].Time = unencodableTime
			}
			return h
		},
		NotReady: func() string { return e.ready },
		Metrics:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	if set != nil {
		set(&o)
	}
	h, err := httpapi.New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.api = h
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.NewServer(h, l)
	if err != nil {
		t.Fatal(err)
	}
	// The validator sees what clients see, the limits' answers too (an
	// overflow connection's 503).
	srv.Handler = apitest.Validator(t)(srv.Handler)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(httpapi.Listener(ln, l)) }()
	e.Base = "http://" + ln.Addr().String()
	e.Addr = ln.Addr().String()
	t.Cleanup(func() {
		_ = srv.Close()
		_ = m.Close()
		_ = bf.Close()
		_ = ix.Close()
		_ = j.Close()
	})
	return e
}

// add journals (and indexes) one transaction per id, one insert each.
func (e *env) add(ids ...int) {
	e.t.Helper()
	cols := []pgq.Column{{Name: "id", TypeOID: 20, Key: true}}
	txs := make([]*pgq.Transaction, len(ids))
	for i, id := range ids {
		e.last += 0x100
		txs[i] = &pgq.Transaction{Xid: uint32(id), CommitLSN: e.last - 8, EndLSN: e.last, CommitTime: time.Now().UTC().Truncate(time.Microsecond), Final: true,
			Changes: []pgq.Change{{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: cols, New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte(strconv.Itoa(id))}}}}}
	}
	first := e.j.LastOffset() + 1
	if err := e.j.Append(txs); err != nil {
		e.t.Fatal(err)
	}
	for i, tx := range txs {
		tx.Offset = first + pgq.Offset(i)
		if err := e.ix.Add([]index.Entry{index.EntryOf(tx, 64, 1)}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// do sends a request and returns its status, its body, and the API error
// when the body is one.
func (e *env) do(method, path, body string, hdr ...string) (*http.Response, []byte, api.Error) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.Base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1] // Header's Host is not sent
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	var eb api.ErrorBody
	if resp.StatusCode >= 400 && bytes.HasPrefix(b, []byte(`{"error"`)) {
		_ = json.Unmarshal(b, &eb)
	}
	return resp, b, eb.Error
}

// statusDoc is what package server answers on /v1/status for an ingest
// that never connected: ingest's part zero, the groups, no journal or
// index trouble (the server's tests validate its own answer).
func statusDoc(m *consumers.Manager) api.Status {
	return api.Status{Groups: m.Status()}
}

// unencodableTime is a time encoding/json refuses (year 10000): the
// documents of /v1/status and /v1/status/history holding it fail to
// encode, an internal error.
var unencodableTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
