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
// Durable state (the group's value in the index): the acked low-water mark
// (groupState.Cursor: every message at or below it is acked, dropped or
// parked) and the parked messages (groupState.Parked, with those requeued
// and not acked yet). In-flight state (delivery counts, acks above the
// low-water mark, nak delays) lives in memory only: after a restart every
// message above the low-water mark that is not parked is delivered again,
// with delivery 1, including messages acked before the restart that were
// above the low-water mark. Ack ids carry the run's epoch (a new one
// after a restart or a reset), so an ack id of an earlier run fails with
// ErrConflict even when the delivery number repeats.
//
// Locking: every shared operation holds g.pmu then g.mu for its whole
// step (they are short: reading at most one window of records, and at most
// one fsynced write when the low-water mark or the parked set moved); no
// lock is held while a fetch waits.

const modeShared = "shared"

// Defaults of a shared group's configuration.
const (
	DefaultAckWait       = 30 * time.Second
	DefaultMaxDeliver    = 5
	DefaultMaxAckPending = 1000
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
	requeued bool      // stored in groupState.Parked until acked
	done     bool
}

// sharedRun is a shared group's in-memory delivery state, guarded by the
// group's mu.
type sharedRun struct {
	msgs    []*sharedMsg // outstanding messages in (offset, index) order; done ones are compacted away
	byID    map[msgID]*sharedMsg
	scanned pgq.Offset // last record read into msgs
	// loaded is set once requeued messages below scanned are read back.
	loaded       bool
	inFlight     int
	redeliveries uint64
	// toPark are messages parked in memory whose write is not done yet.
	toPark []parkedRecord
	notify chan struct{} // closed (and replaced) when a key may be free
	// low is the acked low-water mark in memory; st.Cursor is the one
	// written, behind it by at most lowWaterEvery of acks.
	low pgq.Offset
	// written is when the group's state was last written (wall clock).
	written time.Time
	// epoch tells the ack ids of this run from those of a run before a
	// restart or reset, whose delivery numbers may repeat.
	epoch string
}

func newSharedRun(cursor pgq.Offset) *sharedRun {
	epoch := strconv.FormatUint(uint64(time.Now().UnixNano())&0xffffffffff, 36)
	return &sharedRun{byID: map[msgID]*sharedMsg{}, scanned: cursor, low: cursor, notify: make(chan struct{}), epoch: epoch}
}

func (sh *sharedRun) wake() {
	close(sh.notify)
	sh.notify = make(chan struct{})
}

func (sh *sharedRun) insert(m *sharedMsg) {
	i, _ := slices.BinarySearchFunc(sh.msgs, m.id, func(a *sharedMsg, id msgID) int {
		switch {
		case a.id.less(id):
			return -1
		case id.less(a.id):
			return 1
		}
		return 0
	})
	sh.msgs = slices.Insert(sh.msgs, i, m)
	sh.byID[m.id] = m
}

func (sh *sharedRun) finish(m *sharedMsg) {
	if m.inFlight {
		sh.inFlight--
		m.inFlight = false
	}
	m.done = true
	delete(sh.byID, m.id)
	if len(sh.msgs) > 64 && len(sh.byID) < len(sh.msgs)/2 {
		sh.msgs = slices.DeleteFunc(sh.msgs, func(m *sharedMsg) bool { return m.done })
	}
}

