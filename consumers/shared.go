package consumers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/journal"
	"github.com/pgq-dev/pgq/record"
)

// Shared groups.
//
// A shared group delivers single changes (messages) to any number of
// members at once. Each message is acked, naked or termed on its own.
// Messages with the same ordering key are never in flight together and are
// delivered in commit order; a truncate waits for every earlier message of
// its tables and holds back every later one.
//
// # Durable state
//
// The group's value in the index holds its configuration and the acked
// low-water mark (groupState.Cursor: every message at or below it is
// acked, dropped or parked). Beside it, as index group entries keyed
// kind + be64 offset + be32 change index:
//
//	'a' → empty: acked above the low-water mark
//	'd' → be32 delivery count + be64 next-visible time (Unix µs): a
//	      message delivered and not acked yet (naked: when it may go again)
//	'p' → parkedRecord (JSON): parked, or requeued and not acked yet
//
// Every change of that state (a fetch's deliveries, ack, nak, term,
// requeue, drop, a parked ack-wait expiry) is applied in memory under
// g.mu and queued (sharedRun.pend) with a sequence number. Writes are
// group commits: whoever takes g.pmu writes everything queued so far,
// with the low-water mark computed at that moment, in one fsynced batch
// (index.UpdateGroup), and every caller whose number it covers returns
// without writing. Ack, nak, term, requeue and drop wait until a write
// holds their change, so they answer only once it is on disk, and many
// concurrent calls share one fsync. A fetch does not wait: it answers at
// once and its delivery counts go with the next write, at the latest a
// background one writeSoonDelay (10 ms) later (writeSoonLocked), so a
// crash within that moment may forget the counts of its deliveries (the
// messages then come back with the count before). The
// batch that moves the low-water mark deletes the 'a' and 'd' entries at
// or below it with two range tombstones; a requeued message (which may
// lie below the mark) keeps its delivery count and nak delay in its 'p'
// record instead (parkedRecord.Delivery and Visible).
//
// After a restart (or SIGKILL) delivery goes on from the stored state:
// acked messages are not delivered again, parked ones stay parked,
// delivery counts and nak delays are kept. What a member may see twice:
// a message that was in flight (fetched, its ack not answered yet: the
// ack may or may not have been written), delivered again with the next
// delivery count (or the same one, when the crash came before the
// fetch's background write); and a message whose ack failed or was
// refused (ack wait over). Ack ids carry the run's epoch (a
// new one after a restart or a reset), so an ack id of an earlier run
// fails with ErrConflict even when the delivery number repeats.
//
// # Locking
//
// A shared operation holds g.mu for its in-memory step (no I/O but
// reading at most one window of records), then waits for its write with
// g.pmu (never both while fsyncing: the writer takes g.mu only to take
// the queue and to publish the result). No lock is held while a fetch
// waits for messages.

const modeShared = "shared"

// Defaults of a shared group's configuration.
const (
	DefaultAckWait       = 30 * time.Second
	DefaultMaxDeliver    = 5
	DefaultMaxAckPending = 1000
	// MaxAckPendingLimit bounds max_ack_pending: the read-ahead window
	// follows it (2 × max_ack_pending messages, each holding its record,
	// in memory), so it bounds a group's memory; 10 times the default
	// covers any sane parallelism. Groups stored with more keep it.
	MaxAckPendingLimit = 10000
	// sharedWindow is the fewest messages a shared group reads ahead.
	sharedWindow = 10000
)

// sharedConfig is a shared group's stored configuration.
type sharedConfig struct {
	AckWait       int64   `json:"ack_wait_us"`
	MaxDeliver    int     `json:"max_deliver"`
	Backoff       []int64 `json:"backoff_us,omitempty"`
	MaxAckPending int     `json:"max_ack_pending"`
	Key           string  `json:"key"`
}

// parkedRecord is a stored parked message. A requeued one stays stored
// (Requeued) until it is acked, so that it survives a restart although it
// may lie below the low-water mark.
type parkedRecord struct {
	Offset   pgq.Offset `json:"offset"`
	Index    int        `json:"index"`
	Delivery int        `json:"delivery"`
	Parked   int64      `json:"parked_us"`
	Reason   string     `json:"reason"`
	Requeued bool       `json:"requeued,omitempty"`
	// Visible is when a requeued message naked may go again (Unix µs).
	Visible int64 `json:"visible_us,omitempty"`
}

type msgID struct {
	off pgq.Offset
	idx int
}

func (id msgID) less(o msgID) bool {
	return id.off < o.off || (id.off == o.off && id.idx < o.idx)
}

// sharedMsg is an outstanding message (read, not yet acked or parked).
type sharedMsg struct {
	id       msgID
	tx       *pgq.Transaction // the filtered record, shared by its messages
	key      string           // ordering key; "" unordered
	table    string           // "schema.table"; "" for none
	trunc    []string         // a truncate's tables
	delivery int
	inFlight bool
	deadline time.Time // in flight: when ack-wait expires
	visible  time.Time // not in flight: not delivered before
	requeued bool      // stored as a requeued parked message until acked
	done     bool
}

// delivState is a stored 'd' entry.
type delivState struct {
	delivery int
	visible  int64 // Unix µs; 0: at once
}

