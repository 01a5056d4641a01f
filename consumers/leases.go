package consumers

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/pgq-dev/pgq"
)

// newLeaseLocked starts a lease epoch: delivery restarts after the cursor.
// resumeLocked moves delivery back to what the lease holder's consumer
// has: the cursor for a new session (a restarted consumer; its old
// generation ends, so commits of the old incarnation are fenced), or from
// when it is between the cursor and what was handed out (a lost answer).
// A from on a later part of a multi-part transaction fails with
// ErrBadPosition and changes nothing: delivery would resume without the
// transaction's first part.
func (g *group) resumeLocked(session string, from pgq.Offset) error {
	switch {
	case session != "" && session != g.session:
		if g.delivered > g.st.Cursor || g.session != "" {
			g.gen++
		}
		g.session = session
		g.delivered = g.st.Cursor
		g.nonFinal = nil
	case from > g.st.Cursor && from <= g.delivered:
		if slices.Contains(g.nonFinal, from-1) {
			// The parts before from up to the first are non-final too.
			p0 := from - 1
			for slices.Contains(g.nonFinal, p0-1) {
				p0--
			}
			return errf(ErrBadPosition, "group %q: from %d is part %d of a multi-part transaction: resume at its first part, %d", g.name, from, from-p0, p0)
		}
		g.delivered = from - 1
		g.nonFinal = slices.DeleteFunc(g.nonFinal, func(o pgq.Offset) bool { return o >= from })
	}
	return nil
}

// MaxLeaseTTL bounds a member's lease (lease_ttl of fetch, commit and
// heartbeat, and ManagerOptions.LeaseTTL): a member that dies holding its
// lease blocks its group until the lease ends, so no request may make
// that longer than an hour. A slow consumer renews with heartbeats.
// Leases stored before the bound keep their expiry.
const MaxLeaseTTL = time.Hour

// leaseTTL checks a requested lease TTL; zero is the Manager's default.
func (m *Manager) leaseTTL(ttl time.Duration) (time.Duration, error) {
	if ttl < 0 || ttl > MaxLeaseTTL {
		return 0, errf(ErrBadRequest, "lease_ttl %s: want 0 (the default, %s) up to %s", ttl, m.o.LeaseTTL, MaxLeaseTTL)
	}
	if ttl == 0 {
		return m.o.LeaseTTL, nil
	}
	return ttl, nil
}

func (g *group) newLeaseLocked() {
	g.gen++
	g.delivered = g.st.Cursor
	g.nonFinal = nil
	close(g.leaseFree)
	g.leaseFree = make(chan struct{})
}

// errNeedPersist is acquireLocked's answer when taking the lease needs a
// write and the caller does not hold g.pmu.
var errNeedPersist = errors.New("consumers: taking the lease needs a write")

// acquireLocked takes or renews the lease for member. It reports false,
// the holder's expiry and the channel closed on release when another
// member holds a live lease. Taking a new lease writes the group: without
// pmuHeld it then returns errNeedPersist, and the caller retries holding
// g.pmu.
func (m *Manager) acquireLocked(g *group, member string, ttl time.Duration, now time.Time, pmuHeld bool) (bool, time.Time, <-chan struct{}, error) {
	us := now.UnixMicro()
	live := g.st.Member != "" && us < g.st.LeaseExpiry
	if live && g.st.Member != member {
		return false, time.UnixMicro(g.st.LeaseExpiry), g.leaseFree, nil
	}
	exp := now.Add(ttl).UnixMicro()
	if live { // renewal: memory only
		g.st.LeaseExpiry = max(g.st.LeaseExpiry, exp)
		return true, time.Time{}, nil, nil
	}
	if !pmuHeld {
		return false, time.Time{}, nil, errNeedPersist
	}
	old := g.st
	g.st.Member, g.st.LeaseExpiry = member, exp
	if err := m.persist(g); err != nil {
		g.st = old
		return false, time.Time{}, nil, err
	}
	g.newLeaseLocked()
	return true, time.Time{}, nil, nil
}

func (m *Manager) holderLocked(g *group, member string, now time.Time) error {
	if g.deleted {
		return errf(ErrNotFound, "group %q not found", g.name)
	}
	if g.st.Member != member {
		if g.st.Member == "" {
			return errf(ErrFenced, "group %q: member %q holds no lease (fetch first)", g.name, member)
		}
		return errf(ErrFenced, "group %q: member %q does not hold the lease (held by %q)", g.name, member, g.st.Member)
	}
	if now.UnixMicro() >= g.st.LeaseExpiry {
		return errf(ErrFenced, "group %q: lease of member %q expired at %s", g.name, member, time.UnixMicro(g.st.LeaseExpiry).UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// Heartbeat renews member's lease without fetching.
func (m *Manager) Heartbeat(ctx context.Context, name, member string, ttl time.Duration) (time.Time, error) {
	ttl, err := m.leaseTTL(ttl)
	if err != nil {
		return time.Time{}, err
	}
	g, err := m.get(name)
	if err != nil {
		return time.Time{}, err
	}
	if err := g.exclusive(); err != nil {
		return time.Time{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := m.o.Now()
	if err := m.holderLocked(g, member, now); err != nil {
		return time.Time{}, err
	}
	g.st.LeaseExpiry = max(g.st.LeaseExpiry, now.Add(ttl).UnixMicro())
	return time.UnixMicro(g.st.LeaseExpiry).UTC(), nil
}

// Release gives up member's lease so another member can take over at once
// (delivered but uncommitted transactions are delivered again). Releasing
// a lease member does not hold is a no-op.
func (m *Manager) Release(ctx context.Context, name, member string) error {
	g, err := m.get(name)
	if err != nil {
		return err
	}
	if err := g.exclusive(); err != nil {
		return err
	}
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.deleted || g.st.Member != member {
		return nil
	}
	old := g.st
	g.st.Member, g.st.LeaseExpiry = "", 0
	if err := m.persist(g); err != nil {
		g.st = old
		return err
	}
	g.newLeaseLocked()
	return nil
}
