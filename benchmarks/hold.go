package benchmarks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
)

// holdReps is how many times the hold row drains its range each way
// (alternately, after one warm-up drain that does not count: the first
// drain after the workload was the slowest by far in the first runs); it
// compares the medians.
const holdReps = 5

// holdGroup is the consumer group of the hold row's drains.
const holdGroup = "holdbench"

// holdDrain is one drain of the hold row.
type holdDrain struct {
	pgqDrain
	consumed int  // changes the group's consumer read by the time the range was journaled
	holds    bool // the group held the slot (hold_slot in its info)
}

// holdRow (issue 24 section 3) measures what holding the slot for a group
// costs ingest: the workload's range drained by `pgq run --hold-slot-for
// holdbench` (the group created at Open, from earliest, holding from the
// first record) against the same drain with the same group created from
// earliest over the API but not holding, each with one consumer (the Go
// client, up to 1,000 transactions or 4 MiB a fetch, commit after each)
// keeping up meanwhile, so that the holding run confirms the slot as the
// group commits. Both sides have the consumer: the row isolates the hold
// (feedback confirming no further than the group's committed position,
// the floor's upkeep), not what reading the journal costs. Time: from exec until the journal holds
// the range's last transaction, as the other ingest rows.
func (e *env) holdRow(ctx context.Context, r walRange) Row {
	const metric, target = "ingest with a keeping-up group holding the slot (--hold-slot-for) vs not holding", "≥ 0.9× (≤ 10 % worse)"
	var held, free []holdDrain
	if _, err := e.drainHolding(ctx, "pgq-hold-warmup", "pgqbench_hold_warmup", r, false); err != nil {
		return notMeasured(metric, target, "warm-up drain: "+trimErr(err))
	}
	for i := range holdReps {
		for _, hold := range []bool{i%2 == 0, i%2 != 0} {
			e.settleDisk()
			name := fmt.Sprintf("pgq-hold-%v-%d", hold, i)
			d, err := e.drainHolding(ctx, name, fmt.Sprintf("pgqbench_hold_%v_%d", hold, i), r, hold)
			if err != nil {
				return notMeasured(metric, target, trimErr(err))
			}
			e.log.Info("drained", "range", "hold", "hold", hold, "pgq", d.elapsed.Round(time.Millisecond), "consumed", d.consumed)
			if hold {
				held = append(held, d)
			} else {
				free = append(free, d)
			}
		}
	}
	byTime := func(a, b holdDrain) int { return cmp.Compare(a.elapsed, b.elapsed) }
	slices.SortFunc(held, byTime)
	slices.SortFunc(free, byTime)
	h, f := held[len(held)/2], free[len(free)/2]
	v, ref := float64(r.changes)/h.elapsed.Seconds(), float64(r.changes)/f.elapsed.Seconds()
	row := Row{Metric: metric, Unit: "changes/s", PGQ: f64(v), Reference: f64(ref), RefName: "group not holding", Ratio: f64(v / ref), Target: target}
	row.check(v/ref >= 0.9)
	var ts []string
	for i := range held {
		ts = append(ts, fmt.Sprintf("%.2f/%.2f", held[i].elapsed.Seconds(), free[i].elapsed.Seconds()))
	}
	row.Note = fmt.Sprintf("%d changes in %d tx; medians of %d drains each, sorted holding/not s: %s; CPU pgq %.2fs vs %.2fs; the consumer had read %d and %d changes when the range was journaled",
		r.changes, r.txs, holdReps, strings.Join(ts, " "), h.cpu.Seconds(), f.cpu.Seconds(), h.consumed, f.consumed)
	for _, d := range slices.Concat(held, free) {
		if int(d.changes) != r.changes {
			row.Status = Fail
			row.Note = joinNotes(row.Note, fmt.Sprintf("a pgq drain journaled %d changes, want %d", int(d.changes), r.changes))
			break
		}
	}
	for _, d := range held {
		if !d.holds {
			row.Status = Fail
			row.Note = joinNotes(row.Note, "a --hold-slot-for drain's group did not hold the slot")
			break
		}
	}
	return row
}

