package bridgetest

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/bridge"
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

// BridgeWindowed bridges src (single transactions around one of
// windowParts parts of windowPerPart changes: 2400 changes, fetched as one
// answer) through pub with MaxInFlight windowSize until the group caught
// up, and checks the bound: no Publish call and no Status.InFlight
// sample held more than windowSize messages, the transaction took
// several windows, and no error (a lease lost between windows) occurred.
func BridgeWindowed(t *testing.T, src *Source, pub bridge.Publisher) {
	t.Helper()
	src.Append(5)
	src.AppendParts(windowParts, windowPerPart, false)
	src.Append(5)
	wp := &windowPub{Publisher: pub}
	ctx, cancel := context.WithCancel(context.Background())
	b, done := StartBridgeWith(t, ctx, wp, src.Addr, func(o *bridge.Options) { o.MaxInFlight = windowSize })
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
	src.WaitCaughtUp(t, 60*time.Second)
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

// CheckBigInOrder checks that the big transaction's changes (ids with
// ordinals beyond any small transaction's) follow one another in ordinal
// order.
func CheckBigInOrder(t *testing.T, ids []string) {
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
