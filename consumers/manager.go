package consumers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// Defaults of ManagerOptions.
const (
	DefaultLeaseTTL      = 30 * time.Second
	DefaultMaxFetch      = 10000
	DefaultMaxFetchBytes = 64 << 20
	DefaultMaxWait       = 5 * time.Minute
	maxMemberLen         = 256
)

// ManagerOptions configure NewManager. Zero values get the defaults noted.
type ManagerOptions struct {
	// Journal and Index are required; the Manager does not close them.
	Journal *journal.Journal
	Index   *index.Index
	// LeaseTTL is the default member lease; zero → 30s.
	LeaseTTL time.Duration
	// MaxFetch caps a fetch's max; zero → 10000.
	MaxFetch int
	// MaxFetchBytes caps a fetch's max_bytes; zero → 64 MiB.
	MaxFetchBytes int64
	// MaxWait caps a fetch's wait; zero → 5m.
	MaxWait time.Duration
	// Logger; zero → slog.Default().
	Logger *slog.Logger
	// Now is the clock; zero → time.Now. For tests.
	Now func() time.Time
}

// Validate checks required fields and rejects negative values.
func (o ManagerOptions) Validate() error {
	switch {
	case o.Journal == nil || o.Index == nil:
		return errors.New("consumers: options: Journal and Index are required")
	case o.LeaseTTL < 0 || o.MaxFetch < 0 || o.MaxFetchBytes < 0 || o.MaxWait < 0:
		return errors.New("consumers: options: negative limits")
	}
	return nil
}

func (o *ManagerOptions) defaults() {
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.MaxFetch == 0 {
		o.MaxFetch = DefaultMaxFetch
	}
	if o.MaxFetchBytes == 0 {
		o.MaxFetchBytes = DefaultMaxFetchBytes
	}
	if o.MaxWait == 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// stateVersion is the version of the stored group value.
const stateVersion = 1

// groupState is what the index stores for a group (JSON).
type groupState struct {
	V       int        `json:"v"`
	Cursor  pgq.Offset `json:"cursor"` // last committed offset; 0: nothing
	From    string     `json:"from"`
	Filter  Filter     `json:"filter"`
	Created int64      `json:"created_us"`
	Updated int64      `json:"updated_us"`
	// Lease holder and expiry (Unix µs). Renewals are kept in memory and
	// written with the next commit; a restart honours the stored expiry.
	Member      string `json:"member,omitempty"`
	LeaseExpiry int64  `json:"lease_expiry_us,omitempty"`
}

// group is one group in memory.
type group struct {
	name string
	// sem serializes fetches of the group (capacity 1, ctx-aware).
	sem chan struct{}
	// pmu serializes the writes of the group's state to the index and is
	// held across each fsynced write, so that a write never overtakes
	// another; taken before mu. Commit holds pmu but not mu during its
	// write, so that fetches (which write only to take a new lease) are
	// not held up by it.
	pmu sync.Mutex

	// mu guards every field below.
	mu sync.Mutex
	st groupState
	// gen changes whenever the lease changes hands or the cursor is moved
	// by Reset: a fetch that started under another gen discards its work.
	gen uint64
	// delivered is the highest offset handed to the current lease holder
	// (>= st.Cursor; reset to st.Cursor on a new lease).
	delivered pgq.Offset
	// nonFinal lists delivered offsets in (st.Cursor, delivered] holding a
	// non-final part: commits there are rejected.
	nonFinal []pgq.Offset
	// leaseFree is closed when the lease is released or the group goes.
	leaseFree chan struct{}
	deleted   bool
	// session is the consumer incarnation (FetchRequest.Session) the
	// current delivery belongs to.
	session string
}

// Manager owns the consumer groups of one journal. It is safe for
// concurrent use; see the package documentation for the locking rules.
type Manager struct {
	o  ManagerOptions
	j  *journal.Journal
	ix *index.Index

	// ddl serializes group creation and deletion (Create, Delete) and is
	// held across their fsynced index write, so that two of them never
	// race on one name (a create never lands on a name whose delete is
	// being written, and the other way round). It is taken before every
	// other lock; nothing but Create and Delete takes it, so lookups,
	// fetches and commits never wait for it.
	ddl sync.Mutex
	// mu guards groups (the map, not the groups). It is held only for map
	// operations, never across an index write, so a lookup never waits for
	// an fsync.
	mu     sync.Mutex
	groups map[string]*group

	done      chan struct{} // closed by Close: wakes long polls
	closeOnce sync.Once
}

// NewManager loads the groups stored in the index.
func NewManager(o ManagerOptions) (*Manager, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.defaults()
	m := &Manager{o: o, j: o.Journal, ix: o.Index, groups: map[string]*group{}, done: make(chan struct{})}
	all, err := o.Index.Groups()
	if err != nil {
		return nil, fmt.Errorf("consumers: load groups: %w", err)
	}
	for name, raw := range all {
		var st groupState
		if err := json.Unmarshal(raw, &st); err != nil || st.V != stateVersion {
			return nil, fmt.Errorf("consumers: load group %q: undecodable state (version %d): %v", name, st.V, err)
		}
		m.groups[name] = newGroup(name, st)
	}
	return m, nil
}

func newGroup(name string, st groupState) *group {
	return &group{name: name, sem: make(chan struct{}, 1), st: st, delivered: st.Cursor, leaseFree: make(chan struct{})}
}

// Close wakes every waiting fetch (they return ErrClosed). It does not
// close the journal or the index.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() { close(m.done) })
	return nil
}

