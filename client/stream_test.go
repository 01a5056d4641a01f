package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
)

const (
	bigParts   = 120 // parts of the big transaction
	bigPerPart = 100 // changes per part
)

// appendBig journals one small transaction (offset 1) and then one of
// bigParts parts (offsets 2..bigParts+1), ids counting from 0 across the
// parts, each row padded so the answer is megabytes.
func (s *server) appendBig() {
	s.t.Helper()
	cols := []pgq.Column{{Name: "id", TypeOID: 23, Key: true}, {Name: "pad", TypeOID: 25}}
	row := func(i int) pgq.Change {
		return pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: cols, New: []pgq.Value{
			{Kind: pgq.ValueText, Data: fmt.Appendf(nil, "%d", i)}, {Kind: pgq.ValueText, Data: bytes.Repeat([]byte("p"), 300)}}}
	}
	base := time.Now().UTC().Truncate(time.Microsecond)
	if err := s.j.Append([]*pgq.Transaction{{Xid: 1, CommitLSN: 100, EndLSN: 110, CommitTime: base, Final: true, Changes: []pgq.Change{row(-1)}}}); err != nil {
		s.t.Fatal(err)
	}
	for p := range bigParts {
		tx := &pgq.Transaction{Xid: 2, CommitLSN: 200, EndLSN: 210, CommitTime: base, Part: uint32(p), Final: p == bigParts-1}
		for i := range bigPerPart {
			tx.Changes = append(tx.Changes, row(p*bigPerPart+i))
		}
		if err := s.j.Append([]*pgq.Transaction{tx}); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := s.ix.CatchUp(context.Background(), s.j); err != nil {
		s.t.Fatal(err)
	}
}

// countingBody counts the bytes the client read of fetch answers.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && strings.HasSuffix(r.URL.Path, "/fetch") {
		resp.Body = countingBody{resp.Body, &c.n}
	}
	return resp, err
}

// checkBig checks that got is the big transaction, part by part, every
// change in order.
func checkBig(t *testing.T, got []*pgq.Transaction) {
	t.Helper()
	if len(got) != bigParts {
		t.Fatalf("%d parts, want %d", len(got), bigParts)
	}
	next := 0
	for p, tx := range got {
		if tx.Offset != pgq.Offset(p+2) || tx.Part != uint32(p) || tx.Final != (p == bigParts-1) || tx.CommitLSN != 200 {
			t.Fatalf("part %d: offset %d part %d final %v commit %s", p, tx.Offset, tx.Part, tx.Final, tx.CommitLSN)
		}
		for _, ch := range tx.Changes {
			if id := string(ch.New[0].Data); id != fmt.Sprint(next) {
				t.Fatalf("part %d: change id %s, want %d", p, id, next)
			}
			next++
		}
	}
	if next != bigParts*bigPerPart {
		t.Fatalf("%d changes, want %d", next, bigParts*bigPerPart)
	}
}

