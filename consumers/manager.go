package consumers

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
	"github.com/prometheus/client_golang/prometheus"
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
	// WakeFromAppends says that the journal's writer calls Appended with
	// every durable batch, in offset order (the server does, from the
	// committer's after-append hook): filtered long polls are then woken
	// from the subject sets of the index entries it passes, and no record
	// is read to wake them. False (zero): the Manager reads and decodes
	// each new record while a filtered long poll waits.
	WakeFromAppends bool
	// HoldSlotMaxLag bounds, in bytes of WAL, how far behind the journal's
	// end a hold_slot group may hold the slot (see HoldFloor); zero →
	// DefaultHoldSlotMaxLag (16 GiB).
	HoldSlotMaxLag int64
}

// Validate checks required fields and rejects negative values.
func (o ManagerOptions) Validate() error {
	switch {
	case o.Journal == nil || o.Index == nil:
		return errors.New("consumers: options: Journal and Index are required")
	case o.LeaseTTL < 0 || o.MaxFetch < 0 || o.MaxFetchBytes < 0 || o.MaxWait < 0 || o.HoldSlotMaxLag < 0:
		return errors.New("consumers: options: negative limits")
	case o.LeaseTTL > MaxLeaseTTL:
		return fmt.Errorf("consumers: options: lease TTL %s is over the %s bound", o.LeaseTTL, MaxLeaseTTL)
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
	if o.HoldSlotMaxLag == 0 {
		o.HoldSlotMaxLag = DefaultHoldSlotMaxLag
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
	// Mode is "" (exclusive) or "shared". A shared group's Cursor is its
	// acked low-water mark and Shared its configuration; its other state
	// is in index group entries (see shared.go). Parked is the parked
	// list of an earlier version, moved into entries by the next write.
	Mode   string         `json:"mode,omitempty"`
	Shared *sharedConfig  `json:"shared,omitempty"`
	Parked []parkedRecord `json:"parked,omitempty"`
	// HoldSlot: the slot is not confirmed past what the group has not
	// committed (see HoldFloor).
	HoldSlot bool `json:"hold_slot,omitempty"`
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
	// sh is the in-memory delivery state of a shared group (nil for an
	// exclusive one), rebuilt from st.Cursor after a restart.
	sh *sharedRun
	// shWakes counts wakeSharedLocked's calls (read without mu, by
	// waitShared).
	shWakes atomic.Uint64
	// sel counts the records the group's filter passes (lag, retention;
	// lagsel.go), built on first use.
	sel *index.Selector
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

	done chan struct{} // closed by Close: wakes long polls
	// wk wakes the long polls of filtered groups by filter (wake.go).
	wk *wakers
	// sw queues shared groups' waiting members (sharedwait.go; used with
	// WakeFromAppends).
	sw sharedWaits
	// sharedSteps counts the steps of shared long polls (tests read it).
	sharedSteps atomic.Uint64
	closeOnce   sync.Once

	// retentionLost counts, per group, records an age or size cap dropped
	// before the group consumed them (exported by Collector).
	retentionLost *prometheus.CounterVec
	// tailDelivery observes commit time → fetch answer of the records a
	// long poll waited for (exported by Collector).
	tailDelivery prometheus.Histogram
	// journalDelivery observes journaled (journal.WrittenAt) → fetch
	// answer (exported by Collector).
	journalDelivery prometheus.Histogram
	// fetchAborted counts, per group, fetch answers abandoned after they
	// started because a record could not be read (exported by Collector).
	fetchAborted *prometheus.CounterVec
	// hold is the hold floor of the hold_slot groups (hold.go).
	hold holdState
	// stuck maps a *group to the stuckAt of a corrupt record its reads
	// met (corrupt.go); safe for concurrent use on its own.
	stuck sync.Map
}

// NewManager loads the groups stored in the index.
func NewManager(o ManagerOptions) (*Manager, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.defaults()
	m := &Manager{o: o, j: o.Journal, ix: o.Index, groups: map[string]*group{}, done: make(chan struct{}),
		retentionLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgq_retention_lost_records_total",
			Help: "Journal records an age or size cap dropped before the group consumed them.",
		}, []string{"group"}),
		tailDelivery: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pgq_tail_delivery_seconds",
			Help:    "PostgreSQL commit timestamp to the fetch answer carrying the transaction, for transactions a long-polling fetch waited for (the live tail; includes clock skew between hosts).",
			Buckets: tailDeliveryBuckets,
		}),
		journalDelivery: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pgq_journal_to_delivery_seconds",
			Help:    "Journaling (the fsync of the transaction's record) to the fetch answer handing it out: each final part an exclusive fetch writes, each shared message's first delivery; only records this process journaled.",
			Buckets: journalDeliveryBuckets,
		}),
		fetchAborted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pgq_fetch_aborted_total",
			Help: "Exclusive fetch answers abandoned mid-body (connection closed) because a record could not be read after the answer started.",
		}, []string{"group"})}
	all, err := o.Index.Groups()
	if err != nil {
		return nil, fmt.Errorf("consumers: load groups: %w", err)
	}
	for name, raw := range all {
		var st groupState
		if err := json.Unmarshal(raw, &st); err != nil || st.V != stateVersion {
			return nil, fmt.Errorf("consumers: load group %q: undecodable state (version %d): %v", name, st.V, err)
		}
		g := newGroup(name, st)
		if g.sh != nil {
			if err := m.loadShared(g); err != nil {
				return nil, err
			}
		}
		m.groups[name] = g
		if st.HoldSlot {
			m.hold.any.Store(true)
		}
	}
	m.hold.init()
	m.RefreshHold()
	go m.holdLoop()
	m.wk = newWakers(m.j, o.WakeFromAppends, m.done)
	go m.wk.run()
	return m, nil
}

// Appended takes in a durable batch of the journal (Tx.Offset, Part and
// Final set) and the index entries made of it (index.EntryOf,
// index.EntryOfStored; entries[i] of batch[i]), in offset order, batch
// after batch: the filtered long polls its transactions pass are woken
// (wake.go), and one waiting member of each shared group with waiters
// (sharedwait.go); with ManagerOptions.WakeFromAppends unset, no one is
// woken.
// It takes one lock and reads nothing: call it from the committer's
// after-append hook, at the batch's fsync.
func (m *Manager) Appended(batch []*journal.Record, entries []index.Entry) {
	if m.wk.fed {
		m.wk.feed(batch, entries)
		m.wakeSharedOnAppend()
	}
}

func newGroup(name string, st groupState) *group {
	st.Filter = st.Filter.compiled()
	g := &group{name: name, sem: make(chan struct{}, 1), st: st, delivered: st.Cursor, leaseFree: make(chan struct{})}
	if st.Mode == modeShared {
		g.sh = newSharedRun(st.Cursor)
	}
	return g
}

// Close wakes every waiting fetch (they return ErrClosed) and writes what
// shared groups have queued and not written yet. It does not
// close the journal or the index.
func (m *Manager) Close() error {
	var err error
	m.closeOnce.Do(func() {
		close(m.done)
		err = m.flushShared()
	})
	return err
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
		return nil, errf(ErrNotFound, "group %q not found", name)
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

// scanLimit bounds the records one collect reads from the journal when all
// are filtered out (see readCost for those it passes over unread).
const scanLimit = 4096