// validateShared checks and completes a shared group's configuration.
func validateShared(req CreateRequest) (*sharedConfig, error) {
	c := &sharedConfig{AckWait: time.Duration(req.AckWait).Microseconds(), MaxDeliver: req.MaxDeliver, MaxAckPending: req.MaxAckPending, Key: req.Key}
	if req.AckWait < 0 || req.MaxDeliver < 0 || req.MaxAckPending < 0 {
		return nil, errf(ErrBadRequest, "ack_wait, max_deliver and max_ack_pending must not be negative")
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
	if n == 0 { // no replica identity key: order by table
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
	p := strings.Split(s, ".")
	if len(p) == 4 {
		epoch = p[3]
	}
	bad := errf(ErrBadRequest, "ack id %q: want an ack_id of a fetched or parked message", s)
	if len(p) != 3 && (len(p) != 4 || epoch == "") {
		return msgID{}, 0, "", bad
	}
	off, e1 := strconv.ParseUint(p[0], 10, 64)
	idx, e2 := strconv.Atoi(p[1])
	d, e3 := strconv.Atoi(p[2])
	if e1 != nil || e2 != nil || e3 != nil || idx < 0 || d < 1 || off == 0 {
		return msgID{}, 0, "", bad
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
		return nil, fmt.Errorf("consumers: group %q: read offset %d: %w", g.name, off, err)
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
// g.pmu and g.mu are held.
func (m *Manager) fillLocked(g *group) error {
	sh := g.sh
	if !sh.loaded {
		for _, p := range g.st.Parked {
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
	parked := make(map[msgID]parkedRecord, len(g.st.Parked))
	for _, p := range g.st.Parked {
		parked[msgID{p.Offset, p.Index}] = p
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
				if p, ok := parked[id]; ok && !p.Requeued {
					continue
				}
				msg := g.newMsg(tx, i)
				msg.requeued = parked[id].Requeued
				sh.insert(msg)
			}
		}
		sh.scanned = off
	}
	return nil
}

// requeueLocked puts a parked message back into delivery.
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
	msg.requeued = true
	g.sh.insert(msg)
	return nil
}

// parkLocked moves m out of delivery into the parked set (written by the
// next syncLocked).
func (g *group) parkLocked(msg *sharedMsg, now time.Time, reason string) {
	g.sh.finish(msg)
	g.sh.toPark = append(g.sh.toPark, parkedRecord{Offset: msg.id.off, Index: msg.id.idx, Delivery: msg.delivery, Parked: now.UnixMicro(), Reason: reason})
}

// expireLocked returns in-flight messages whose ack wait ended to pending,
// or parks them after max_deliver deliveries.
func (g *group) expireLocked(now time.Time) {
	for _, msg := range g.sh.msgs {
		if msg.done || !msg.inFlight || msg.deadline.After(now) {
			continue
		}
		g.sh.inFlight--
		msg.inFlight = false
		if msg.delivery >= g.st.Shared.MaxDeliver {
			g.parkLocked(msg, now, fmt.Sprintf("not acked within ack_wait after %d deliveries", msg.delivery))
			continue
		}
		msg.visible = now
	}
}

// lowWaterEvery is how often at most a shared group writes a low-water
// mark that moved alone (no parked message changed): acks are batched
// into one write instead of one fsync each. Close writes what is left; a
// crash loses at most this much low-water progress, delivered again.
const lowWaterEvery = 20 * time.Millisecond

// syncLocked writes the low-water mark and the parked set when they moved
// (the low-water mark alone at most every lowWaterEvery, unless force);
// memory (g.st) follows disk only after a successful write, so retention
// never drops what the stored state still needs.
func (m *Manager) syncLocked(g *group, ack []msgID, force bool) error {
	sh := g.sh
	low := sh.scanned
	for _, msg := range sh.msgs {
		if !msg.done && !msg.requeued {
			low = msg.id.off - 1
			break
		}
	}
	low = max(low, g.st.Cursor)
	sh.low = low
	parked := g.st.Parked
	changed := len(sh.toPark) > 0
	if len(ack) > 0 {
		parked = slices.DeleteFunc(slices.Clone(parked), func(p parkedRecord) bool {
			return slices.Contains(ack, msgID{p.Offset, p.Index})
		})
		changed = changed || len(parked) != len(g.st.Parked)
	}
	force = force || m.closed() // after Close nothing flushes any more
	if !changed && (low == g.st.Cursor || (!force && time.Since(sh.written) < lowWaterEvery)) {
		return nil
	}
	if len(sh.toPark) > 0 {
		parked = slices.DeleteFunc(slices.Clone(parked), func(p parkedRecord) bool {
			return slices.ContainsFunc(sh.toPark, func(q parkedRecord) bool { return q.Offset == p.Offset && q.Index == p.Index })
		})
		parked = append(parked, sh.toPark...)
	}
	st := g.st
	st.Cursor, st.Parked, st.Updated = low, parked, m.o.Now().UnixMicro()
	if err := m.persistState(g.name, &st); err != nil {
		return err
	}
	g.st = st
	sh.toPark = nil
	sh.written = time.Now()
	return nil
}

// flushShared writes the low-water marks of the shared groups that moved
// since their last write (Close).
func (m *Manager) flushShared() error {
	m.mu.Lock()
	gs := make([]*group, 0, len(m.groups))
	for _, g := range m.groups {
		gs = append(gs, g)
	}
	m.mu.Unlock()
	var errs []error
	for _, g := range gs {
		g.pmu.Lock()
		g.mu.Lock()
		if g.sh != nil && !g.deleted {
			errs = append(errs, m.syncLocked(g, nil, true))
		}
		g.mu.Unlock()
		g.pmu.Unlock()
	}
	return errors.Join(errs...)
}

// FetchShared delivers up to req.Max messages of a shared group to
// req.Member, waiting up to req.Wait for one.
func (m *Manager) FetchShared(ctx context.Context, name string, req FetchRequest) ([]api.Message, error) {
	if err := m.clampFetch(&req); err != nil {
		return nil, err
	}
	g, err := m.sharedGroup(name)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(req.Wait)
	for {
		changed := m.j.Changed()
		out, notify, next, err := m.fetchSharedStep(g, req.Max)
		if err != nil || len(out) > 0 || !time.Now().Before(deadline) {
			return out, err
		}
		d := time.Until(deadline)
		if !next.IsZero() {
			// Clock time: poll, so that a test's fake clock is followed.
			d = min(d, max(next.Sub(m.o.Now()), time.Millisecond), 50*time.Millisecond)
		}
		t := time.NewTimer(d)
		select {
		case <-changed:
		case <-notify:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-m.done:
			t.Stop()
			return nil, ErrClosed
		}
		t.Stop()
	}
}

// fetchSharedStep is one round of FetchShared: it returns the messages
// delivered, the channel closed when a key may be free and the next time
// a pending message becomes visible or an in-flight one expires.
func (m *Manager) fetchSharedStep(g *group, max int) ([]api.Message, <-chan struct{}, time.Time, error) {
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.deleted {
		return nil, nil, time.Time{}, errf(ErrNotFound, "group %q", g.name)
	}
	sh, cfg := g.sh, g.st.Shared
	now := m.o.Now()
	g.expireLocked(now)
	if err := m.fillLocked(g); err != nil {
		return nil, nil, time.Time{}, err
	}
	var (
		out       []api.Message
		next      time.Time
		seenKey   = map[string]bool{}
		seenTable = map[string]bool{}
		truncated = map[string]bool{}
		buf       []byte
	)
	soon := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, msg := range sh.msgs {
		if msg.done {
			continue
		}
		if len(out) >= max || sh.inFlight >= cfg.MaxAckPending {
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
		msg.deadline = now.Add(time.Duration(cfg.AckWait) * time.Microsecond)
		sh.inFlight++
		buf = pgq.AppendChangeJSON(buf[:0], &msg.tx.Changes[msg.id.idx])
		out = append(out, api.Message{Offset: msg.id.off, Xid: msg.tx.Xid, CommitLSN: msg.tx.CommitLSN.String(), CommitTime: msg.tx.CommitTime.UTC(),
			Index: msg.id.idx, Change: append([]byte(nil), buf...), Delivery: msg.delivery, AckID: formatAckID(msg.id, msg.delivery, sh.epoch)})
	}
	if err := m.syncLocked(g, nil, false); err != nil {
		return nil, nil, time.Time{}, err
	}
	return out, sh.notify, next, nil
}

// Ack kinds.
const (
	ackAck = iota
	ackNak
	ackTerm
	ackProgress
)

// Ack acknowledges messages of a shared group: they are done. Acking a
// message that is already acked is a no-op; acking a delivery that is no
// longer in flight (redelivered, naked, parked) fails with ErrConflict and
// changes nothing.
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
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.deleted {
		return 0, errf(ErrNotFound, "group %q", name)
	}
	sh, cfg := g.sh, g.st.Shared
	now := m.o.Now()
	g.expireLocked(now)
	// Check every id first: a bad one changes nothing.
	msgs := make([]*sharedMsg, 0, len(ackIDs))
	for _, s := range ackIDs {
		id, d, epoch, err := parseAckID(s)
		if err != nil {
			return 0, err
		}
		msg := sh.byID[id]
		switch {
		case epoch != sh.epoch:
			if epoch == "" {
				return 0, errf(ErrBadRequest, "group %q: ack id %s is not the ack_id of a fetched message", name, s)
			}
			return 0, errf(ErrConflict, "group %q: ack id %s is from an earlier delivery run (pgq restarted or the group was reset since): the message is delivered again", name, s)
		case msg != nil && msg.inFlight && msg.delivery == d:
			msgs = append(msgs, msg)
		case msg != nil:
			state := "waiting for redelivery"
			if msg.inFlight {
				state = "in flight"
			}
			return 0, errf(ErrConflict, "group %q: ack id %s: delivery %d is over (the message is %s as delivery %d)", name, s, d, state, msg.delivery)
		case slices.ContainsFunc(g.st.Parked, func(p parkedRecord) bool { return p.Offset == id.off && p.Index == id.idx }) ||
			slices.ContainsFunc(sh.toPark, func(p parkedRecord) bool { return p.Offset == id.off && p.Index == id.idx }):
			return 0, errf(ErrConflict, "group %q: ack id %s: the message is parked", name, s)
		case id.off <= sh.scanned && kind == ackAck && !slices.ContainsFunc(g.st.Parked, func(p parkedRecord) bool { return p.Offset == id.off && p.Index == id.idx }):
			// Acked already (a retried ack): nothing to do.
		default:
			return 0, errf(ErrNotFound, "group %q: ack id %s: no such delivered message", name, s)
		}
	}
	var acked []msgID
	for _, msg := range msgs {
		switch kind {
		case ackAck:
			if msg.requeued {
				acked = append(acked, msg.id)
			}
			sh.finish(msg)
		case ackTerm:
			g.parkLocked(msg, now, "term")
		case ackProgress:
			msg.deadline = now.Add(time.Duration(cfg.AckWait) * time.Microsecond)
		case ackNak:
			sh.inFlight--
			msg.inFlight = false
			if msg.delivery >= cfg.MaxDeliver {
				g.parkLocked(msg, now, fmt.Sprintf("naked after %d deliveries", msg.delivery))
				continue
			}
			d := delay
			if d == 0 && len(cfg.Backoff) > 0 {
				d = time.Duration(cfg.Backoff[min(msg.delivery-1, len(cfg.Backoff)-1)]) * time.Microsecond
			}
			msg.visible = now.Add(d)
		}
	}
	if err := m.syncLocked(g, acked, false); err != nil {
		return 0, err
	}
	sh.wake()
	return len(msgs), nil
}

// Parked lists a shared group's parked messages (not those requeued), in
// commit order.
func (m *Manager) Parked(ctx context.Context, name string) ([]api.ParkedMessage, error) {
	g, err := m.sharedGroup(name)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	parked := slices.Clone(g.st.Parked)
	g.mu.Unlock()
	slices.SortFunc(parked, func(a, b parkedRecord) int {
		if a.Offset != b.Offset {
			return cmp.Compare(a.Offset, b.Offset)
		}
		return cmp.Compare(a.Index, b.Index)
	})
	out := []api.ParkedMessage{}
	var buf []byte
	for _, p := range parked {
		if p.Requeued {
			continue
		}
		g.mu.Lock() // readRecord reads g.st.Filter
		tx, err := m.readRecord(g, p.Offset)
		g.mu.Unlock()
		if errors.Is(err, ErrOutOfRange) { // dropped by an age or size cap
			out = append(out, api.ParkedMessage{Message: api.Message{Offset: p.Offset, Index: p.Index, Change: []byte("null"), Delivery: p.Delivery,
				AckID: formatAckID(msgID{p.Offset, p.Index}, max(p.Delivery, 1), "")}, Parked: time.UnixMicro(p.Parked).UTC(), Reason: p.Reason + " (record removed by retention)"})
			continue
		}
		if err != nil {
			return nil, err
		}
		if tx == nil || p.Index >= len(tx.Changes) {
			return nil, fmt.Errorf("consumers: group %q: parked message %d.%d is not in its record", name, p.Offset, p.Index)
		}
		buf = pgq.AppendChangeJSON(buf[:0], &tx.Changes[p.Index])
		id := msgID{p.Offset, p.Index}
		out = append(out, api.ParkedMessage{Message: api.Message{Offset: p.Offset, Xid: tx.Xid, CommitLSN: tx.CommitLSN.String(), CommitTime: tx.CommitTime.UTC(),
			Index: p.Index, Change: append([]byte(nil), buf...), Delivery: p.Delivery, AckID: formatAckID(id, max(p.Delivery, 1), "")},
			Parked: time.UnixMicro(p.Parked).UTC(), Reason: p.Reason})
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
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.deleted {
		return 0, errf(ErrNotFound, "group %q", name)
	}
	if err := m.syncLocked(g, nil, true); err != nil { // write pending parks first
		return 0, err
	}
	var hit []parkedRecord
	for _, p := range g.st.Parked {
		if !p.Requeued && (all || want[msgID{p.Offset, p.Index}]) {
			hit = append(hit, p)
			delete(want, msgID{p.Offset, p.Index})
		}
	}
	for id := range want {
		return 0, errf(ErrNotFound, "group %q: message %d.%d is not parked", name, id.off, id.idx)
	}
	if len(hit) == 0 {
		return 0, nil
	}
	if requeue {
		for _, p := range hit {
			if _, err := m.readRecord(g, p.Offset); err != nil {
				return 0, fmt.Errorf("requeue %d.%d (drop it instead): %w", p.Offset, p.Index, err)
			}
		}
	}
	st := g.st
	st.Parked = slices.DeleteFunc(slices.Clone(g.st.Parked), func(p parkedRecord) bool {
		return !p.Requeued && slices.Contains(hit, p)
	})
	if requeue {
		for _, p := range hit {
			p.Requeued, p.Delivery = true, 0
			st.Parked = append(st.Parked, p)
		}
	}
	st.Updated = m.o.Now().UnixMicro()
	if err := m.persistState(g.name, &st); err != nil {
		return 0, err
	}
	g.st = st
	if requeue {
		for _, p := range hit {
			if p.Offset > g.sh.scanned {
				continue // read again by the next fill
			}
			if err := m.requeueLocked(g, p); err != nil {
				return 0, err
			}
		}
		g.sh.wake()
	}
	return len(hit), nil
}

// sharedInfoLocked is the SharedInfo of g; g.mu is held.
func (g *group) sharedInfoLocked() *api.SharedInfo {
	c := g.st.Shared
	si := &api.SharedInfo{AckWait: api.Duration(time.Duration(c.AckWait) * time.Microsecond), MaxDeliver: c.MaxDeliver, MaxAckPending: c.MaxAckPending, Key: c.Key,
		Backoff: []api.Duration{}, InFlight: g.sh.inFlight, Pending: len(g.sh.byID) - g.sh.inFlight, Redeliveries: g.sh.redeliveries, Parked: len(g.sh.toPark)}
	for _, b := range c.Backoff {
		si.Backoff = append(si.Backoff, api.Duration(time.Duration(b)*time.Microsecond))
	}
	for _, p := range g.st.Parked {
		if !p.Requeued {
			si.Parked++
		}
	}
	return si
}

// retainFromLocked is the last offset retention may drop for g: below its
// cursor and below every parked message; g.mu is held.
func (g *group) retainFromLocked() pgq.Offset {
	c := g.st.Cursor
	for _, p := range g.st.Parked {
		c = min(c, p.Offset-1)
	}
	return c
}
