package jetstream_test

import (
	"context"
	"testing"

	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/internal/bridgetest"
)

// TestJetStreamWindowedTransaction: a transaction of 2400 changes,
// larger than the bridge's window (MaxInFlight 250), reaches JetStream
// whole, exactly once and in order (its changes in ordinal order in the
// stream), with no more than the window in flight at any time, and the
// group's cursor passes it only once its last change was acknowledged
// (waitCaughtUp).
func TestJetStreamWindowedTransaction(t *testing.T) {
	ns := bridgetest.StartNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	src := bridgetest.StartSource(t, 50)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := jetstream.New(ctx, jetstream.Options{URL: ns.ClientURL(), CreateStream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	bridgetest.BridgeWindowed(t, src, p)
	ids, pls := bridgetest.ReadStream(t, ns.ClientURL(), "PGQ")
	bridgetest.CheckExactlyOnce(t, src, ids, pls)
	bridgetest.CheckBigInOrder(t, ids)
}