// Kinds of queued changes (pendOp.kind) and entry key prefixes.
const (
	entryAck      byte = 'a'
	entryDelivery byte = 'd'
	entryParked   byte = 'p'
	// opDrop forgets a parked message (no entry of its own).
	opDrop byte = 'x'
)

// pendOp is the latest queued change of one message's stored state.
type pendOp struct {
	kind byte // entryAck, entryDelivery, entryParked or opDrop
	d    delivState
	p    parkedRecord
	// requeued: an ack of a requeued message (its 'p' entry goes).
	requeued bool
}

// sharedRun is a shared group's in-memory delivery state. Every field is
// guarded by the group's mu.
type sharedRun struct {
	msgs []*sharedMsg // outstanding messages, not requeued, in (offset, index) order; done ones are compacted away
	byID map[msgID]*sharedMsg
	// nRequeued counts the outstanding requeued messages (in byID only).
	nRequeued int
	scanned   pgq.Offset // last record read into msgs
	// loaded is set once requeued messages below scanned are read back.
	loaded       bool
	inFlight     int
	redeliveries uint64
	// nextExpiry is at or before the earliest ack-wait deadline of the
	// messages in flight (zero: none in flight).
	nextExpiry time.Time
	notify     chan struct{} // closed (and replaced) when a key may be free
	// low is the acked low-water mark in memory; st.Cursor is the one
	// written.
	low pgq.Offset
	// epoch tells the ack ids of this run from those of a run before a
	// restart or reset, whose delivery numbers may repeat.
	epoch string

	// parked holds the parked messages, requeued ones included (memory
	// ahead of disk by what pend holds).
	parked map[msgID]parkedRecord
	// acked and deliv are what the stored entries said at load about
	// messages above scanned: consumed by fill.
	acked map[msgID]bool
	deliv map[msgID]delivState

	// pend is the queue of changes not written yet; seq numbers the
	// changes queued, synced the last one written.
	pend   map[msgID]pendOp
	seq    uint64
	synced uint64
	// writeSoon is set while a background write is started and has not
	// taken the queue yet.
	writeSoon bool
	// forceValue makes the next write store the group's value even when
	// its low-water mark did not move (legacy parked list to drop).
	forceValue bool
}

func newSharedRun(cursor pgq.Offset) *sharedRun {
	epoch := strconv.FormatUint(uint64(time.Now().UnixNano())&0xffffffffff, 36)
	return &sharedRun{byID: map[msgID]*sharedMsg{}, scanned: cursor, low: cursor, notify: make(chan struct{}), epoch: epoch,
		parked: map[msgID]parkedRecord{}, acked: map[msgID]bool{}, deliv: map[msgID]delivState{}, pend: map[msgID]pendOp{}}
}

func (sh *sharedRun) wake() {
	close(sh.notify)
	sh.notify = make(chan struct{})
}

// queueDelivery queues msg's delivery count and next-visible time (Unix
// µs, 0: at once): a 'd' entry, or in its parked record when it is a
// requeued message (below the low-water mark, where 'd' entries go).
func (sh *sharedRun) queueDelivery(msg *sharedMsg, visible int64) uint64 {
	if msg.requeued {
		p := sh.parked[msg.id]
		p.Delivery, p.Visible = msg.delivery, visible
		sh.parked[msg.id] = p
		return sh.queue(msg.id, pendOp{kind: entryParked, p: p})
	}
	return sh.queue(msg.id, pendOp{kind: entryDelivery, d: delivState{delivery: msg.delivery, visible: visible}})
}

// queue records the latest change of a message's stored state and
// returns its sequence number.
func (sh *sharedRun) queue(id msgID, op pendOp) uint64 {
	sh.pend[id] = op
	sh.seq++
	return sh.seq
}

// insert adds a message read from the journal (after every one in msgs)
// or a requeued one (kept out of msgs: it does not hold the low-water
// mark).
func (sh *sharedRun) insert(m *sharedMsg) {
	if m.requeued {
		sh.nRequeued++
	} else {
		sh.msgs = append(sh.msgs, m)
	}
	sh.byID[m.id] = m
}

func (sh *sharedRun) finish(m *sharedMsg) {
	if m.inFlight {
		sh.inFlight--
		m.inFlight = false
	}
	m.done = true
	delete(sh.byID, m.id)
	if m.requeued {
		sh.nRequeued--
		return
	}
	// Drop done messages at the front; compact when half are done.
	i := 0
	for i < len(sh.msgs) && sh.msgs[i].done {
		i++
	}
	if i > 0 {
		sh.msgs = sh.msgs[i:]
	}
	if len(sh.msgs) > 64 && len(sh.byID) < len(sh.msgs)/2 {
		sh.msgs = slices.DeleteFunc(sh.msgs, func(m *sharedMsg) bool { return m.done })
	}
}

// lowLocked is the acked low-water mark in memory: below the first
// outstanding message that is not requeued.
func (sh *sharedRun) lowLocked() pgq.Offset {
	for _, msg := range sh.msgs {
		if !msg.done {
			return msg.id.off - 1
		}
	}
	return sh.scanned
}

