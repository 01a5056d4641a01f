package jetstream_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/internal/bridgetest"
)

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
	ns := bridgetest.StartNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	ctx := context.Background()
	p, err := jetstream.New(ctx, jetstream.Options{URL: ns.ClientURL(), CreateStream: true, Duplicates: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
	src := bridgetest.StartSource(t, 50)
	stop := make(chan struct{})
	wg := bridgetest.Writer(src, stop)
	kills := 8
	for i := 0; i < kills; i++ {
		cmd := bridgetest.StartChild(t, "jetstream", ns.ClientURL(), src.Addr)
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
		_ = cmd.Process.Kill() // SIGKILL
		_ = cmd.Wait()
	}
	close(stop)
	wg.Wait()
	cmd := bridgetest.StartChild(t, "jetstream", ns.ClientURL(), src.Addr)
	src.WaitCaughtUp(t, 30*time.Second)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	ids, pls := bridgetest.ReadStream(t, ns.ClientURL(), "PGQ")
	bridgetest.CheckExactlyOnce(t, src, ids, pls)
	t.Logf("%d kills, %d transactions, %d changes, all exactly once in per-key order", kills, src.Journal.LastOffset(), len(ids))
}

// TestJetStreamBrokerRestart restarts nats-server (same store) while the
// bridge runs in-process under write load: the bridge retries, reports the
// outage in its status, and the stream ends with every change exactly
// once in per-key order.
func TestJetStreamBrokerRestart(t *testing.T) {
	dir := t.TempDir()
	ns := bridgetest.StartNATS(t, dir, 0)
	url := ns.ClientURL()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := jetstream.New(ctx, jetstream.Options{URL: url, CreateStream: true, Window: 256, AckTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	src := bridgetest.StartSource(t, 50)
	b, done := bridgetest.StartBridge(t, ctx, p, src.Addr)
	stop := make(chan struct{})
	wg := bridgetest.Writer(src, stop)
	time.Sleep(500 * time.Millisecond)
	ns.Shutdown()
	ns.WaitForShutdown()
	time.Sleep(1500 * time.Millisecond)
	st := b.Status()
	if st.BrokerOK || st.Errors == 0 {
		t.Errorf("status during the outage: %+v", st)
	}
	ns = bridgetest.StartNATSAt(t, dir, url)
	defer ns.Shutdown()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	src.WaitCaughtUp(t, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := b.Status(); !st.BrokerOK {
		t.Errorf("status after the outage: %+v", st)
	}
	ids, pls := bridgetest.ReadStream(t, url, "PGQ")
	bridgetest.CheckExactlyOnce(t, src, ids, pls)
	t.Logf("%d changes exactly once across a broker restart; %d duplicates dropped by the stream; %d publish errors", len(ids), p.Duplicates(), b.Status().Errors)
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
	ns := bridgetest.StartNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	src := bridgetest.StartSource(t, 50)
	for round := range 4 {
		for range 10 {
			src.Append(1)
			src.AppendLegacy(3, 4)
		}
		ctx, cancel := context.WithCancel(context.Background())
		p, err := jetstream.New(ctx, jetstream.Options{URL: ns.ClientURL(), CreateStream: true, Duplicates: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, done := bridgetest.StartBridgeWith(t, ctx, p, src.Addr, func(o *bridge.Options) { o.MaxTransactions = 2 })
		if round == 3 {
			src.WaitCaughtUp(t, 30*time.Second)
		} else {
			time.Sleep(time.Duration(50+rand.IntN(150)) * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		_ = p.Close()
		gi, err := bridgetest.DialPGQ(t, src.Addr).Group(context.Background(), "g")
		if err != nil {
			t.Fatal(err)
		}
		if gi.CommittedOffset > 0 {
			tx, err := src.Journal.Read(gi.CommittedOffset)
			if err != nil {
				t.Fatal(err)
			}
			if !tx.Final {
				t.Fatalf("round %d: the cursor %d is inside a transaction (part %d)", round, gi.CommittedOffset, tx.Part)
			}
		}
	}
	ids, pls := bridgetest.ReadStream(t, ns.ClientURL(), "PGQ")
	bridgetest.CheckExactlyOnce(t, src, ids, pls)
	t.Logf("%d changes of transactions journaled in parts in the old layout, exactly once", len(ids))
}

// TestSharedStreamRefused: a stream whose last message is another
// group's bridge's is refused (Run ends with ErrShared, nothing is
// published); the same stream is taken once that group's message is not
// the last (here: the stream purged).
func TestSharedStreamRefused(t *testing.T) {
	ns := bridgetest.StartNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	ctx := context.Background()
	p, err := jetstream.New(ctx, jetstream.Options{URL: ns.ClientURL(), CreateStream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	js := bridgetest.JSClient(t, ns.ClientURL())
	other := &nats.Msg{Subject: "pgq.public.t", Data: []byte("{}"), Header: nats.Header{}}
	other.Header.Set(njs.MsgIDHeader, "0/5.0")
	other.Header.Set(bridge.HeaderGroup, "other")
	if _, err := js.PublishMsg(ctx, other); err != nil {
		t.Fatal(err)
	}
	src := bridgetest.StartSource(t, 50)
	src.Append(10)
	b, done := bridgetest.StartBridge(t, ctx, p, src.Addr)
	bridgetest.WantShared(t, done)
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
	_, done = bridgetest.StartBridge(t, cctx, p, src.Addr)
	src.WaitCaughtUp(t, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ids, pls := bridgetest.ReadStream(t, ns.ClientURL(), "PGQ")
	bridgetest.CheckExactlyOnce(t, src, ids, pls)
}
