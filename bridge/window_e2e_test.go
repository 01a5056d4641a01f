package bridge_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/bridge/kafka"
)

// windowPub passes every Publish to the real publisher it wraps and
// records the most messages one call had to send (unacknowledged).
type windowPub struct {
	bridge.Publisher
	max, calls atomic.Int64
}

func (w *windowPub) Publish(ctx context.Context, msgs []bridge.Message, acked []bool) error {
	n := int64(0)
	for _, a := range acked {
		if !a {
			n++
		}
	}
	w.calls.Add(1)
	for {
		m := w.max.Load()
		if n <= m || w.max.CompareAndSwap(m, n) {
			break
		}
	}
	return w.Publisher.Publish(ctx, msgs, acked)
}

const (
	windowSize    = 250
	windowParts   = 40
	windowPerPart = 60
)

// bridgeWindowed bridges src (single transactions around one of
// windowParts parts of windowPerPart changes: 2400 changes, fetched as one
// answer) through pub with MaxInFlight windowSize until the group caught
// up, and checks the bound: no Publish call and no Status.InFlight
// sample held more than windowSize messages, the transaction took
// several windows, and no error (a lease lost between windows) occurred.
func bridgeWindowed(t *testing.T, src *source, pub bridge.Publisher) {
	t.Helper()
	src.append(5)
	src.appendParts(windowParts, windowPerPart, false)
	src.append(5)
	wp := &windowPub{Publisher: pub}
	ctx, cancel := context.WithCancel(context.Background())
	b, done := startBridgeWith(t, ctx, wp, src.addr, func(o *bridge.Options) { o.MaxInFlight = windowSize })
	var maxStatus atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := int64(b.Status().InFlight); n > maxStatus.Load() {
				maxStatus.Store(n)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	src.waitCaughtUp(t, 60*time.Second)
	close(stopSampling)
	<-sampled
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d publishes, at most %d messages per publish, status in_flight at most %d (window %d); status %+v", wp.calls.Load(), wp.max.Load(), maxStatus.Load(), windowSize, b.Status())
	if wp.max.Load() > windowSize || maxStatus.Load() > windowSize {
		t.Fatalf("in flight: %d messages in one publish, status %d: want at most the window, %d", wp.max.Load(), maxStatus.Load(), windowSize)
	}
	if st := b.Status(); st.Errors != 0 {
		// A lease lost while the transaction went out window by window
		// (no fetch or commit renewed it) fences the commit: everything
		// is published again.
		t.Fatalf("bridge errors: %d, last %q", st.Errors, st.LastError)
	}
	if min := int64(windowParts * windowPerPart / windowSize); wp.calls.Load() < min {
		t.Fatalf("%d publishes: the transaction of %d changes was not cut into windows of %d", wp.calls.Load(), windowParts*windowPerPart, windowSize)
	}
}

// TestJetStreamWindowedTransaction: a transaction of 2400 changes,
// larger than the bridge's window (MaxInFlight 250), reaches JetStream
// whole, exactly once and in order (its changes in ordinal order in the
// stream), with no more than the window in flight at any time, and the
// group's cursor passes it only once its last change was acknowledged
// (waitCaughtUp).
func TestJetStreamWindowedTransaction(t *testing.T) {
	ns := startNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	src := startSource(t, 50)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := jetstream.New(ctx, jetstream.Options{URL: ns.ClientURL(), CreateStream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	bridgeWindowed(t, src, p)
	ids, pls := readStream(t, ns.ClientURL(), "PGQ")
	checkExactlyOnce(t, src, ids, pls)
	checkBigInOrder(t, ids)
}

// TestKafkaWindowedTransaction is TestJetStreamWindowedTransaction with
// Kafka (kfake): every change once, in per-key order, the window held.
func TestKafkaWindowedTransaction(t *testing.T) {
	brokers := kafkaBrokers(t)
	src := startSource(t, 50)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := kafka.New(ctx, kafka.Options{Brokers: brokers, Topic: "pgqwin.{schema}.{table}", CreateTopics: true, Partitions: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	bridgeWindowed(t, src, p)
	ids, pls := readTopic(t, brokers, "pgqwin.public.t", src.changes)
	if dups := checkAtLeastOnce(t, src, ids, pls); dups != 0 {
		t.Fatalf("%d duplicates", dups)
	}
}

// checkBigInOrder checks that the big transaction's changes (ids with
// ordinals beyond any small transaction's) follow one another in ordinal
// order.
func checkBigInOrder(t *testing.T, ids []string) {
	t.Helper()
	next := -1
	for _, id := range ids {
		dot := strings.LastIndexByte(id, '.')
		ord, err := strconv.Atoi(id[dot+1:])
		if err != nil || ord < 3 { // the small transactions' ordinals are 0..2
			continue
		}
		if next == -1 {
			next = ord
		}
		if ord != next {
			t.Fatalf("big transaction: ordinal %d after %d", ord, next-1)
		}
		next++
	}
	if next != windowParts*windowPerPart {
		t.Fatalf("big transaction: ordinals up to %d, want %d", next-1, windowParts*windowPerPart-1)
	}
}
