package kafka_test

import (
	"context"
	"testing"

	"github.com/pgq-dev/pgq/bridge/kafka"
	"github.com/pgq-dev/pgq/internal/bridgetest"
)

// TestKafkaWindowedTransaction is TestJetStreamWindowedTransaction with
// Kafka (kfake): every change once, in per-key order, the window held.
func TestKafkaWindowedTransaction(t *testing.T) {
	brokers := bridgetest.KafkaBrokers(t)
	src := bridgetest.StartSource(t, 50)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := kafka.New(ctx, kafka.Options{Brokers: brokers, Topic: "pgqwin.{schema}.{table}", CreateTopics: true, Partitions: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	bridgetest.BridgeWindowed(t, src, p)
	ids, pls := bridgetest.ReadTopic(t, brokers, "pgqwin.public.t", src.Changes)
	if dups := bridgetest.CheckAtLeastOnce(t, src, ids, pls); dups != 0 {
		t.Fatalf("%d duplicates", dups)
	}
}
