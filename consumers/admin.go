package consumers

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
	"github.com/pgq-dev/pgq/record"
)

// Resolve returns the first offset a group starting at p would deliver.
// An lsn: or time: position that the index cannot answer while it is stale
// (behind the journal, healing) fails with ErrUnavailable (HTTP 503):
// retry shortly. A position never starts inside a multi-part transaction
// (its consumer would get parts without part 0): offset:N on a later part
// fails with ErrBadPosition naming the first part's offset, and any other
// kind that lands on one moves back to its first part.
func (m *Manager) Resolve(p Position) (pgq.Offset, error) {
	off, err := m.resolve(p)
	if err != nil {
		return 0, err
	}
	return m.wholeTx(p, off)
}

// wholeTx returns off, or the offset of the first part of the multi-part
// transaction that off holds a later part of (an error for offset:N).
func (m *Manager) wholeTx(p Position, off pgq.Offset) (pgq.Offset, error) {
	first, last := m.bounds()
	if off < first || off > last {
		return off, nil
	}
	raw, err := m.j.ReadRaw(off)
	if errors.Is(err, journal.ErrNotFound) && off < m.j.FirstOffset() {
		return 0, errf(ErrOutOfRange, "%s: offset %d was just removed by retention", p, off)
	}
	if err != nil {
		return 0, fmt.Errorf("consumers: resolve %s: %w", p, err)
	}
	ri, err := record.Peek(raw)
	if err != nil {
		return 0, fmt.Errorf("consumers: resolve %s: offset %d: %w", p, off, err)
	}
	if ri.Part == 0 {
		return off, nil
	}
	// Parts are consecutive records; retention never starts the journal
	// inside a transaction, so its first part is still there.
	p0 := max(off-pgq.Offset(ri.Part), first)
	if p.Kind == PosOffset {
		return 0, errf(ErrBadPosition, "%s is part %d of a multi-part transaction (xid %d): start at its first part, offset:%d", p, ri.Part, ri.Xid, p0)
	}
	return p0, nil
}

func (m *Manager) resolve(p Position) (pgq.Offset, error) {
	first, last := m.bounds()
	seekMiss := func() pgq.Offset { return max(m.ix.LastOffset()+1, first) }
	switch p.Kind {
	case PosEarliest:
		return first, nil
	case PosLatest:
		return last + 1, nil
	case PosOffset:
		if p.Offset < first || p.Offset > last+1 {
			return 0, errf(ErrOutOfRange, "%s: the journal holds offsets %d..%d", p, first, last)
		}
		return p.Offset, nil
	case PosLSN:
		off, err := m.ix.SeekLSN(p.LSN)
		if errors.Is(err, index.ErrNotFound) {
			return seekMiss(), nil
		}
		if err != nil {
			return 0, m.resolveErr(p, err)
		}
		return max(off, first), nil
	case PosTime:
		off, err := m.ix.SeekTime(p.Time)
		if errors.Is(err, index.ErrNotFound) {
			return seekMiss(), nil
		}
		if err != nil {
			return 0, m.resolveErr(p, err)
		}
		return max(off, first), nil
	}
	return 0, errf(ErrBadPosition, "invalid position %q", p)
}

func (m *Manager) resolveErr(p Position, err error) error {
	if errors.Is(err, index.ErrStale) {
		return errf(ErrUnavailable, "resolve %s: the index is behind the journal and catching up; retry shortly: %w", p, err)
	}
	return fmt.Errorf("consumers: resolve %s: %w", p, err)
}

// CreateRequest creates a group (api.CreateRequest; From is a position
// for ParsePosition, empty → "latest").
type CreateRequest = api.CreateRequest

// Create creates a group at its start position. An existing name fails
// with ErrExists.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (GroupInfo, error) {
	if err := ValidateName(req.Name); err != nil {
		return GroupInfo{}, err
	}
	if req.From == "" {
		req.From = "latest"
	}
	pos, err := ParsePosition(req.From)
	if err != nil {
		return GroupInfo{}, err
	}
	f := Filter{Tables: req.Tables, Ops: req.Ops}
	if err := f.Validate(); err != nil {
		return GroupInfo{}, err
	}
	var shared *sharedConfig
	switch req.Mode {
	case "", "exclusive":
		if req.AckWait != 0 || req.MaxDeliver != 0 || len(req.Backoff) > 0 || req.MaxAckPending != 0 || req.Key != "" {
			return GroupInfo{}, errf(ErrBadRequest, "ack_wait, max_deliver, backoff, max_ack_pending and key apply to shared groups (mode \"shared\") only")
		}
	case modeShared:
		if shared, err = validateShared(req); err != nil {
			return GroupInfo{}, err
		}
	default:
		return GroupInfo{}, errf(ErrBadRequest, "mode %q: want exclusive or shared", req.Mode)
	}
	if m.closed() {
		return GroupInfo{}, ErrClosed
	}
	// m.ddl keeps every other create and delete out until the group is
	// written and published; m.mu is held only to look at the map, so
	// lookups of other groups go on during the fsync.
	m.ddl.Lock()
	defer m.ddl.Unlock()
	if m.exists(req.Name) {
		return GroupInfo{}, errf(ErrExists, "group %q already exists", req.Name)
	}
	next, err := m.Resolve(pos)
	if err != nil {
		return GroupInfo{}, err
	}
	now := m.o.Now().UnixMicro()
	st := groupState{V: stateVersion, Cursor: next - 1, From: pos.String(), Filter: f, Created: now, Updated: now, HoldSlot: req.HoldSlot}
	if shared != nil {
		st.Mode, st.Shared = modeShared, shared
	}
	g := newGroup(req.Name, st)
	if err := m.persist(g); err != nil { // g is not published: we own it alone
		return GroupInfo{}, err
	}
	if st.HoldSlot {
		m.hold.any.Store(true) // before holders can find it
	}
	m.mu.Lock()
	m.groups[req.Name] = g
	m.mu.Unlock()
	if st.HoldSlot {
		m.RefreshHold()
	}
	return m.info(g), nil
}

