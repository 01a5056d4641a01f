package bridgetest

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// Source is an in-process pgq API over a real journal and index (no
// PostgreSQL).
type Source struct {
	t       testing.TB
	Addr    string // the API's host:port
	Journal *journal.Journal
	Index   *index.Index
	Manager *consumers.Manager
	srv     *http.Server

	Mu      sync.Mutex // guards the fields below and appends
	lastEnd pgq.LSN
	seq     int            // last value written
	keys    int            // key space
	Changes int            // changes appended
	IDs     map[string]int // message id ("<commit LSN>.<ordinal>") → key
}

func StartSource(t testing.TB, keys int) *Source {
	t.Helper()
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	j, err := journal.Open(journal.Options{Dir: dir + "/journal", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := index.Open(index.Options{Dir: dir + "/index", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m, err := consumers.NewManager(consumers.ManagerOptions{Journal: j, Index: ix, Logger: log, LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The status names the database and slot a format names as the
	// source when the bridge's options do not (TestFormatSourceFromStatus).
	mux, err := httpapi.New(httpapi.Options{Groups: m, Status: func() api.Status { return api.Status{Database: "app", Slot: "slot1"} }})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Source{t: t, Addr: ln.Addr().String(), Journal: j, Index: ix, Manager: m, srv: &http.Server{Handler: mux},
		lastEnd: j.LastEndLSN(), keys: keys, IDs: map[string]int{}}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = s.srv.Close()
		_ = s.Manager.Close()
		_ = s.Index.Close()
		_ = s.Journal.Close()
	})
	cl, err := client.New(s.Addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateGroup(context.Background(), api.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	return s
}

// append journals n transactions of 1 to 3 updates each; each update sets
// row key k (of s.keys) to v, a value increasing over the whole journal.
func (s *Source) Append(n int) {
	s.t.Helper()
	s.Mu.Lock()
	defer s.Mu.Unlock()
	cols := []pgq.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "v", TypeOID: 20}, {Name: "pad", TypeOID: 25}}
	pad := []byte("padding-to-make-a-change-about-two-hundred-bytes-long-padding-padding-padding")
	batch := make([]*pgq.Transaction, n)
	keys := make([][]int, n)
	for i := range batch {
		s.lastEnd += 100
		tx := &pgq.Transaction{Xid: uint32(s.lastEnd), CommitLSN: s.lastEnd - 10, EndLSN: s.lastEnd,
			CommitTime: time.Now().UTC().Truncate(time.Microsecond), Final: true}
		for c := 0; c < 1+(s.seq%3); c++ {
			s.seq++
			k := (s.seq * 7919) % s.keys
			keys[i] = append(keys[i], k)
			tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpUpdate, Schema: "public", Table: "t", Columns: cols,
				New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte(strconv.Itoa(k))}, {Kind: pgq.ValueText, Data: []byte(strconv.Itoa(s.seq))}, {Kind: pgq.ValueText, Data: pad}}})
		}
		batch[i] = tx
	}
	recs := journal.Records(batch)
	if err := s.Journal.AppendRecords(recs); err != nil {
		s.t.Error(err)
		return
	}
	entries := make([]index.Entry, n)
	for i, tx := range batch {
		entries[i] = index.EntryOf(tx, recs[i].Bytes, len(tx.Changes))
		for c, k := range keys[i] {
			s.IDs[bridge.MessageID(tx.CommitLSN, uint32(c), "")] = k
			s.Changes++
		}
	}
	if err := s.Index.Add(entries); err != nil {
		s.t.Error(err)
	}
}

// appendLegacy journals one transaction of parts records of per updates
// each as pgq did before the ordinals were recorded: every later part's
// body has 9 elements and decodes with ordinals from 0 again. Its changes'
// ids are "<commit LSN>.<ordinal in the whole transaction>".
func (s *Source) AppendLegacy(parts, per int) { s.AppendParts(parts, per, true) }

// appendParts journals one transaction of parts records of per updates
// each; legacy: in the layout before ordinals were recorded (see
// appendLegacy), else with each part's first ordinal.
func (s *Source) AppendParts(parts, per int, legacy bool) {
	s.t.Helper()
	s.Mu.Lock()
	defer s.Mu.Unlock()
	cols := []pgq.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "v", TypeOID: 20}}
	s.lastEnd += 100
	batch := make([]*pgq.Transaction, parts)
	keys := make([][]int, parts)
	for p := range batch {
		tx := &pgq.Transaction{Xid: uint32(s.lastEnd), CommitLSN: s.lastEnd - 10, EndLSN: s.lastEnd,
			CommitTime: time.Now().UTC().Truncate(time.Microsecond), Part: uint32(p), Final: p == parts-1}
		for range per {
			s.seq++
			k := (s.seq * 7919) % s.keys
			keys[p] = append(keys[p], k)
			tx.Changes = append(tx.Changes, pgq.Change{Op: pgq.OpUpdate, Schema: "public", Table: "t", Columns: cols,
				New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte(strconv.Itoa(k))}, {Kind: pgq.ValueText, Data: []byte(strconv.Itoa(s.seq))}}})
		}
		if !legacy {
			tx.FirstOrdinal = uint32(p * per)
		}
		batch[p] = tx // legacy: FirstOrdinal 0 on every part, the old layout
	}
	recs := journal.Records(batch)
	if err := s.Journal.AppendRecords(recs); err != nil {
		s.t.Error(err)
		return
	}
	entries := make([]index.Entry, parts)
	ord := 0
	for i, tx := range batch {
		entries[i] = index.EntryOf(tx, recs[i].Bytes, len(tx.Changes))
		for _, k := range keys[i] {
			s.IDs[bridge.MessageID(tx.CommitLSN, uint32(ord), "")] = k
			s.Changes++
			ord++
		}
	}
	if err := s.Index.Add(entries); err != nil {
		s.t.Error(err)
	}
}

// waitCaughtUp waits until group g has committed everything journaled.
func (s *Source) WaitCaughtUp(t testing.TB, d time.Duration) {
	t.Helper()
	cl, err := client.New(s.Addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(d)
	for {
		gi, err := cl.Group(context.Background(), "g")
		if err == nil && gi.CommittedOffset >= s.Journal.LastOffset() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group not caught up after %s: %+v %v (journal last %d)", d, gi, err, s.Journal.LastOffset())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
