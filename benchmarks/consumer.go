package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
)

// consumerRows are the measurements through the consumers Go client
// library against the load pgq: end-to-end latency at 1,000 tx/s (item 3)
// and replay over HTTP (item 4).
func (e *env) consumerRows(ctx context.Context, p *pgqProc) []Row {
	cl, err := client.Dial(p.addr, client.Options{Retry: client.RetryOptions{GiveUp: -1}})
	if err != nil {
		why := "consumers.Dial: " + trimErr(err)
		return []Row{
			notMeasured("end-to-end latency at 1,000 tx/s, p99", "≤ 10 ms", why),
			notMeasured("consumer replay, Go library over HTTP", "≥ 300,000 changes/s", why),
		}
	}
	return []Row{e.latencyRow(ctx, cl, p), e.httpReplayRow(ctx, cl)}
}

// latencyRow: pgbench at a steady 1,000 tx/s inserts rows whose created
// column is clock_timestamp(); one consumer (Consume: commit after each
// fetched batch) receives them through the Go library, and the latency is
// its receive time minus created.
func (e *env) latencyRow(ctx context.Context, cl *client.Client, p *pgqProc) Row {
	const metric, target = "end-to-end latency at 1,000 tx/s, p99", "≤ 10 ms"
	const group = "latency"
	if _, err := cl.CreateGroup(ctx, consumers.CreateRequest{Name: group, From: "latest", Tables: []string{"public.bench_events"}}); err != nil {
		return notMeasured(metric, target, "create group: "+trimErr(err))
	}
	cs, err := cl.Consumer(group, client.ConsumerOptions{Member: "bench", Wait: time.Second, Max: 1000})
	if err != nil {
		return notMeasured(metric, target, "consumer: "+trimErr(err))
	}
	types := pgtype.NewMap()
	cctx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	var lats []time.Duration
	var decodeErr error
	warmup := time.Now().Add(time.Second)
	consumed := make(chan error, 1)
	go func() {
		consumed <- cs.Consume(cctx, func(_ context.Context, tx *pgq.Transaction) error {
			now := time.Now()
			for i := range tx.Changes {
				v, col, ok := tx.Changes[i].Get("created", false)
				if !ok {
					continue
				}
				x, err := v.Decode(types, col.TypeOID)
				t, isTime := x.(time.Time)
				if err != nil || !isTime {
					decodeErr = fmt.Errorf("created column: %v (%T)", err, x)
					continue
				}
				if t.After(warmup) {
					lats = append(lats, now.Sub(t))
				}
			}
			return nil
		})
	}()
	ingestBefore := p.durableWithin(ctx)
	e.log.Info("latency: pgbench at 1,000 tx/s", "for", e.sz.latencyFor)
	_, benchErr := e.pgbench(ctx, latencyScript, "-c", "2", "-j", "2", "-R", "1000", "-T", fmt.Sprint(int(e.sz.latencyFor.Seconds())))
	// Let the consumer take the tail, then stop it.
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
	}
	stopConsumer()
	cerr := <-consumed
	_ = cs.Close(context.WithoutCancel(ctx))
	if cerr != nil && !errors.Is(cerr, context.Canceled) {
		return notMeasured(metric, target, "consume: "+trimErr(cerr))
	}
	if benchErr != nil {
		return notMeasured(metric, target, trimErr(benchErr))
	}
	if len(lats) == 0 {
		why := "no rows received"
		if decodeErr != nil {
			why += ": " + trimErr(decodeErr)
		}
		return notMeasured(metric, target, why)
	}
	slices.Sort(lats)
	at := func(p float64) time.Duration { return lats[max(0, min(len(lats)-1, int(p/100*float64(len(lats)))))] }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p99 := at(99)
	r := Row{Metric: metric, Unit: "ms", PGQ: f64(ms(p99)), Target: target}
	r.check(p99 <= 10*time.Millisecond)
	r.Note = fmt.Sprintf("p50 %.2f ms, p99 %.2f ms, max %.2f ms over %d rows (first second skipped); commit → pgq fsync → fetch long-poll → Go library", ms(at(50)), ms(p99), ms(lats[len(lats)-1]), len(lats))
	r.Note = joinNotes(r.Note, ingestShare(ingestBefore, p.durableWithin(ctx)))
	return r
}

// durableBuckets are upper bounds (seconds) of pgq's
// pgq_commit_to_durable_seconds histogram read for the latency row.
var durableBuckets = []string{"0.004", "0.008", "0.016", "0.032", "0.064", "+Inf"}

// durableWithin reads the cumulative bucket counts of pgq's commit → fsync
// histogram (nil when unavailable).
func (p *pgqProc) durableWithin(ctx context.Context) []float64 {
	out := make([]float64, len(durableBuckets))
	for i, le := range durableBuckets {
		v, err := p.metric(ctx, `pgq_commit_to_durable_seconds_bucket{le="`+le+`"}`)
		if err != nil {
			return nil
		}
		out[i] = v
	}
	return out
}

// ingestShare splits the end-to-end row: which share of the phase's
// transactions pgq had fsynced within each bound after their commit.
func ingestShare(before, after []float64) string {
	if before == nil || after == nil {
		return "pgq commit → fsync histogram unavailable"
	}
	total := after[len(after)-1] - before[len(before)-1]
	if total <= 0 {
		return "pgq commit → fsync: no transactions"
	}
	parts := make([]string, 0, len(durableBuckets)-1)
	for i, le := range durableBuckets[:len(durableBuckets)-1] {
		ms, _ := strconv.ParseFloat(le, 64)
		parts = append(parts, fmt.Sprintf("≤%gms %.1f%%", ms*1000, 100*(after[i]-before[i])/total))
	}
	return "pgq commit → fsync (its own histogram): " + strings.Join(parts, ", ")
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
