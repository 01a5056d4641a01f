package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/internal/bridgetest"
)

// BenchmarkBridgeVsRawPublish measures the bridge (fetch from pgq over
// HTTP, build the messages, async-publish with a 256-message window, wait
// for every ack, commit the group; the next fetch overlaps the acks)
// against a plain nats.go async publisher sending the same messages (same
// payloads and headers, so the same sizes, the same window) to a JetStream
// stream with file storage, one replica, on the same in-process
// nats-server in the same run. The two alternate, five rounds each (a new
// group and stream per round), and the best round of each is reported
// with their ratio (target ≥ 0.8): on a shared machine the best round is
// the least disturbed one. cpu_ratio is the same comparison in CPU time
// of the whole process (nats-server, pgq and the bridge are all in it),
// raw over bridge: it does not depend on what else the machine runs.
func BenchmarkBridgeVsRawPublish(b *testing.B) {
	const txs, rounds = 20000, 5
	for b.Loop() {
		ns := bridgetest.StartNATS(b, b.TempDir(), 0)
		url := ns.ClientURL()
		src := bridgetest.StartSource(b, 1000)
		for range txs / 1000 {
			src.Append(1000)
		}
		// The messages, as the bridge builds them, for the raw publisher.
		var msgs []bridge.Message
		for off := src.Journal.FirstOffset(); off <= src.Journal.LastOffset(); off++ {
			tx, err := src.Journal.Read(off)
			if err != nil {
				b.Fatal(err)
			}
			msgs = bridge.AppendMessages(msgs, tx)
		}
		var bridgeTook, rawTook []time.Duration
		var bridgeCPU, rawCPU time.Duration
		for r := range rounds {
			c := bridgetest.CPUTime(b)
			bridgeTook = append(bridgeTook, benchBridgeRound(b, src, url, r))
			c2 := bridgetest.CPUTime(b)
			rawTook = append(rawTook, benchRawRound(b, url, msgs, r))
			bridgeCPU, rawCPU = bridgeCPU+c2-c, rawCPU+bridgetest.CPUTime(b)-c2
		}
		ns.Shutdown()

		bridgeRate := float64(len(msgs)) / slices.Min(bridgeTook).Seconds()
		rawRate := float64(len(msgs)) / slices.Min(rawTook).Seconds()
		b.ReportMetric(bridgeRate, "bridge_msgs/s")
		b.ReportMetric(rawRate, "raw_msgs/s")
		b.ReportMetric(bridgeRate/rawRate, "ratio")
		b.ReportMetric(float64(rawCPU)/float64(bridgeCPU), "cpu_ratio")
		b.Logf("%d messages: bridge %v (best %.0f/s), raw nats.go async %v (best %.0f/s), ratio %.2f; CPU bridge %s raw %s, ratio %.2f",
			len(msgs), bridgeTook, bridgeRate, rawTook, rawRate, bridgeRate/rawRate, bridgeCPU, rawCPU, float64(rawCPU)/float64(bridgeCPU))
	}
}

// benchBridgeRound bridges the whole journal of src through a new group
// into a new stream and returns the time until the group committed it all.
func benchBridgeRound(b *testing.B, src *bridgetest.Source, url string, r int) time.Duration {
	p, err := jetstream.New(context.Background(), jetstream.Options{URL: url, Stream: fmt.Sprintf("B%d", r), Subject: fmt.Sprintf("b%d.{schema}.{table}", r), CreateStream: true, Window: 256})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	return bridgetest.BridgeRound(b, src, fmt.Sprintf("bench%d", r), p)
}

// benchRawRound publishes msgs with plain nats.go async publishes into a
// new stream and returns the time until the last ack.
func benchRawRound(b *testing.B, url string, msgs []bridge.Message, r int) time.Duration {
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc, natsjs.WithPublishAsyncMaxPending(256))
	if err != nil {
		b.Fatal(err)
	}
	prefix := fmt.Sprintf("raw%d.", r)
	if _, err := js.CreateStream(context.Background(), natsjs.StreamConfig{Name: fmt.Sprintf("RAW%d", r), Subjects: []string{prefix + ">"}, Storage: natsjs.FileStorage, Replicas: 1}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for _, m := range msgs {
		msg := nats.NewMsg(prefix + m.Schema + "." + m.Table)
		msg.Data = m.Payload
		msg.Header.Set(nats.MsgIdHdr, m.ID)
		for _, h := range m.Headers() { // the same message size
			msg.Header.Set(h[0], h[1])
		}
		msg.Header.Set(jetstream.HeaderKey, string(m.Key))
		for {
			_, err := js.PublishMsgAsync(msg)
			if errors.Is(err, natsjs.ErrTooManyStalledMsgs) {
				continue // the window stayed full for 200ms (a loaded machine)
			}
			if err != nil {
				b.Fatal(err)
			}
			break
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		b.Fatal("raw publish did not complete")
	}
	return time.Since(start)
}
