package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/kafka"
	"github.com/pgq-dev/pgq/bridge/webhook"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// rowKeyUpdates is how many times the row key tests update each row.
const rowKeyUpdates = 12

// rowKeyServer runs pgq over a database with three tables of the same
// shape (id, v, big): tf under REPLICA IDENTITY FULL with a primary key,
// td under the default identity, tn under FULL without a primary key. Row
// 1 of each is inserted (v 0, big a value stored out of line), then
// updated rowKeyUpdates times (v 1, 2, …, big left alone: an unchanged
// TOAST value), one transaction per change; it returns when all of it is
// journaled, with big's value.
func rowKeyServer(t *testing.T) (*Server, string) {
	t.Helper()
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t,
		`CREATE TABLE tf (id int PRIMARY KEY, v int NOT NULL, big text)`,
		`ALTER TABLE tf REPLICA IDENTITY FULL`,
		`CREATE TABLE td (id int PRIMARY KEY, v int NOT NULL, big text)`,
		`CREATE TABLE tn (id int NOT NULL, v int NOT NULL, big text)`,
		`ALTER TABLE tn REPLICA IDENTITY FULL`)
	for _, tb := range []string{"tf", "td", "tn"} {
		db.Exec(t, `ALTER TABLE `+tb+` ALTER big SET STORAGE EXTERNAL`)
	}
	s, stop := start(t, db, t.TempDir())
	t.Cleanup(func() { _ = stop() })
	deadline := time.Now().Add(20 * time.Second)
	for s.ingester.Status().ProtoVersion == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	big := strings.Repeat("0123456789abcdef", 512) // 8 KiB, out of line
	for _, tb := range []string{"tf", "td", "tn"} {
		db.Exec(t, `INSERT INTO `+tb+` VALUES (1, 0, '`+big+`')`)
	}
	for v := 1; v <= rowKeyUpdates; v++ {
		for _, tb := range []string{"tf", "td", "tn"} {
			db.Exec(t, `UPDATE `+tb+` SET v = `+strconv.Itoa(v)+` WHERE id = 1`)
		}
	}
	waitRecords(t, s, 3*(rowKeyUpdates+1))
	return s, big
}

