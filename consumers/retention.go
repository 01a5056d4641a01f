package consumers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/opterr"
	"github.com/pgq-dev/pgq/record"
	"github.com/prometheus/client_golang/prometheus"
)

// RetentionOptions configure Retain. The zero value keeps every record some
// group still needs and nothing else bounds the journal.
type RetentionOptions struct {
	// MinAge keeps records younger than this (by commit time) even when
	// every group has committed them. Zero: no minimum.
	MinAge time.Duration
	// MaxAge drops records older than this even when a group still needs
	// them (such a group then gets ErrOutOfRange). Zero: no cap.
	MaxAge time.Duration
	// MaxBytes drops the oldest segments while the journal is larger than
	// this, regardless of groups. Zero: no cap.
	MaxBytes int64
	// Interval between retention passes of the sidecar; zero → 10s.
	Interval time.Duration
}

// Validate rejects negative values and a MaxAge below MinAge.
func (o RetentionOptions) Validate() error {
	if o.MinAge < 0 || o.MaxAge < 0 || o.MaxBytes < 0 || o.Interval < 0 {
		return opterr.New(nil, "consumers: retention: negative {} value", opterr.Of("consumers.RetentionOptions"))
	}
	if o.MaxAge > 0 && o.MaxAge < o.MinAge {
		return opterr.New(nil, "consumers: retention: {} (%s) is below {} (%s)", opterr.Of("consumers.RetentionOptions.MaxAge", "consumers.RetentionOptions.MinAge"), o.MaxAge, o.MinAge)
	}
	return nil
}

// RetainResult reports one retention pass.
type RetainResult struct {
	// Target is the offset retention wanted as the new first record,
	// before rounding down to a segment start.
	Target pgq.Offset
	// First is the journal's first offset after the pass.
	First pgq.Offset
	// Dropped is the number of records removed.
	Dropped uint64
	// Lost names the groups that had not committed records the pass
	// dropped (only age and size caps do that), and the offsets.
	Lost []GroupLoss
}

// GroupLoss is a range of offsets a group will never receive.
type GroupLoss struct {
	Group    string
	From, To pgq.Offset
}