// drainHolding is drainPGQ with the group holdGroup and one consumer
// reading it meanwhile; with hold the group holds the slot.
func (e *env) drainHolding(ctx context.Context, name, slot string, r walRange, hold bool) (holdDrain, error) {
	var d holdDrain
	if err := e.copySlot(ctx, r.template, slot); err != nil {
		return d, err
	}
	defer e.dropSlot(ctx, slot)
	var extra []string
	if hold {
		extra = []string{"--hold-slot-for", holdGroup}
	}
	p, err := e.startPGQ(ctx, name, slot, extra...)
	if err != nil {
		return d, err
	}
	cl, err := client.New(p.addr, client.Options{Retry: client.RetryOptions{GiveUp: 30 * time.Second}})
	if err != nil {
		_ = p.stop()
		return d, fmt.Errorf("client: %w", err)
	}
	cctx, stopConsumer := context.WithCancel(ctx)
	consumed := make(chan consumeResult, 1)
	go func() { consumed <- consumeGroup(cctx, cl, !hold) }()
	at, st, werr := p.waitJournaled(ctx, r.lastTx, 10*time.Minute)
	d.elapsed, d.status = at.Sub(p.started), st
	stopConsumer()
	res := <-consumed
	d.consumed = res.changes
	if werr == nil && res.err != nil {
		werr = fmt.Errorf("consumer: %w", res.err)
	}
	if werr == nil {
		d.changes, werr = p.metric(ctx, "pgq_changes_written_total")
	}
	if werr == nil && hold {
		d.holds, werr = holdsSlot(ctx, cl)
	}
	serr := p.stop()
	if ps := p.cmd.ProcessState; ps != nil {
		d.cpu = ps.UserTime() + ps.SystemTime()
	}
	if err := errors.Join(werr, serr); err != nil {
		return d, fmt.Errorf("pgq drain (log %s.log): %w", name, err)
	}
	return d, nil
}

// consumeResult is what consumeGroup read.
type consumeResult struct {
	changes int
	err     error
}

// consumeGroup reads holdGroup until ctx ends, committing after each
// fetch; create makes the group first (from earliest).
func consumeGroup(ctx context.Context, cl *client.Client, create bool) consumeResult {
	var res consumeResult
	if create {
		if _, err := cl.CreateGroup(ctx, api.CreateRequest{Name: holdGroup, From: "earliest"}); err != nil {
			res.err = fmt.Errorf("create group: %w", err)
			return res
		}
	}
	cs, err := cl.Consumer(holdGroup, client.ConsumerOptions{Member: "bench", Max: 1000, MaxBytes: 4 << 20})
	if err != nil {
		res.err = err
		return res
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = cs.Close(cctx)
	}()
	for ctx.Err() == nil {
		if _, err := cs.Poll(ctx, 100*time.Millisecond); err != nil {
			if ctx.Err() == nil {
				res.err = err
			}
			return res
		}
		for cs.Buffered() > 0 {
			tx, err := cs.Next(ctx)
			if err != nil {
				if ctx.Err() == nil {
					res.err = err
				}
				return res
			}
			res.changes += len(tx.Changes)
		}
		if err := cs.Commit(ctx); err != nil && ctx.Err() == nil {
			res.err = err
			return res
		}
	}
	return res
}

// holdsSlot reports whether the group holds the slot (hold_slot in its
// info): the drain measured what it meant to.
func holdsSlot(ctx context.Context, cl *client.Client) (bool, error) {
	gi, err := cl.Group(ctx, holdGroup)
	if err != nil {
		return false, fmt.Errorf("group info: %w", err)
	}
	return gi.HoldSlot, nil
}

// holdOnlyRows writes the ingest workload and measures the hold row alone
// (Config.Only "hold").
func (e *env) holdOnlyRows(ctx context.Context) ([]Row, error) {
	w, err := e.runWorkload(ctx, func(walRange) error { return nil })
	if err != nil {
		return nil, err
	}
	defer e.dropSlot(ctx, templateSlot)
	defer e.dropSlot(ctx, bulkTemplateSlot)
	return []Row{e.holdRow(ctx, w.whole())}, nil
}
