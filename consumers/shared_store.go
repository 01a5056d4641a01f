package consumers

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/index"
)

// The stored state of shared groups: index group entries beside the
// group's value, written by group commit (see shared.go).

// entryKeyLen is the length of an entry key: kind, be64 offset, be32 index.
const entryKeyLen = 1 + 8 + 4

func entryKey(kind byte, id msgID) []byte {
	k := make([]byte, entryKeyLen)
	k[0] = kind
	binary.BigEndian.PutUint64(k[1:], uint64(id.off))
	binary.BigEndian.PutUint32(k[9:], uint32(id.idx))
	return k
}

func parseEntryKey(k []byte) (byte, msgID, error) {
	if len(k) != entryKeyLen {
		return 0, msgID{}, fmt.Errorf("entry key of %d bytes, want %d", len(k), entryKeyLen)
	}
	return k[0], msgID{pgq.Offset(binary.BigEndian.Uint64(k[1:])), int(binary.BigEndian.Uint32(k[9:]))}, nil
}

func encodeDeliv(d delivState) []byte {
	v := make([]byte, 12)
	binary.BigEndian.PutUint32(v, uint32(d.delivery))
	binary.BigEndian.PutUint64(v[4:], uint64(d.visible))
	return v
}

func decodeDeliv(v []byte) (delivState, error) {
	if len(v) != 12 {
		return delivState{}, fmt.Errorf("delivery entry of %d bytes, want 12", len(v))
	}
	return delivState{delivery: int(binary.BigEndian.Uint32(v)), visible: int64(binary.BigEndian.Uint64(v[4:]))}, nil
}

// loadShared reads a shared group's entries into its new run (and moves
// a parked list of the group's value, as an earlier version stored it,
// into entries with the next write). g is not published yet.
func (m *Manager) loadShared(g *group) error {
	sh := g.sh
	for _, p := range g.st.Parked {
		id := msgID{p.Offset, p.Index}
		sh.parked[id] = p
		sh.queue(id, pendOp{kind: entryParked, p: p})
		sh.forceValue = true
	}
	err := m.ix.GroupEntries(g.name, func(k, v []byte) error {
		kind, id, err := parseEntryKey(k)
		if err != nil {
			return err
		}
		switch kind {
		case entryAck:
			if id.off > g.st.Cursor {
				sh.acked[id] = true
			}
		case entryDelivery:
			d, err := decodeDeliv(v)
			if err != nil {
				return err
			}
			if id.off > g.st.Cursor {
				sh.deliv[id] = d
			}
		case entryParked:
			var p parkedRecord
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("parked entry %d.%d: %w", id.off, id.idx, err)
			}
			sh.parked[id] = p
		default:
			return fmt.Errorf("entry of unknown kind %q", kind)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("consumers: load shared group %q: %w", g.name, err)
	}
	return nil
}

// waitWritten returns once change seq of run sh is written, writing it
// (with everything queued by then) when no one else has. seq 0: nothing.
func (m *Manager) waitWritten(g *group, sh *sharedRun, seq uint64) error {
	if seq == 0 {
		return nil
	}
	g.pmu.Lock()
	defer g.pmu.Unlock()
	return m.writeSharedLocked(g, sh, seq)
}

// writeSoonLocked schedules a background write of what g's run queued,
// writeSoonDelay from now, unless one is scheduled already; g.mu is held. A failed write
// leaves the changes queued for the next.
func (m *Manager) writeSoonLocked(g *group) {
	sh := g.sh
	if sh.writeSoon {
		return
	}
	sh.writeSoon = true
	// A little later: the settles of the fetched messages usually write
	// the counts first, and this write then finds nothing to do.
	time.AfterFunc(writeSoonDelay, func() {
		g.pmu.Lock()
		defer g.pmu.Unlock()
		g.mu.Lock()
		sh.writeSoon = false
		seq := sh.seq
		g.mu.Unlock()
		if err := m.writeSharedLocked(g, sh, seq); err != nil && !errors.Is(err, ErrNotFound) && !m.closed() {
			m.o.Logger.Warn("shared group: background write failed; retried with the next", "group", g.name, "err", err)
		}
	})
}

// writeSoonDelay is how long after a fetch its delivery counts are
// written at the latest (when no settle wrote them before).
const writeSoonDelay = 10 * time.Millisecond

// flushSharedLocked writes everything queued of g's run; g.pmu is held.
func (m *Manager) flushSharedLocked(g *group) error {
	g.mu.Lock()
	sh := g.sh
	seq := sh.seq
	g.mu.Unlock()
	return m.writeSharedLocked(g, sh, seq)
}

// kindRange deletes every entry of kind above offset from and at or below
// offset upto (upto 0: every entry of kind). The ranges of successive
// writes do not overlap, which keeps Pebble's fragmenting of them cheap.
func kindRange(kind byte, from, upto pgq.Offset) index.GroupEntry {
	if upto == 0 {
		return index.GroupEntry{Key: []byte{kind}, End: []byte{kind + 1}, Delete: true}
	}
	return index.GroupEntry{Key: entryKey(kind, msgID{from + 1, 0}), End: entryKey(kind, msgID{upto + 1, 0}), Delete: true}
}

// writeSharedLocked writes the queued changes of run sh, and the
// low-water mark when it moved, in one fsynced batch, unless change seq
// is written already. g.pmu is held (one write at a time), g.mu is not:
// it is taken to take the queue and to publish the result, never across
// the fsync.
func (m *Manager) writeSharedLocked(g *group, sh *sharedRun, seq uint64) error {
	g.mu.Lock()
	if sh.synced >= seq {
		g.mu.Unlock()
		return nil
	}
	if g.deleted {
		g.mu.Unlock()
		return errf(ErrNotFound, "group %q not found", g.name)
	}
	if g.sh != sh { // cannot happen: Reset writes the queue first
		g.mu.Unlock()
		return errf(ErrConflict, "group %q was reset", g.name)
	}
	low := max(sh.lowLocked(), g.st.Cursor)
	sh.low = low
	upto, taken := sh.seq, sh.pend
	sh.pend = make(map[msgID]pendOp, len(taken))
	entries := make([]index.GroupEntry, 0, len(taken)+2)
	for id, op := range taken {
		switch op.kind {
		case entryAck:
			if op.requeued {
				entries = append(entries, index.GroupEntry{Key: entryKey(entryParked, id), Delete: true})
			}
			if id.off > low { // at or below: covered by the mark
				entries = append(entries, index.GroupEntry{Key: entryKey(entryAck, id), Value: []byte{}})
			}
		case entryDelivery:
			if id.off > low {
				entries = append(entries, index.GroupEntry{Key: entryKey(entryDelivery, id), Value: encodeDeliv(op.d)})
			}
		case entryParked:
			v, err := json.Marshal(op.p)
			if err != nil {
				g.mu.Unlock()
				return fmt.Errorf("consumers: encode parked message: %w", err)
			}
			entries = append(entries, index.GroupEntry{Key: entryKey(entryParked, id), Value: v})
		case opDrop:
			entries = append(entries, index.GroupEntry{Key: entryKey(entryParked, id), Delete: true})
		}
	}
	var value []byte
	st := g.st
	if low != g.st.Cursor || sh.forceValue {
		// The mark moves: the ack and delivery entries at or below it go
		// (a requeued message keeps its count in its parked record).
		if low > g.st.Cursor {
			entries = append(entries, kindRange(entryAck, g.st.Cursor, low), kindRange(entryDelivery, g.st.Cursor, low))
		}
		st.Cursor, st.Parked, st.Updated = low, nil, m.o.Now().UnixMicro()
		var err error
		if value, err = json.Marshal(&st); err != nil {
			g.mu.Unlock()
			return fmt.Errorf("consumers: encode group %q: %w", g.name, err)
		}
	}
	g.mu.Unlock()

	var err error
	if len(entries) > 0 || value != nil {
		err = m.ix.UpdateGroup(g.name, value, entries)
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		// Queue the changes again (a later change of a message wins).
		for id, op := range taken {
			if _, newer := sh.pend[id]; !newer {
				sh.pend[id] = op
			}
		}
		return fmt.Errorf("consumers: store group %q: %w", g.name, err)
	}
	sh.synced = upto
	if value != nil {
		g.st.Cursor, g.st.Parked, g.st.Updated = st.Cursor, nil, st.Updated
		sh.forceValue = false
	}
	return nil
}

// flushShared writes what is queued of every shared group (Close).
func (m *Manager) flushShared() error {
	m.mu.Lock()
	gs := make([]*group, 0, len(m.groups))
	for _, g := range m.groups {
		gs = append(gs, g)
	}
	m.mu.Unlock()
	var errs []error
	for _, g := range gs {
		g.mu.Lock()
		shared := g.sh != nil
		g.mu.Unlock()
		if !shared {
			continue
		}
		g.pmu.Lock()
		if err := m.flushSharedLocked(g); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
		}
		g.pmu.Unlock()
	}
	return errors.Join(errs...)
}