// rowKeyClient returns a client of s with group name created from the
// journal's start.
func rowKeyClient(t *testing.T, s *Server, group string) *client.Client {
	t.Helper()
	cl, err := client.New(s.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateGroup(context.Background(), api.CreateRequest{Name: group, From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	return cl
}

// bridgeAll runs a bridge of group g of s into p until the group
// committed the whole journal.
func bridgeAll(t *testing.T, s *Server, cl *client.Client, g string, p bridge.Publisher, f format.Format) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := bridge.New(bridge.Options{Client: cl, Group: g, Member: "m", Publisher: p, MaxTransactions: 200, Format: f,
		Wait: 100 * time.Millisecond, LeaseTTL: time.Second, BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		gi, err := cl.Group(context.Background(), g)
		if err == nil && gi.CommittedOffset >= s.journal.LastOffset() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not caught up: %+v %v", g, gi, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// rowChange is what the tests read of a change in pgq's format.
type rowChange struct {
	Op    string `json:"op"`
	Table string `json:"table"`
	New   struct {
		V int `json:"v"`
	} `json:"new"`
}

// checkVersions checks that each table's versions of row 1 arrived in
// order 0, 1, …, rowKeyUpdates.
func checkVersions(t *testing.T, what string, got map[string][]int) {
	t.Helper()
	for _, tb := range []string{"tf", "td", "tn"} {
		vs := got[tb]
		ok := len(vs) == rowKeyUpdates+1
		for i := 0; ok && i < len(vs); i++ {
			ok = vs[i] == i
		}
		if !ok {
			t.Errorf("%s: versions of %s's row in the order %v, want 0 to %d in order", what, tb, vs, rowKeyUpdates)
		}
	}
}

// TestRowKeySharedGroupOrder: a shared group (key pk) holds back the
// later changes of a row until the earlier one is acked, under
// REPLICA IDENTITY FULL too (keyed by the whole old row, tf's insert and
// updates would all be delivered at once), and a FULL table without a
// primary key keeps its order with one key for the table.
func TestRowKeySharedGroupOrder(t *testing.T) {
	s, _ := rowKeyServer(t)
	base := "http://" + s.Addr()
	post(t, base+"/v1/groups", "", `{"name":"sh","mode":"shared","from":"earliest","key":"pk"}`)
	got := map[string][]int{}
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; n < 3*(rowKeyUpdates+1); {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s %d messages: %v", n, got)
		}
		var ans struct {
			Messages []struct {
				AckID  string    `json:"ack_id"`
				Change rowChange `json:"change"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(post(t, base+"/v1/groups/sh/fetch", "", `{"member":"w","max":100,"wait":"200ms"}`), &ans); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		var ids []string
		for _, m := range ans.Messages {
			if seen[m.Change.Table] {
				t.Fatalf("two changes of %s's row delivered at once: %+v", m.Change.Table, ans.Messages)
			}
			seen[m.Change.Table] = true
			got[m.Change.Table] = append(got[m.Change.Table], m.Change.New.V)
			ids = append(ids, strconv.Quote(m.AckID))
			n++
		}
		if len(ids) > 0 {
			post(t, base+"/v1/groups/sh/ack", "", `{"ack_ids":[`+strings.Join(ids, ",")+`]}`)
		}
	}
	checkVersions(t, "shared group", got)
}

// TestRowKeyWebhookLanes: the webhook with 4 lanes sends the versions of
// one row in order through one lane. The receiver holds the request of
// each row's insert for a while: a version sent through another lane
// (tf's updates, keyed by the whole old row, spread over all four)
// would arrive before it.
func TestRowKeyWebhookLanes(t *testing.T) {
	s, _ := rowKeyServer(t)
	cl := rowKeyClient(t, s, "wh")
	var mu sync.Mutex // guards got
	got := map[string][]int{}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msgs []struct {
			Change rowChange `json:"change"`
		}
		if err := json.Unmarshal(body, &msgs); err != nil {
			t.Errorf("webhook body %s: %v", body, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		for _, m := range msgs {
			if m.Change.Op == "insert" {
				time.Sleep(300 * time.Millisecond)
			}
			mu.Lock()
			got[m.Change.Table] = append(got[m.Change.Table], m.Change.New.V)
			mu.Unlock()
		}
	}))
	defer rcv.Close()
	p, err := webhook.New(webhook.Options{URL: rcv.URL, BatchSize: 1, Concurrency: 4, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	bridgeAll(t, s, cl, "wh", p, format.PGQ)
	mu.Lock()
	defer mu.Unlock()
	checkVersions(t, "webhook", got)
}

// kafkaRecords bridges group g of s into a kfake cluster of 6 partitions
// in format f and returns the topic's records.
func kafkaRecords(t *testing.T, s *Server, g string, f format.Format) []*kgo.Record {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(6), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	p, err := kafka.New(context.Background(), kafka.Options{Brokers: brokers, Topic: "rk", CreateTopics: true, Partitions: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	bridgeAll(t, s, rowKeyClient(t, s, g), g, p, f)
	kc, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("rk"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < 3*(rowKeyUpdates+1) {
		fs := kc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d records of %d after 20s", len(recs), 3*(rowKeyUpdates+1))
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	return recs
}

// recordTable is the pgq-table header of r ("public.tf").
func recordTable(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == "pgq-table" {
			return string(h.Value)
		}
	}
	return ""
}

// TestRowKeyKafkaPartition: the Kafka key of a row's changes is the table
// and its primary key, under REPLICA IDENTITY FULL too, so the key and
// the partition stay the same across updates (keyed by the whole old
// row, every update of tf had another); a FULL table without a primary
// key is keyed by the table.
func TestRowKeyKafkaPartition(t *testing.T) {
	s, _ := rowKeyServer(t)
	want := map[string]string{"public.tf": "public.tf|1", "public.td": "public.td|1", "public.tn": "public.tn"}
	part := map[string]int32{}
	n := map[string]int{}
	for _, r := range kafkaRecords(t, s, "kf", format.PGQ) {
		tb := recordTable(r)
		if string(r.Key) != want[tb] {
			t.Errorf("%s: key %q, want %q", tb, r.Key, want[tb])
		}
		if p, ok := part[tb]; ok && p != r.Partition {
			t.Errorf("%s: partitions %d and %d", tb, p, r.Partition)
		}
		part[tb] = r.Partition
		n[tb]++
	}
	for tb := range want {
		if n[tb] != rowKeyUpdates+1 {
			t.Errorf("%s: %d records, want %d", tb, n[tb], rowKeyUpdates+1)
		}
	}
}

// TestRowKeyDebezium: in the Debezium format an update under REPLICA
// IDENTITY FULL is one "u" keyed by the primary key (not a "d" and a "c",
// as when every column counted as key), and its unchanged TOAST column
// takes the old image's value; under the default identity the old image
// has no value for it: the placeholder stays. The FULL table without a
// primary key has "u" events too, and no Debezium key (a record
// without a key).
func TestRowKeyDebezium(t *testing.T) {
	s, big := rowKeyServer(t)
	ops := map[string]string{}
	for _, r := range kafkaRecords(t, s, "dbz", format.Debezium) {
		tb := recordTable(r)
		var ev struct {
			Op    string `json:"op"`
			After struct {
				V   int    `json:"v"`
				Big string `json:"big"`
			} `json:"after"`
		}
		if len(r.Value) > 0 && r.Value[0] == '[' {
			t.Errorf("%s: several events for one change (a d and a c?), want one: %.300s", tb, r.Value)
			continue
		}
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			t.Fatalf("%s: value %.200s: %v", tb, r.Value, err)
		}
		ops[tb] += ev.Op
		wantKey := `{"id":1}`
		if tb == "public.tn" {
			// Debezium's key is null: the record has none (the bridge
			// picks its partition by pgq's row key, public.tn).
			wantKey = ""
		}
		if string(r.Key) != wantKey {
			t.Errorf("%s: key %s, want %s", tb, r.Key, wantKey)
		}
		if ev.Op != "u" {
			continue
		}
		wantBig := big
		if tb == "public.td" {
			wantBig = "__debezium_unavailable_value"
		}
		if ev.After.Big != wantBig {
			t.Errorf("%s: update to v %d: after.big %.40q…, want %.40q…", tb, ev.After.V, ev.After.Big, wantBig)
		}
	}
	want := "c" + strings.Repeat("u", rowKeyUpdates)
	for _, tb := range []string{"public.tf", "public.td", "public.tn"} {
		if ops[tb] != want {
			t.Errorf("%s: ops %s, want %s", tb, ops[tb], want)
		}
	}
}