// Retain runs one retention pass. The new start of the journal is
//
//	max(min(groups, minAge), maxAge, maxBytes)
//
// where groups is the lowest cursor+1 over all groups (no bound when there
// are no groups: nothing is dropped for lack of readers), minAge the first
// record younger than MinAge, maxAge the first record younger than MaxAge
// and maxBytes the first segment to keep under MaxBytes. It is rounded down
// to the start of the segment holding it (the journal drops whole
// segments), and the journal moves it back to part 0 when that start is
// inside a multi-part transaction; the last record is never dropped, and
// the index is truncated to match. The caps win over MinAge.
//
// A cap that drops records a group with a filter has not committed (a
// shared group: with no message outstanding), none of which its filter
// passes, moves that group's cursor
// over them (skipFiltered, lagsel.go) instead of leaving it out of range:
// it would never have received them. The rule reads the records' subject
// sets in the index, so it is exact where they are known; records of
// unknown subjects count as the group's, and the group goes out of range
// as before.
func (m *Manager) Retain(ctx context.Context, o RetentionOptions) (RetainResult, error) {
	first, last := m.bounds()
	res := RetainResult{First: first}
	if last == 0 {
		return res, nil
	}
	now := m.o.Now()
	target := first // keep everything
	if c, ok := m.MinCursor(); ok {
		target = max(c+1, first)
		if o.MinAge > 0 {
			off, err := m.ix.SeekTime(now.Add(-o.MinAge))
			switch {
			case err == nil:
				target = min(target, off)
			case errors.Is(err, index.ErrNotFound): // every record is older
			default:
				return res, fmt.Errorf("consumers: retention: %w", err)
			}
		}
	}
	if o.MaxAge > 0 {
		off, err := m.ix.SeekTime(now.Add(-o.MaxAge))
		switch {
		case err == nil:
			target = max(target, off)
		case errors.Is(err, index.ErrNotFound):
			target = last + 1
		default:
			return res, fmt.Errorf("consumers: retention: %w", err)
		}
	}
	segs, err := m.j.Segments()
	if err != nil {
		return res, fmt.Errorf("consumers: retention: %w", err)
	}
	if o.MaxBytes > 0 {
		var total int64
		for _, s := range segs {
			total += s.Bytes
		}
		for i := 0; i < len(segs)-1 && total > o.MaxBytes; i++ {
			total -= segs[i].Bytes
			target = max(target, segs[i+1].FirstOffset)
		}
	}
	res.Target = target
	// Round down to a segment start.
	cut := pgq.Offset(0)
	for _, s := range segs {
		if s.FirstOffset <= target {
			cut = s.FirstOffset
		}
	}
	cut = min(cut, last)
	if cut <= first {
		return res, nil
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	// The journal moves a cut inside a multi-part transaction back to its
	// part 0 (parts are consecutive records); so does skipFiltered.
	if raw, err := m.j.ReadRaw(cut); err == nil {
		if ri, err := record.Peek(raw); err == nil {
			cut -= pgq.Offset(ri.Part)
		}
	}
	if cut <= first {
		return res, nil
	}
	// Filtered groups that would receive none of the dropped records move
	// over them instead of going out of range (lagsel.go), before the
	// journal drops them: the index still knows their subjects.
	m.skipFiltered(cut)
	// The index follows the journal's actual start.
	if err := m.j.TruncateFront(cut); err != nil {
		return res, fmt.Errorf("consumers: retention: %w", err)
	}
	if err := m.ix.TruncateFront(m.j.FirstOffset()); err != nil {
		return res, fmt.Errorf("consumers: retention: %w", err)
	}
	res.First = m.j.FirstOffset()
	res.Dropped = uint64(res.First - first)
	m.o.Logger.Info("retention: dropped journal records", "dropped", res.Dropped, "first", res.First, "target", target)
	m.reportLost(ctx, &res, first)
	return res, nil
}

// reportLost records, per group, what a pass that moved the journal's
// start from first to res.First dropped before the group committed it:
// a cap (age or size) may do that, and it is said loudly, with the
// offsets the group will never see. A group still out of range from an
// earlier pass (its cursor below first) loses this pass's records too:
// they count from first, so that the counter and the warnings add up to
// every record the group lost, not only those of the first pass.
func (m *Manager) reportLost(ctx context.Context, res *RetainResult, first pgq.Offset) {
	for _, g := range m.List(ctx) {
		if g.CommittedOffset+1 >= res.First {
			continue
		}
		lost := max(g.CommittedOffset+1, first)
		res.Lost = append(res.Lost, GroupLoss{Group: g.Name, From: lost, To: res.First - 1})
		m.retentionLost.WithLabelValues(g.Name).Add(float64(res.First - lost))
		m.o.Logger.Warn("retention: dropped records a group had not consumed (consumers.RetentionOptions.MaxAge / consumers.RetentionOptions.MaxBytes); the group is out of range until reset",
			"group", g.Name, "lost_from", lost, "lost_to", res.First-1, "records", uint64(res.First-lost))
	}
}

// RunRetention runs Retain every o.Interval until ctx ends. Errors are
// logged and retried on the next tick.
func (m *Manager) RunRetention(ctx context.Context, o RetentionOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Interval == 0 {
		o.Interval = 10 * time.Second
	}
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.done:
			return nil
		case <-t.C:
		}
		if _, err := m.Retain(ctx, o); err != nil && ctx.Err() == nil {
			m.o.Logger.Error("retention pass failed", "error", err)
		}
	}
}

// RetentionLost is the pgq_retention_lost_records_total counter (by group).
func (m *Manager) RetentionLost() *prometheus.CounterVec { return m.retentionLost }
