package bridgetest

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaBrokers returns PGQ_TEST_KAFKA_BROKERS (a real broker) or starts a
// kfake cluster.
func KafkaBrokers(t *testing.T) []string {
	t.Helper()
	if env := os.Getenv("PGQ_TEST_KAFKA_BROKERS"); env != "" {
		return strings.Split(env, ",")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.DefaultNumPartitions(6), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// ReadTopic reads every record of topic: ids ("<offset>.<index>") and
// payloads, in order per partition; perKey holds each key's values in
// partition order.
func ReadTopic(t *testing.T, brokers []string, topic string, want int) (ids []string, pls []Payload) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var extra context.Context
	for {
		pctx := ctx
		if len(ids) >= want {
			if extra == nil { // duplicates may follow in other partitions
				var c context.CancelFunc
				extra, c = context.WithTimeout(ctx, time.Second)
				defer c()
			}
			pctx = extra
		}
		fs := cl.PollFetches(pctx)
		if extra != nil && extra.Err() != nil {
			return ids, pls
		}
		if err := ctx.Err(); err != nil {
			t.Errorf("read %d of %d records: %v", len(ids), want, err) // the caller's check says which
			return ids, pls
		}
		fs.EachRecord(func(r *kgo.Record) {
			var id string
			for _, h := range r.Headers {
				if h.Key == "pgq-id" {
					id = string(h.Value)
				}
			}
			var p Payload
			if err := json.Unmarshal(r.Value, &p); err != nil {
				t.Fatalf("payload %q: %v", r.Value, err)
			}
			ids = append(ids, id)
			pls = append(pls, p)
		})
	}
}

// KafkaMessages reads the topic's records until none came for a second.
func KafkaMessages(t *testing.T, brokers []string, topic string) []Bridged {
	t.Helper()
	return KafkaMessagesN(t, brokers, topic, 1)
}

// KafkaMessagesN reads the topic's records until at least want came
// (within 20s) and then none for a second.
func KafkaMessagesN(t *testing.T, brokers []string, topic string, want int) []Bridged {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []Bridged
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		wait := time.Second
		if len(out) < want {
			wait = time.Until(deadline)
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		fs := cl.PollFetches(ctx)
		cancel()
		n := len(out)
		fs.EachRecord(func(r *kgo.Record) {
			m := Bridged{Key: string(r.Key), Body: r.Value, Hdr: map[string]string{}, Partition: r.Partition, Subject: r.Topic}
			for _, h := range r.Headers {
				m.Hdr[h.Key] = string(h.Value)
			}
			out = append(out, m)
		})
		if len(out) >= want && len(out) == n {
			break
		}
	}
	if len(out) < want {
		t.Fatalf("%s: %d records, want %d", topic, len(out), want)
	}
	return out
}