func (m *Manager) closed() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// lookup returns the group published under name, nil when none.
func (m *Manager) lookup(name string) *group {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.groups[name]
}

func (m *Manager) get(name string) (*group, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.groups[name]
	if !ok {
		return nil, errf(ErrNotFound, "group %q", name)
	}
	return g, nil
}

// persist writes g's state; the caller holds g.pmu and g.mu (or owns g
// alone).
func (m *Manager) persist(g *group) error { return m.persistState(g.name, &g.st) }

// persistState writes a group's state, fsynced; the caller holds the
// group's pmu (or owns it alone).
func (m *Manager) persistState(name string, st *groupState) error {
	raw, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("consumers: encode group %q: %w", name, err)
	}
	if err := m.ix.PutGroup(name, raw); err != nil {
		return fmt.Errorf("consumers: store group %q: %w", name, err)
	}
	return nil
}

// bounds returns the journal's first and last offsets; an empty journal
// has first = last+1.
func (m *Manager) bounds() (first, last pgq.Offset) {
	first, last = m.j.FirstOffset(), m.j.LastOffset()
	if first == 0 {
		first = last + 1
	}
	return first, last
}

// Resolve returns the first offset a group starting at p would deliver.
// An lsn: or time: position that the index cannot answer while it is stale
// (behind the journal, healing) fails with ErrUnavailable (HTTP 503):
// retry shortly.
func (m *Manager) Resolve(p Position) (pgq.Offset, error) {
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
	return 0, errf(ErrBadPosition, "invalid position")
}

func (m *Manager) resolveErr(p Position, err error) error {
	if errors.Is(err, index.ErrStale) {
		return fmt.Errorf("%w: resolve %s: the index is behind the journal and catching up; retry shortly: %w", ErrUnavailable, p, err)
	}
	return fmt.Errorf("consumers: resolve %s: %w", p, err)
}

