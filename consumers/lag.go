package consumers

import (
	"errors"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/index"
)

// Lag is how far a group is behind the journal's end (api.Lag).
type Lag = api.Lag

// GroupInfo describes a group (api.GroupInfo).
type GroupInfo = api.GroupInfo

func (m *Manager) info(g *group) GroupInfo {
	g.mu.Lock()
	st, delivered := g.st, g.delivered
	var si *api.SharedInfo
	if g.sh != nil {
		si = g.sharedInfoLocked()
		delivered = g.sh.scanned
		st.Cursor = max(st.Cursor, g.sh.low) // acked, perhaps not written yet
	}
	g.mu.Unlock()
	gi := GroupInfo{
		Name: g.name, From: st.From, Tables: st.Filter.Tables, Ops: st.Filter.Ops,
		CommittedOffset: st.Cursor, Delivered: delivered,
		Created: time.UnixMicro(st.Created).UTC(), Updated: time.UnixMicro(st.Updated).UTC(),
	}
	gi.Committed = gi.CommittedOffset //nolint:staticcheck // filled for one release, see api.GroupInfo
	if gi.Tables == nil {
		gi.Tables = []string{}
	}
	if gi.Ops == nil {
		gi.Ops = []string{}
	}
	now := m.o.Now()
	if st.Member != "" && now.UnixMicro() < st.LeaseExpiry {
		gi.Member = st.Member
		t := time.UnixMicro(st.LeaseExpiry).UTC()
		gi.LeaseExpires = &t
	}
	gi.Lag = m.groupLag(g, st.Filter, st.Cursor, now)
	gi.Mode, gi.Shared = "exclusive", si
	if st.HoldSlot {
		gi.HoldSlot, gi.HoldReleased = true, m.holdReleased(g.name)
	}
	if si != nil {
		gi.Mode = modeShared
	}
	m.stuckInfo(g, &gi) // corrupt.go
	return gi
}

// lag computes the lag of a cursor counting every record (a group without
// filter; groupLag counts a filtered group's).
func (m *Manager) lag(cursor pgq.Offset, now time.Time) Lag {
	first, last := m.bounds()
	var l Lag
	if last <= cursor {
		return l
	}
	next := cursor + 1
	l.Records = uint64(last - cursor)
	if next < first {
		l.OutOfRange = true
		next = first
	}
	ixLast := min(m.ix.LastOffset(), last)
	if b, err := m.ix.BytesBetween(next, ixLast); err == nil {
		l.Bytes = b
	}
	l.IndexStale = ixLast < last && errors.Is(m.ix.Err(), index.ErrStale)
	if e, err := m.ix.EntryAt(next); err == nil {
		l.Seconds = max(now.Sub(e.CommitTime).Seconds(), 0)
	} else if tx, err := m.j.Read(next); err == nil {
		l.Seconds = max(now.Sub(tx.CommitTime).Seconds(), 0)
	}
	return l
}

// MinCursor returns the lowest committed cursor over all groups, and false
// when there are no groups. For a shared group it is its acked low-water
// mark, or less when a parked (or requeued, unacked) message lies below it.
func (m *Manager) MinCursor() (pgq.Offset, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var lo pgq.Offset
	ok := false
	for _, g := range m.groups {
		g.mu.Lock()
		c := g.st.Cursor
		if g.sh != nil {
			c = g.retainFromLocked()
		}
		g.mu.Unlock()
		if !ok || c < lo {
			lo, ok = c, true
		}
	}
	return lo, ok
}

// Lags returns the lag of every group by name.
func (m *Manager) Lags() map[string]Lag {
	m.mu.Lock()
	gs := make([]*group, 0, len(m.groups))
	for _, g := range m.groups {
		gs = append(gs, g)
	}
	m.mu.Unlock()
	now := m.o.Now()
	out := make(map[string]Lag, len(gs))
	for _, g := range gs {
		g.mu.Lock()
		c, f := g.st.Cursor, g.st.Filter
		g.mu.Unlock()
		out[g.name] = m.groupLag(g, f, c, now)
	}
	return out
}
