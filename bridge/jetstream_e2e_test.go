package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
)

// startChild runs the test binary as a bridge process.
func startChild(t *testing.T, broker, brokerURL, pgqAddr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PGQ_BRIDGE_CHILD="+broker, "BROKER_URL="+brokerURL, "PGQ_ADDR="+pgqAddr)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// writer appends transactions to src until stop is closed.
func writer(src *source, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			src.append(1 + rand.IntN(20))
		}
	}()
	return &wg
}

// payload is the part of a message's JSON the checks read.
type payload struct {
	Offset    uint64 `json:"offset"`
	CommitLSN string `json:"commit_lsn"`
	Index     int    `json:"index"`
	// Ordinal is the change's ordinal in its transaction (message ids).
	Ordinal int `json:"ordinal"`
	Count   int `json:"count"`
	Change  struct {
		Op  string `json:"op"`
		New struct {
			ID int `json:"id"`
			V  int `json:"v"`
		} `json:"new"`
	} `json:"change"`
}

// jsClient connects to url's JetStream until the test ends.
func jsClient(t *testing.T, url string) njs.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// readStream reads every message of stream in order.
func readStream(t *testing.T, url, stream string) (ids []string, pls []payload) {
	t.Helper()
	js := jsClient(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.OrderedConsumer(ctx, njs.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for uint64(len(ids)) < info.State.Msgs {
		batch, err := cons.Fetch(1000, njs.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			ids = append(ids, m.Headers().Get(njs.MsgIDHeader))
			var p payload
			if err := json.Unmarshal(m.Data(), &p); err != nil {
				t.Fatalf("payload %q: %v", m.Data(), err)
			}
			if m.Headers().Get(bridge.HeaderOffset) != strconv.FormatUint(p.Offset, 10) || m.Headers().Get(bridge.HeaderOp) != p.Change.Op || m.Headers().Get(bridge.HeaderTable) != "public.t" {
				t.Fatalf("headers %v do not match payload %s", m.Headers(), m.Data())
			}
			pls = append(pls, p)
		}
		if batch.Error() != nil {
			t.Fatal(batch.Error())
		}
		if n == 0 {
			t.Fatalf("stream has %d messages, read %d", info.State.Msgs, len(ids))
		}
	}
	return ids, pls
}

// checkExactlyOnce checks that ids hold every change of src exactly once
// and that each key's values increase.
func checkExactlyOnce(t *testing.T, src *source, ids []string, pls []payload) {
	t.Helper()
	src.mu.Lock()
	defer src.mu.Unlock()
	seen := make(map[string]bool, len(ids))
	last := map[int]int{}
	for i, id := range ids {
		if seen[id] {
			t.Fatalf("message %s stored twice", id)
		}
		seen[id] = true
		k, ok := src.ids[id]
		if !ok {
			t.Fatalf("message %s is no change of the journal", id)
		}
		p := pls[i]
		if p.Change.New.ID != k || !strings.HasSuffix(id, "."+strconv.Itoa(p.Ordinal)) {
			t.Fatalf("message %s: payload ordinal %d, key %d (want %d)", id, p.Ordinal, p.Change.New.ID, k)
		}
		if p.Change.New.V <= last[k] {
			t.Fatalf("key %d: value %d after %d: per-key order broken", k, p.Change.New.V, last[k])
		}
		last[k] = p.Change.New.V
	}
	if len(ids) != src.changes {
		var missing []string
		for id := range src.ids {
			if !seen[id] && len(missing) < 20 {
				missing = append(missing, id)
			}
		}
		t.Logf("missing (some): %v", missing)
		t.Fatalf("stream holds %d messages, journal %d changes", len(ids), src.changes)
	}
}

// TestJetStreamKillUnderLoad SIGKILLs the bridge process repeatedly while
// transactions keep arriving: the stream ends with every change exactly
// once, in per-key order. The stream's duplicate window is 100ms, so what
// keeps a batch acknowledged but not committed when the bridge died out
// of the stream is the new bridge resuming after the stream's last
// message, not Nats-Msg-Id dedup.
func TestJetStreamKillUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ns := startNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	ctx := context.Background()
	p, err := jetstream.New(ctx, jetstream.Options{URL: ns.ClientURL(), CreateStream: true, Duplicates: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
	src := startSource(t, 50)
	stop := make(chan struct{})
	wg := writer(src, stop)
	kills := 8
	for i := 0; i < kills; i++ {
		cmd := startChild(t, "jetstream", ns.ClientURL(), src.addr)
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
		_ = cmd.Process.Kill() // SIGKILL
		_ = cmd.Wait()
	}
	close(stop)
	wg.Wait()
	cmd := startChild(t, "jetstream", ns.ClientURL(), src.addr)
	src.waitCaughtUp(t, 30*time.Second)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	ids, pls := readStream(t, ns.ClientURL(), "PGQ")
	checkExactlyOnce(t, src, ids, pls)
	t.Logf("%d kills, %d transactions, %d changes, all exactly once in per-key order", kills, src.j.LastOffset(), len(ids))
}

// TestJetStreamBrokerRestart restarts nats-server (same store) while the
// bridge runs in-process under write load: the bridge retries, reports the
// outage in its status, and the stream ends with every change exactly
// once in per-key order.
func TestJetStreamBrokerRestart(t *testing.T) {
	dir := t.TempDir()
	ns := startNATS(t, dir, 0)
	url := ns.ClientURL()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := jetstream.New(ctx, jetstream.Options{URL: url, CreateStream: true, Window: 256, AckTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	src := startSource(t, 50)
	b, done := startBridge(t, ctx, p, src.addr)
	stop := make(chan struct{})
	wg := writer(src, stop)
	time.Sleep(500 * time.Millisecond)
	ns.Shutdown()
	ns.WaitForShutdown()
	time.Sleep(1500 * time.Millisecond)
	st := b.Status()
	if st.BrokerOK || st.Errors == 0 {
		t.Errorf("status during the outage: %+v", st)
	}
	ns = startNATSAt(t, dir, url)
	defer ns.Shutdown()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	src.waitCaughtUp(t, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := b.Status(); !st.BrokerOK {
		t.Errorf("status after the outage: %+v", st)
	}
	ids, pls := readStream(t, url, "PGQ")
	checkExactlyOnce(t, src, ids, pls)
	t.Logf("%d changes exactly once across a broker restart; %d duplicates dropped by the stream; %d publish errors", len(ids), p.Duplicates(), b.Status().Errors)
}

func startBridge(t *testing.T, ctx context.Context, p bridge.Publisher, addr string) (*bridge.Bridge, chan error) {
	return startBridgeLease(t, ctx, p, addr, time.Second)
}

// startBridgeLease is startBridge with a lease TTL.
func startBridgeLease(t *testing.T, ctx context.Context, p bridge.Publisher, addr string, lease time.Duration) (*bridge.Bridge, chan error) {
	return startBridgeWith(t, ctx, p, addr, func(o *bridge.Options) { o.LeaseTTL = lease })
}

// startBridgeWith is startBridge with options changed by set.
func startBridgeWith(t *testing.T, ctx context.Context, p bridge.Publisher, addr string, set func(*bridge.Options)) (*bridge.Bridge, chan error) {
	t.Helper()
	cl := dialPGQ(t, addr)
	o := bridge.Options{Client: cl, Group: "g", Member: "m", Publisher: p, MaxTransactions: 200,
		Wait: 200 * time.Millisecond, LeaseTTL: time.Second, BackoffMin: 20 * time.Millisecond, BackoffMax: 300 * time.Millisecond, LagInterval: 100 * time.Millisecond,
		Metrics: bridge.NewMetrics()}
	set(&o)
	b, err := bridge.New(o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	return b, done
}

// TestJetStreamLegacyParts journals transactions in parts in the layout
// before ordinals were recorded (later parts decode with ordinals from 0)
// between single-record ones, and bridges them in batches of 2 records
// (so batches end inside transactions) across clean restarts, with a
// duplicate window of 1s: every change is in the stream once under
// "<commit LSN>.<ordinal in the whole transaction>" (with ordinals from 0
// in every part, part 1's ids would repeat part 0's and the stream would
// drop them as duplicates), and the group's cursor never stops inside a
// transaction.
func TestJetStreamLegacyParts(t *testing.T) {
	ns := startNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	src := startSource(t, 50)
	for round := range 4 {
		for range 10 {
			src.append(1)
			src.appendLegacy(3, 4)
		}
		ctx, cancel := context.WithCancel(context.Background())
		p, err := jetstream.New(ctx, jetstream.Options{URL: ns.ClientURL(), CreateStream: true, Duplicates: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, done := startBridgeWith(t, ctx, p, src.addr, func(o *bridge.Options) { o.MaxTransactions = 2 })
		if round == 3 {
			src.waitCaughtUp(t, 30*time.Second)
		} else {
			time.Sleep(time.Duration(50+rand.IntN(150)) * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		_ = p.Close()
		gi, err := dialPGQ(t, src.addr).Group(context.Background(), "g")
		if err != nil {
			t.Fatal(err)
		}
		if gi.CommittedOffset > 0 {
			tx, err := src.j.Read(gi.CommittedOffset)
			if err != nil {
				t.Fatal(err)
			}
			if !tx.Final {
				t.Fatalf("round %d: the cursor %d is inside a transaction (part %d)", round, gi.CommittedOffset, tx.Part)
			}
		}
	}
	ids, pls := readStream(t, ns.ClientURL(), "PGQ")
	checkExactlyOnce(t, src, ids, pls)
	t.Logf("%d changes of transactions journaled in parts in the old layout, exactly once", len(ids))
}

// TestSharedStreamRefused: a stream whose last message is another
// group's bridge's is refused (Run ends with ErrShared, nothing is
// published); the same stream is taken once that group's message is not
// the last (here: the stream purged).
func TestSharedStreamRefused(t *testing.T) {
	ns := startNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	ctx := context.Background()
	p, err := jetstream.New(ctx, jetstream.Options{URL: ns.ClientURL(), CreateStream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	js := jsClient(t, ns.ClientURL())
	other := &nats.Msg{Subject: "pgq.public.t", Data: []byte("{}"), Header: nats.Header{}}
	other.Header.Set(njs.MsgIDHeader, "0/5.0")
	other.Header.Set(bridge.HeaderGroup, "other")
	if _, err := js.PublishMsg(ctx, other); err != nil {
		t.Fatal(err)
	}
	src := startSource(t, 50)
	src.append(10)
	b, done := startBridge(t, ctx, p, src.addr)
	wantShared(t, done)
	if st := b.Status(); st.Published != 0 {
		t.Fatalf("published %d messages into a refused stream", st.Published)
	}
	stream, err := js.Stream(ctx, "PGQ")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	_, done = startBridge(t, cctx, p, src.addr)
	src.waitCaughtUp(t, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ids, pls := readStream(t, ns.ClientURL(), "PGQ")
	checkExactlyOnce(t, src, ids, pls)
}

// wantShared waits for Run's result: an error wrapping ErrShared.
func wantShared(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, bridge.ErrShared) {
			t.Fatalf("Run = %v, want ErrShared", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the bridge still publishes into a stream or topic another producer writes")
	}
}
