package kafka_test

import (
	"context"
	"testing"

	"github.com/pgq-dev/pgq/bridge/kafka"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/bridgetest"
)

// TestKafkaFormats bridges into Kafka (kfake) in each format and checks a
// record's value, key and headers.
func TestKafkaFormats(t *testing.T) {
	brokers := bridgetest.KafkaBrokers(t)
	for _, f := range []format.Format{format.PGQ, format.Debezium, format.CloudEvents} {
		t.Run(f.String(), func(t *testing.T) {
			src := bridgetest.StartSource(t, 50)
			topic := "fmt" + f.String()
			p, err := kafka.New(context.Background(), kafka.Options{Brokers: brokers, Topic: topic, CreateTopics: true, Partitions: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			bridgetest.BridgeFormat(t, p, src, f)
			m := bridgetest.KafkaMessages(t, brokers, topic)[0]
			bridgetest.CheckFormat(t, src, f, "ce_", m)
		})
	}
}
