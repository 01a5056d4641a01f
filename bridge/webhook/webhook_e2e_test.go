package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/webhook"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/bridgetest"
	"github.com/pgq-dev/pgq/internal/syncbuf"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// webhookSecret is a Standard Webhooks secret (the specification's
// example: a 24-byte key; the child bridge signs with it too) and
// webhookKey its key, what Options.Secret takes.
const webhookSecret = bridgetest.WebhookSecret

var webhookKey = func() []byte {
	key, legacy, err := webhook.ParseSecret(webhookSecret)
	if err != nil || legacy {
		panic(fmt.Sprintf("test secret: %v (legacy %v)", err, legacy))
	}
	return key
}()

// verifyStandard verifies a request's webhook-* headers with the
// Standard Webhooks Go library, as a receiver written from that
// project's documentation would, and the deprecated Pgq-Signature with
// the same key.
func verifyStandard(body []byte, h http.Header) error {
	wh, err := standardwebhooks.NewWebhook(webhookSecret)
	if err != nil {
		return err
	}
	if err := wh.Verify(body, h); err != nil {
		return err
	}
	return webhook.Verify(webhookKey, body, h.Get(webhook.HeaderSignature), time.Now(), time.Minute)
}

// stableID is the id a receiver names a change of a pgq-format body by:
// "<commit_lsn>.<ordinal>", both signed in the body.
func stableID(p bridgetest.Payload) string { return fmt.Sprintf("%s.%d", p.CommitLSN, p.Ordinal) }

