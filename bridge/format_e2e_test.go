package bridge_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/bridge/kafka"
	"github.com/pgq-dev/pgq/format"
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
			nc, err := nats.Connect(ns.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, err := njs.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			st, err := js.Stream(context.Background(), stream)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := st.GetMsg(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			m := bridged{key: raw.Header.Get(jetstream.HeaderKey), body: raw.Data, hdr: map[string]string{"pgq-id": raw.Header.Get(njs.MsgIDHeader)}}
			for h, v := range raw.Header {
				m.hdr[h] = v[0]
			}
			m.hdr["pgq-id"] = raw.Header.Get(njs.MsgIDHeader)
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
			m := bridged{key: string(r.Key), body: r.Value, hdr: map[string]string{}}
			for _, h := range r.Headers {
				m.hdr[h.Key] = string(h.Value)
			}
			checkFormat(t, src, f, "ce_", m)
		})
	}
}