// ordered returns every outstanding message, requeued ones included, in
// (offset, index) order (and perhaps done ones: skip them).
func (sh *sharedRun) ordered() []*sharedMsg {
	if sh.nRequeued == 0 {
		return sh.msgs // done ones included
	}
	out := make([]*sharedMsg, 0, len(sh.byID))
	for _, m := range sh.byID {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *sharedMsg) int {
		if a.id.less(b.id) {
			return -1
		}
		if b.id.less(a.id) {
			return 1
		}
		return 0
	})
	return out
}

// validateShared checks and completes a shared group's configuration.
func validateShared(req CreateRequest) (*sharedConfig, error) {
	c := &sharedConfig{AckWait: time.Duration(req.AckWait).Microseconds(), MaxDeliver: req.MaxDeliver, MaxAckPending: req.MaxAckPending, Key: req.Key}
	if req.AckWait < 0 || req.MaxDeliver < 0 || req.MaxAckPending < 0 {
		return nil, errf(ErrBadRequest, "ack_wait, max_deliver and max_ack_pending must not be negative")
	}
	if req.MaxAckPending > MaxAckPendingLimit {
		return nil, errf(ErrBadRequest, "max_ack_pending %d: at most %d (pgq reads ahead twice as many messages)", req.MaxAckPending, MaxAckPendingLimit)
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait.Microseconds()
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = DefaultMaxDeliver
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = DefaultMaxAckPending
	}
	switch c.Key {
	case "":
		c.Key = "pk"
	case "pk", "table", "none":
	default:
		return nil, errf(ErrBadRequest, "key %q: want pk, table or none", c.Key)
	}
	for _, d := range req.Backoff {
		if d < 0 {
			return nil, errf(ErrBadRequest, "backoff steps must not be negative")
		}
		c.Backoff = append(c.Backoff, time.Duration(d).Microseconds())
	}
	return c, nil
}

// messageKey returns a change's ordering key, table and truncated tables
// under key mode mode.
func messageKey(mode string, c *pgq.Change) (key, table string, trunc []string) {
	if mode == "none" {
		return "", "", nil
	}
	if c.Op == pgq.OpTruncate {
		return "", "", c.Tables
	}
	if c.Table == "" {
		return "", "", nil
	}
	table = c.Schema + "." + c.Table
	if mode == "table" {
		return table, table, nil
	}
	vals := c.New
	if c.Op == pgq.OpDelete && c.Old != nil {
		vals = c.Old
	}
	var b strings.Builder
	b.WriteString(table)
	n := 0
	for i, col := range c.Columns {
		if !col.Key || i >= len(vals) {
			continue
		}
		n++
		b.WriteByte(0)
		b.WriteString(col.Name)
		b.WriteByte('=')
		b.WriteByte(byte(vals[i].Kind))
		b.Write(vals[i].Data)
	}
	if n == 0 { // no key columns (no primary key, FULL tables too): order by table
		return table, table, nil
	}
	return b.String(), table, nil
}

// formatAckID returns the ack id of delivery d of a message in the
// delivery run epoch: "<offset>.<index>.<delivery>.<epoch>" (parked
// messages, which belong to no run, have no epoch).
func formatAckID(id msgID, d int, epoch string) string {
	s := strconv.FormatUint(uint64(id.off), 10) + "." + strconv.Itoa(id.idx) + "." + strconv.Itoa(d)
	if epoch != "" {
		s += "." + epoch
	}
	return s
}

// parseAckID parses an ack id; the epoch is "" when absent.
func parseAckID(s string) (id msgID, delivery int, epoch string, err error) {
	bad := func() error {
		return errf(ErrBadRequest, "ack id %q: want an ack_id of a fetched or parked message", s)
	}
	var p [4]string
	n := 0
	for rest := s; ; n++ {
		i := strings.IndexByte(rest, '.')
		if n == 3 || i < 0 {
			p[n] = rest
			n++
			break
		}
		p[n], rest = rest[:i], rest[i+1:]
	}
	if n == 4 {
		epoch = p[3]
	}
	if n < 3 || (n == 4 && (epoch == "" || strings.IndexByte(epoch, '.') >= 0)) {
		return msgID{}, 0, "", bad()
	}
	off, e1 := strconv.ParseUint(p[0], 10, 64)
	idx, e2 := strconv.Atoi(p[1])
	d, e3 := strconv.Atoi(p[2])
	if e1 != nil || e2 != nil || e3 != nil || idx < 0 || d < 1 || off == 0 {
		return msgID{}, 0, "", bad()
	}
	return msgID{pgq.Offset(off), idx}, d, epoch, nil
}

// sharedGroup returns the group name if it is a shared group.
func (m *Manager) sharedGroup(name string) (*group, error) {
	g, err := m.get(name)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sh == nil {
		return nil, errf(ErrBadRequest, "group %q is an exclusive group: fetch and commit offsets instead", name)
	}
	return g, nil
}

// exclusive fails for a shared group.
func (g *group) exclusive() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sh != nil {
		return errf(ErrBadRequest, "group %q is a shared group: use fetch with ack, nak and term", g.name)
	}
	return nil
}