// receiver is a webhook endpoint over a real HTTP server. It verifies
// every request's signature with the Standard Webhooks library and
// records, in arrival order, the changes of the requests it answered 2xx
// (acked; a duplicate is recognized by its stable id, read from the
// signed body). fail is the share of requests answered 500 (half of them
// after "storing" the batch: the redelivery is a duplicate on the wire
// the receiver must recognize), hang the share left unanswered until
// the client gives up.
type receiver struct {
	fail, hang float64
	t          testing.TB

	mu          sync.Mutex
	ids         []string             // acknowledged, in order
	pls         []bridgetest.Payload // their payloads
	sizes       []int                // changes of each acknowledged request
	stored      map[string]int
	requests    int
	inFlight    int // requests being served; maxInFlight the most at once
	maxInFlight int
	failed      int
	hung        int
	badSig      int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	rc.inFlight++
	rc.maxInFlight = max(rc.maxInFlight, rc.inFlight)
	rc.mu.Unlock()
	defer func() {
		rc.mu.Lock()
		rc.inFlight--
		rc.mu.Unlock()
	}()
	time.Sleep(time.Millisecond) // a receiver's own work: requests overlap when sent at once
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if err := verifyStandard(body, r.Header); err != nil {
		rc.mu.Lock()
		rc.badSig++
		rc.mu.Unlock()
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	x := rand.Float64()
	rc.mu.Lock()
	rc.requests++
	if x < rc.hang {
		rc.hung++
		rc.mu.Unlock()
		<-r.Context().Done() // the client's timeout ends it
		return
	}
	if x < rc.hang+rc.fail/2 {
		rc.failed++
		rc.mu.Unlock()
		http.Error(w, "refused", http.StatusInternalServerError)
		return
	}
	var pls []bridgetest.Payload
	if err := json.Unmarshal(body, &pls); err != nil {
		rc.mu.Unlock()
		rc.t.Errorf("body %q: %v", body, err)
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	ids := make([]string, len(pls))
	for i, p := range pls {
		ids[i] = stableID(p)
	}
	if x < rc.hang+rc.fail { // stored, but the answer says no
		rc.failed++
		for _, id := range ids {
			rc.stored[id]++
		}
		rc.mu.Unlock()
		http.Error(w, "refused after storing", http.StatusServiceUnavailable)
		return
	}
	for _, id := range ids {
		rc.stored[id]++
	}
	rc.ids = append(rc.ids, ids...)
	rc.pls = append(rc.pls, pls...)
	rc.sizes = append(rc.sizes, len(pls))
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func startReceiver(t *testing.T, fail, hang float64) (*receiver, *httptest.Server) {
	rc := &receiver{fail: fail, hang: hang, t: t, stored: map[string]int{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return rc, srv
}

// check: every change acknowledged (first acknowledgements in per-key
// order), duplicates only recognizable ones; returns the duplicates.
func (rc *receiver) check(t *testing.T, src *bridgetest.Source) int {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.badSig > 0 {
		t.Fatalf("%d requests with a bad signature", rc.badSig)
	}
	return bridgetest.CheckAtLeastOnce(t, src, rc.ids, rc.pls)
}

// webhookRun bridges src into url in-process (through lanes key lanes)
// under write load for d, then until caught up.
func webhookRun(t *testing.T, src *bridgetest.Source, url string, timeout, d time.Duration, lanes int) {
	t.Helper()
	p, err := webhook.New(webhook.Options{URL: url, Secret: webhookKey, BatchSize: 50, Timeout: timeout, Concurrency: lanes})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := bridge.NewMetrics()
	b, done := bridgetest.StartBridgeWith(t, ctx, p, src.Addr, func(o *bridge.Options) {
		o.BackoffMax, o.BackoffMin, o.Logger, o.Metrics = 50*time.Millisecond, 5*time.Millisecond, slog.New(slog.DiscardHandler), m
	})
	stop := make(chan struct{})
	wg := bridgetest.Writer(src, stop)
	time.Sleep(d)
	close(stop)
	wg.Wait()
	src.WaitCaughtUp(t, 60*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := b.Status(); st.Errors == 0 {
		t.Errorf("no publish errors recorded: %+v", st)
	}
	// The metrics, as `pgq bridge webhook --listen` serves them.
	ms := httptest.NewServer(bridge.Handler(b, m))
	defer ms.Close()
	resp, err := http.Get(ms.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	src.Mu.Lock()
	want := fmt.Sprintf(`pgq_bridge_published_messages_total{broker="webhook",group="g"} %d`, src.Changes)
	src.Mu.Unlock()
	for _, w := range []string{want, `pgq_bridge_errors_total{broker="webhook",group="g",kind="publish"}`} {
		if !strings.Contains(string(text), w) {
			t.Errorf("metrics lack %s:\n%s", w, text)
		}
	}
}

// TestWebhookFlakyReceiver: a receiver failing 30 % of requests (half of
// them after storing the batch): every change acknowledged, first
// acknowledgements in per-key order, each duplicate a redelivery of a
// batch the receiver had answered with an error.
func TestWebhookFlakyReceiver(t *testing.T) {
	t.Run("one lane", func(t *testing.T) {
		if rc := flakyReceiver(t, 1); rc.maxInFlight != 1 {
			t.Fatalf("%d requests in flight at once with one lane", rc.maxInFlight)
		}
	})
	// Four lanes: requests in flight at once (each lane's keys in
	// order), a failure in one lane leaves the others' acknowledgements.
	t.Run("four lanes", func(t *testing.T) {
		rc := flakyReceiver(t, 4)
		if rc.maxInFlight < 2 {
			t.Fatalf("at most %d request in flight with four lanes", rc.maxInFlight)
		}
		t.Logf("up to %d requests in flight", rc.maxInFlight)
	})
}

func flakyReceiver(t *testing.T, lanes int) *receiver {
	rc, srv := startReceiver(t, 0.3, 0)
	src := bridgetest.StartSource(t, 50)
	webhookRun(t, src, srv.URL, 2*time.Second, 2*time.Second, lanes)
	dups := rc.check(t, src)
	if dups != 0 {
		t.Fatalf("%d changes acknowledged twice (only 2xx answers count)", dups)
	}
	redelivered := 0
	for _, n := range rc.stored {
		if n > 1 {
			redelivered++
		}
	}
	t.Logf("%d changes acknowledged once each; %d requests, %d failed; %d changes seen again on the wire (recognized by id)", len(rc.ids), rc.requests, rc.failed, redelivered)
	if rc.failed == 0 || redelivered == 0 {
		t.Fatal("the receiver never failed a request or saw no redelivery: the test tests nothing")
	}
	return rc
}

// TestWebhookHangingReceiver: a receiver that leaves 20 % of requests
// unanswered; the request timeout fails them and the bridge resends.
func TestWebhookHangingReceiver(t *testing.T) {
	rc, srv := startReceiver(t, 0, 0.2)
	src := bridgetest.StartSource(t, 50)
	webhookRun(t, src, srv.URL, 100*time.Millisecond, time.Second, 1)
	if dups := rc.check(t, src); dups != 0 {
		t.Fatalf("%d changes acknowledged twice", dups)
	}
	if rc.hung == 0 {
		t.Fatal("no request hung")
	}
	t.Logf("%d changes acknowledged once each; %d of %d requests hung", len(rc.ids), rc.hung, rc.requests)
}

// TestWebhookMaxAttempts: a receiver failing everything; with
// MaxAttempts 3 the bridge ends with ErrGaveUp naming the batch, having
// committed nothing.
func TestWebhookMaxAttempts(t *testing.T) {
	_, srv := startReceiver(t, 2, 0) // every request fails
	src := bridgetest.StartSource(t, 50)
	src.Append(5)
	p, err := webhook.New(webhook.Options{URL: srv.URL, Secret: webhookKey, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, done := bridgetest.StartBridgeWith(t, context.Background(), p, src.Addr, func(o *bridge.Options) {
		o.BackoffMin, o.BackoffMax, o.Logger = time.Millisecond, 5*time.Millisecond, slog.New(slog.DiscardHandler)
	})
	select {
	case err := <-done:
		if !errors.Is(err, bridge.ErrGaveUp) || !strings.Contains(err.Error(), "attempt 3") || !strings.Contains(err.Error(), "batch ") {
			t.Fatalf("Run: %v, want ErrGaveUp naming the batch after attempt 3", err)
		}
		t.Log(err)
	case <-time.After(30 * time.Second):
		t.Fatal("the bridge did not give up")
	}
	gi, err := bridgetest.DialPGQ(t, src.Addr).Group(context.Background(), "g")
	if err != nil || gi.CommittedOffset != 0 {
		t.Fatalf("committed %+v %v, want nothing", gi, err)
	}
}

// TestWebhookKillUnderLoad SIGKILLs the bridge process repeatedly under
// write load while the receiver fails 30 % of requests: every change
// acknowledged, first acknowledgements in per-key order; what a killed
// bridge had delivered but not committed comes again (at least once),
// recognizable by its ids.
func TestWebhookKillUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	rc, srv := startReceiver(t, 0.3, 0)
	src := bridgetest.StartSource(t, 50)
	stop := make(chan struct{})
	wg := bridgetest.Writer(src, stop)
	kills := 6
	for i := 0; i < kills; i++ {
		cmd := bridgetest.StartChild(t, "webhook", srv.URL, src.Addr)
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
		_ = cmd.Process.Kill() // SIGKILL
		_ = cmd.Wait()
	}
	close(stop)
	wg.Wait()
	cmd := bridgetest.StartChild(t, "webhook", srv.URL, src.Addr)
	src.WaitCaughtUp(t, 60*time.Second)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	dups := rc.check(t, src)
	t.Logf("%d kills, %d changes acknowledged, %d acknowledged again after a kill (recognized by id); %d of %d requests failed", kills, len(rc.ids)-dups, dups, rc.failed, rc.requests)
}

// TestWebhookCloudEvents: with the cloudevents format a request is a
// structured-mode CloudEvents JSON batch whose events carry the stable
// ids of the journal's changes, each once, and the change as data.
func TestWebhookCloudEvents(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	var cts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies, cts = append(bodies, body), append(cts, r.Header.Get("Content-Type"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	src := bridgetest.StartSource(t, 50)
	p, err := webhook.New(webhook.Options{URL: srv.URL, Format: format.CloudEvents, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	bridgetest.BridgeFormat(t, p, src, format.CloudEvents)
	mu.Lock()
	defer mu.Unlock()
	var got []string
	for i, b := range bodies {
		if cts[i] != "application/cloudevents-batch+json" {
			t.Fatalf("Content-Type %q", cts[i])
		}
		var evs []struct {
			SpecVersion string `json:"specversion"`
			ID          string `json:"id"`
			Source      string `json:"source"`
			Type        string `json:"type"`
			Data        struct {
				Op string `json:"op"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &evs); err != nil {
			t.Fatalf("body %s: %v", b, err)
		}
		for _, e := range evs {
			if e.SpecVersion != "1.0" || e.Source != "/pgq/db/s" || e.Type != "pgq.update" || e.Data.Op != "update" {
				t.Fatalf("event %+v", e)
			}
			got = append(got, e.ID)
		}
	}
	src.Mu.Lock()
	defer src.Mu.Unlock()
	seen := map[string]bool{}
	for _, id := range got {
		if _, ok := src.IDs[id]; !ok || seen[id] {
			t.Fatalf("event id %q: not a change of the journal, or twice", id)
		}
		seen[id] = true
	}
	if len(got) != src.Changes {
		t.Fatalf("%d event ids, %d changes", len(got), src.Changes)
	}
}

// TestWebhookLinger: a trickle of one transaction every 20 ms is posted
// in batches of at least the linger target (20 changes) while the linger
// (2 s) has not passed; without the linger the same trickle goes
// out about one transaction a request. A last batch below the target
// waits the whole linger.
func TestWebhookLinger(t *testing.T) {
	run := func(t *testing.T, linger time.Duration) (sizes []int, lastWait time.Duration) {
		src := bridgetest.StartSource(t, 50)
		var mu sync.Mutex
		var got []int
		var lastPost time.Time
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var pls []bridgetest.Payload
			if err := json.NewDecoder(r.Body).Decode(&pls); err != nil {
				t.Errorf("body: %v", err)
			}
			mu.Lock()
			got = append(got, len(pls))
			lastPost = time.Now()
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}))
		defer srv.Close()
		p, err := webhook.New(webhook.Options{URL: srv.URL, BatchSize: 20})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, done := bridgetest.StartBridgeWith(t, ctx, p, src.Addr, func(o *bridge.Options) {
			o.Linger, o.LingerChanges, o.Logger = linger, 20, slog.New(slog.DiscardHandler)
		})
		for range 40 {
			src.Append(1)
			time.Sleep(20 * time.Millisecond)
		}
		src.Mu.Lock()
		total := src.Changes
		src.Mu.Unlock()
		src.Append(1) // the last: waits the linger alone (1-3 changes)
		appended := time.Now()
		src.WaitCaughtUp(t, 30*time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		sum := 0
		for _, n := range got {
			sum += n
		}
		src.Mu.Lock()
		if sum != src.Changes || total >= src.Changes {
			t.Fatalf("posted %d changes in %v, journaled %d", sum, got, src.Changes)
		}
		src.Mu.Unlock()
		return got, lastPost.Sub(appended)
	}
	t.Run("linger", func(t *testing.T) {
		sizes, lastWait := run(t, 2*time.Second)
		// Every batch but the last reaches the target: the trickle fills
		// it within 20 × 20 ms, far below the linger. A transaction is
		// never split across batches, so a batch may pass the target by
		// its last transaction's changes (1 to 3), which the publisher
		// posts after the 20 in a request of their own.
		for i, n := range sizes[:len(sizes)-1] {
			if n != 20 && (n > 3 || i == 0 || sizes[i-1] != 20) {
				t.Errorf("request %d of %v: %d changes, want 20 or the rest (< 3) of a batch after 20", i, sizes, n)
			}
		}
		if last := sizes[len(sizes)-1]; last >= 20 {
			t.Errorf("last request %d changes of %v: the last transaction should have waited alone", last, sizes)
		}
		if lastWait < 1500*time.Millisecond {
			t.Errorf("the last batch was posted %v after its transaction, before the linger (2s)", lastWait)
		}
	})
	t.Run("none", func(t *testing.T) {
		sizes, lastWait := run(t, 0)
		if len(sizes) < 30 {
			t.Errorf("without linger %d requests (%v), want about one a transaction (41)", len(sizes), sizes)
		}
		if lastWait > time.Second {
			t.Errorf("without linger the last batch waited %v", lastWait)
		}
	})
}

// TestWebhookRedirect: a receiver answering its first POSTs with
// "302 Location: /landing" (whose GET answers 200) has received nothing:
// the publisher follows no redirect, even through a Client that would
// (Go's default turns the POST into a bodiless GET), and counts each as a
// failed attempt naming the Location. Once the receiver stops
// redirecting, every change arrives exactly once, in per-key order, and
// the landing page was never asked.
func TestWebhookRedirect(t *testing.T) {
	rc, _ := startReceiver(t, 0, 0)
	var mu sync.Mutex
	redirects, landings := 0, 0
	const wantRedirects = 4
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		redirect := redirects < wantRedirects
		if redirect {
			redirects++
		}
		mu.Unlock()
		if redirect {
			http.Redirect(w, r, "/landing", http.StatusFound)
			return
		}
		rc.ServeHTTP(w, r)
	})
	mux.HandleFunc("/landing", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		landings++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	src := bridgetest.StartSource(t, 5)
	src.Append(5)
	p, err := webhook.New(webhook.Options{URL: srv.URL + "/hook", Secret: webhookKey, Client: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, done := bridgetest.StartBridgeWith(t, ctx, p, src.Addr, func(o *bridge.Options) {
		o.BackoffMin, o.BackoffMax = 5*time.Millisecond, 20*time.Millisecond
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	src.WaitCaughtUp(t, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if redirects != wantRedirects || landings != 0 {
		t.Fatalf("%d redirects answered, landing asked %d times: want %d and 0", redirects, landings, wantRedirects)
	}
	if st := b.Status(); st.Errors < wantRedirects {
		t.Fatalf("%d publish errors counted for %d redirects", st.Errors, wantRedirects)
	}
	if !strings.Contains(logs.String(), "302 Found") || !strings.Contains(logs.String(), "/landing") {
		t.Fatalf("the log names neither the status nor the Location:\n%s", logs.String())
	}
	if dups := rc.check(t, src); dups != 0 {
		t.Fatalf("%d changes acknowledged twice", dups)
	}
	if len(rc.ids) != src.Changes {
		t.Fatalf("%d changes acknowledged, %d journaled", len(rc.ids), src.Changes)
	}
}

// TestWebhookLargeBatchHeaderLimit: with --batch-size 5000, a transaction
// of 6000 changes is delivered through a receiver whose server takes at
// most 8 KiB of headers (nginx's default is of that order): no header
// grows with the batch (a header listing the batch's ids, as Pgq-Ids
// did, is some 70 KB here and every attempt failed with 431 forever).
// Every request verifies with the Standard Webhooks library.
func TestWebhookLargeBatchHeaderLimit(t *testing.T) {
	rc := &receiver{t: t, stored: map[string]int{}}
	srv := httptest.NewUnstartedServer(rc)
	srv.Config.MaxHeaderBytes = 8 << 10
	srv.Start()
	t.Cleanup(srv.Close)
	src := bridgetest.StartSource(t, 50)
	src.AppendParts(2, 3000, false)
	p, err := webhook.New(webhook.Options{URL: srv.URL, Secret: webhookKey, BatchSize: 5000, Timeout: 30 * time.Second, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, done := bridgetest.StartBridgeWith(t, ctx, p, src.Addr, func(o *bridge.Options) { o.Logger = slog.New(slog.DiscardHandler) })
	cl := bridgetest.DialPGQ(t, src.Addr)
	for deadline := time.Now().Add(60 * time.Second); ; {
		select {
		case err := <-done:
			t.Fatalf("the bridge ended: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if gi, err := cl.Group(ctx, "g"); err == nil && gi.CommittedOffset >= src.Journal.LastOffset() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not caught up after 60s")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if dups := rc.check(t, src); dups != 0 {
		t.Fatalf("%d changes acknowledged twice", dups)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if slices.Max(rc.sizes) != 5000 {
		t.Fatalf("requests of %v changes, want one of 5000", rc.sizes)
	}
	t.Logf("requests of %v changes through an 8 KiB header limit", rc.sizes)
}

// TestWebhookDebeziumSequence: in the Debezium format every event of a
// webhook body names its change by source.sequence, a JSON string of
// ["<commit LSN>","<ordinal>"] (not null as before), from which the
// receiver rebuilds the change's stable id: each journaled change once.
// The body is signed, so the names are too.
func TestWebhookDebeziumSequence(t *testing.T) {
	var mu sync.Mutex
	var seqs []string
	bad := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := verifyStandard(body, r.Header); err != nil {
			mu.Lock()
			bad++
			mu.Unlock()
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var evs []struct {
			Source struct {
				Sequence *string `json:"sequence"`
			} `json:"source"`
		}
		if err := json.Unmarshal(body, &evs); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			if e.Source.Sequence == nil {
				t.Errorf("an event without source.sequence in %s", body)
				continue
			}
			seqs = append(seqs, *e.Source.Sequence)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	src := bridgetest.StartSource(t, 50)
	src.AppendParts(2, 5, false) // a transaction in two records: ordinals across parts
	p, err := webhook.New(webhook.Options{URL: srv.URL, Secret: webhookKey, Format: format.Debezium, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	bridgetest.BridgeFormat(t, p, src, format.Debezium)
	mu.Lock()
	defer mu.Unlock()
	src.Mu.Lock()
	defer src.Mu.Unlock()
	if bad > 0 {
		t.Fatalf("%d requests failed verification", bad)
	}
	seen := map[string]bool{}
	for _, sq := range seqs {
		var pair []string
		if err := json.Unmarshal([]byte(sq), &pair); err != nil || len(pair) != 2 {
			t.Fatalf("source.sequence %q: want a JSON array of 2 strings (%v)", sq, err)
		}
		lsn, err1 := strconv.ParseUint(pair[0], 10, 64)
		ord, err2 := strconv.ParseUint(pair[1], 10, 32)
		if err1 != nil || err2 != nil {
			t.Fatalf("source.sequence %q: not numbers", sq)
		}
		id := bridge.MessageID(pgq.LSN(lsn), uint32(ord), "")
		if _, ok := src.IDs[id]; !ok || seen[id] {
			t.Fatalf("source.sequence %q (%s): not a change of the journal, or twice", sq, id)
		}
		seen[id] = true
	}
	if len(seen) != src.Changes {
		t.Fatalf("%d changes named, %d journaled", len(seen), src.Changes)
	}
	t.Logf("%d changes named by source.sequence, e.g. %s", len(seen), seqs[0])
}
