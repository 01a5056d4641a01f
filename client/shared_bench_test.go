package client_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
)

// benchShared consumes n messages of distinct rows over HTTP with members
// SharedConsumers (Concurrency 1 each) whose handler sleeps work.
func benchShared(b *testing.B, members int, work time.Duration) {
	n := max(b.N, 2000)
	s := startServer(&testing.T{}, b.TempDir(), "127.0.0.1:0", nil)
	defer s.stop()
	s.t = &testing.T{}
	s.append(n)
	c, err := client.Dial(s.addr, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "jobs", Mode: "shared", From: "earliest", MaxAckPending: 10000}); err != nil {
		b.Fatal(err)
	}
	var handled atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range members {
		sc, err := c.SharedConsumer("jobs", client.SharedConsumerOptions{Member: "m" + strconv.Itoa(i), Concurrency: 1, Wait: 100 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = sc.Consume(ctx, func(context.Context, api.Message) error {
				if work > 0 {
					time.Sleep(work)
				}
				if handled.Add(1) == int64(n) {
					cancel()
				}
				return nil
			})
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkSharedConsume1Member1ms(b *testing.B)  { benchShared(b, 1, time.Millisecond) }
func BenchmarkSharedConsume8Members1ms(b *testing.B) { benchShared(b, 8, time.Millisecond) }
func BenchmarkSharedConsume8MembersNoop(b *testing.B) {
	benchShared(b, 8, 0)
}