func (m *Manager) readRecord(g *group, off pgq.Offset) (*pgq.Transaction, error) {
	raw, err := m.j.ReadRaw(off)
	if errors.Is(err, journal.ErrNotFound) && off < m.j.FirstOffset() {
		return nil, errf(ErrOutOfRange, "group %q: offset %d was removed by retention; reset the group", g.name, off)
	}
	if err != nil {
		return nil, m.readErr(g, off, fmt.Errorf("consumers: group %q: read offset %d: %w", g.name, off, err))
	}
	tx := &pgq.Transaction{Offset: off}
	if err := record.Check(raw); err != nil {
		return nil, fmt.Errorf("consumers: group %q: offset %d: %w", g.name, off, err)
	}
	if err := record.DecodeBody(raw[record.HeaderSize:], tx); err != nil {
		return nil, fmt.Errorf("consumers: group %q: offset %d: %w", g.name, off, err)
	}
	return g.st.Filter.Apply(tx), nil
}

func (g *group) newMsg(tx *pgq.Transaction, idx int) *sharedMsg {
	key, table, trunc := messageKey(g.st.Shared.Key, &tx.Changes[idx])
	return &sharedMsg{id: msgID{tx.Offset, idx}, tx: tx, key: key, table: table, trunc: trunc}
}

// fillLocked reads records into the window and loads requeued messages;
// g.mu is held.
func (m *Manager) fillLocked(g *group) error {
	sh := g.sh
	if !sh.loaded {
		for _, p := range sh.parked {
			if !p.Requeued || p.Offset > sh.scanned {
				continue
			}
			if err := m.requeueLocked(g, p); errors.Is(err, ErrOutOfRange) {
				// An age or size cap dropped its record: it cannot be
				// delivered; it stays listed until dropped.
				m.o.Logger.Warn("shared group: a requeued message's record was removed by retention", "group", g.name, "offset", p.Offset, "index", p.Index)
			} else if err != nil {
				return err
			}
		}
		sh.loaded = true
	}
	window := max(sharedWindow, 2*g.st.Shared.MaxAckPending)
	first, last := m.bounds()
	if sh.scanned < last && sh.scanned+1 < first {
		return errf(ErrOutOfRange, "group %q: next offset %d is below the journal start %d (removed by retention); reset the group", g.name, sh.scanned+1, first)
	}
	for off := sh.scanned + 1; off <= last && len(sh.byID) < window; off++ {
		tx, err := m.readRecord(g, off)
		if err != nil {
			return err
		}
		if tx != nil {
			for i := range tx.Changes {
				id := msgID{off, i}
				if sh.acked[id] { // acked before a restart
					delete(sh.acked, id)
					continue
				}
				p, parked := sh.parked[id]
				if parked && !p.Requeued {
					continue
				}
				msg := g.newMsg(tx, i)
				if parked { // requeued: its count is in its parked record
					msg.requeued, msg.delivery = true, p.Delivery
					if p.Visible != 0 {
						msg.visible = time.UnixMicro(p.Visible)
					}
				} else {
					sh.restore(msg)
				}
				sh.insert(msg)
			}
		}
		sh.scanned = off
	}
	return nil
}

// restore gives msg the delivery count and nak delay stored before a
// restart.
func (sh *sharedRun) restore(msg *sharedMsg) {
	d, ok := sh.deliv[msg.id]
	if !ok {
		return
	}
	delete(sh.deliv, msg.id)
	msg.delivery = d.delivery
	if d.visible != 0 {
		msg.visible = time.UnixMicro(d.visible)
	}
}

// requeueLocked puts a parked message back into delivery; g.mu is held.
func (m *Manager) requeueLocked(g *group, p parkedRecord) error {
	id := msgID{p.Offset, p.Index}
	if g.sh.byID[id] != nil {
		return nil
	}
	tx, err := m.readRecord(g, p.Offset)
	if err != nil {
		return err
	}
	if tx == nil || p.Index >= len(tx.Changes) {
		return fmt.Errorf("consumers: group %q: parked message %d.%d is not in its record", g.name, p.Offset, p.Index)
	}
	msg := g.newMsg(tx, p.Index)
	msg.requeued, msg.delivery = true, p.Delivery
	if p.Visible != 0 {
		msg.visible = time.UnixMicro(p.Visible)
	}
	g.sh.insert(msg)
	return nil
}

// parkLocked moves msg out of delivery into the parked set and returns
// the sequence number of the queued change.
func (g *group) parkLocked(msg *sharedMsg, now time.Time, reason string) uint64 {
	g.sh.finish(msg)
	p := parkedRecord{Offset: msg.id.off, Index: msg.id.idx, Delivery: msg.delivery, Parked: now.UnixMicro(), Reason: reason}
	g.sh.parked[msg.id] = p
	return g.sh.queue(msg.id, pendOp{kind: entryParked, p: p})
}

// expireLocked returns in-flight messages whose ack wait ended to pending,
// or parks them after max_deliver deliveries; it returns the sequence
// number of the last change queued (0: none).
func (g *group) expireLocked(now time.Time) uint64 {
	sh := g.sh
	if sh.nextExpiry.IsZero() || sh.nextExpiry.After(now) {
		return 0
	}
	var (
		seq  uint64
		next time.Time
	)
	for _, msg := range sh.byID {
		if !msg.inFlight {
			continue
		}
		if msg.deadline.After(now) {
			if next.IsZero() || msg.deadline.Before(next) {
				next = msg.deadline
			}
			continue
		}
		sh.inFlight--
		msg.inFlight = false
		if msg.delivery >= g.st.Shared.MaxDeliver {
			seq = g.parkLocked(msg, now, fmt.Sprintf("not acked within ack_wait after %d deliveries", msg.delivery))
			continue
		}
		msg.visible = now
	}
	sh.nextExpiry = next
	return seq
}

