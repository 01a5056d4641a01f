package webhook_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/webhook"
	"github.com/pgq-dev/pgq/internal/bridgetest"
)

// BenchmarkWebhookVsPlainPost measures the webhook bridge (fetch from pgq
// over HTTP, build, sign, POST batches of 100 changes, wait for the 2xx,
// commit) against a plain loop POSTing the same bodies (JSON arrays of
// the same payloads, 100 a request, unsigned, one request at a time)
// with one net/http client to the same receiver, in the same run. The
// bridge runs with its default (one request at a time, all in order) and
// with --concurrency 4 (four key lanes). pgq's server and the bridge
// share this process, the receiver is a process of its own, all on this
// machine's cores. Two receivers, both real HTTP servers answering 204:
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
// best round of each, its ratio to the plain loop's best (goal ≥ 0.8)
// and the process's CPU time per round are reported. With the discard
// receiver one more arm runs the bridge with a publisher that
// acknowledges at once: the bridge's own bound (fetching from pgq,
// decoding, building), which the POSTs overlap with.
func BenchmarkWebhookVsPlainPost(b *testing.B) {
	const txs, rounds, batch = 100000, 3, 100
	for b.Loop() {
		src := bridgetest.StartSource(b, 1000)
		for range txs / 1000 {
			src.Append(1000)
		}
		// The plain loop's payloads, in one pointer-free array (300k
		// Messages kept live would make every collection during the
		// bridge's rounds scan them, a cost no deployed bridge has).
		var pl payloads
		for off := src.Journal.FirstOffset(); off <= src.Journal.LastOffset(); off++ {
			tx, err := src.Journal.Read(off)
			if err != nil {
				b.Fatal(err)
			}
			for i := range tx.Changes {
				pl.all = bridge.AppendPayload(pl.all, tx, i)
				pl.ends = append(pl.ends, len(pl.all))
			}
		}
		n := float64(len(pl.ends))
		for k, rcv := range []string{"discard", "decode"} {
			url := startReceiverProcess(b, rcv)
			type arm struct {
				name string
				run  func(group string) time.Duration
				took []time.Duration
				cpu  time.Duration
			}
			hook := func(lanes int) func(string) time.Duration {
				return func(group string) time.Duration {
					hp, err := webhook.New(webhook.Options{URL: url, Secret: webhookKey, BatchSize: batch, Concurrency: lanes})
					if err != nil {
						b.Fatal(err)
					}
					return bridgetest.BridgeRound(b, src, group, hp)
				}
			}
			arms := []*arm{
				{name: "webhook", run: hook(1)},
				{name: "webhook --concurrency 4", run: hook(4)},
				{name: "plain POST loop", run: func(string) time.Duration { return benchPlainPostRound(b, url, &pl, batch) }},
			}
			if k == 0 {
				arms = append(arms, &arm{name: "bridge with a no-op publisher (the fetch bound)",
					run: func(group string) time.Duration { return bridgetest.BridgeRound(b, src, group, noopPublisher{}) }})
			}
			for r := range rounds {
				for i := range arms {
					a := arms[(r+i)%len(arms)]
					runtime.GC()
					c0 := bridgetest.CPUTime(b)
					a.took = append(a.took, a.run(fmt.Sprintf("%s%d%d", rcv, (r+i)%len(arms), r)))
					a.cpu += bridgetest.CPUTime(b) - c0
				}
			}
			rate := func(a *arm) float64 { return n / slices.Min(a.took).Seconds() }
			plain := rate(arms[2])
			for i, a := range arms {
				b.Logf("%s receiver, %d changes: %s %v (best %.0f/s, CPU %v a round): %.2f× the plain loop",
					rcv, len(pl.ends), a.name, a.took, rate(a), a.cpu/rounds, rate(a)/plain)
				if i < 2 {
					unit := "ratio_" + rcv
					if i == 1 {
						unit += "_c4"
					}
					b.ReportMetric(rate(a)/plain, unit)
				}
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
			if r.Header.Get(webhook.HeaderWebhookSignature) != "" {
				if err := verifyStandard(body, r.Header); err != nil {
					http.Error(w, err.Error(), http.StatusUnauthorized)
					return
				}
			}
			var pls []bridgetest.Payload
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
