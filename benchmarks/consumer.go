package benchmarks

import (
	"context"
	"fmt"
	"time"

	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
)

// consumerRows are the measurements through the consumers Go client
// library against the load pgq: commit → consumer latency at 1,000 tx/s
// next to a live pg_recvlogical (latency.go) and replay over HTTP.
func (e *env) consumerRows(ctx context.Context, p *pgqProc) []Row {
	cl, err := client.New(p.addr, client.Options{Retry: client.RetryOptions{GiveUp: -1}})
	if err != nil {
		why := "consumers.Dial: " + trimErr(err)
		return []Row{
			notMeasured(latencyMetric+", p50", latencyTargetP50, why),
			notMeasured(latencyMetric+", p99", latencyTargetP99, why),
			notMeasured("consumer replay, Go library over HTTP", "≥ 300,000 changes/s", why),
		}
	}
	return append(e.latencyRows(ctx, cl, p), e.httpReplayRow(ctx, cl))
}

// latencyOnlyRows are the latency rows alone (Config.LatencyOnly).
func (e *env) latencyOnlyRows(ctx context.Context, p *pgqProc) []Row {
	cl, err := client.New(p.addr, client.Options{Retry: client.RetryOptions{GiveUp: -1}})
	if err != nil {
		why := "client.New: " + trimErr(err)
		return []Row{notMeasured(latencyMetric+", p50", latencyTargetP50, why), notMeasured(latencyMetric+", p99", latencyTargetP99, why)}
	}
	return e.latencyRows(ctx, cl, p)
}

// httpReplayRow replays the load pgq's journal from the start through the
// Go library (msgpack over HTTP, commit after each fetch), pass after pass
// with a fresh group, until sz.replay changes were read.
func (e *env) httpReplayRow(ctx context.Context, cl *client.Client) Row {
	const metric, target = "consumer replay, Go library over HTTP", "≥ 300,000 changes/s"
	var changes, txs, fetches int
	var el time.Duration
	for pass := 1; changes < e.sz.replay; pass++ {
		group := fmt.Sprintf("replay%d", pass)
		if _, err := cl.CreateGroup(ctx, consumers.CreateRequest{Name: group, From: "earliest"}); err != nil {
			return notMeasured(metric, target, "create group: "+trimErr(err))
		}
		cs, err := cl.Consumer(group, client.ConsumerOptions{Member: "bench", Max: 1000, MaxBytes: 4 << 20})
		if err != nil {
			return notMeasured(metric, target, "consumer: "+trimErr(err))
		}
		start := time.Now()
		before := changes
		for {
			caughtUp, err := cs.Poll(ctx, 0)
			if err != nil {
				return notMeasured(metric, target, "fetch: "+trimErr(err))
			}
			fetches++
			for cs.Buffered() > 0 {
				tx, err := cs.Next(ctx)
				if err != nil {
					return notMeasured(metric, target, "next: "+trimErr(err))
				}
				txs++
				changes += len(tx.Changes)
			}
			if err := cs.Commit(ctx); err != nil {
				return notMeasured(metric, target, "commit: "+trimErr(err))
			}
			if caughtUp {
				break
			}
		}
		el += time.Since(start)
		_ = cs.Close(ctx)
		_ = cl.DeleteGroup(ctx, group)
		if changes == before {
			return notMeasured(metric, target, "the journal is empty")
		}
	}
	v := float64(changes) / el.Seconds()
	r := Row{Metric: metric, Unit: "changes/s", PGQ: f64(v), Target: target}
	r.check(v >= 300_000)
	r.Note = fmt.Sprintf("%d changes in %d transactions, %d fetches (max 1000 tx / 4 MiB, commit after each) in %.2fs", changes, txs, fetches, el.Seconds())
	return r
}
