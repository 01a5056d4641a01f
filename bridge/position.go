package bridge

import (
	"cmp"
	"errors"
	"strconv"
	"strings"

	"github.com/pgq-dev/pgq"
)

// Position is a message's place in the order the bridge publishes in:
// the commit LSN, then (at one commit LSN) the transaction's changes
// before a backfill chunk's rows, then the ordinal (a backfill row's
// index), then the event within the change (a format's change that
// renders to several events has a message per event: Message.Event). Journal order is commit order, commit LSNs grow with it, and a
// backfill chunk takes its high watermark transaction's place; so the
// messages of one bridge are published in increasing Position, whichever
// journal (a fresh data dir, a restored one) they were read from.
type Position struct {
	LSN      pgq.LSN
	Backfill string // "" for a change of a transaction
	Ordinal  uint32
	Event    uint32
}

// ErrNoPosition is ParseID's error for an id that names no position (an
// id of the format before issue 24, "<offset>.<index>", or no pgq id).
var ErrNoPosition = errors.New("bridge: message id names no position")

// Position returns m's position (from CommitLSN, Ordinal and Backfill).
func (m *Message) Position() Position {
	return Position{LSN: m.CommitLSN, Backfill: m.Backfill, Ordinal: m.Ordinal, Event: m.Event}
}

// ParseID parses a message id (MessageID, or EventID's
// "<commit LSN>.<ordinal>.<event>") back into its position. A backfill
// id never is a number (backfill ids start with "bf"), so
// "<LSN>.<number>.<number>" is a change's event.
func ParseID(id string) (Position, error) {
	lsn, rest, ok := strings.Cut(id, ".")
	if !ok || !strings.Contains(lsn, "/") {
		return Position{}, ErrNoPosition
	}
	l, err := pgq.ParseLSN(lsn)
	if err != nil {
		return Position{}, ErrNoPosition
	}
	p := Position{LSN: l}
	if i := strings.LastIndexByte(rest, '.'); i >= 0 {
		p.Backfill, rest = rest[:i], rest[i+1:]
		if p.Backfill == "" {
			return Position{}, ErrNoPosition
		}
	}
	n, err := strconv.ParseUint(rest, 10, 32)
	if err != nil {
		return Position{}, ErrNoPosition
	}
	p.Ordinal = uint32(n)
	if ord, err := strconv.ParseUint(p.Backfill, 10, 32); err == nil {
		p.Backfill, p.Ordinal, p.Event = "", uint32(ord), p.Ordinal
	}
	return p, nil
}

// Compare orders positions: -1 if p is before q, 0 if equal, +1 after.
func (p Position) Compare(q Position) int {
	if c := cmp.Compare(p.LSN, q.LSN); c != 0 {
		return c
	}
	if (p.Backfill == "") != (q.Backfill == "") {
		if p.Backfill == "" {
			return -1
		}
		return 1
	}
	if c := strings.Compare(p.Backfill, q.Backfill); c != 0 {
		return c
	}
	if c := cmp.Compare(p.Ordinal, q.Ordinal); c != 0 {
		return c
	}
	return cmp.Compare(p.Event, q.Event)
}

// String returns the position as a message id.
func (p Position) String() string {
	return EventID(MessageID(p.LSN, p.Ordinal, p.Backfill), p.Event)
}

// Held is the highest position a broker holds for one stream (JetStream)
// or partition (Kafka), as a publisher found it at start or after a
// reconnect; the zero Held holds nothing.
type Held struct {
	Pos Position
	OK  bool
}

// Covers reports whether m is at or before h: the broker holds it
// already and the publisher skips it.
func (h Held) Covers(m *Message) bool {
	return h.OK && m.Position().Compare(h.Pos) <= 0
}

// Raise makes h the later of h and p.
func (h *Held) Raise(p Position) {
	if !h.OK || p.Compare(h.Pos) > 0 {
		h.Pos, h.OK = p, true
	}
}

// ErrShared is a publisher's error when the stream or partition it
// resumes from was last written by someone else: another producer, or a
// bridge of another group. Its position says nothing about this bridge's
// messages, so the bridge refuses to publish there.
var ErrShared = errors.New("bridge: stream or topic written by another producer; a stream or topic takes one bridge")

// ErrGaveUp is a publisher's error when it stopped retrying a batch (the
// webhook's --max-attempts): Run ends with it, nothing past the
// acknowledged messages committed.
var ErrGaveUp = errors.New("bridge: publisher gave up on a batch")

// CheckOwner checks the pgq headers of the last message a broker holds:
// id (the pgq id header) and group (HeaderGroup) against the group of
// the messages to publish (a message without the group header, published
// before it, counts as this group's). An id without a position (a bridge before
// issue 24, no group header) gives Held{} and no error: the bridge starts
// from the group's cursor, as before. A message without a pgq id, or
// another group's, is ErrShared.
func CheckOwner(id, group, want string) (Held, error) {
	if id == "" {
		return Held{}, ErrShared
	}
	p, err := ParseID(id)
	if err != nil {
		return Held{}, nil // the old id format: nothing to resume from
	}
	if group != "" && group != want { // "": published before the group header
		return Held{}, errors.Join(ErrShared, errors.New("bridge: last message "+id+" of group "+strconv.Quote(group)+", not "+strconv.Quote(want)))
	}
	return Held{Pos: p, OK: true}, nil
}
