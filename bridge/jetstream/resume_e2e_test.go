package jetstream_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/bridgetest"
)

// TestJetStreamResumesBetweenEvents: as bridge/kafka's
// TestKafkaResumesBetweenEvents, for a stream whose last message is the
// delete of a key-changing update: the create follows it (with its own
// Nats-Msg-Id, which the stream does not drop as a duplicate), nothing
// before it comes again.
func TestJetStreamResumesBetweenEvents(t *testing.T) {
	ns := bridgetest.StartNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	ctx := context.Background()
	src := bridgetest.StartSource(t, 50)
	id := src.AppendKeyChange()
	js := bridgetest.JSClient(t, ns.ClientURL())
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
	bridgetest.BridgeFormat(t, p, src, format.Debezium)
	msgs := bridgetest.JetStreamMessages(t, ns.ClientURL(), "BETWEEN")
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.Hdr["pgq-id"])
	}
	if len(msgs) != 1+src.Changes || ids[0] != id || ids[1] != bridge.EventID(id, 1) {
		t.Fatalf("messages %q: want %s, %s and the %d changes after them", ids, id, bridge.EventID(id, 1), src.Changes-1)
	}
	var ev struct{ Op string }
	if err := json.Unmarshal(msgs[1].Body, &ev); err != nil || ev.Op != "c" {
		t.Fatalf("after the held delete: %s, want the create", msgs[1].Body)
	}
	for _, m := range msgs[2:] {
		bridgetest.CheckFormat(t, src, format.Debezium, "ce-", m)
	}
}
