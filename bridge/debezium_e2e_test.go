package bridge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/bridge/kafka"
	"github.com/pgq-dev/pgq/bridge/webhook"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/bridgetest"
)

// TestDebeziumLeavesOutNonEvents: in the Debezium format a ddl or gap
// change has no message on JetStream, Kafka or the webhook (its null
// would be a tombstone to a Kafka Connect sink and a corrupt record to
// Flink's debezium-json); every change with an event has its message,
// the Debezium event of its update.
func TestDebeziumLeavesOutNonEvents(t *testing.T) {
	check := func(t *testing.T, src *bridgetest.Source, prefix string, msgs []bridgetest.Bridged) {
		t.Helper()
		if len(msgs) != src.Changes {
			t.Errorf("%d messages, want %d (the updates)", len(msgs), src.Changes)
		}
		for _, m := range msgs {
			bridgetest.CheckFormat(t, src, format.Debezium, prefix, m) // an update's event, named by its id
		}
	}
	t.Run("jetstream", func(t *testing.T) {
		ns := bridgetest.StartNATS(t, t.TempDir(), 0)
		defer ns.Shutdown()
		src := bridgetest.StartSource(t, 50)
		src.AppendNonEvents()
		p, err := jetstream.New(context.Background(), jetstream.Options{URL: ns.ClientURL(), Stream: "NONEV", Subject: "NONEV.{table}", CreateStream: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		bridgetest.BridgeFormat(t, p, src, format.Debezium)
		check(t, src, "ce-", bridgetest.JetStreamMessages(t, ns.ClientURL(), "NONEV"))
	})
	t.Run("kafka", func(t *testing.T) {
		brokers := bridgetest.KafkaBrokers(t)
		src := bridgetest.StartSource(t, 50)
		src.AppendNonEvents()
		p, err := kafka.New(context.Background(), kafka.Options{Brokers: brokers, Topic: "nonev", CreateTopics: true, Partitions: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		bridgetest.BridgeFormat(t, p, src, format.Debezium)
		check(t, src, "ce_", bridgetest.KafkaMessages(t, brokers, "nonev"))
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
		src := bridgetest.StartSource(t, 50)
		src.AppendNonEvents()
		p, err := webhook.New(webhook.Options{URL: srv.URL, Format: format.Debezium, BatchSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		bridgetest.BridgeFormat(t, p, src, format.Debezium)
		mu.Lock()
		defer mu.Unlock()
		if len(events) != src.Changes {
			t.Errorf("%d events, want %d (the updates)", len(events), src.Changes)
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
// a repeated id) and Kafka (whose resume reads the ids back; without
// tombstones here: TestKafkaKillBetweenEvents has them).
func TestDebeziumEventPerMessage(t *testing.T) {
	check := func(t *testing.T, src *bridgetest.Source, id, prefix string, msgs []bridgetest.Bridged) {
		t.Helper()
		if len(msgs) != src.Changes+2 {
			t.Errorf("%d messages, want %d (the updates, the delete and the create)", len(msgs), src.Changes+2)
		}
		seen := map[string]bool{}
		for _, m := range msgs {
			mid := m.Hdr["pgq-id"]
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
				if json.Unmarshal(m.Body, &ev) != nil || ev.Op != "d" || ev.Before == nil || ev.Before.ID != -1 || m.Key != `{"id":-1}` {
					t.Errorf("%s: %s key %s, want the delete of id -1", mid, m.Body, m.Key)
				}
			case bridge.EventID(id, 1):
				if json.Unmarshal(m.Body, &ev) != nil || ev.Op != "c" || ev.After == nil || ev.After.ID != -2 || m.Key != `{"id":-2}` {
					t.Errorf("%s: %s key %s, want the create of id -2", mid, m.Body, m.Key)
				}
			default:
				bridgetest.CheckFormat(t, src, format.Debezium, prefix, m)
			}
		}
		if !seen[id] || !seen[bridge.EventID(id, 1)] {
			t.Errorf("ids %v: want %s and %s", seen, id, bridge.EventID(id, 1))
		}
	}
	t.Run("jetstream", func(t *testing.T) {
		ns := bridgetest.StartNATS(t, t.TempDir(), 0)
		defer ns.Shutdown()
		src := bridgetest.StartSource(t, 50)
		id := src.AppendKeyChange()
		p, err := jetstream.New(context.Background(), jetstream.Options{URL: ns.ClientURL(), Stream: "REKEY", Subject: "REKEY.{table}", CreateStream: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		bridgetest.BridgeFormat(t, p, src, format.Debezium)
		check(t, src, id, "ce-", bridgetest.JetStreamMessages(t, ns.ClientURL(), "REKEY"))
	})
	t.Run("kafka", func(t *testing.T) {
		brokers := bridgetest.KafkaBrokers(t)
		src := bridgetest.StartSource(t, 50)
		id := src.AppendKeyChange()
		p, err := kafka.New(context.Background(), kafka.Options{Brokers: brokers, Topic: "rekey", CreateTopics: true, Partitions: 3, NoTombstones: true})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		bridgetest.BridgeFormat(t, p, src, format.Debezium)
		check(t, src, id, "ce_", bridgetest.KafkaMessages(t, brokers, "rekey"))
	})
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
		src := bridgetest.StartSource(t, 50)
		src.Append(2)
		p, err := webhook.New(webhook.Options{URL: srv.URL, Format: format.CloudEvents})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		_, done := bridgetest.StartBridgeWith(t, ctx, p, src.Addr, func(o *bridge.Options) { o.Format, o.FormatOptions = format.CloudEvents, c.o })
		src.WaitCaughtUp(t, 30*time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		srv.Close()
		mu.Lock()
		if len(sources) != src.Changes {
			t.Errorf("options %+v: %d events, want %d", c.o, len(sources), src.Changes)
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
