package bridge_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/webhook"
	"github.com/pgq-dev/pgq/client"
)

// BenchmarkWebhookVsPlainPost measures the webhook bridge (fetch from pgq
// over HTTP, build, sign, POST batches of 100 changes one at a time, wait
// for the 2xx, commit) against a plain loop POSTing the same bodies (JSON
// arrays of the same payloads, 100 a request, unsigned) with one
// net/http client to the same receiver (a real HTTP server that reads
// each body and answers 204), in the same run. They alternate, three
// rounds each (a new group per round); the best round of each and their
// ratio (goal ≥ 0.8) are reported. A third arm runs the bridge with a
// publisher that acknowledges at once: the bridge's own bound (fetching
// from pgq, decoding, building), which the POSTs overlap with.
func BenchmarkWebhookVsPlainPost(b *testing.B) {
	const txs, rounds, batch = 100000, 3, 100
	for b.Loop() {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusNoContent)
		}))
		src := startSource(b, 1000)
		for range txs / 1000 {
			src.append(1000)
		}
		var msgs []bridge.Message
		for off := src.j.FirstOffset(); off <= src.j.LastOffset(); off++ {
			tx, err := src.j.Read(off)
			if err != nil {
				b.Fatal(err)
			}
			msgs = bridge.AppendMessages(msgs, tx)
		}
		var hookTook, plainTook, noopTook []time.Duration
		for r := range rounds {
			hookTook = append(hookTook, benchWebhookRound(b, src, srv.URL, r, batch, nil))
			plainTook = append(plainTook, benchPlainPostRound(b, srv.URL, msgs, batch))
			noopTook = append(noopTook, benchWebhookRound(b, src, srv.URL, r, batch, noopPublisher{}))
		}
		srv.Close()
		hookRate := float64(len(msgs)) / slices.Min(hookTook).Seconds()
		plainRate := float64(len(msgs)) / slices.Min(plainTook).Seconds()
		b.ReportMetric(hookRate, "webhook_changes/s")
		b.ReportMetric(plainRate, "plain_changes/s")
		b.ReportMetric(hookRate/plainRate, "ratio")
		noopRate := float64(len(msgs)) / slices.Min(noopTook).Seconds()
		b.ReportMetric(hookRate/noopRate, "fetch_bound_ratio")
		b.Logf("%d changes: webhook %v (best %.0f/s), plain POST loop %v (best %.0f/s), ratio %.2f; bridge with a no-op publisher (the fetch bound) %v (best %.0f/s), webhook/no-op %.2f",
			len(msgs), hookTook, hookRate, plainTook, plainRate, hookRate/plainRate, noopTook, noopRate, hookRate/noopRate)
	}
}

// noopPublisher acknowledges everything at once: the bridge's speed
// without a sink (fetch, decode, build, commit).
type noopPublisher struct{}

func (noopPublisher) Publish(_ context.Context, _ []bridge.Message, acked []bool) error {
	for i := range acked {
		acked[i] = true
	}
	return nil
}

func (noopPublisher) Name() string { return "noop" }

// benchWebhookRound bridges src's journal through a new group into url
// (or into p when not nil) and returns the time until all is committed.
func benchWebhookRound(b *testing.B, src *source, url string, r, batch int, p bridge.Publisher) time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	group := fmt.Sprintf("hook%d", r)
	if p == nil {
		hp, err := webhook.New(webhook.Options{URL: url, Secret: []byte(webhookSecret), BatchSize: batch})
		if err != nil {
			b.Fatal(err)
		}
		p = hp
	} else {
		group = fmt.Sprintf("noop%d", r)
	}
	cl, err := client.New(src.addr, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := cl.CreateGroup(ctx, api.CreateRequest{Name: group, From: "earliest"}); err != nil {
		b.Fatal(err)
	}
	br, err := bridge.New(bridge.Options{Client: cl, Group: group, Member: "bench", Publisher: p, MaxTransactions: 1000,
		Wait: 100 * time.Millisecond, LeaseTTL: 10 * time.Second, LagInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- br.Run(ctx) }()
	last := src.j.LastOffset()
	for {
		gi, err := src.m.Info(ctx, group)
		if err != nil {
			b.Fatal(err)
		}
		if gi.CommittedOffset >= last {
			break
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("bridge not caught up: %+v", gi)
		}
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return took
}

// benchPlainPostRound POSTs msgs' payloads in JSON arrays of batch, one
// request at a time, and returns the time until the last answer.
func benchPlainPostRound(b *testing.B, url string, msgs []bridge.Message, batch int) time.Duration {
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	var body bytes.Buffer
	start := time.Now()
	for i := 0; i < len(msgs); i += batch {
		body.Reset()
		body.WriteByte('[')
		for k, m := range msgs[i:min(i+batch, len(msgs))] {
			if k > 0 {
				body.WriteByte(',')
			}
			body.Write(m.Payload)
		}
		body.WriteByte(']')
		resp, err := hc.Post(url, "application/json", bytes.NewReader(body.Bytes()))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			b.Fatal(resp.Status)
		}
	}
	return time.Since(start)
}
