package bridge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/bridge/kafka"
	"github.com/pgq-dev/pgq/bridge/webhook"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// bridged is one broker message as the format tests read it.
type bridged struct {
	key  string
	body []byte
	hdr  map[string]string
}

// bridgeFormat journals 3 transactions, bridges them in format f into
// publisher p until the group caught up.
func bridgeFormat(t *testing.T, p bridge.Publisher, src *source, f format.Format) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	src.append(3)
	_, done := startBridgeWith(t, ctx, p, src.addr, func(o *bridge.Options) {
		o.Format = f
		o.FormatOptions = format.Options{Database: "db", Slot: "s"}
	})
	src.waitCaughtUp(t, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// checkFormat checks the first message m of the source's journal in
// format f: pgq's payload, a Debezium update event keyed {"id":k}, or a
// binary-mode CloudEvent (prefix "ce-" or "ce_") whose data is the change.
func checkFormat(t *testing.T, src *source, f format.Format, prefix string, m bridged) {
	t.Helper()
	src.mu.Lock()
	defer src.mu.Unlock()
	id := m.hdr["pgq-id"]
	k, ok := src.ids[id]
	if !ok {
		t.Fatalf("message id %q (headers %v) not a change of the journal", id, m.hdr)
	}
	switch f {
	case format.PGQ:
		var p payload
		if err := json.Unmarshal(m.body, &p); err != nil || p.Change.New.ID != k || p.Change.Op != "update" {
			t.Fatalf("pgq payload %s: %v", m.body, err)
		}
	case format.Debezium:
		var ev struct {
			Before json.RawMessage `json:"before"`
			After  struct {
				ID int `json:"id"`
			} `json:"after"`
			Source struct {
				Connector string `json:"connector"`
				DB        string `json:"db"`
				Table     string `json:"table"`
			} `json:"source"`
			Op string `json:"op"`
		}
		if err := json.Unmarshal(m.body, &ev); err != nil || ev.Op != "u" || ev.After.ID != k || ev.Source.Connector != "postgresql" || ev.Source.DB != "db" || ev.Source.Table != "t" {
			t.Fatalf("debezium value %s: %v", m.body, err)
		}
		if want := `{"id":` + itoa(k) + `}`; m.key != want {
			t.Fatalf("debezium key %q, want %q", m.key, want)
		}
	case format.CloudEvents:
		var p struct {
			Op  string `json:"op"`
			New struct {
				ID int `json:"id"`
			} `json:"new"`
		}
		if err := json.Unmarshal(m.body, &p); err != nil || p.Op != "update" || p.New.ID != k {
			t.Fatalf("cloudevents data %s: %v", m.body, err)
		}
		want := map[string]string{prefix + "specversion": "1.0", prefix + "id": id, prefix + "type": "pgq.update",
			prefix + "subject": "public.t", prefix + "source": "/pgq/db/s"}
		for h, v := range want {
			if m.hdr[h] != v {
				t.Fatalf("header %s = %q, want %q (headers %v)", h, m.hdr[h], v, m.hdr)
			}
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestJetStreamFormats bridges into JetStream in each format and checks a
// message's body and headers.
func TestJetStreamFormats(t *testing.T) {
	ns := startNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	for _, f := range []format.Format{format.PGQ, format.Debezium, format.CloudEvents} {
		t.Run(f.String(), func(t *testing.T) {
			src := startSource(t, 50)
			stream := "F" + strings.ToUpper(f.String())
			p, err := jetstream.New(context.Background(), jetstream.Options{URL: ns.ClientURL(), Stream: stream, Subject: stream + ".{table}", CreateStream: true})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			bridgeFormat(t, p, src, f)
			m := jetstreamMessages(t, ns.ClientURL(), stream)[0]
			checkFormat(t, src, f, "ce-", m)
		})
	}
}

// TestKafkaFormats bridges into Kafka (kfake) in each format and checks a
// record's value, key and headers.
func TestKafkaFormats(t *testing.T) {
	brokers := kafkaBrokers(t)
	for _, f := range []format.Format{format.PGQ, format.Debezium, format.CloudEvents} {
		t.Run(f.String(), func(t *testing.T) {
			src := startSource(t, 50)
			topic := "fmt" + f.String()
			p, err := kafka.New(context.Background(), kafka.Options{Brokers: brokers, Topic: topic, CreateTopics: true, Partitions: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			bridgeFormat(t, p, src, f)
			m := kafkaMessages(t, brokers, topic)[0]
			checkFormat(t, src, f, "ce_", m)
		})
	}
}

// jetstreamMessages reads every message of the stream, in order.
func jetstreamMessages(t *testing.T, url, stream string) []bridged {
	t.Helper()
	ctx := context.Background()
	st, err := jsClient(t, url).Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []bridged
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		raw, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		m := bridged{key: raw.Header.Get(jetstream.HeaderKey), body: raw.Data, hdr: map[string]string{}}
		for h, v := range raw.Header {
			m.hdr[h] = v[0]
		}
		m.hdr["pgq-id"] = raw.Header.Get(njs.MsgIDHeader)
		out = append(out, m)
	}
	if len(out) == 0 {
		t.Fatal("no message")
	}
	return out
}

// kafkaMessages reads the topic's records until none came for a second.
func kafkaMessages(t *testing.T, brokers []string, topic string) []bridged {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []bridged
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		wait := time.Second
		if len(out) == 0 {
			wait = time.Until(deadline)
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		fs := cl.PollFetches(ctx)
		cancel()
		n := len(out)
		fs.EachRecord(func(r *kgo.Record) {
			m := bridged{key: string(r.Key), body: r.Value, hdr: map[string]string{}}
			for _, h := range r.Headers {
				m.hdr[h.Key] = string(h.Value)
			}
			out = append(out, m)
		})
		if len(out) > 0 && len(out) == n {
			break
		}
	}
	if len(out) == 0 {
		t.Fatal("no record")
	}
	return out
}

// appendNonEvents journals a transaction of an update, a ddl change and
// an update, and one of a gap change alone: changes Debezium has no
// event for, between two events.
func (s *source) appendNonEvents() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	a, b := s.nextUpdate(), s.nextUpdate()
	ddl := pgq.Change{Op: pgq.OpDDL, Prefix: "pgq.ddl", Transactional: true,
		Content: []byte(`{"command":"ALTER TABLE","object":"public.t","schema":"public","object_type":"table","statement":"ALTER TABLE t ADD note text"}`)}
	batch := s.journal([]pgq.Change{a, ddl, b}, []pgq.Change{{Op: pgq.OpGap, FromLSN: s.lastEnd, ToLSN: s.lastEnd + 50}})
	s.ids[bridge.MessageID(batch[0].CommitLSN, 0, "")] = keyOf(a)
	s.ids[bridge.MessageID(batch[0].CommitLSN, 2, "")] = keyOf(b)
	s.changes += 2
}

// appendKeyChange journals a transaction of an update that changes the
// row's key from -1 to -2, between two updates: a delete and a create in
// Debezium's format. It returns the change's id (MessageID).
func (s *source) appendKeyChange() string {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	a, b := s.nextUpdate(), s.nextUpdate()
	rekey := s.nextUpdate()
	rekey.New[0].Data = []byte("-2")
	rekey.Old = []pgq.Value{{Kind: pgq.ValueText, Data: []byte("-1")}, {Kind: pgq.ValueNull}}
	batch := s.journal([]pgq.Change{a, rekey, b})
	s.ids[bridge.MessageID(batch[0].CommitLSN, 0, "")] = keyOf(a)
	s.ids[bridge.MessageID(batch[0].CommitLSN, 2, "")] = keyOf(b)
	s.changes += 2
	return bridge.MessageID(batch[0].CommitLSN, 1, "")
}

// nextUpdate is an update of the next key (s.mu held).
func (s *source) nextUpdate() pgq.Change {
	s.seq++
	k := (s.seq * 7919) % s.keys
	cols := []pgq.Column{{Name: "id", TypeOID: 20, Key: true}, {Name: "v", TypeOID: 20}}
	return pgq.Change{Op: pgq.OpUpdate, Schema: "public", Table: "t", Columns: cols,
		New: []pgq.Value{{Kind: pgq.ValueText, Data: []byte(strconv.Itoa(k))}, {Kind: pgq.ValueText, Data: []byte(strconv.Itoa(s.seq))}}}
}

// keyOf is the key nextUpdate gave c.
func keyOf(c pgq.Change) int {
	k, _ := strconv.Atoi(string(c.New[0].Data))
	return k
}

// journal journals a transaction of each list of changes (s.mu held)
// and returns them.
func (s *source) journal(txs ...[]pgq.Change) []*pgq.Transaction {
	s.t.Helper()
	var batch []*pgq.Transaction
	for _, changes := range txs {
		s.lastEnd += 100
		batch = append(batch, &pgq.Transaction{Xid: uint32(s.lastEnd), CommitLSN: s.lastEnd - 10, EndLSN: s.lastEnd,
			CommitTime: time.Now().UTC().Truncate(time.Microsecond), Final: true, Changes: changes})
	}
	recs := journal.Records(batch)
	if err := s.j.AppendRecords(recs); err != nil {
		s.t.Fatal(err)
	}
	entries := make([]index.Entry, len(batch))
	for i, tx := range batch {
		entries[i] = index.EntryOf(tx, recs[i].Bytes, len(tx.Changes))
	}
	if err := s.ix.Add(entries); err != nil {
		s.t.Fatal(err)
	}
	return batch
}

// TestDebeziumLeavesOutNonEvents: in the Debezium format a ddl or gap
// change has no message on JetStream, Kafka or the webhook (its null
// would be a tombstone to a Kafka Connect sink and a corrupt record to
// Flink's debezium-json); every change with an event has its message,
// the Debezium event of its update.
func TestDebeziumLeavesOutNonEvents(t *testing.T) {
	check := func(t *testing.T, src *source, prefix string, msgs []bridged) {
		t.Helper()
		if len(msgs) != src.changes {
			t.Errorf("%d messages, want %d (the updates)", len(msgs), src.changes)
		}
		for _, m := range msgs {
			checkFormat(t, src, format.Debezium, prefix, m) // an update's event, named by its id
		}
	}
	t.Run("jetstream", func(t *testing.T) {
		ns := startNATS(t, t.TempDir(), 0)
		defer ns.Shutdown()
		src := startSource(t, 50)
		src.appendNonEvents()
		p, err := jetstream.New(context.Background(), jetstream.Options{URL: ns.ClientURL(), Stream: "NONEV", Subject: "NONEV.{table}", CreateStream: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		bridgeFormat(t, p, src, format.Debezium)
		check(t, src, "ce-", jetstreamMessages(t, ns.ClientURL(), "NONEV"))
	})
	t.Run("kafka", func(t *testing.T) {
		brokers := kafkaBrokers(t)
		src := startSource(t, 50)
		src.appendNonEvents()
		p, err := kafka.New(context.Background(), kafka.Options{Brokers: brokers, Topic: "nonev", CreateTopics: true, Partitions: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		bridgeFormat(t, p, src, format.Debezium)
		check(t, src, "ce_", kafkaMessages(t, brokers, "nonev"))
	})
	t.Run("webhook", func(t *testing.T) {
		var mu sync.Mutex
		var events []json.RawMessage
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var batch []json.RawMessage
			if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
				t.Errorf("body: %v", err)
			}
			mu.Lock()
			events = append(events, batch...)
			mu.Unlock()
		}))
		defer srv.Close()
		src := startSource(t, 50)
		src.appendNonEvents()
		p, err := webhook.New(webhook.Options{URL: srv.URL, Format: format.Debezium, BatchSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		bridgeFormat(t, p, src, format.Debezium)
		mu.Lock()
		defer mu.Unlock()
		if len(events) != src.changes {
			t.Errorf("%d events, want %d (the updates)", len(events), src.changes)
		}
		for _, e := range events {
			var ev struct{ Op string }
			if err := json.Unmarshal(e, &ev); err != nil || ev.Op != "u" {
				t.Errorf("event %s: want an update's (%v)", e, err)
			}
		}
	})
}

// TestDebeziumEventPerMessage: a key-changing update is a delete and a
// create in Debezium's format, published as two messages (as Debezium
// does), each keyed by its own key and with its own id (the change's, and
// EventID's "<id>.1"), on JetStream (whose Nats-Msg-Id dedupe would drop
// a repeated id) and Kafka (whose resume reads the ids back).
func TestDebeziumEventPerMessage(t *testing.T) {
	check := func(t *testing.T, src *source, id, prefix string, msgs []bridged) {
		t.Helper()
		if len(msgs) != src.changes+2 {
			t.Errorf("%d messages, want %d (the updates, the delete and the create)", len(msgs), src.changes+2)
		}
		seen := map[string]bool{}
		for _, m := range msgs {
			mid := m.hdr["pgq-id"]
			if seen[mid] {
				t.Errorf("id %s twice", mid)
			}
			seen[mid] = true
			var ev struct {
				Before, After *struct{ ID int }
				Op            string
			}
			switch mid {
			case id:
				if json.Unmarshal(m.body, &ev) != nil || ev.Op != "d" || ev.Before == nil || ev.Before.ID != -1 || m.key != `{"id":-1}` {
					t.Errorf("%s: %s key %s, want the delete of id -1", mid, m.body, m.key)
				}
			case bridge.EventID(id, 1):
				if json.Unmarshal(m.body, &ev) != nil || ev.Op != "c" || ev.After == nil || ev.After.ID != -2 || m.key != `{"id":-2}` {
					t.Errorf("%s: %s key %s, want the create of id -2", mid, m.body, m.key)
				}
			default:
				checkFormat(t, src, format.Debezium, prefix, m)
			}
		}
		if !seen[id] || !seen[bridge.EventID(id, 1)] {
			t.Errorf("ids %v: want %s and %s", seen, id, bridge.EventID(id, 1))
		}
	}
	t.Run("jetstream", func(t *testing.T) {
		ns := startNATS(t, t.TempDir(), 0)
		defer ns.Shutdown()
		src := startSource(t, 50)
		id := src.appendKeyChange()
		p, err := jetstream.New(context.Background(), jetstream.Options{URL: ns.ClientURL(), Stream: "REKEY", Subject: "REKEY.{table}", CreateStream: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		bridgeFormat(t, p, src, format.Debezium)
		check(t, src, id, "ce-", jetstreamMessages(t, ns.ClientURL(), "REKEY"))
	})
	t.Run("kafka", func(t *testing.T) {
		brokers := kafkaBrokers(t)
		src := startSource(t, 50)
		id := src.appendKeyChange()
		p, err := kafka.New(context.Background(), kafka.Options{Brokers: brokers, Topic: "rekey", CreateTopics: true, Partitions: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		bridgeFormat(t, p, src, format.Debezium)
		check(t, src, id, "ce_", kafkaMessages(t, brokers, "rekey"))
	})
}

// TestKafkaResumesBetweenEvents: a bridge that stopped between the delete
// and the create of a key-changing update (the partition's last record is
// the delete) resumes with the create: each event has its own position
// (EventID), so the create is not taken for a record the partition holds.
// One partition: both events go to it, as every message of a topic of
// one partition.
func TestKafkaResumesBetweenEvents(t *testing.T) {
	brokers := kafkaBrokers(t)
	ctx := context.Background()
	src := startSource(t, 50)
	id := src.appendKeyChange()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "between"); err != nil {
		t.Fatal(err)
	}
	// What the stopped bridge published: the records before the delete, and the delete.
	held := &kgo.Record{Topic: "between", Key: []byte(`{"id":-1}`), Value: []byte(`{"op":"d"}`),
		Headers: []kgo.RecordHeader{{Key: kafka.HeaderID, Value: []byte(id)}, {Key: bridge.HeaderGroup, Value: []byte("g")}}}
	if err := cl.ProduceSync(ctx, held).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p, err := kafka.New(ctx, kafka.Options{Brokers: brokers, Topic: "between"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	bridgeFormat(t, p, src, format.Debezium)
	msgs := kafkaMessages(t, brokers, "between")
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.hdr[kafka.HeaderID])
	}
	// The held delete, the create, then every change after the key change.
	if len(msgs) != 1+src.changes || ids[0] != id || ids[1] != bridge.EventID(id, 1) {
		t.Fatalf("records %q: want %s, %s and the %d changes after them", ids, id, bridge.EventID(id, 1), src.changes-1)
	}
	var ev struct{ Op string }
	if err := json.Unmarshal(msgs[1].body, &ev); err != nil || ev.Op != "c" || msgs[1].key != `{"id":-2}` {
		t.Fatalf("after the held delete: %s key %s, want the create", msgs[1].body, msgs[1].key)
	}
	for _, m := range msgs[2:] {
		checkFormat(t, src, format.Debezium, "ce_", m)
	}
}

// TestFormatSourceFromStatus: a bridge whose format options name no
// database or slot names pgq's own, from its status (/pgq/app/slot1 of
// the source's status), as pgq's HTTP fetch does; options that name them
// win.
func TestFormatSourceFromStatus(t *testing.T) {
	for _, c := range []struct {
		o    format.Options
		want string
	}{{format.Options{}, "/pgq/app/slot1"}, {format.Options{Slot: "s"}, "/pgq/app/s"}, {format.Options{Database: "db", Slot: "s"}, "/pgq/db/s"}} {
		var mu sync.Mutex
		var sources []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var evs []struct{ Source string }
			if err := json.NewDecoder(r.Body).Decode(&evs); err != nil {
				t.Errorf("body: %v", err)
			}
			mu.Lock()
			for _, e := range evs {
				sources = append(sources, e.Source)
			}
			mu.Unlock()
		}))
		src := startSource(t, 50)
		src.append(2)
		p, err := webhook.New(webhook.Options{URL: srv.URL, Format: format.CloudEvents})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		_, done := startBridgeWith(t, ctx, p, src.addr, func(o *bridge.Options) { o.Format, o.FormatOptions = format.CloudEvents, c.o })
		src.waitCaughtUp(t, 30*time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		srv.Close()
		mu.Lock()
		if len(sources) != src.changes {
			t.Errorf("options %+v: %d events, want %d", c.o, len(sources), src.changes)
		}
		for _, s := range sources {
			if s != c.want {
				t.Errorf("options %+v: source %q, want %q", c.o, s, c.want)
				break
			}
		}
		mu.Unlock()
	}
}

// TestJetStreamResumesBetweenEvents: as TestKafkaResumesBetweenEvents, for
// a stream whose last message is the delete of a key-changing update: the
// create follows it (with its own Nats-Msg-Id, which the stream does not
// drop as a duplicate), nothing before it comes again.
func TestJetStreamResumesBetweenEvents(t *testing.T) {
	ns := startNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	ctx := context.Background()
	src := startSource(t, 50)
	id := src.appendKeyChange()
	js := jsClient(t, ns.ClientURL())
	if _, err := js.CreateStream(ctx, njs.StreamConfig{Name: "BETWEEN", Subjects: []string{"BETWEEN.>"}}); err != nil {
		t.Fatal(err)
	}
	held := nats.NewMsg("BETWEEN.t")
	held.Data = []byte(`{"op":"d"}`)
	held.Header.Set(njs.MsgIDHeader, id)
	held.Header.Set(bridge.HeaderGroup, "g")
	if _, err := js.PublishMsg(ctx, held); err != nil {
		t.Fatal(err)
	}
	p, err := jetstream.New(ctx, jetstream.Options{URL: ns.ClientURL(), Stream: "BETWEEN", Subject: "BETWEEN.{table}"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	bridgeFormat(t, p, src, format.Debezium)
	msgs := jetstreamMessages(t, ns.ClientURL(), "BETWEEN")
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.hdr["pgq-id"])
	}
	if len(msgs) != 1+src.changes || ids[0] != id || ids[1] != bridge.EventID(id, 1) {
		t.Fatalf("messages %q: want %s, %s and the %d changes after them", ids, id, bridge.EventID(id, 1), src.changes-1)
	}
	var ev struct{ Op string }
	if err := json.Unmarshal(msgs[1].body, &ev); err != nil || ev.Op != "c" {
		t.Fatalf("after the held delete: %s, want the create", msgs[1].body)
	}
	for _, m := range msgs[2:] {
		checkFormat(t, src, format.Debezium, "ce-", m)
	}
}
