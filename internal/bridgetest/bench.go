package bridgetest

import (
	"context"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/client"
)

// BridgeRound bridges the whole journal of src through a new group into p
// and returns the time until the group committed it all.
func BridgeRound(b *testing.B, src *Source, group string, p bridge.Publisher) time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, err := client.New(src.Addr, client.Options{})
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
	// The group's cursor, read in-process (not over HTTP: the polling
	// would take CPU from the bridge).
	last := src.Journal.LastOffset()
	for {
		gi, err := src.Manager.Info(ctx, group)
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

// CPUTime is the user and system CPU time of this process so far.
func CPUTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