// sharedMode tells a shared group.
func (g *group) sharedMode() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.sh != nil
}

// resetSharedLocked writes g.st (its cursor moved by Reset) and drops the
// run's ack and delivery entries, then starts a new run there; parked
// messages stay. g.pmu and g.mu are held.
func (m *Manager) resetSharedLocked(g *group) error {
	sh := g.sh
	st := g.st
	st.Parked = nil
	raw, err := json.Marshal(&st)
	if err != nil {
		return fmt.Errorf("consumers: encode group %q: %w", g.name, err)
	}
	entries := []index.GroupEntry{kindRange(entryAck, 0, 0), kindRange(entryDelivery, 0, 0)}
	// Parks and drops queued since the flush go in the same batch; queued
	// acks and deliveries of the ending run are moot.
	for id, op := range sh.pend {
		switch op.kind {
		case entryParked:
			v, err := json.Marshal(op.p)
			if err != nil {
				return fmt.Errorf("consumers: encode parked message: %w", err)
			}
			entries = append(entries, index.GroupEntry{Key: entryKey(entryParked, id), Value: v})
		case opDrop:
			entries = append(entries, index.GroupEntry{Key: entryKey(entryParked, id), Delete: true})
		}
	}
	if err := m.ix.UpdateGroup(g.name, raw, entries); err != nil {
		return fmt.Errorf("consumers: store group %q: %w", g.name, err)
	}
	sh.pend, sh.synced = map[msgID]pendOp{}, sh.seq
	g.st.Parked = nil
	m.wakeSharedLocked(g)
	nsh := newSharedRun(g.st.Cursor)
	nsh.parked = sh.parked
	g.sh = nsh
	return nil
}