func (m *Manager) exists(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.groups[name]
	return ok
}

// Delete removes a group; its waiting fetches fail with ErrNotFound.
func (m *Manager) Delete(ctx context.Context, name string) error {
	// m.ddl keeps creates and deletes out (a Delete of a name being
	// created waits for the Create and then finds the group), g.pmu every
	// write of the group (a commit, a new lease): none may land after the
	// delete. m.mu is not held across the fsync: lookups go on meanwhile
	// (and may still find the group until it is unpublished below).
	if err := ValidateName(name); err != nil {
		return err
	}
	m.ddl.Lock()
	defer m.ddl.Unlock()
	g, err := m.get(name)
	if err != nil {
		return err
	}
	g.pmu.Lock()
	defer g.pmu.Unlock()
	if m.lookup(name) != g {
		return errf(ErrNotFound, "group %q not found", name)
	}
	if err := m.ix.DeleteGroup(name); err != nil {
		return fmt.Errorf("consumers: delete group %q: %w", name, err)
	}
	m.mu.Lock()
	delete(m.groups, name)
	m.mu.Unlock()
	g.mu.Lock()
	g.deleted = true
	g.gen++
	if g.sh != nil {
		g.sh.wake()
	}
	close(g.leaseFree)
	g.mu.Unlock()
	return nil
}

// Info returns one group.
func (m *Manager) Info(ctx context.Context, name string) (GroupInfo, error) {
	g, err := m.get(name)
	if err != nil {
		return GroupInfo{}, err
	}
	return m.info(g), nil
}

// List returns every group, sorted by name.
func (m *Manager) List(ctx context.Context) []GroupInfo {
	m.mu.Lock()
	gs := make([]*group, 0, len(m.groups))
	for _, g := range m.groups {
		gs = append(gs, g)
	}
	m.mu.Unlock()
	sort.Slice(gs, func(a, b int) bool { return gs[a].name < gs[b].name })
	out := make([]GroupInfo, len(gs))
	for i, g := range gs {
		out[i] = m.info(g)
	}
	return out
}

// ResetResult reports where a reset moved (or, dry, would move) a group
// (api.ResetResult).
type ResetResult = api.ResetResult

// Reset moves a group's cursor to a position (forwards or backwards). It
// ends the current lease: the member's next commit fails with ErrFenced
// and its next fetch starts at the new position. DryRun only reports.
func (m *Manager) Reset(ctx context.Context, name, to string, dryRun bool) (ResetResult, error) {
	g, err := m.get(name)
	if err != nil {
		return ResetResult{}, err
	}
	pos, err := ParsePosition(to)
	if err != nil {
		return ResetResult{}, err
	}
	next, err := m.Resolve(pos)
	if err != nil {
		return ResetResult{}, err
	}
	g.pmu.Lock()
	defer g.pmu.Unlock()
	if !dryRun && g.sharedMode() {
		// Write what the run queued (parks above all) before it ends.
		if err := m.flushSharedLocked(g); err != nil {
			return ResetResult{}, err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.deleted {
		return ResetResult{}, errf(ErrNotFound, "group %q not found", name)
	}
	res := ResetResult{Group: name, To: pos.String(), DryRun: dryRun, PreviousCommittedOffset: g.st.Cursor, CommittedOffset: next - 1, NextOffset: next}
	res.PreviousCommitted, res.Committed = res.PreviousCommittedOffset, res.CommittedOffset //nolint:staticcheck // filled for one release, see api.ResetResult
	res.Lag = m.lag(next-1, m.o.Now())
	if dryRun {
		return res, nil
	}
	old := g.st
	g.st.Cursor = next - 1
	g.st.Updated = m.o.Now().UnixMicro()
	g.st.Member, g.st.LeaseExpiry = "", 0
	if g.sh != nil {
		if err := m.resetSharedLocked(g); err != nil {
			g.st = old
			return ResetResult{}, err
		}
	} else if err := m.persist(g); err != nil {
		g.st = old
		return ResetResult{}, err
	}
	g.newLeaseLocked()
	return res, nil
}
