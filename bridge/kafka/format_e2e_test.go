package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatal(err)
			}
			var r *kgo.Record
			fs.EachRecord(func(x *kgo.Record) {
				if r == nil {
					r = x
				}
			})
			if r == nil {
				t.Fatal("no record")
			}
			m := bridgetest.Bridged{Key: string(r.Key), Body: r.Value, Hdr: map[string]string{}}
			for _, h := range r.Headers {
				m.Hdr[h.Key] = string(h.Value)
			}
			bridgetest.CheckFormat(t, src, f, "ce_", m)
		})
	}
}
