package jetstream_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

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

// TestJetStreamKillBetweenEvents SIGKILLs a bridge process (Debezium's
// format) right after the stream acknowledged the delete of a
// key-changing update and before its create, then runs one to the end:
// the create follows (its own Nats-Msg-Id, which the stream's duplicate
// window does not drop) and every event is in the stream exactly once. A
// delete has no tombstone on JetStream (no Tombstoner: an empty NATS
// message deletes nothing), and the truncate, whose Debezium key is
// null, carries no pgq-key header.
func TestJetStreamKillBetweenEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ns := bridgetest.StartNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	p, err := jetstream.New(context.Background(), jetstream.Options{URL: ns.ClientURL(), CreateStream: true, Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
	src := bridgetest.StartSource(t, 50)
	src.Append(5)
	del, trunc := src.AppendDelete()
	rekey := src.AppendKeyChange()
	src.Append(5)
	bridgetest.KillBetween(t, "jetstream", ns.ClientURL(), src, "debezium", rekey)

	msgs := bridgetest.JetStreamMessages(t, ns.ClientURL(), "PGQ")
	byID := map[string]bridgetest.Bridged{}
	for _, m := range msgs {
		id := m.Hdr["pgq-id"]
		if _, dup := byID[id]; dup {
			t.Fatalf("message %s twice", id)
		}
		byID[id] = m
	}
	events := map[string]string{del: "d", rekey: "d", bridge.EventID(rekey, 1): "c", trunc: "t"}
	if len(msgs) != src.Changes+len(events) {
		t.Errorf("%d messages, want %d updates and %d other events", len(msgs), src.Changes, len(events))
	}
	for id, op := range events {
		var ev struct{ Op string }
		if err := json.Unmarshal(byID[id].Body, &ev); err != nil || ev.Op != op {
			t.Errorf("%s: %s, want op %s", id, byID[id].Body, op)
		}
	}
	if k, ok := byID[trunc].Hdr[jetstream.HeaderKey]; ok {
		t.Errorf("truncate: %s header %q, want none (Debezium's key is null)", jetstream.HeaderKey, k)
	}
	if k := byID[del].Hdr[jetstream.HeaderKey]; k != `{"id":-3}` {
		t.Errorf("delete: %s %q, want {\"id\":-3}", jetstream.HeaderKey, k)
	}
	for id, m := range byID {
		if _, ok := events[id]; !ok {
			bridgetest.CheckFormat(t, src, format.Debezium, "ce-", m)
		}
	}
}
