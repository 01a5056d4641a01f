package bridge_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/bridge/kafka"
	"github.com/pgq-dev/pgq/bridge/webhook"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/journal"
)

// TestMain runs the test binary as a bridge process when PGQ_BRIDGE_CHILD
// names a broker (the kill tests SIGKILL it), or as the webhook
// benchmark's receiver when PGQ_BENCH_RECEIVER names one.
func TestMain(m *testing.M) {
	if kind := os.Getenv("PGQ_BENCH_RECEIVER"); kind != "" {
		if err := runReceiver(kind); err != nil {
			fmt.Fprintln(os.Stderr, "receiver:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if broker := os.Getenv("PGQ_BRIDGE_CHILD"); broker != "" {
		if err := runChild(broker); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	pgqbin.Remove() // the pgq the NodeLoss tests and the latency bench ran
	os.Exit(code)
}

// runChild bridges PGQ_ADDR's group "g" into the broker at BROKER_URL until
// killed.
func runChild(broker string) error {
	ctx := context.Background()
	var pub bridge.Publisher
	switch broker {
	case "jetstream":
		p, err := jetstream.New(ctx, jetstream.Options{URL: os.Getenv("BROKER_URL"), Window: 256})
		if err != nil {
			return err
		}
		pub = p
	case "kafka":
		p, err := kafka.New(ctx, kafka.Options{Brokers: []string{os.Getenv("BROKER_URL")}, CreateTopics: true, Partitions: 6})
		if err != nil {
			return err
		}
		pub = p
	case "webhook":
		p, err := webhook.New(webhook.Options{URL: os.Getenv("BROKER_URL"), Secret: webhookKey, BatchSize: 50, Timeout: 5 * time.Second})
		if err != nil {
			return err
		}
		pub = p
	}
	return runBridge(ctx, pub, os.Getenv("PGQ_ADDR"), "g", "child")
}

func runBridge(ctx context.Context, pub bridge.Publisher, addr, group, member string) error {
	cl, err := client.New(addr, client.Options{Retry: client.RetryOptions{Min: 10 * time.Millisecond, Max: 200 * time.Millisecond}})
	if err != nil {
		return err
	}
	b, err := bridge.New(bridge.Options{Client: cl, Group: group, Member: member, Publisher: pub, MaxTransactions: 200,
		Wait: 200 * time.Millisecond, LeaseTTL: time.Second, BackoffMin: 20 * time.Millisecond, BackoffMax: 500 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	return b.Run(ctx)
}

// source is an in-process pgq API over a real journal and index (no
// PostgreSQL).
type source struct {
	t    testing.TB
	addr string
	j    *journal.Journal
	ix   *index.Index
	m    *consumers.Manager
	srv  *http.Server

	mu      sync.Mutex // guards the fields below and appends
	lastEnd pgq.LSN
	seq     int            // last value written
	keys    int            // key space
	changes int            // changes appended
	ids     map[string]int // "<offset>.<index>" → key
}

func startSource(t testing.TB, keys int) *source {
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
	s := &source{t: t, addr: ln.Addr().String(), j: j, ix: ix, m: m, srv: &http.Server{Handler: mux},
		lastEnd: j.LastEndLSN(), keys: keys, ids: map[string]int{}}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = s.srv.Close()
		_ = s.m.Close()
		_ = s.ix.Close()
		_ = s.j.Close()
	})
	cl, err := client.New(s.addr, client.Options{})
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
func (s *source) append(n int) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
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
	if err := s.j.AppendRecords(recs); err != nil {
		s.t.Error(err)
		return
	}
	entries := make([]index.Entry, n)
	for i, tx := range batch {
		entries[i] = index.EntryOf(tx, recs[i].Bytes, len(tx.Changes))
		for c, k := range keys[i] {
			s.ids[bridge.MessageID(tx.CommitLSN, uint32(c), "")] = k
			s.changes++
		}
	}
	if err := s.ix.Add(entries); err != nil {
		s.t.Error(err)
	}
}

// appendLegacy journals one transaction of parts records of per updates
// each as pgq did before the ordinals were recorded: every later part's
// body has 9 elements and decodes with ordinals from 0 again. Its changes'
// ids are "<commit LSN>.<ordinal in the whole transaction>".
func (s *source) appendLegacy(parts, per int) { s.appendParts(parts, per, true) }

// appendParts journals one transaction of parts records of per updates
// each; legacy: in the layout before ordinals were recorded (see
// appendLegacy), else with each part's first ordinal.
func (s *source) appendParts(parts, per int, legacy bool) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
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
	if err := s.j.AppendRecords(recs); err != nil {
		s.t.Error(err)
		return
	}
	entries := make([]index.Entry, parts)
	ord := 0
	for i, tx := range batch {
		entries[i] = index.EntryOf(tx, recs[i].Bytes, len(tx.Changes))
		for _, k := range keys[i] {
			s.ids[bridge.MessageID(tx.CommitLSN, uint32(ord), "")] = k
			s.changes++
			ord++
		}
	}
	if err := s.ix.Add(entries); err != nil {
		s.t.Error(err)
	}
}

// waitCaughtUp waits until group g has committed everything journaled.
func (s *source) waitCaughtUp(t testing.TB, d time.Duration) {
	t.Helper()
	cl, err := client.New(s.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(d)
	for {
		gi, err := cl.Group(context.Background(), "g")
		if err == nil && gi.CommittedOffset >= s.j.LastOffset() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group not caught up after %s: %+v %v (journal last %d)", d, gi, err, s.j.LastOffset())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startNATS runs a nats-server with JetStream on dir; port 0 → a free one.
func startNATS(t testing.TB, dir string, port int) *natsserver.Server {
	t.Helper()
	if port == 0 {
		port = -1
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	return ns
}

func dialPGQ(t testing.TB, addr string) *client.Client {
	t.Helper()
	cl, err := client.New(addr, client.Options{Retry: client.RetryOptions{Min: 10 * time.Millisecond, Max: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// startNATSAt restarts a nats-server on the store dir and the port of url.
func startNATSAt(t testing.TB, dir, url string) *natsserver.Server {
	t.Helper()
	_, portStr, _ := net.SplitHostPort(url[len("nats://"):])
	port, _ := strconv.Atoi(portStr)
	var ns *natsserver.Server
	for i := 0; ; i++ {
		ns2, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
		if err != nil {
			t.Fatal(err)
		}
		go ns2.Start()
		if ns2.ReadyForConnections(5 * time.Second) {
			ns = ns2
			break
		}
		ns2.Shutdown()
		if i == 5 {
			t.Fatal("nats-server did not restart")
		}
	}
	return ns
}
