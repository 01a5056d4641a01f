package consumers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

// DefaultHoldSlotMaxLag is ManagerOptions.HoldSlotMaxLag's default: past
// it a holding group lets the slot go, so that a stuck consumer cannot
// fill the database's disk with WAL.
const DefaultHoldSlotMaxLag = 16 << 30

// holdRefreshEvery is how often the hold floor is recomputed without a
// kick: shared groups' acks and an idle journal's lag move it too.
const holdRefreshEvery = time.Second

// holdState is the Manager's bookkeeping of the groups that hold the
// slot (hold_slot): the floor ingest reads without a lock, and, per
// group, the floor of its last committed position (cached by cursor: a
// journal read only when the cursor moved) and whether it is past the
// lag bound.
type holdState struct {
	mu       sync.Mutex // serializes refresh; guards the maps
	floors   map[string]holdFloor
	released map[string]bool
	floor    atomic.Uint64
	holding  atomic.Bool
	// any is set (for good) before a group first holds the slot: until
	// then holders has none to find and locks no group. RefreshHold runs
	// at every durable batch (KickHold), and locking each of a thousand
	// groups there took 6 % of pgq's CPU in the thousand readers bench.
	any   atomic.Bool
	kick  chan struct{}
	gauge *prometheus.GaugeVec
}

type holdFloor struct {
	cursor pgq.Offset
	lsn    pgq.LSN
}

func (h *holdState) init() {
	h.floors, h.released = map[string]holdFloor{}, map[string]bool{}
	h.kick = make(chan struct{}, 1)
	h.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pgq_hold_slot_released",
		Help: "1 while a hold_slot group is past --hold-slot-max-lag: the slot is confirmed past what it has not committed.",
	}, []string{"group"})
}

// HoldFloor is the LSN the slot may be confirmed to at most for the
// groups that hold it: the end LSN of the last complete transaction at or
// below the oldest committed position among them (0: none committed yet;
// ingest then keeps the slot where it is). ok is false when no group
// holds the slot (or every holder is past the lag bound). It reads two
// atomics: ingest calls it on every status update.
func (m *Manager) HoldFloor() (pgq.LSN, bool) {
	return pgq.LSN(m.hold.floor.Load()), m.hold.holding.Load()
}

// KickHold asks for the hold floor to be recomputed soon (after a commit
// or a durable batch); it never blocks.
func (m *Manager) KickHold() {
	select {
	case m.hold.kick <- struct{}{}:
	default:
	}
}

// holdLoop recomputes the floor when kicked and every holdRefreshEvery,
// until Close.
func (m *Manager) holdLoop() {
	t := time.NewTicker(holdRefreshEvery)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-m.hold.kick:
		case <-t.C:
		}
		m.RefreshHold()
	}
}

// holder is a holding group's name and committed position.
type holder struct {
	name   string
	cursor pgq.Offset
}

func (m *Manager) holders() []holder {
	if !m.hold.any.Load() {
		return nil
	}
	m.mu.Lock()
	gs := make([]*group, 0, len(m.groups))
	for _, g := range m.groups {
		gs = append(gs, g)
	}
	m.mu.Unlock()
	var out []holder
	for _, g := range gs {
		g.mu.Lock()
		if g.st.HoldSlot && !g.deleted {
			c := g.st.Cursor
			if g.sh != nil {
				c = max(c, g.sh.low) // acked, perhaps not written yet
			}
			out = append(out, holder{g.name, c})
		}
		g.mu.Unlock()
	}
	return out
}

// RefreshHold recomputes the hold floor now. A holder whose lag (the
// journal's end LSN minus its floor) is past HoldSlotMaxLag is left out
// (WARN, pgq_hold_slot_released, hold_released in its info) until it is
// back within the bound.
func (m *Manager) RefreshHold() {
	h := &m.hold
	h.mu.Lock()
	defer h.mu.Unlock()
	end := m.j.LastEndLSN()
	var floor pgq.LSN
	holding := false
	seen := map[string]bool{}
	for _, hg := range m.holders() {
		seen[hg.name] = true
		f, base, err := m.floorOf(hg)
		if err != nil {
			// Unknown: hold at the slot's position rather than guess.
			m.o.Logger.Warn("hold_slot: cannot read the group's committed position; holding the slot where it is", "group", hg.name, "error", err)
			f, base = 0, end
		}
		lag := int64(0)
		if end > base {
			lag = int64(end - base)
		}
		if m.noteRelease(hg.name, lag > m.o.HoldSlotMaxLag, lag) {
			continue
		}
		if !holding || f < floor {
			floor = f
		}
		holding = true
	}
	for name := range h.floors {
		if !seen[name] {
			delete(h.floors, name)
			delete(h.released, name)
			h.gauge.DeleteLabelValues(name)
		}
	}
	h.floor.Store(uint64(floor))
	h.holding.Store(holding)
}

