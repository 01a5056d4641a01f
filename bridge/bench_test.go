package bridge_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/client"
)

// BenchmarkBridgeVsRawPublish measures the bridge (fetch from pgq over
// HTTP, build the messages, async-publish with a 256-message window, wait
// for every ack, commit the group) against a plain nats.go async publisher
// sending the same messages (same subjects, payloads and headers, so the
// same sizes, the same window) to a JetStream stream with file storage, one replica, on the
// same in-process nats-server in the same run. It reports both rates and
// their ratio (target ≥ 0.8).
func BenchmarkBridgeVsRawPublish(b *testing.B) {
	const txs = 20000
	for b.Loop() {
		ns := startNATS(b, b.TempDir(), 0)
		url := ns.ClientURL()
		src := startSource(b, 1000)
		for range txs / 1000 {
			src.append(1000)
		}
		// The messages, as the bridge builds them, for the raw publisher.
		var msgs []bridge.Message
		for off := src.j.FirstOffset(); off <= src.j.LastOffset(); off++ {
			tx, err := src.j.Read(off)
			if err != nil {
				b.Fatal(err)
			}
			msgs = bridge.AppendMessages(msgs, tx)
		}

		// The bridge.
		ctx, cancel := context.WithCancel(context.Background())
		p, err := jetstream.New(ctx, jetstream.Options{URL: url, CreateStream: true, Window: 256})
		if err != nil {
			b.Fatal(err)
		}
		cl, err := client.Dial(src.addr, client.Options{})
		if err != nil {
			b.Fatal(err)
		}
		br, err := bridge.New(bridge.Options{Client: cl, Group: "g", Member: "bench", Publisher: p, MaxTransactions: 1000,
			Wait: 100 * time.Millisecond, LeaseTTL: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- br.Run(ctx) }()
		src.waitCaughtUp(b, 5*time.Minute)
		bridgeTook := time.Since(start)
		cancel()
		<-done
		_ = p.Close()

		// The reference: plain async publishes of the same messages.
		nc, err := nats.Connect(url)
		if err != nil {
			b.Fatal(err)
		}
		js, err := natsjs.New(nc, natsjs.WithPublishAsyncMaxPending(256))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := js.CreateStream(context.Background(), natsjs.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}, Storage: natsjs.FileStorage, Replicas: 1}); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		for _, m := range msgs {
			msg := nats.NewMsg("raw." + m.Schema + "." + m.Table)
			msg.Data = m.Payload
			msg.Header.Set(nats.MsgIdHdr, m.ID)
			for _, h := range m.Headers() { // the same message size
				msg.Header.Set(h[0], h[1])
			}
			msg.Header.Set("pgq-key", string(m.Key))
			if _, err := js.PublishMsgAsync(msg); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(5 * time.Minute):
			b.Fatal("raw publish did not complete")
		}
		rawTook := time.Since(start)
		nc.Close()
		ns.Shutdown()

		bridgeRate := float64(len(msgs)) / bridgeTook.Seconds()
		rawRate := float64(len(msgs)) / rawTook.Seconds()
		b.ReportMetric(bridgeRate, "bridge_msgs/s")
		b.ReportMetric(rawRate, "raw_msgs/s")
		b.ReportMetric(bridgeRate/rawRate, "ratio")
		b.Logf("%d messages: bridge %s (%.0f/s), raw nats.go async %s (%.0f/s), ratio %.2f", len(msgs), bridgeTook, bridgeRate, rawTook, rawRate, bridgeRate/rawRate)
	}
}
