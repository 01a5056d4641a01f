package kafka_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/kafka"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/bridgetest"
)

// TestKafkaResumesBetweenEvents: a bridge that stopped between the delete
// of a key-changing update and its tombstone (the partition's last record
// is the delete) resumes with the tombstone, then the create: each event
// has its own position (EventID), so neither is taken for a record the
// partition holds.
// One partition: both events go to it, as every message of a topic of
// one partition.
func TestKafkaResumesBetweenEvents(t *testing.T) {
	brokers := bridgetest.KafkaBrokers(t)
	ctx := context.Background()
	src := bridgetest.StartSource(t, 50)
	id := src.AppendKeyChange()
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
	bridgetest.BridgeFormat(t, p, src, format.Debezium)
	msgs := bridgetest.KafkaMessages(t, brokers, "between")
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.Hdr[kafka.HeaderID])
	}
	// The held delete, its tombstone, the create, then every change after
	// the key change.
	if len(msgs) != 2+src.Changes || ids[0] != id || ids[1] != bridge.EventID(id, 1) || ids[2] != bridge.EventID(id, 2) {
		t.Fatalf("records %q: want %s, %s, %s and the %d changes after them", ids, id, bridge.EventID(id, 1), bridge.EventID(id, 2), src.Changes-1)
	}
	if msgs[1].Body != nil || msgs[1].Key != `{"id":-1}` {
		t.Fatalf("after the held delete: %s key %s, want its tombstone", msgs[1].Body, msgs[1].Key)
	}
	var ev struct{ Op string }
	if err := json.Unmarshal(msgs[2].Body, &ev); err != nil || ev.Op != "c" || msgs[2].Key != `{"id":-2}` {
		t.Fatalf("after the tombstone: %s key %s, want the create", msgs[2].Body, msgs[2].Key)
	}
	for _, m := range msgs[3:] {
		bridgetest.CheckFormat(t, src, format.Debezium, "ce_", m)
	}
}

// TestKafkaKillBetweenEvents SIGKILLs a bridge process (Debezium's
// format, tombstones on: the default) right after Kafka acknowledged a
// delete and before its tombstone, then one right after the tombstone of
// a key-changing update's delete and before its create, then runs one to
// the end: every event is in the topic exactly once, the tombstones with
// the delete's key and a null value, each with its own id; the
// truncate's record has no key (Debezium's is null) and sits in the
// partition of pgq's row key ("public.t"), where the resume looks.
func TestKafkaKillBetweenEvents(t *testing.T) {
	if testing.Short() || os.Getenv("PGQ_TEST_KAFKA_BROKERS") != "" {
		t.Skip("starts processes; the child uses the default topic on kfake only")
	}
	brokers := bridgetest.KafkaBrokers(t)
	src := bridgetest.StartSource(t, 50)
	src.Append(5)
	del, trunc := src.AppendDelete()
	rekey := src.AppendKeyChange()
	src.Append(5)
	bridgetest.KillBetween(t, "kafka", brokers[0], src, "debezium", del, bridge.EventID(rekey, 1))

	msgs := bridgetest.KafkaMessages(t, brokers, "pgq.public.t")
	byID := map[string]bridgetest.Bridged{}
	for _, m := range msgs {
		id := m.Hdr[kafka.HeaderID]
		if _, dup := byID[id]; dup {
			t.Fatalf("record %s twice", id)
		}
		byID[id] = m
	}
	// Every update once, and the events of the delete, the key change and
	// the truncate: d, tombstone; d, tombstone, c; t.
	events := map[string]struct{ op, key string }{
		del: {"d", `{"id":-3}`}, bridge.EventID(del, 1): {"", `{"id":-3}`},
		rekey: {"d", `{"id":-1}`}, bridge.EventID(rekey, 1): {"", `{"id":-1}`}, bridge.EventID(rekey, 2): {"c", `{"id":-2}`},
		trunc: {"t", ""},
	}
	if len(msgs) != src.Changes+len(events) {
		t.Errorf("%d records, want %d updates and %d other events", len(msgs), src.Changes, len(events))
	}
	for id, want := range events {
		m, ok := byID[id]
		if !ok {
			t.Fatalf("no record %s", id)
		}
		var ev struct{ Op string }
		if want.op == "" {
			if m.Body != nil {
				t.Errorf("%s: value %s, want a tombstone (null)", id, m.Body)
			}
		} else if err := json.Unmarshal(m.Body, &ev); err != nil || ev.Op != want.op {
			t.Errorf("%s: value %s, want op %s", id, m.Body, want.op)
		}
		if m.Key != want.key {
			t.Errorf("%s: key %q, want %q", id, m.Key, want.key)
		}
	}
	part := kgo.StickyKeyPartitioner(nil).ForTopic("pgq.public.t").Partition(&kgo.Record{Key: []byte("public.t")}, 6)
	if m := byID[trunc]; int(m.Partition) != part {
		t.Errorf("truncate in partition %d, want %d (murmur2 of pgq's row key public.t)", m.Partition, part)
	}
	for id, m := range byID {
		if _, ok := events[id]; !ok {
			bridgetest.CheckFormat(t, src, format.Debezium, "ce_", m)
		}
	}
}