// noteRelease records whether a holder is past the lag bound, logging the
// transitions; it reports released. h.mu is held.
func (m *Manager) noteRelease(name string, released bool, lag int64) bool {
	h := &m.hold
	if released != h.released[name] {
		if released {
			m.o.Logger.Warn("hold_slot: the group is past consumers.ManagerOptions.HoldSlotMaxLag; the slot is no longer held for it (what is confirmed meanwhile is not protected against losing pgq's disk)", "group", name, "lag_bytes", lag, "max_lag_bytes", m.o.HoldSlotMaxLag)
		} else {
			m.o.Logger.Info("hold_slot: the group is back within consumers.ManagerOptions.HoldSlotMaxLag; holding the slot for it again", "group", name, "lag_bytes", lag)
		}
	}
	h.released[name] = released
	v := 0.0
	if released {
		v = 1
	}
	h.gauge.WithLabelValues(name).Set(v)
	return released
}

// floorOf returns a holder's floor (see HoldFloor) and the LSN its lag is
// measured from (the floor, or the journal's first commit LSN when the
// floor is 0). h.mu is held.
func (m *Manager) floorOf(hg holder) (floor, base pgq.LSN, err error) {
	if c, ok := m.hold.floors[hg.name]; ok && c.cursor == hg.cursor && c.lsn != 0 {
		return c.lsn, c.lsn, nil
	}
	first, last := m.bounds()
	cur := min(hg.cursor, last)
	if cur >= first {
		floor, err = m.completeAt(cur, first)
		if err != nil {
			return 0, 0, err
		}
	}
	m.hold.floors[hg.name] = holdFloor{hg.cursor, floor}
	if floor != 0 || first > last {
		return floor, floor, nil
	}
	ri, err := m.peek(first)
	return 0, ri.CommitLSN, err
}

// completeAt is the end LSN of the last complete transaction at or below
// offset off: off's own when it holds a final part, else the one before
// off's transaction's first part (0 when that is before the journal).
func (m *Manager) completeAt(off, first pgq.Offset) (pgq.LSN, error) {
	ri, err := m.peek(off)
	if err != nil || ri.Final {
		return ri.EndLSN, err
	}
	prev := off - pgq.Offset(ri.Part) - 1
	if prev < first || prev > off {
		return 0, nil
	}
	ri, err = m.peek(prev)
	return ri.EndLSN, err
}

func (m *Manager) peek(off pgq.Offset) (record.Info, error) {
	raw, err := m.j.ReadRaw(off)
	if err != nil {
		return record.Info{}, fmt.Errorf("consumers: read offset %d: %w", off, err)
	}
	ri, err := record.Peek(raw)
	if err != nil {
		return record.Info{}, fmt.Errorf("consumers: offset %d: %w", off, err)
	}
	return ri, nil
}

// holdReleased reports whether a holding group is past the lag bound.
func (m *Manager) holdReleased(name string) bool {
	m.hold.mu.Lock()
	defer m.hold.mu.Unlock()
	return m.hold.released[name]
}

// HoldSlotFor marks the named groups as holding the slot, creating those
// that do not exist (exclusive, no filter, from earliest), and computes
// the floor: pgq run --hold-slot-for calls it before ingest streams, so a
// brand-new data dir holds from its first record.
func (m *Manager) HoldSlotFor(ctx context.Context, names []string) error {
	for _, name := range names {
		if err := m.holdSlotFor(ctx, name); err != nil {
			return err
		}
	}
	m.RefreshHold()
	return nil
}

func (m *Manager) holdSlotFor(ctx context.Context, name string) error {
	_, err := m.Create(ctx, CreateRequest{Name: name, From: "earliest", HoldSlot: true})
	if !errors.Is(err, ErrExists) {
		return err
	}
	g, err := m.get(name)
	if err != nil {
		return err
	}
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	if g.st.HoldSlot {
		g.mu.Unlock()
		return nil
	}
	st := g.st
	g.mu.Unlock()
	st.HoldSlot = true
	m.hold.any.Store(true)
	if err := m.persistState(name, &st); err != nil {
		return err
	}
	g.mu.Lock()
	g.st.HoldSlot = true
	g.mu.Unlock()
	return nil
}
