package bridge_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
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
// net/http client to the same receiver, in the same run. pgq's server,
// the bridge and the receiver share this machine's cores. Two receivers,
// both real HTTP servers answering 204:
//
//   - discard reads each body and throws it away: the receiver costs
//     nothing, so the plain loop is as fast as this machine POSTs, and the
//     ratio is bound by the CPU the bridge spends reading pgq (fetch,
//     decode, build) on the same cores;
//   - decode verifies the signature (when there is one: the plain loop
//     sends none) and decodes each body into the receiver's own structs,
//     the least a receiver does before storing a batch.
//
// The arms alternate, three rounds each (a new group per round, each
// round starting with another arm, each arm after a collection); the
// best round of each and their ratio (goal ≥ 0.8) are reported, with the
// process's CPU time per arm. A third arm (discard receiver) runs the
// bridge with a publisher that acknowledges at once: the bridge's own
// bound (fetching from pgq, decoding, building), which the POSTs
// overlap with.
func BenchmarkWebhookVsPlainPost(b *testing.B) {
	const txs, rounds, batch = 100000, 3, 100
	for b.Loop() {
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
		n := float64(len(pl.ends))
		for k, rcv := range []struct {
			name string
			noop bool
		}{{"discard", true}, {"decode", false}} {
			url := startReceiverProcess(b, rcv.name)
			var hookTook, plainTook, noopTook []time.Duration
			var cpu [3]time.Duration
			arms := []func(r int){
				func(r int) { hookTook = append(hookTook, benchWebhookRound(b, src, url, r, batch, nil)) },
				func(int) { plainTook = append(plainTook, benchPlainPostRound(b, url, &pl, batch)) },
				func(r int) {
					noopTook = append(noopTook, benchWebhookRound(b, src, url, r, batch, noopPublisher{}))
				},
			}
			if !rcv.noop {
				arms = arms[:2]
			}
			for r := range rounds {
				for a := range arms {
					runtime.GC()
					c0 := cpuTime(b)
					arms[(r+a)%len(arms)](10*k + r)
					cpu[(r+a)%len(arms)] += cpuTime(b) - c0
				}
			}
			hookRate := n / slices.Min(hookTook).Seconds()
			plainRate := n / slices.Min(plainTook).Seconds()
			unit := "ratio"
			if k > 0 {
				unit = "ratio_" + rcv.name
			}
			b.ReportMetric(hookRate/plainRate, unit)
			b.Logf("%s receiver, %d changes: webhook %v (best %.0f/s, CPU %v a round), plain POST loop %v (best %.0f/s, CPU %v a round): ratio %.2f",
				rcv.name, len(pl.ends), hookTook, hookRate, cpu[0]/rounds, plainTook, plainRate, cpu[1]/rounds, hookRate/plainRate)
			if rcv.noop {
				noopRate := n / slices.Min(noopTook).Seconds()
				b.ReportMetric(hookRate/noopRate, "fetch_bound_ratio")
				b.Logf("bridge with a no-op publisher (the fetch bound): %v (best %.0f/s, CPU %v a round); webhook/no-op %.2f",
					noopTook, noopRate, cpu[2]/rounds, hookRate/noopRate)
			}
		}
	}
}

// startReceiverProcess runs this test binary as a receiver of kind (see
// runReceiver) until the benchmark ends and returns its URL. The receiver
// is a process of its own, as a deployed one is: in this process its
// garbage and goroutines would slow the bridge, and the bridge's its.
func startReceiverProcess(b *testing.B, kind string) string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PGQ_BENCH_RECEIVER="+kind)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("receiver %s: %v", kind, err)
	}
	return "http://" + strings.TrimSpace(line)
}

// runReceiver serves a benchmark receiver on a free port (printed on
// stdout) until killed; every answer is 204 unless the request is bad:
//   - discard reads each body and throws it away;
//   - decode verifies the signature when there is one and decodes the
//     body into payloads.
func runReceiver(kind string) error {
	var h http.HandlerFunc
	switch kind {
	case "discard":
		h = func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusNoContent)
		}
	case "decode":
		h = func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			if sig := r.Header.Get(webhook.HeaderSignature); sig != "" {
				if err := webhook.Verify([]byte(webhookSecret), body, sig, time.Now(), time.Minute); err != nil {
					http.Error(w, err.Error(), http.StatusUnauthorized)
					return
				}
			}
			var pls []payload
			if err := json.Unmarshal(body, &pls); err != nil || len(pls) == 0 {
				http.Error(w, fmt.Sprintf("bad body: %v (%d changes)", err, len(pls)), http.StatusBadRequest)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}
	default:
		return fmt.Errorf("unknown receiver %q", kind)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	return http.Serve(ln, h)
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
