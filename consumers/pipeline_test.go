package consumers_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
)

// TestConsumeOverlapsCommit: Consume (whose commits overlap the next
// fetch) delivers every transaction in order, and the cursor ends on the
// last one once ctx ends.
func TestConsumeOverlapsCommit(t *testing.T) {
	e := newBenchEnv(t)
	ctx := ctxT(t)
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	const total = 3000
	go func() {
		for i := 0; i < total; i += 100 {
			txs := make([]*pgq.Transaction, 100)
			for k := range txs {
				txs[k] = benchTx(i+k+1, time.Now())
			}
			e.append(t, txs...)
			time.Sleep(time.Millisecond)
		}
	}()
	cs, err := e.C.Consumer("g", client.ConsumerOptions{Member: "m", Max: 37, Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	var next pgq.Offset = 1
	err = cs.Consume(cctx, func(_ context.Context, tx *pgq.Transaction) error {
		if tx.Offset != next {
			return fmt.Errorf("got offset %d, want %d", tx.Offset, next)
		}
		next++
		if tx.Offset == total {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume: %v", err)
	}
	gi, err := e.C.Group(ctx, "g")
	if err != nil || gi.CommittedOffset != total {
		t.Fatalf("committed %d (%v), want %d", gi.CommittedOffset, err, total)
	}
}

// TestConsumeRedeliversAfterReset: a reset ends the member's lease
// generation; Consume's commit is fenced, and instead of failing it
// drops what it fetched and goes on from the reset cursor (at-least-once).
func TestConsumeRedeliversAfterReset(t *testing.T) {
	e := newBenchEnv(t)
	ctx := ctxT(t)
	e.fill(t, 50)
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	cs, err := e.C.Consumer("g", client.ConsumerOptions{Member: "m", Max: 10, Wait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reset, again := false, 0
	var seen []pgq.Offset
	err = cs.Consume(cctx, func(_ context.Context, tx *pgq.Transaction) error {
		seen = append(seen, tx.Offset)
		switch {
		case tx.Offset == 15 && !reset:
			reset = true
			if _, err := e.C.ResetGroup(ctx, "g", "earliest", false); err != nil {
				return err
			}
		case reset && tx.Offset == 1:
			again++
		case reset && again > 0 && tx.Offset == 50:
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume: %v (seen %v)", err, seen)
	}
	if again != 1 || cs.Redeliveries() < 1 {
		t.Fatalf("after the reset offset 1 came back %d times, redeliveries %d (seen %v)", again, cs.Redeliveries(), seen)
	}
	if gi, _ := e.C.Group(ctx, "g"); gi.CommittedOffset != 50 {
		t.Fatalf("committed %d, want 50", gi.CommittedOffset)
	}
}

// TestCommitRacesDelete: a commit racing a delete never brings the group
// back (the index holds no group after the delete), and commits racing
// fetches, heartbeats and resets keep the cursor within what was
// delivered.
func TestCommitRacesDelete(t *testing.T) {
	e := newBenchEnv(t)
	ctx := ctxT(t)
	e.fill(t, 200)
	for i := range 20 {
		name := fmt.Sprintf("g%d", i)
		if _, err := e.M.Create(ctx, consumers.CreateRequest{Name: name, From: "earliest"}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Add(3)
		go func() { // fetch + commit
			defer wg.Done()
			for {
				res, err := e.M.Fetch(ctx, name, consumers.FetchRequest{Member: "m", Max: 7})
				if err != nil {
					return
				}
				if _, err := e.M.Commit(ctx, name, "m", res.NextOffset-1, 0); err != nil {
					return
				}
			}
		}()
		go func() { // heartbeats and resets
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = e.M.Heartbeat(ctx, name, "m", 0)
				if k%5 == 0 {
					_, _ = e.M.Reset(ctx, name, "offset:50", false)
				}
				if gi, err := e.M.Info(ctx, name); err == nil && gi.CommittedOffset > gi.Delivered {
					t.Errorf("committed %d beyond delivered %d", gi.CommittedOffset, gi.Delivered)
				}
			}
		}()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * time.Millisecond)
			if err := e.M.Delete(ctx, name); err != nil {
				t.Errorf("delete: %v", err)
			}
			close(stop)
		}()
		wg.Wait()
	}
	m2, err := consumers.NewManager(consumers.ManagerOptions{Journal: e.J, Index: e.Ix, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if gs := m2.List(ctx); len(gs) != 0 {
		t.Fatalf("%d groups came back after their delete, e.g. %+v", len(gs), gs[0])
	}
}