// SharedMessage is one message of a shared group as a fetch delivered
// it (or as it lies parked): change Index of the record Tx at Offset.
// consumers hands out changes, never their rendering (package format's,
// httpapi's answers).
type SharedMessage struct {
	Offset pgq.Offset
	// Tx is the record, after the group's filter; the messages of one
	// record share it. Read it, never change it. nil for a parked
	// message whose record retention removed.
	Tx       *pgq.Transaction
	Index    int
	Delivery int
	AckID    string
}

// ParkedMessage is a parked message of a shared group.
type ParkedMessage struct {
	SharedMessage
	// Parked is when it was parked, Reason why.
	Parked time.Time
	Reason string
}

// FetchShared delivers up to req.Max messages of a shared group to
// req.Member, waiting up to req.Wait for one.
// FetchSharedRecords delivers them as record bodies.
func (m *Manager) FetchShared(ctx context.Context, name string, req FetchRequest) ([]SharedMessage, error) {
	var out []SharedMessage
	err := m.fetchShared(ctx, name, req, func(off pgq.Offset, tx *pgq.Transaction, idx, delivery int, ackID string) {
		out = append(out, SharedMessage{Offset: off, Tx: tx, Index: idx, Delivery: delivery, AckID: ackID})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// deliverFunc receives each message a fetch delivers: change idx of the
// (filtered) record tx at offset off, its delivery number and ack id. It
// runs under the group's lock. tx is the window's record, which nothing
// changes once read: it may be kept (FetchShared hands it out), read-only.
type deliverFunc func(off pgq.Offset, tx *pgq.Transaction, idx, delivery int, ackID string)

// fetchShared is the long poll of FetchShared and FetchSharedRecords:
// rounds of fetchSharedStep until one delivers something (to emit) or
// req.Wait ends.
func (m *Manager) fetchShared(ctx context.Context, name string, req FetchRequest, emit deliverFunc) error {
	if err := m.clampFetch(&req); err != nil {
		return err
	}
	g, err := m.sharedGroup(name)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(req.Wait)
	for {
		changed, seen, gen := m.j.Changed(), m.j.LastOffset(), g.shWakes.Load()
		m.sharedSteps.Add(1)
		n, notify, next, err := m.fetchSharedStep(g, req.Max, emit)
		if err != nil {
			return err
		}
		if n > 0 && m.wk.fed {
			m.wakeNextShared(g) // what this step left, if anything, is the next member's
		}
		if n > 0 || !time.Now().Before(deadline) {
			return nil
		}
		d := time.Until(deadline)
		if !next.IsZero() {
			// Clock time: poll, so that a test's fake clock is followed.
			d = min(d, max(next.Sub(m.o.Now()), time.Millisecond), 50*time.Millisecond)
		}
		t := time.NewTimer(d)
		if m.wk.fed {
			notify = nil // a settle wakes one waiter of the queue instead
		}
		wake, release := m.sharedDataWake(g, changed, seen, gen)
		select {
		case <-wake:
		case <-notify:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			release(false)
			return ctx.Err()
		case <-m.done:
			t.Stop()
			release(false)
			return ErrClosed
		}
		t.Stop()
		release(true) // the loop steps next
	}
}

// sharedDataWake is dataWake for a shared group's member: with
// WakeFromAppends, a place in the group's queue of waiters, woken one at
// a time (sharedwait.go); else the wait of dataWake. release says
// whether a step follows the wait.
func (m *Manager) sharedDataWake(g *group, changed <-chan struct{}, seen pgq.Offset, gen uint64) (<-chan struct{}, func(stepped bool)) {
	if m.wk.fed {
		return m.waitShared(g, seen, gen)
	}
	wake, release := m.dataWake(g, changed, seen)
	return wake, func(bool) { release() }
}

// fetchSharedStep is one round of fetchShared: it hands each message it
// delivers to emit and returns how many, the channel closed when a key may be free and the next time
// a pending message becomes visible or an in-flight one expires. What it
// changed (delivery counts, parks of expired messages) is written in the
// background (writeSoonLocked): a fetch does not wait for an fsync.
func (m *Manager) fetchSharedStep(g *group, max int, emit deliverFunc) (n int, notify <-chan struct{}, next time.Time, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.deleted {
		return 0, nil, time.Time{}, errf(ErrNotFound, "group %q not found", g.name)
	}
	sh, cfg := g.sh, g.st.Shared
	now := m.o.Now()
	seq := g.expireLocked(now)
	defer func() {
		if seq > 0 {
			m.writeSoonLocked(g)
		}
	}()
	if err := m.fillLocked(g); err != nil {
		return 0, nil, time.Time{}, err
	}
	var (
		seenKey   = map[string]bool{}
		seenTable = map[string]bool{}
		truncated = map[string]bool{}
		ackWait   = time.Duration(cfg.AckWait) * time.Microsecond
	)
	soon := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, msg := range sh.ordered() {
		if msg.done {
			continue
		}
		if n >= max || sh.inFlight >= cfg.MaxAckPending {
			break
		}
		free := true
		if msg.trunc != nil {
			for _, t := range msg.trunc {
				free = free && !seenTable[t] && !truncated[t]
			}
			for _, t := range msg.trunc {
				truncated[t], seenTable[t] = true, true
			}
		} else {
			free = (msg.key == "" || !seenKey[msg.key]) && (msg.table == "" || !truncated[msg.table])
			if msg.key != "" {
				seenKey[msg.key] = true
			}
			if msg.table != "" {
				seenTable[msg.table] = true
			}
		}
		if msg.inFlight {
			soon(msg.deadline)
			continue
		}
		if !free {
			continue
		}
		if msg.visible.After(now) {
			soon(msg.visible)
			continue
		}
		msg.delivery++
		if msg.delivery > 1 {
			sh.redeliveries++
		}
		msg.inFlight = true
		msg.deadline = now.Add(ackWait)
		if sh.nextExpiry.IsZero() || msg.deadline.Before(sh.nextExpiry) {
			sh.nextExpiry = msg.deadline
		}
		sh.inFlight++
		seq = sh.queueDelivery(msg, 0)
		emit(msg.id.off, msg.tx, msg.id.idx, msg.delivery, formatAckID(msg.id, msg.delivery, sh.epoch))
		if msg.delivery == 1 {
			m.observeJournalDelivery(msg.id.off)
		}
		n++
	}
	sh.low = sh.lowLocked()
	return n, sh.notify, next, nil
}

// Ack kinds.
const (
	ackAck = iota
	ackNak
	ackTerm
	ackProgress
	// ackRelease is a nak of messages no handler saw (a member that
	// fetched ahead stops): visible again at once, never parked by it.
	ackRelease
)

// Ack acknowledges messages of a shared group: they are done, and written
// when Ack returns. Acking a message that is already acked is a no-op;
// acking a delivery that is no longer in flight (redelivered, naked,
// parked) fails with ErrConflict and changes nothing, and an id naming no
// delivery that was made (no such change, a delivery not made yet) with
// ErrNotFound.
func (m *Manager) Ack(ctx context.Context, name string, ackIDs []string) (int, error) {
	return m.settle(name, ackIDs, ackAck, 0)
}

// Nak returns messages for redelivery after delay (zero: the group's next
// backoff step), or parks those delivered max_deliver times.
func (m *Manager) Nak(ctx context.Context, name string, ackIDs []string, delay time.Duration) (int, error) {
	if delay < 0 {
		return 0, errf(ErrBadRequest, "delay must not be negative")
	}
	return m.settle(name, ackIDs, ackNak, delay)
}

// ReleaseUnhandled gives back messages in flight that no handler saw (a member
// fetched them ahead and stops): they are delivered again at once, with
// the next delivery count (ack ids stay unique), and are not parked by
// it even at max_deliver.
func (m *Manager) ReleaseUnhandled(ctx context.Context, name string, ackIDs []string) (int, error) {
	return m.settle(name, ackIDs, ackRelease, 0)
}

// InProgress restarts the ack wait of messages in flight (a slow handler
// is still at work).
func (m *Manager) InProgress(ctx context.Context, name string, ackIDs []string) (int, error) {
	return m.settle(name, ackIDs, ackProgress, 0)
}

// Term parks messages at once.
func (m *Manager) Term(ctx context.Context, name string, ackIDs []string) (int, error) {
	return m.settle(name, ackIDs, ackTerm, 0)
}

func (m *Manager) settle(name string, ackIDs []string, kind int, delay time.Duration) (int, error) {
	if len(ackIDs) == 0 {
		return 0, errf(ErrBadRequest, "ack_ids is empty")
	}
	g, err := m.sharedGroup(name)
	if err != nil {
		return 0, err
	}
	sh, n, seq, err := m.settleLocked(g, ackIDs, kind, delay)
	if err != nil {
		return 0, err
	}
	if err := m.waitWritten(g, sh, seq); err != nil {
		return 0, err
	}
	return n, nil
}

// settleLocked applies a settle in memory and returns the sequence number
// of its last change to wait for.
func (m *Manager) settleLocked(g *group, ackIDs []string, kind int, delay time.Duration) (*sharedRun, int, uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	name := g.name
	if g.deleted {
		return nil, 0, 0, errf(ErrNotFound, "group %q not found", name)
	}
	sh, cfg := g.sh, g.st.Shared
	now := m.o.Now()
	seq := g.expireLocked(now)
	// Check every id first: a bad one changes nothing. A message named
	// twice (the same id repeated, or spelled twice) is settled once:
	// settling it again would count it twice and, for a nak, take it out
	// of flight twice.
	msgs := make([]*sharedMsg, 0, len(ackIDs))
	seen := make(map[*sharedMsg]bool, len(ackIDs))
	changes := map[pgq.Offset]int{} // records read to tell acked messages from none
	for _, s := range ackIDs {
		msg, acked, err := m.settleTargetLocked(g, s, kind, changes)
		if err != nil {
			return nil, 0, 0, err
		}
		if acked {
			// Acked already (a retried ack): done once what is queued is
			// written.
			seq = sh.seq
			continue
		}
		if !seen[msg] {
			seen[msg] = true
			msgs = append(msgs, msg)
		}
	}
	for _, msg := range msgs {
		seq = g.settleMsgLocked(msg, kind, delay, cfg, now, seq)
	}
	sh.low = sh.lowLocked()
	m.wakeSharedLocked(g)
	return sh, len(msgs), seq, nil
}

// settleTargetLocked checks ack id s for a settle of kind and returns the
// in-flight message it settles, or acked when it is a retried ack of a
// message acked already. Any other id is an error, so that a settle with
// one bad id changes nothing. changes caches the change counts of the
// records read to tell an acked message from an id naming none.
func (m *Manager) settleTargetLocked(g *group, s string, kind int, changes map[pgq.Offset]int) (msg *sharedMsg, acked bool, err error) {
	name, sh := g.name, g.sh
	id, d, epoch, err := parseAckID(s)
	if err != nil {
		return nil, false, err
	}
	msg = sh.byID[id]
	p, parked := sh.parked[id]
	switch {
	case epoch != sh.epoch:
		if epoch == "" {
			return nil, false, errf(ErrBadRequest, "group %q: ack id %s is not the ack_id of a fetched message", name, s)
		}
		return nil, false, errf(ErrConflict, "group %q: ack id %s is from an earlier delivery run (pgq restarted or the group was reset since): the message is delivered again", name, s)
	case msg != nil && msg.inFlight && msg.delivery == d:
		return msg, false, nil
	case msg != nil && d > msg.delivery && !msg.requeued:
		// A requeued message restarts its count, so only for it may a
		// higher number be a delivery that was made.
		return nil, false, errf(ErrNotFound, "group %q: ack id %s: delivery %d of the message was never made (it had %d)", name, s, d, msg.delivery)
	case msg != nil:
		state := "waiting for redelivery"
		if msg.inFlight {
			state = "in flight"
		}
		return nil, false, errf(ErrConflict, "group %q: ack id %s: delivery %d is over (the message is %s as delivery %d)", name, s, d, state, msg.delivery)
	case parked && !p.Requeued:
		return nil, false, errf(ErrConflict, "group %q: ack id %s: the message is parked", name, s)
	case id.off <= sh.scanned && kind == ackAck && !parked:
		// Read, not outstanding, not parked: acked already, unless the id
		// names no message of the group at all.
		ok, err := m.isMessageLocked(g, id, changes)
		if err != nil || ok {
			return nil, ok, err
		}
	}
	return nil, false, errf(ErrNotFound, "group %q: ack id %s: no such delivered message", name, s)
}

// isMessageLocked reports whether id names a change of g's filtered
// journal; counts caches the change count of each record read. A record
// removed by retention cannot tell: its messages count as acked (the
// group's cursor or a cap moved past them). g.mu is held.
func (m *Manager) isMessageLocked(g *group, id msgID, counts map[pgq.Offset]int) (bool, error) {
	n, ok := counts[id.off]
	if !ok {
		tx, err := m.readRecord(g, id.off)
		switch {
		case errors.Is(err, ErrOutOfRange):
			return true, nil
		case err != nil:
			return false, err
		case tx != nil:
			n = len(tx.Changes)
		}
		counts[id.off] = n
	}
	return id.idx < n, nil
}

// settleMsgLocked settles one in-flight message (ack, term, progress, nak
// or release) and returns the sequence number of the change to wait for:
// seq when the settle queues none.
func (g *group) settleMsgLocked(msg *sharedMsg, kind int, delay time.Duration, cfg *sharedConfig, now time.Time, seq uint64) uint64 {
	sh := g.sh
	switch kind {
	case ackAck:
		if msg.requeued {
			delete(sh.parked, msg.id)
		}
		sh.finish(msg)
		seq = sh.queue(msg.id, pendOp{kind: entryAck, requeued: msg.requeued})
	case ackTerm:
		seq = g.parkLocked(msg, now, "term")
	case ackProgress:
		msg.deadline = now.Add(time.Duration(cfg.AckWait) * time.Microsecond)
	case ackNak, ackRelease: // a release: at once, never parked
		sh.inFlight--
		msg.inFlight = false
		if kind == ackNak && msg.delivery >= cfg.MaxDeliver {
			return g.parkLocked(msg, now, fmt.Sprintf("naked after %d deliveries", msg.delivery))
		}
		d := delay
		if kind == ackNak && d == 0 && len(cfg.Backoff) > 0 {
			d = time.Duration(cfg.Backoff[min(msg.delivery-1, len(cfg.Backoff)-1)]) * time.Microsecond
		}
		msg.visible = now.Add(d)
		vis := int64(0)
		if d > 0 {
			vis = msg.visible.UnixMicro()
		}
		seq = sh.queueDelivery(msg, vis)
	}
	return seq
}

// Parked lists a shared group's parked messages (not those requeued), in
// commit order.
func (m *Manager) Parked(ctx context.Context, name string) ([]ParkedMessage, error) {
	g, err := m.sharedGroup(name)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	parked := make([]parkedRecord, 0, len(g.sh.parked))
	for _, p := range g.sh.parked {
		if !p.Requeued {
			parked = append(parked, p)
		}
	}
	g.mu.Unlock()
	slices.SortFunc(parked, func(a, b parkedRecord) int {
		if a.Offset != b.Offset {
			return cmp.Compare(a.Offset, b.Offset)
		}
		return cmp.Compare(a.Index, b.Index)
	})
	out := []ParkedMessage{}
	for _, p := range parked {
		g.mu.Lock() // readRecord reads g.st.Filter
		tx, err := m.readRecord(g, p.Offset)
		g.mu.Unlock()
		if errors.Is(err, ErrOutOfRange) { // dropped by an age or size cap
			out = append(out, ParkedMessage{SharedMessage: SharedMessage{Offset: p.Offset, Index: p.Index, Delivery: p.Delivery,
				AckID: formatAckID(msgID{p.Offset, p.Index}, max(p.Delivery, 1), "")}, Parked: time.UnixMicro(p.Parked).UTC(), Reason: p.Reason + " (record removed by retention)"})
			continue
		}
		if err != nil {
			return nil, err
		}
		if tx == nil || p.Index >= len(tx.Changes) {
			return nil, fmt.Errorf("consumers: group %q: parked message %d.%d is not in its record", name, p.Offset, p.Index)
		}
		id := msgID{p.Offset, p.Index}
		out = append(out, ParkedMessage{SharedMessage: SharedMessage{Offset: p.Offset, Tx: tx, Index: p.Index, Delivery: p.Delivery,
			AckID: formatAckID(id, max(p.Delivery, 1), "")}, Parked: time.UnixMicro(p.Parked).UTC(), Reason: p.Reason})
	}
	return out, nil
}

// Requeue puts parked messages (by ack id, or all) back into delivery,
// with their delivery count restarted.
func (m *Manager) Requeue(ctx context.Context, name string, ackIDs []string, all bool) (int, error) {
	return m.parkedAction(name, ackIDs, all, true)
}

// Drop forgets parked messages (by ack id, or all).
func (m *Manager) Drop(ctx context.Context, name string, ackIDs []string, all bool) (int, error) {
	return m.parkedAction(name, ackIDs, all, false)
}

func (m *Manager) parkedAction(name string, ackIDs []string, all, requeue bool) (int, error) {
	if all == (len(ackIDs) > 0) {
		return 0, errf(ErrBadRequest, "give either ack_ids or all")
	}
	want := map[msgID]bool{}
	for _, s := range ackIDs {
		id, _, _, err := parseAckID(s)
		if err != nil {
			return 0, err
		}
		want[id] = true
	}
	g, err := m.sharedGroup(name)
	if err != nil {
		return 0, err
	}
	sh, n, seq, err := m.parkedActionLocked(g, want, all, requeue)
	if err != nil || n == 0 {
		return 0, err
	}
	if err := m.waitWritten(g, sh, seq); err != nil {
		return 0, err
	}
	return n, nil
}

func (m *Manager) parkedActionLocked(g *group, want map[msgID]bool, all, requeue bool) (*sharedRun, int, uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.deleted {
		return nil, 0, 0, errf(ErrNotFound, "group %q not found", g.name)
	}
	sh := g.sh
	var hit []parkedRecord
	for id, p := range sh.parked {
		if !p.Requeued && (all || want[id]) {
			hit = append(hit, p)
			delete(want, id)
		}
	}
	for id := range want {
		return nil, 0, 0, errf(ErrNotFound, "group %q: message %d.%d is not parked", g.name, id.off, id.idx)
	}
	if requeue {
		for _, p := range hit {
			if _, err := m.readRecord(g, p.Offset); err != nil {
				return nil, 0, 0, fmt.Errorf("requeue %d.%d (drop it instead): %w", p.Offset, p.Index, err)
			}
		}
	}
	var seq uint64
	for _, p := range hit {
		id := msgID{p.Offset, p.Index}
		if !requeue {
			delete(sh.parked, id)
			seq = sh.queue(id, pendOp{kind: opDrop})
			continue
		}
		p.Requeued, p.Delivery, p.Visible = true, 0, 0
		sh.parked[id] = p
		seq = sh.queue(id, pendOp{kind: entryParked, p: p})
		if p.Offset > sh.scanned {
			continue // read by the next fill
		}
		if err := m.requeueLocked(g, p); err != nil {
			return nil, 0, 0, err
		}
	}
	if requeue {
		m.wakeSharedLocked(g)
	}
	return sh, len(hit), seq, nil
}

// sharedInfoLocked is the SharedInfo of g; g.mu is held.
func (g *group) sharedInfoLocked() *api.SharedInfo {
	c := g.st.Shared
	si := &api.SharedInfo{AckWait: api.Duration(time.Duration(c.AckWait) * time.Microsecond), MaxDeliver: c.MaxDeliver, MaxAckPending: c.MaxAckPending, Key: c.Key,
		Backoff: []api.Duration{}, InFlight: g.sh.inFlight, Pending: len(g.sh.byID) - g.sh.inFlight, Redeliveries: g.sh.redeliveries}
	for _, b := range c.Backoff {
		si.Backoff = append(si.Backoff, api.Duration(time.Duration(b)*time.Microsecond))
	}
	for _, p := range g.sh.parked {
		if !p.Requeued {
			si.Parked++
		}
	}
	return si
}

// retainFromLocked is the last offset retention may drop for g: below its
// stored cursor and below every parked message; g.mu is held.
func (g *group) retainFromLocked() pgq.Offset {
	c := g.st.Cursor
	for _, p := range g.sh.parked {
		c = min(c, p.Offset-1)
	}
	return c
}
