package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

const (
	streamParts   = 40 // parts of the big transaction
	streamPerPart = 50 // changes per part
)

// writeCounter records the largest single Write of the answers it wraps
// and, when onHeader is set, calls it before the third write of an
// answer (when the 200 and some records were sent).
type writeCounter struct {
	http.ResponseWriter
	mu       sync.Mutex
	maxWrite int
	total    int
	writes   int
	onHeader func()
}

func (w *writeCounter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.writes++
	if w.writes == 3 && w.onHeader != nil {
		w.onHeader()
	}
	w.maxWrite = max(w.maxWrite, len(b))
	w.total += len(b)
	w.mu.Unlock()
	return w.ResponseWriter.Write(b)
}

// streamServer serves a journal holding one small transaction and then
// one of streamParts parts; every answer's writes are counted in wc.
func streamServer(t *testing.T, onHeader func(j *journal.Journal)) (*httptest.Server, *writeCounter) {
	t.Helper()
	dir := t.TempDir()
	j, err := journal.Open(journal.Options{Dir: filepath.Join(dir, "journal"), SegmentSize: 64 << 10, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	ix, err := index.Open(index.Options{Dir: filepath.Join(dir, "index")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "pad", TypeOID: 25}}
	row := func(i int) pgq.Change {
		return pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: cols, New: []pgq.Value{
			{Kind: pgq.ValueText, Data: []byte(fmt.Sprint(i))}, {Kind: pgq.ValueText, Data: bytes.Repeat([]byte("p"), 100)}}}
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := j.Append([]*pgq.Transaction{{Xid: 1, CommitLSN: 100, EndLSN: 110, CommitTime: base, Final: true, Changes: []pgq.Change{row(0)}}}); err != nil {
		t.Fatal(err)
	}
	for p := range streamParts {
		tx := &pgq.Transaction{Xid: 2, CommitLSN: 200, EndLSN: 210, CommitTime: base.Add(time.Second), Part: uint32(p), Final: p == streamParts-1}
		for i := range streamPerPart {
			tx.Changes = append(tx.Changes, row(p*streamPerPart+i))
		}
		if err := j.Append([]*pgq.Transaction{tx}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.CatchUp(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	m, err := consumers.NewManager(consumers.ManagerOptions{Journal: j, Index: ix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	a, err := New(Options{Groups: m})
	if err != nil {
		t.Fatal(err)
	}
	wc := &writeCounter{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &writeCounter{ResponseWriter: w}
		if onHeader != nil && strings.HasSuffix(r.URL.Path, "/fetch") {
			c.onHeader = func() { onHeader(j) }
		}
		defer func() {
			wc.mu.Lock()
			wc.maxWrite, wc.total = max(wc.maxWrite, c.maxWrite), wc.total+c.total
			wc.mu.Unlock()
		}()
		a.ServeHTTP(c, r)
	}))
	t.Cleanup(srv.Close)
	return srv, wc
}

// post sends a JSON request and returns the answer's status and body.
func post(t *testing.T, url, accept string, body any) (int, []byte, error) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// TestFetchStreamsBigTransaction: an exclusive fetch with max 1 of a
// transaction of 40 parts answers all its parts, whole and in order, in
// every form and format, and writes the answer record by record: no write
// holds more than a few parts (the answer built whole was one write).
func TestFetchStreamsBigTransaction(t *testing.T) {
	srv, wc := streamServer(t, nil)
	for _, c := range []struct{ accept, format string }{
		{"", "pgq"}, {"", "debezium"}, {"", "cloudevents"},
		{api.MediaMsgpack, "pgq"}, {api.MediaMsgpack, "debezium"}, {api.MediaMsgpack, "cloudevents"},
		{api.MediaRecords, ""},
	} {
		t.Run(c.accept+"/"+c.format, func(t *testing.T) {
			group := fmt.Sprintf("g%d", time.Now().UnixNano())
			if st, b, err := post(t, srv.URL+"/v1/groups", "", map[string]any{"name": group, "from": "earliest"}); err != nil || st != http.StatusCreated {
				t.Fatalf("create: %d %s %v", st, b, err)
			}
			fetch := map[string]any{"member": "m", "max": 1}
			if c.format != "" {
				fetch["format"] = c.format
			}
			url := srv.URL + "/v1/groups/" + group + "/fetch"
			if st, b, err := post(t, url, c.accept, fetch); err != nil || st != http.StatusOK { // the small transaction
				t.Fatalf("fetch 1: %d %s %v", st, b, err)
			}
			wc.mu.Lock()
			wc.maxWrite, wc.total = 0, 0
			wc.mu.Unlock()
			st, body, err := post(t, url, c.accept, fetch)
			if err != nil || st != http.StatusOK {
				t.Fatalf("fetch 2: %d %v %.300s", st, err, body)
			}
			var ans struct {
				Transactions []map[string]any `json:"transactions" msgpack:"transactions"`
				NextOffset   uint64           `json:"next_offset" msgpack:"next_offset"`
			}
			var rec struct {
				Transactions []struct {
					_msgpack struct{} `msgpack:",as_array"`
					Offset   uint64
					Body     msgpack.RawMessage
				} `msgpack:"transactions"`
				NextOffset uint64 `msgpack:"next_offset"`
			}
			switch c.accept {
			case "":
				err = json.Unmarshal(body, &ans)
			case api.MediaMsgpack:
				err = msgpack.Unmarshal(body, &ans)
			default:
				err = msgpack.Unmarshal(body, &rec)
				ans.NextOffset = rec.NextOffset
				for range rec.Transactions {
					ans.Transactions = append(ans.Transactions, nil)
				}
			}
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if len(ans.Transactions) != streamParts || ans.NextOffset != streamParts+2 {
				t.Fatalf("%d records, next %d; want the %d parts, next %d", len(ans.Transactions), ans.NextOffset, streamParts, streamParts+2)
			}
			changes := 0
			for i, tx := range ans.Transactions {
				switch {
				case c.accept == api.MediaRecords:
					if rec.Transactions[i].Offset != uint64(i+2) {
						t.Fatalf("record %d at offset %d", i, rec.Transactions[i].Offset)
					}
					changes += streamPerPart
				case c.format == "pgq":
					if fmt.Sprint(tx["part"]) != fmt.Sprint(i) {
						t.Fatalf("record %d is part %v", i, tx["part"])
					}
					changes += len(tx["changes"].([]any))
				default:
					changes += len(tx["changes"].([]any))
				}
			}
			if changes != streamParts*streamPerPart {
				t.Fatalf("%d changes, want %d", changes, streamParts*streamPerPart)
			}
			wc.mu.Lock()
			mw, total := wc.maxWrite, wc.total
			wc.mu.Unlock()
			if mw*8 > total {
				t.Fatalf("largest write %d bytes of an answer of %d: the answer was not written part by part", mw, total)
			}
			t.Logf("answer %d bytes, largest write %d", total, mw)
		})
	}
}

// TestFetchAbortedBody: when a record cannot be read after the 200 and
// some records were sent (here the journal closes then), the body is cut short: a plain
// reader sees an unexpected EOF and the Go client reports an error, never
// a complete answer.
func TestFetchAbortedBody(t *testing.T) {
	for _, accept := range []string{"", api.MediaRecords} {
		srv, _ := streamServer(t, func(j *journal.Journal) { j.Close() })
		if st, b, err := post(t, srv.URL+"/v1/groups", "", map[string]any{"name": "g", "from": "earliest"}); err != nil || st != http.StatusCreated {
			t.Fatalf("create: %d %s %v", st, b, err)
		}
		if st, b, err := post(t, srv.URL+"/v1/groups/g/fetch", accept, map[string]any{"member": "m", "max": 1}); err != nil || st != http.StatusOK {
			t.Fatalf("fetch 1: %d %s %v", st, b, err)
		}
		st, body, err := post(t, srv.URL+"/v1/groups/g/fetch", accept, map[string]any{"member": "m", "max": 1})
		if st != http.StatusOK || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("accept %q: status %d, error %v, body %.200s: want 200 and a body cut short", accept, st, err, body)
		}
	}
	srv, _ := streamServer(t, func(j *journal.Journal) { j.Close() })
	c, err := client.New(srv.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fetch(ctx, "g", client.FetchRequest{Member: "m", Max: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Fetch(ctx, "g", client.FetchRequest{Member: "m", Max: 1})
	if err == nil {
		t.Fatalf("client fetch of a cut answer succeeded: %d transactions", len(res.Transactions))
	}
	t.Logf("client: %v", err)
}
