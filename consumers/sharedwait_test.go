package consumers

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
)

// TestSharedMembersWakeOneAtATime: with WakeFromAppends, an append wakes
// one waiting member of a shared group (and a member that delivered, the
// next one), not every member: twenty members long-polling, fifty
// transactions appended one at a time, each delivered exactly once, in
// a few steps per transaction (waking every member took twenty or more).
// Each member acknowledges what it got before counting it: the
// transactions all change one row, and a message waits while an earlier
// one of its key is in flight.
func TestSharedMembersWakeOneAtATime(t *testing.T) {
	m, _ := wakeEnv(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := m.Create(ctx, CreateRequest{Name: "sh", Mode: "shared"}); err != nil {
		t.Fatal(err)
	}
	g, err := m.sharedGroup("sh")
	if err != nil {
		t.Fatal(err)
	}
	const members, txs = 20, 50
	var (
		mu  sync.Mutex
		got = map[pgq.Offset]int{}
		wg  sync.WaitGroup
	)
	for i := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				msgs, err := m.FetchShared(ctx, "sh", FetchRequest{Member: fmt.Sprint("m", i), Max: 100, Wait: 5 * time.Second})
				if err != nil {
					return
				}
				var ids []string
				for _, msg := range msgs {
					ids = append(ids, msg.AckID)
				}
				if len(ids) > 0 {
					if _, err := m.Ack(ctx, "sh", ids); err != nil {
						return
					}
				}
				mu.Lock()
				for _, msg := range msgs {
					got[msg.Offset]++
				}
				mu.Unlock()
			}
		}()
	}
	waiting := func() int {
		m.sw.mu.Lock()
		defer m.sw.mu.Unlock()
		return len(m.sw.byGroup[g])
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				mu.Lock()
				n := len(got)
				mu.Unlock()
				t.Fatalf("timed out waiting for %s (%d delivered, %d waiting)", what, n, waiting())
			}
		}
	}
	until("every member to wait", func() bool { return waiting() == members })
	steps := m.sharedSteps.Load()
	for i := 1; i <= txs; i++ {
		appendTx(t, m, "orders")
		until(fmt.Sprintf("transaction %d delivered and every member waiting again", i), func() bool {
			mu.Lock()
			n := len(got)
			mu.Unlock()
			return n == i && waiting() == members
		})
	}
	perTx := float64(m.sharedSteps.Load()-steps) / txs
	cancel()
	wg.Wait()
	for off, n := range got {
		if n != 1 {
			t.Errorf("offset %d delivered %d times", off, n)
		}
	}
	if perTx > 6 {
		t.Fatalf("%.1f steps of the %d members per transaction; want one member woken per append (and the next after a delivery)", perTx, members)
	}
	t.Logf("%.1f steps per transaction with %d members waiting", perTx, members)
}