// CreateRequest creates a group.
type CreateRequest struct {
	Name string `json:"name"`
	// From is the start position (ParsePosition); empty → "latest".
	From   string   `json:"from,omitempty"`
	Tables []string `json:"tables,omitempty"`
	Ops    []string `json:"ops,omitempty"`
}

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
	if m.closed() {
		return GroupInfo{}, ErrClosed
	}
	// m.ddl keeps every other create and delete out until the group is
	// written and published; m.mu is held only to look at the map, so
	// lookups of other groups go on during the fsync.
	m.ddl.Lock()
	defer m.ddl.Unlock()
	if m.exists(req.Name) {
		return GroupInfo{}, errf(ErrExists, "group %q", req.Name)
	}
	next, err := m.Resolve(pos)
	if err != nil {
		return GroupInfo{}, err
	}
	now := m.o.Now().UnixMicro()
	g := newGroup(req.Name, groupState{V: stateVersion, Cursor: next - 1, From: pos.String(), Filter: f, Created: now, Updated: now})
	if err := m.persist(g); err != nil { // g is not published: we own it alone
		return GroupInfo{}, err
	}
	m.mu.Lock()
	m.groups[req.Name] = g
	m.mu.Unlock()
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
		return errf(ErrNotFound, "group %q", name)
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
	close(g.leaseFree)
	g.mu.Unlock()
	return nil
}

// Lag is how far a group is behind the journal's end.
type Lag struct {
	// Records is the number of journal records after the cursor.
	Records uint64 `json:"records" msgpack:"records"`
	// Bytes is the encoded size of those records.
	Bytes int64 `json:"bytes" msgpack:"bytes"`
	// Seconds is now minus the commit time of the first record after the
	// cursor; 0 when caught up.
	Seconds float64 `json:"seconds" msgpack:"seconds"`
	// OutOfRange is true when the cursor is below the journal's start
	// (retention removed records the group never committed).
	OutOfRange bool `json:"out_of_range" msgpack:"out_of_range"`
	// IndexStale is true when the index is behind the journal (a failed
	// index write, being healed): Bytes then counts only the records the
	// index covers, a lower bound.
	IndexStale bool `json:"index_stale,omitempty" msgpack:"index_stale,omitempty"`
}

// GroupInfo describes a group.
type GroupInfo struct {
	Name   string   `json:"name" msgpack:"name"`
	From   string   `json:"from" msgpack:"from"`
	Tables []string `json:"tables" msgpack:"tables"`
	Ops    []string `json:"ops" msgpack:"ops"`
	// Committed is the cursor: every offset up to it is done.
	Committed pgq.Offset `json:"committed_offset" msgpack:"committed_offset"`
	// Delivered is the highest offset handed to the current member.
	Delivered    pgq.Offset `json:"delivered_offset" msgpack:"delivered_offset"`
	Created      time.Time  `json:"created" msgpack:"created"`
	Updated      time.Time  `json:"updated" msgpack:"updated"`
	Member       string     `json:"member,omitempty" msgpack:"member,omitempty"`
	LeaseExpires *time.Time `json:"lease_expires,omitempty" msgpack:"lease_expires,omitempty"`
	Lag          Lag        `json:"lag" msgpack:"lag"`
}

func (m *Manager) info(g *group) GroupInfo {
	g.mu.Lock()
	st, delivered := g.st, g.delivered
	g.mu.Unlock()
	gi := GroupInfo{
		Name: g.name, From: st.From, Tables: st.Filter.Tables, Ops: st.Filter.Ops,
		Committed: st.Cursor, Delivered: delivered,
		Created: time.UnixMicro(st.Created).UTC(), Updated: time.UnixMicro(st.Updated).UTC(),
	}
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
	gi.Lag = m.lag(st.Cursor, now)
	return gi
}

// lag computes the lag of a cursor.
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

