package consumers

import (
	"context"
	"slices"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
)

// CommitResult reports a commit (api.CommitResult).
type CommitResult = api.CommitResult

// Commit moves the group's cursor to offset: everything up to it is done.
// Only the live lease holder may commit; the offset must lie between the
// cursor and the highest delivered offset, and not on a non-final part of
// a multi-part transaction (fetches always end on a final part, so
// NextOffset-1 is always valid). Committing the current cursor again is a
// no-op that renews the lease. The new cursor is fsynced before Commit
// returns.
func (m *Manager) Commit(ctx context.Context, name, member string, offset pgq.Offset, ttl time.Duration) (CommitResult, error) {
	return m.CommitGen(ctx, name, member, offset, ttl, 0)
}

// CommitGen is Commit for records delivered under lease generation gen
// (FetchResult.Generation; 0: unchecked). A commit from a lease that has
// since ended (reset, expiry and takeover, release) is always fenced, even
// when the same member holds a new lease.
func (m *Manager) CommitGen(ctx context.Context, name, member string, offset pgq.Offset, ttl time.Duration, gen uint64) (CommitResult, error) {
	if member == "" || len(member) > maxMemberLen {
		return CommitResult{}, errf(ErrBadRequest, "member must be 1 to %d bytes", maxMemberLen)
	}
	ttl, err := m.leaseTTL(ttl)
	if err != nil {
		return CommitResult{}, err
	}
	g, err := m.get(name)
	if err != nil {
		return CommitResult{}, err
	}
	if err := g.exclusive(); err != nil {
		return CommitResult{}, err
	}
	// g.pmu keeps every other write of the group (new lease, reset,
	// release, delete) out until the cursor is on disk, so the lease and
	// gen checked here still hold after the write; g.mu is released during
	// the write so that fetches proceed meanwhile.
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	locked := true
	defer func() {
		if locked {
			g.mu.Unlock()
		}
	}()
	now := m.o.Now()
	if err := m.holderLocked(g, member, now); err != nil {
		return CommitResult{}, err
	}
	if gen != 0 && gen != g.gen {
		return CommitResult{}, errf(ErrFenced, "group %q: member %q commits records of lease generation %d, which ended (now %d: reset, expiry and takeover, or release)", name, member, gen, g.gen)
	}
	switch {
	case offset < g.st.Cursor:
		return CommitResult{}, errf(ErrInvalidCommit, "group %q: offset %d is behind the committed offset %d (commits cannot go backwards; use reset)", name, offset, g.st.Cursor)
	case offset > g.delivered:
		return CommitResult{}, errf(ErrInvalidCommit, "group %q: offset %d is beyond the last delivered offset %d", name, offset, g.delivered)
	case slices.Contains(g.nonFinal, offset):
		return CommitResult{}, errf(ErrInvalidCommit, "group %q: offset %d is a non-final part of a multi-part transaction; commit its final part", name, offset)
	}
	g.st.LeaseExpiry = max(g.st.LeaseExpiry, now.Add(ttl).UnixMicro())
	if offset > g.st.Cursor {
		// Write the new state, then publish it: the cursor in memory
		// never runs ahead of disk.
		st := g.st
		st.Cursor = offset
		st.Updated = now.UnixMicro()
		g.mu.Unlock()
		locked = false
		err := m.persistState(g.name, &st)
		g.mu.Lock()
		locked = true
		if err != nil {
			return CommitResult{}, err
		}
		g.st.Cursor, g.st.Updated = st.Cursor, st.Updated
		if st.HoldSlot {
			m.KickHold() // the floor follows the commit
		}
		g.nonFinal = slices.DeleteFunc(g.nonFinal, func(o pgq.Offset) bool { return o <= offset })
	}
	res := CommitResult{CommittedOffset: g.st.Cursor, LeaseExpires: time.UnixMicro(g.st.LeaseExpiry).UTC()}
	res.Committed = res.CommittedOffset //nolint:staticcheck // filled for one release, see api.CommitResult
	return res, nil
}
