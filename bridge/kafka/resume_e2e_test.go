package kafka_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/kafka"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/bridgetest"
)

// TestKafkaResumesBetweenEvents: a bridge that stopped between the delete
// and the create of a key-changing update (the partition's last record is
// the delete) resumes with the create: each event has its own position
// (EventID), so the create is not taken for a record the partition holds.
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
	// The held delete, the create, then every change after the key change.
	if len(msgs) != 1+src.Changes || ids[0] != id || ids[1] != bridge.EventID(id, 1) {
		t.Fatalf("records %q: want %s, %s and the %d changes after them", ids, id, bridge.EventID(id, 1), src.Changes-1)
	}
	var ev struct{ Op string }
	if err := json.Unmarshal(msgs[1].Body, &ev); err != nil || ev.Op != "c" || msgs[1].Key != `{"id":-2}` {
		t.Fatalf("after the held delete: %s key %s, want the create", msgs[1].Body, msgs[1].Key)
	}
	for _, m := range msgs[2:] {
		bridgetest.CheckFormat(t, src, format.Debezium, "ce_", m)
	}
}