// ResetResult reports where a reset moved (or, dry, would move) a group.
type ResetResult struct {
	Group  string `json:"group" msgpack:"group"`
	To     string `json:"to" msgpack:"to"`
	DryRun bool   `json:"dry_run" msgpack:"dry_run"`
	// PreviousCommitted and Committed are the cursor before and after.
	PreviousCommitted pgq.Offset `json:"previous_committed_offset" msgpack:"previous_committed_offset"`
	Committed         pgq.Offset `json:"committed_offset" msgpack:"committed_offset"`
	// NextOffset is the first offset the group will deliver.
	NextOffset pgq.Offset `json:"next_offset" msgpack:"next_offset"`
	Lag        Lag        `json:"lag" msgpack:"lag"`
}

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
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.deleted {
		return ResetResult{}, errf(ErrNotFound, "group %q", name)
	}
	res := ResetResult{Group: name, To: pos.String(), DryRun: dryRun, PreviousCommitted: g.st.Cursor, Committed: next - 1, NextOffset: next}
	res.Lag = m.lag(next-1, m.o.Now())
	if dryRun {
		return res, nil
	}
	old := g.st
	g.st.Cursor = next - 1
	g.st.Updated = m.o.Now().UnixMicro()
	g.st.Member, g.st.LeaseExpiry = "", 0
	if err := m.persist(g); err != nil {
		g.st = old
		return ResetResult{}, err
	}
	g.newLeaseLocked()
	return res, nil
}

// newLeaseLocked starts a lease epoch: delivery restarts after the cursor.
// resumeLocked moves delivery back to what the lease holder's consumer
// has: the cursor for a new session (a restarted consumer; its old
// generation ends, so commits of the old incarnation are fenced), or from
// when it is between the cursor and what was handed out (a lost answer).
func (g *group) resumeLocked(session string, from pgq.Offset) {
	switch {
	case session != "" && session != g.session:
		if g.delivered > g.st.Cursor || g.session != "" {
			g.gen++
		}
		g.session = session
		g.delivered = g.st.Cursor
		g.nonFinal = nil
	case from > g.st.Cursor && from <= g.delivered:
		g.delivered = from - 1
		g.nonFinal = slices.DeleteFunc(g.nonFinal, func(o pgq.Offset) bool { return o >= from })
	}
}

func (g *group) newLeaseLocked() {
	g.gen++
	g.delivered = g.st.Cursor
	g.nonFinal = nil
	close(g.leaseFree)
	g.leaseFree = make(chan struct{})
}

// FetchRequest asks for transactions.
type FetchRequest struct {
	// Member identifies the consumer (required, up to 256 bytes).
	Member string
	// Max transactions; zero → 100. MaxBytes of encoded records; zero →
	// 1 MiB. At least one whole transaction is returned when one is
	// available, even if larger than MaxBytes.
	Max      int
	MaxBytes int64
	// Wait is how long to wait for data (and for a lease held by another
	// member); zero returns at once.
	Wait time.Duration
	// FailFast returns ErrConflict at once when another member holds the
	// lease, instead of waiting up to Wait for it.
	FailFast bool
	// LeaseTTL overrides the Manager's lease TTL for this member.
	LeaseTTL time.Duration
	// Session identifies the consumer's incarnation (a random id per
	// process or Consumer). A fetch from a new session of the member
	// holding the lease restarts delivery at the cursor, so a member that
	// restarted with the same id is redelivered what it had fetched but not
	// committed, instead of skipping it. Empty: not tracked.
	Session string
	// From is the first offset the consumer has not received (the
	// NextOffset of its last fetch; zero: unknown). When an answer was
	// lost, delivery resumes there (never below the cursor) instead of
	// after what the server last handed out.
	From pgq.Offset
}

// FetchResult is what a fetch delivered.
type FetchResult struct {
	// Transactions passing the group's filter, whole (every part of a
	// multi-part transaction, in order).
	Transactions []*pgq.Transaction
	// NextOffset is the first offset not delivered yet. After processing,
	// commit NextOffset-1: this also moves the cursor over filtered-out
	// records, which are never returned.
	NextOffset pgq.Offset
	// Committed is the group's cursor.
	Committed pgq.Offset
	// LastOffset is the journal's last offset when the fetch returned:
	// NextOffset > LastOffset means the group has caught up.
	LastOffset   pgq.Offset
	LeaseExpires time.Time
}

