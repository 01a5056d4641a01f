package bridge_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgq-dev/pgq/bridge/kafka"
)

// kafkaBrokers returns PGQ_TEST_KAFKA_BROKERS (a real broker) or starts a
// kfake cluster.
func kafkaBrokers(t *testing.T) []string {
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

// readTopic reads every record of topic: ids ("<offset>.<index>") and
// payloads, in order per partition; perKey holds each key's values in
// partition order.
func readTopic(t *testing.T, brokers []string, topic string, want int) (ids []string, pls []payload) {
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
			t.Fatalf("read %d of %d records: %v", len(ids), want, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var id string
			for _, h := range r.Headers {
				if h.Key == "pgq-id" {
					id = string(h.Value)
				}
			}
			var p payload
			if err := json.Unmarshal(r.Value, &p); err != nil {
				t.Fatalf("payload %q: %v", r.Value, err)
			}
			ids = append(ids, id)
			pls = append(pls, p)
		})
	}
}

// checkAtLeastOnce checks that every change is in the topic, that the
// first occurrences of each key are in order, and returns the number of
// duplicates.
func checkAtLeastOnce(t *testing.T, src *source, ids []string, pls []payload) (dups int) {
	t.Helper()
	src.mu.Lock()
	defer src.mu.Unlock()
	seen := map[string]bool{}
	last := map[int]int{}
	for i, id := range ids {
		if seen[id] {
			dups++
			continue
		}
		seen[id] = true
		k, ok := src.ids[id]
		if !ok || pls[i].Change.New.ID != k {
			t.Fatalf("record %s: not a change of the journal or wrong key", id)
		}
		if v := pls[i].Change.New.V; v <= last[k] {
			t.Fatalf("key %d: value %d after %d: per-key order broken", k, v, last[k])
		} else {
			last[k] = v
		}
	}
	if len(seen) != src.changes {
		t.Fatalf("topic holds %d distinct changes, journal %d", len(seen), src.changes)
	}
	return dups
}

// TestKafkaResume stops and restarts the bridge (cleanly) under write
// load, with topic creation: every change is in the topic exactly once, in
// per-key order, and each restart resumes from the group's cursor.
func TestKafkaResume(t *testing.T) {
	brokers := kafkaBrokers(t)
	src := startSource(t, 50)
	stop := make(chan struct{})
	wg := writer(src, stop)
	topic := "pgq.public.t"
	if os.Getenv("PGQ_TEST_KAFKA_BROKERS") != "" {
		topic = "pgqtest" + time.Now().Format("150405") + ".{schema}.{table}"
	}
	for i := 0; i < 4; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		p, err := kafka.New(ctx, kafka.Options{Brokers: brokers, Topic: topic, CreateTopics: true, Partitions: 6})
		if err != nil {
			t.Fatal(err)
		}
		_, done := startBridge(t, ctx, p, src.addr)
		time.Sleep(time.Duration(200+rand.IntN(300)) * time.Millisecond)
		if i == 3 {
			close(stop)
			wg.Wait()
			src.waitCaughtUp(t, 30*time.Second)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		_ = p.Close()
	}
	ids, pls := readTopic(t, brokers, strings.ReplaceAll(strings.ReplaceAll(topic, "{schema}", "public"), "{table}", "t"), src.changes)
	if dups := checkAtLeastOnce(t, src, ids, pls); dups != 0 {
		t.Fatalf("%d duplicates after clean restarts", dups)
	}
	t.Logf("%d changes exactly once across 3 clean restarts", len(ids))
}

// TestKafkaKillUnderLoad SIGKILLs the bridge process repeatedly under
// write load against kfake: every change is in the topic at least once,
// first occurrences in per-key order; duplicates (batches acknowledged by
// Kafka but not committed to pgq when killed) are counted.
func TestKafkaKillUnderLoad(t *testing.T) {
	if testing.Short() || os.Getenv("PGQ_TEST_KAFKA_BROKERS") != "" {
		t.Skip("starts processes; the child uses the default topic on kfake only")
	}
	brokers := kafkaBrokers(t)
	src := startSource(t, 50)
	stop := make(chan struct{})
	wg := writer(src, stop)
	kills := 6
	for i := 0; i < kills; i++ {
		cmd := startChild(t, "kafka", brokers[0], src.addr)
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	close(stop)
	wg.Wait()
	cmd := startChild(t, "kafka", brokers[0], src.addr)
	src.waitCaughtUp(t, 30*time.Second)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	ids, pls := readTopic(t, brokers, "pgq.public.t", src.changes)
	dups := checkAtLeastOnce(t, src, ids, pls)
	t.Logf("%d kills, %d changes all present, first occurrences in per-key order; %d duplicate records read (re-published batches)", kills, src.changes, dups)
}
