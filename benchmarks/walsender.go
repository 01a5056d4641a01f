package benchmarks

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// walsenderSampler samples what the walsenders of the cluster are doing,
// to see whether a reader back-pressures its walsender: a walsender
// waiting with wait event WalSenderWriteData has output the client is not
// reading fast enough (the TCP window is full); one running (no wait
// event) is decoding.
type walsenderSampler struct {
	cancel context.CancelFunc
	done   chan map[string]int
}

// sampleWalsenders starts sampling pg_stat_activity every 5 ms on a
// connection of its own, until stop.
func (e *env) sampleWalsenders(ctx context.Context) (*walsenderSampler, error) {
	conn, err := e.cluster.Connect(ctx, e.db)
	if err != nil {
		return nil, fmt.Errorf("walsender sampler: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &walsenderSampler{cancel: cancel, done: make(chan map[string]int, 1)}
	go func() {
		defer conn.Close(context.WithoutCancel(ctx))
		counts := map[string]int{}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				s.done <- counts
				return
			case <-tick.C:
			}
			rows, err := conn.Query(sctx, `SELECT coalesce(wait_event, 'running') FROM pg_stat_activity WHERE backend_type = 'walsender' AND state = 'active'`)
			if err != nil {
				continue
			}
			for rows.Next() {
				var ev string
				if rows.Scan(&ev) == nil {
					counts[ev]++
				}
			}
			rows.Close()
		}
	}()
	return s, nil
}

// stop ends the sampling and describes it: the share of samples per wait
// event, the largest first.
func (s *walsenderSampler) stop() string {
	s.cancel()
	counts := <-s.done
	total := 0
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range counts {
		total += v
		all = append(all, kv{k, v})
	}
	if total == 0 {
		return "no walsender samples"
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v })
	var parts []string
	for _, x := range all {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", x.k, 100*float64(x.v)/float64(total)))
	}
	return fmt.Sprintf("walsender %s (%d samples)", strings.Join(parts, ", "), total)
}