func (m *Manager) clampFetch(req *FetchRequest) error {
	if req.Member == "" || len(req.Member) > maxMemberLen {
		return errf(ErrBadRequest, "member must be 1 to %d bytes", maxMemberLen)
	}
	if req.Max < 0 || req.MaxBytes < 0 || req.Wait < 0 || req.LeaseTTL < 0 {
		return errf(ErrBadRequest, "max, max_bytes, wait and lease_ttl must not be negative")
	}
	if req.Max == 0 {
		req.Max = 100
	}
	if req.MaxBytes == 0 {
		req.MaxBytes = 1 << 20
	}
	if req.LeaseTTL == 0 {
		req.LeaseTTL = m.o.LeaseTTL
	}
	req.Max = min(req.Max, m.o.MaxFetch)
	req.MaxBytes = min(req.MaxBytes, m.o.MaxFetchBytes)
	req.Wait = min(req.Wait, m.o.MaxWait)
	return nil
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

// Fetch delivers the next transactions to member, taking or renewing the
// group's lease. It long-polls: it returns as soon as at least one
// transaction passes the filter, or when Wait ends (possibly with none, but
// with NextOffset moved past filtered-out records). A cursor below the
// journal's start fails with ErrOutOfRange.
func (m *Manager) Fetch(ctx context.Context, name string, req FetchRequest) (*FetchResult, error) {
	b, err := m.fetch(ctx, name, req, true)
	if err != nil {
		return nil, err
	}
	res := &FetchResult{NextOffset: b.next, Committed: b.committed, LastOffset: b.last, LeaseExpires: b.leaseExpires}
	if len(b.recs) > 0 {
		res.Transactions = make([]*pgq.Transaction, len(b.recs))
		for i, r := range b.recs {
			res.Transactions[i] = r.tx
		}
	}
	return res, nil
}

// fetched is one delivered record.
type fetched struct {
	off   pgq.Offset
	final bool
	// raw is the framed record as journaled, set when the record is
	// delivered unchanged and the fetch did not ask for decoded
	// transactions; tx is set otherwise.
	raw []byte
	tx  *pgq.Transaction
}

// body returns the msgpack record body of r: the journaled bytes when r
// is unchanged, else a fresh encoding of the (filtered) transaction.
func (r *fetched) body() []byte {
	if r.raw != nil {
		return r.raw[pgq.RecordHeaderSize:]
	}
	return pgq.AppendRecord(nil, r.tx)[pgq.RecordHeaderSize:]
}

// fetchBatch is what fetch delivered; see FetchResult.
type fetchBatch struct {
	recs                  []fetched
	next, committed, last pgq.Offset
	leaseExpires          time.Time
	gen                   uint64 // the lease generation the records were delivered under
}

// fetch is Fetch. With decode, every record comes decoded (fetched.tx);
// without, records that pass the group's filter unchanged come as the
// journaled bytes (fetched.raw), so that a msgpack response splices them
// without decoding and re-encoding.
func (m *Manager) fetch(ctx context.Context, name string, req FetchRequest, decode bool) (*fetchBatch, error) {
	if err := m.clampFetch(&req); err != nil {
		return nil, err
	}
	g, err := m.get(name)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(req.Wait)
	timer := time.NewTimer(req.Wait)
	defer timer.Stop()

	select {
	case g.sem <- struct{}{}:
	default:
		select {
		case g.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.done:
			return nil, ErrClosed
		case <-timer.C:
			return nil, errf(ErrConflict, "group %q: another fetch of the group is in progress", name)
		}
	}
	defer func() { <-g.sem }()

	// The lease.
	var gen uint64
	pmuHeld := false
	for {
		if pmuHeld {
			g.pmu.Lock()
		}
		g.mu.Lock()
		if g.deleted {
			g.mu.Unlock()
			if pmuHeld {
				g.pmu.Unlock()
			}
			return nil, errf(ErrNotFound, "group %q", name)
		}
		ok, exp, free, err := m.acquireLocked(g, req.Member, req.LeaseTTL, m.o.Now(), pmuHeld)
		if ok {
			g.resumeLocked(req.Session, req.From)
		}
		holder := g.st.Member
		gen = g.gen
		g.mu.Unlock()
		if pmuHeld {
			g.pmu.Unlock()
		}
		// A renewal needs no write: only a new lease waits for g.pmu (and
		// so for a commit's write in progress).
		pmuHeld = errors.Is(err, errNeedPersist)
		if pmuHeld {
			continue
		}
		if err != nil {
			return nil, err
		}
		if ok {
			break
		}
		if req.FailFast || !time.Now().Before(deadline) {
			return nil, errf(ErrConflict, "group %q is leased by member %q until %s", name, holder, exp.UTC().Format(time.RFC3339Nano))
		}
		expiry := time.NewTimer(time.Until(exp) + time.Millisecond)
		select {
		case <-free:
		case <-expiry.C:
		case <-timer.C:
			timer.Reset(0)
		case <-ctx.Done():
			expiry.Stop()
			return nil, ctx.Err()
		case <-m.done:
			expiry.Stop()
			return nil, ErrClosed
		}
		expiry.Stop()
	}

	// The data.
	for {
		changed := m.j.Changed()
		g.mu.Lock()
		from := g.delivered + 1
		g.mu.Unlock()
		res, lastRead, nonFinal, more, err := m.collect(g, from, req, decode)
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		if g.deleted {
			g.mu.Unlock()
			return nil, errf(ErrNotFound, "group %q", name)
		}
		if g.gen != gen {
			g.mu.Unlock()
			return nil, errf(ErrFenced, "group %q: lease of member %q ended during the fetch (reset, expiry or takeover)", name, req.Member)
		}
		if lastRead >= from {
			g.delivered = lastRead
			g.nonFinal = append(g.nonFinal, nonFinal...)
		}
		// Any fetch renews the lease.
		g.st.LeaseExpiry = max(g.st.LeaseExpiry, m.o.Now().Add(req.LeaseTTL).UnixMicro())
		res.next = g.delivered + 1
		res.committed = g.st.Cursor
		res.last = m.j.LastOffset()
		res.leaseExpires = time.UnixMicro(g.st.LeaseExpiry).UTC()
		res.gen = g.gen
		g.mu.Unlock()
		if len(res.recs) > 0 || !time.Now().Before(deadline) {
			return res, nil
		}
		if more {
			continue // only filtered-out records so far and more to read
		}
		select {
		case <-changed:
		case <-timer.C:
			timer.Reset(0) // fire again: the next round returns
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.done:
			return nil, ErrClosed
		}
	}
}

// scanLimit bounds the records one collect reads when all are filtered out.
const scanLimit = 4096

// collect reads whole transactions from offset from. It returns the
// delivered records, the last offset consumed (delivered or filtered out;
// from-1 when none), the non-final parts among them, and whether it
// stopped at scanLimit with more records to read. Without decode, records
// of a group without filter are only checked (pgq.PeekRecord), not
// decoded.
func (m *Manager) collect(g *group, from pgq.Offset, req FetchRequest, decode bool) (res *fetchBatch, consumed pgq.Offset, nonFinal []pgq.Offset, more bool, err error) {
	g.mu.Lock()
	filter := g.st.Filter
	g.mu.Unlock()
	res = &fetchBatch{}
	first, last := m.bounds()
	consumed = from - 1
	if from < first {
		return nil, 0, nil, false, errf(ErrOutOfRange, "group %q: next offset %d is below the journal start %d (removed by retention); reset the group", g.name, from, first)
	}
	peek := filter.IsZero() && !decode
	var (
		bytes    int64
		scanned  int
		unit     []fetched // parts of the transaction being read
		unitSize int64
	)
	for off := from; off <= last; off++ {
		if len(unit) == 0 && (len(res.recs) >= req.Max || (len(res.recs) > 0 && bytes >= req.MaxBytes)) {
			break
		}
		if len(unit) == 0 && scanned >= scanLimit {
			more = true
			break
		}
		raw, err := m.j.ReadRaw(off)
		if errors.Is(err, journal.ErrNotFound) && off < m.j.FirstOffset() {
			return nil, 0, nil, false, errf(ErrOutOfRange, "group %q: offset %d was removed by retention; reset the group", g.name, off)
		}
		if err != nil {
			return nil, 0, nil, false, fmt.Errorf("consumers: fetch %q: %w", g.name, err)
		}
		r := fetched{off: off}
		if peek {
			ri, err := pgq.PeekRecord(raw)
			if err != nil {
				return nil, 0, nil, false, fmt.Errorf("consumers: fetch %q: offset %d: %w", g.name, off, err)
			}
			r.final, r.raw = ri.Final, raw
		} else {
			// ReadRaw returned a copy: decode in place, without another.
			tx := &pgq.Transaction{Offset: off}
			err := pgq.CheckRecord(raw)
			if err == nil {
				err = pgq.DecodeRecordBody(raw[pgq.RecordHeaderSize:], tx)
			}
			if err != nil {
				return nil, 0, nil, false, fmt.Errorf("consumers: fetch %q: offset %d: %w", g.name, off, err)
			}
			r.final, r.tx = tx.Final, tx
			if !decode {
				r.raw = raw
			}
		}
		scanned++
		unit = append(unit, r)
		unitSize += int64(len(raw))
		if !r.final {
			continue
		}
		for _, p := range unit {
			if !p.final {
				nonFinal = append(nonFinal, p.off)
			}
			if p.tx != nil {
				f := filter.Apply(p.tx)
				if f == nil {
					continue
				}
				if f != p.tx { // some changes filtered out: re-encode
					p.tx, p.raw = f, nil
				} else if p.raw != nil {
					p.tx = nil // spliced verbatim
				}
			}
			res.recs = append(res.recs, p)
		}
		bytes += unitSize
		consumed = off
		unit, unitSize = unit[:0], 0
	}
	return res, consumed, nonFinal, more, nil
}

// CommitResult reports a commit.
type CommitResult struct {
	Committed    pgq.Offset `json:"committed_offset" msgpack:"committed_offset"`
	LeaseExpires time.Time  `json:"lease_expires" msgpack:"lease_expires"`
}

func (m *Manager) holderLocked(g *group, member string, now time.Time) error {
	if g.deleted {
		return errf(ErrNotFound, "group %q", g.name)
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
	if ttl <= 0 {
		ttl = m.o.LeaseTTL
	}
	g, err := m.get(name)
	if err != nil {
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
		g.nonFinal = slices.DeleteFunc(g.nonFinal, func(o pgq.Offset) bool { return o <= offset })
	}
	return CommitResult{Committed: g.st.Cursor, LeaseExpires: time.UnixMicro(g.st.LeaseExpiry).UTC()}, nil
}

// Heartbeat renews member's lease without fetching.
func (m *Manager) Heartbeat(ctx context.Context, name, member string, ttl time.Duration) (time.Time, error) {
	if ttl <= 0 {
		ttl = m.o.LeaseTTL
	}
	g, err := m.get(name)
	if err != nil {
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

// MinCursor returns the lowest committed cursor over all groups, and false
// when there are no groups.
func (m *Manager) MinCursor() (pgq.Offset, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var lo pgq.Offset
	ok := false
	for _, g := range m.groups {
		g.mu.Lock()
		c := g.st.Cursor
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
		c := g.st.Cursor
		g.mu.Unlock()
		out[g.name] = m.lag(c, now)
	}
	return out
}
