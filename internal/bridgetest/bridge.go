package bridgetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/client"
)

func DialPGQ(t testing.TB, addr string) *client.Client {
	t.Helper()
	cl, err := client.New(addr, client.Options{Retry: client.RetryOptions{Min: 10 * time.Millisecond, Max: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func StartBridge(t *testing.T, ctx context.Context, p bridge.Publisher, addr string) (*bridge.Bridge, chan error) {
	return StartBridgeLease(t, ctx, p, addr, time.Second)
}

// StartBridgeLease is StartBridge with a lease TTL.
func StartBridgeLease(t *testing.T, ctx context.Context, p bridge.Publisher, addr string, lease time.Duration) (*bridge.Bridge, chan error) {
	return StartBridgeWith(t, ctx, p, addr, func(o *bridge.Options) { o.LeaseTTL = lease })
}

// StartBridgeWith is StartBridge with options changed by set.
func StartBridgeWith(t *testing.T, ctx context.Context, p bridge.Publisher, addr string, set func(*bridge.Options)) (*bridge.Bridge, chan error) {
	t.Helper()
	cl := DialPGQ(t, addr)
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

// Writer appends transactions to src until stop is closed.
func Writer(src *Source, stop <-chan struct{}) *sync.WaitGroup {
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
			src.Append(1 + rand.IntN(20))
		}
	}()
	return &wg
}

// Payload is the part of a message's JSON the checks read.
type Payload struct {
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

// CheckExactlyOnce checks that ids hold every change of src exactly once
// and that each key's values increase.
func CheckExactlyOnce(t *testing.T, src *Source, ids []string, pls []Payload) {
	t.Helper()
	src.Mu.Lock()
	defer src.Mu.Unlock()
	seen := make(map[string]bool, len(ids))
	last := map[int]int{}
	for i, id := range ids {
		if seen[id] {
			t.Fatalf("message %s stored twice", id)
		}
		seen[id] = true
		k, ok := src.IDs[id]
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
	if len(ids) != src.Changes {
		var missing []string
		for id := range src.IDs {
			if !seen[id] && len(missing) < 20 {
				missing = append(missing, id)
			}
		}
		t.Logf("missing (some): %v", missing)
		t.Fatalf("stream holds %d messages, journal %d changes", len(ids), src.Changes)
	}
}

// WantShared waits for Run's result: an error wrapping ErrShared.
func WantShared(t *testing.T, done <-chan error) {
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

// CheckAtLeastOnce checks that every change is in the topic, that the
// first occurrences of each key are in order, and returns the number of
// duplicates.
func CheckAtLeastOnce(t *testing.T, src *Source, ids []string, pls []Payload) (dups int) {
	t.Helper()
	src.Mu.Lock()
	defer src.Mu.Unlock()
	seen := map[string]bool{}
	last := map[int]int{}
	for i, id := range ids {
		if seen[id] {
			dups++
			continue
		}
		seen[id] = true
		k, ok := src.IDs[id]
		if !ok || pls[i].Change.New.ID != k {
			t.Fatalf("record %s: not a change of the journal or wrong key", id)
		}
		if v := pls[i].Change.New.V; v <= last[k] {
			t.Fatalf("key %d: value %d after %d: per-key order broken", k, v, last[k])
		} else {
			last[k] = v
		}
	}
	if len(seen) != src.Changes {
		t.Fatalf("topic holds %d distinct changes, journal %d", len(seen), src.Changes)
	}
	return dups
}