// TestFetchStreamBigTransaction: a transaction of 120 parts fetched with
// max 1 through FetchStream and through a Consumer arrives whole, part by
// part, every change in order, and is decoded as it arrives: the first
// part is returned when a small share of the answer was read from the
// connection (reading the answer whole first, as Fetch did, returns it
// after all of it), so what the client holds is bounded by a part, not
// by the transaction. The Consumer commits only after the last part.
func TestFetchStreamBigTransaction(t *testing.T) {
	s := startServer(t, t.TempDir(), "127.0.0.1:0", nil)
	defer s.stop()
	s.appendBig()
	tr := &countingTransport{}
	c, err := client.New(s.addr, client.Options{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, g := range []string{"g", "h"} {
		if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: g, From: "earliest"}); err != nil {
			t.Fatal(err)
		}
	}
	// The small transaction first, then the big one alone (max 1).
	if res, err := c.Fetch(ctx, "g", client.FetchRequest{Member: "m", Max: 1}); err != nil || len(res.Transactions) != 1 {
		t.Fatalf("first fetch: %+v, %v", res, err)
	}
	tr.n.Store(0)
	st, err := c.FetchStream(ctx, "g", client.FetchRequest{Member: "m", Max: 1, MaxBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if st.Len() != bigParts || st.Result().NextOffset != bigParts+2 || st.Result().Generation == 0 {
		t.Fatalf("answer of %d transactions, fields %+v", st.Len(), st.Result())
	}
	var got []*pgq.Transaction
	var atFirst int64
	for tx, err := range st.All() {
		if err != nil {
			t.Fatal(err)
		}
		if got = append(got, tx); len(got) == 1 {
			atFirst = tr.n.Load()
		}
	}
	total := tr.n.Load()
	checkBig(t, got)
	t.Logf("FetchStream: first part after %d of %d bytes", atFirst, total)
	if atFirst*10 > total {
		t.Errorf("FetchStream returned the first part after reading %d of the answer's %d bytes: want under a tenth (decoded as it arrives)", atFirst, total)
	}

	// A Consumer: the same, and its commits stay before the transaction
	// until its last part was handled.
	cs, err := c.Consumer("h", client.ConsumerOptions{Member: "m", Max: 1, MaxBytes: 1024, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if tx, err := cs.Next(ctx); err != nil || tx.Offset != 1 {
		t.Fatalf("first Next: %v, %v", tx, err)
	}
	if err := cs.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tr.n.Store(0)
	got, atFirst = got[:0], 0
	for len(got) < bigParts {
		tx, err := cs.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got = append(got, tx); len(got) == 1 {
			atFirst = tr.n.Load()
			if cs.Buffered() != bigParts-1 {
				t.Errorf("Buffered %d after the first part, want %d", cs.Buffered(), bigParts-1)
			}
		}
		if !tx.Final {
			if m := cs.Mark(); m.Offset() != 1 {
				t.Fatalf("mark %d inside the transaction (part %d), want 1", m.Offset(), tx.Part)
			}
		}
	}
	total = tr.n.Load()
	checkBig(t, got)
	t.Logf("Consumer: first part after %d of %d bytes", atFirst, total)
	if atFirst*10 > total {
		t.Errorf("Consumer returned the first part after reading %d of the answer's %d bytes: want under a tenth", atFirst, total)
	}
	if err := cs.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if gi, err := c.Group(ctx, "h"); err != nil || gi.CommittedOffset != bigParts+1 {
		t.Fatalf("committed %d (%v), want %d", gi.CommittedOffset, err, bigParts+1)
	}
}

// cutReader fails after n bytes, as a connection pgq closes in the middle
// of an answer.
type cutReader struct {
	io.ReadCloser
	n int
}

func (r *cutReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("cut")
	}
	if len(p) > r.n {
		p = p[:r.n]
	}
	n, err := r.ReadCloser.Read(p)
	r.n -= n
	return n, err
}

// TestFetchStreamCut: an answer cut in the middle of the big transaction
// (the proxy in front of pgq aborts the body, as pgq does on a failed
// read) is an unexpected EOF from FetchStream and from the Consumer,
// never an answer that looks complete; the Consumer commits nothing of
// the transaction and its next fetch delivers the transaction again from
// its first part, whole.
func TestFetchStreamCut(t *testing.T) {
	s := startServer(t, t.TempDir(), "127.0.0.1:0", nil)
	defer s.stop()
	s.appendBig()
	target, _ := url.Parse("http://" + s.addr)
	var cuts atomic.Int32
	cuts.Store(2) // the FetchStream's answer, then the Consumer's
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(resp *http.Response) error {
		if strings.HasSuffix(resp.Request.URL.Path, "/fetch") && resp.StatusCode == 200 && resp.Request.Header.Get("X-Big") == "1" && cuts.Add(-1) >= 0 {
			resp.Body = &cutReader{ReadCloser: resp.Body, n: 1 << 20}
		}
		return nil
	}
	proxy := httptest.NewServer(rp)
	defer proxy.Close()
	var big atomic.Bool
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if big.Load() {
			r.Header.Set("X-Big", "1")
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	c, err := client.New(proxy.URL, client.Options{HTTPClient: hc, Retry: client.RetryOptions{Min: 10 * time.Millisecond, GiveUp: -1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, g := range []string{"g", "h"} {
		if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: g, From: "earliest"}); err != nil {
			t.Fatal(err)
		}
	}
	// The small transaction first, whole; then the big one, cut.
	if res, err := c.Fetch(ctx, "g", client.FetchRequest{Member: "m", Max: 1}); err != nil || len(res.Transactions) != 1 {
		t.Fatalf("first fetch: %+v, %v", res, err)
	}
	cs, err := c.Consumer("h", client.ConsumerOptions{Member: "m", Max: 1, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if tx, err := cs.Next(ctx); err != nil || tx.Offset != 1 {
		t.Fatalf("first Next: %v, %v", tx, err)
	}
	if err := cs.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	big.Store(true)
	if _, err := c.Fetch(ctx, "g", client.FetchRequest{Member: "m", Max: 1}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Fetch of a cut answer: %v, want an unexpected EOF", err)
	}
	n := 0
	var nerr error
	for {
		var tx *pgq.Transaction
		if tx, nerr = cs.Next(ctx); nerr != nil {
			break
		}
		if tx.Final {
			t.Fatalf("the last part came from a cut answer")
		}
		n++
	}
	if !errors.Is(nerr, io.ErrUnexpectedEOF) || n == 0 || n >= bigParts {
		t.Fatalf("Consumer: %d parts, then %v: want some parts, then an unexpected EOF", n, nerr)
	}
	if err := cs.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if gi, err := c.Group(ctx, "h"); err != nil || gi.CommittedOffset != 1 {
		t.Fatalf("committed %d (%v) after a cut answer, want 1", gi.CommittedOffset, err)
	}
	var got []*pgq.Transaction
	for len(got) < bigParts {
		tx, err := cs.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tx)
	}
	checkBig(t, got)
	if err := cs.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if gi, err := c.Group(ctx, "h"); err != nil || gi.CommittedOffset != bigParts+1 {
		t.Fatalf("committed %d (%v), want %d", gi.CommittedOffset, err, bigParts+1)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
