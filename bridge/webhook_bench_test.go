package bridge_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
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
		// The plain loop's payloads, in one pointer-free array (300k
		// Messages kept live would make every collection during the
		// bridge's rounds scan them, a cost no deployed bridge has).
		var pl payloads
		for off := src.j.FirstOffset(); off <= src.j.LastOffset(); off++ {
			tx, err := src.j.Read(off)
			if err != nil {
				b.Fatal(err)
			}
			for i := range tx.Changes {
				pl.all = bridge.AppendPayload(pl.all, tx, i)
				pl.ends = append(pl.ends, len(pl.all))
			}
		}
		var hookTook, plainTook, noopTook []time.Duration
		var cpu [3]time.Duration
		arms := []func(r int){
			func(r int) { hookTook = append(hookTook, benchWebhookRound(b, src, srv.URL, r, batch, nil)) },
			func(int) { plainTook = append(plainTook, benchPlainPostRound(b, srv.URL, &pl, batch)) },
			func(r int) {
				noopTook = append(noopTook, benchWebhookRound(b, src, srv.URL, r, batch, noopPublisher{}))
			},
		}
		for r := range rounds {
			// Each round starts with another arm, each arm after a
			// collection: the first arm after the setup (300k messages
			// built for the plain loop) paid for the garbage of it.
			for k := range arms {
				runtime.GC()
				c0 := cpuTime(b)
				arms[(r+k)%len(arms)](r)
				cpu[(r+k)%len(arms)] += cpuTime(b) - c0
			}
		}
		srv.Close()
		hookRate := float64(len(pl.ends)) / slices.Min(hookTook).Seconds()
		plainRate := float64(len(pl.ends)) / slices.Min(plainTook).Seconds()
		b.ReportMetric(hookRate, "webhook_changes/s")
		b.ReportMetric(plainRate, "plain_changes/s")
		b.ReportMetric(hookRate/plainRate, "ratio")
		noopRate := float64(len(pl.ends)) / slices.Min(noopTook).Seconds()
		b.ReportMetric(hookRate/noopRate, "fetch_bound_ratio")
		b.Logf("CPU per round (process, all goroutines): webhook %v, plain POST loop %v, no-op bridge %v",
			cpu[0]/rounds, cpu[1]/rounds, cpu[2]/rounds)
		b.Logf("%d changes: webhook %v (best %.0f/s), plain POST loop %v (best %.0f/s), ratio %.2f; bridge with a no-op publisher (the fetch bound) %v (best %.0f/s), webhook/no-op %.2f",
			len(pl.ends), hookTook, hookRate, plainTook, plainRate, hookRate/plainRate, noopTook, noopRate, hookRate/noopRate)
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

// payloads are the changes' payloads back to back: change i is
// all[ends[i-1]:ends[i]].
type payloads struct {
	all  []byte
	ends []int
}

// benchPlainPostRound POSTs pl's payloads in JSON arrays of batch, one
// request at a time, and returns the time until the last answer.
func benchPlainPostRound(b *testing.B, url string, pl *payloads, batch int) time.Duration {
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	var body bytes.Buffer
	start := time.Now()
	for i := 0; i < len(pl.ends); i += batch {
		body.Reset()
		body.WriteByte('[')
		for k := i; k < min(i+batch, len(pl.ends)); k++ {
			if k > i {
				body.WriteByte(',')
			}
			from := 0
			if k > 0 {
				from = pl.ends[k-1]
			}
			body.Write(pl.all[from:pl.ends[k]])
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
