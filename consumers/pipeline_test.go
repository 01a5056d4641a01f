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
	cs, err := e.C.Consumer("g", consumers.ConsumerOptions{Member: "m", Max: 37, Wait: 100 * time.Millisecond})
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
	if err != nil || gi.Committed != total {
		t.Fatalf("committed %d (%v), want %d", gi.Committed, err, total)
	}
}

// TestConsumeReturnsFailedCommit: a reset fences the member; Consume
// returns the refusal of its background commit. Which refusal depends on
// timing: ErrFenced when the commit reaches the server first, and
// ErrInvalidCommit when Consume's overlapping fetch has already taken a new
// lease (delivering from the reset cursor again), so the old commit lies
// beyond what the new lease delivered. Either way nothing is committed.
func TestConsumeReturnsFailedCommit(t *testing.T) {
	e := newBenchEnv(t)
	ctx := ctxT(t)
	e.fill(t, 50)
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	cs, err := e.C.Consumer("g", consumers.ConsumerOptions{Member: "m", Max: 10, Wait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = cs.Consume(ctx, func(_ context.Context, tx *pgq.Transaction) error {
		if tx.Offset == 15 {
			if _, err := e.C.ResetGroup(ctx, "g", "earliest", false); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, consumers.ErrFenced) && !errors.Is(err, consumers.ErrInvalidCommit) {
		t.Fatalf("Consume: %v, want ErrFenced or ErrInvalidCommit", err)
	}
	if gi, _ := e.C.Group(ctx, "g"); gi.Committed != 0 {
		t.Fatalf("committed %d after the reset, want 0", gi.Committed)
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
				if gi, err := e.M.Info(ctx, name); err == nil && gi.Committed > gi.Delivered {
					t.Errorf("committed %d beyond delivered %d", gi.Committed, gi.Delivered)
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
