package consumers

import (
	"errors"
	"fmt"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/journal"
)

// stuckAt is where a group's reads met a corrupt journal record: the
// group cannot move past Offset until the journal is repaired or the
// group is reset past it. Manager.stuck maps a *group to it.
type stuckAt struct {
	Offset  pgq.Offset
	Message string
	At      time.Time
}

// readErr is the error of a group's read of off that failed with err: a
// corrupt record becomes ErrJournalCorrupt (API code journal_corrupt)
// naming the offset, and the group is marked stuck there (GroupInfo's
// stuck_at and journal_error). Other errors are returned as they are.
func (m *Manager) readErr(g *group, off pgq.Offset, err error) error {
	var ce *journal.CorruptError
	if !errors.As(err, &ce) {
		return err
	}
	cause := "bad record"
	if ce.Err != nil {
		cause = ce.Err.Error()
	}
	msg := fmt.Sprintf("journal record at offset %d is corrupt (%s): the group cannot read past it until the journal is repaired or the group is reset past it", ce.Offset, cause)
	m.stuck.Store(g, stuckAt{Offset: ce.Offset, Message: msg, At: m.o.Now().UTC()})
	m.o.Logger.Error("consumers: group stuck at a corrupt journal record", "group", g.name, "offset", ce.Offset, "reason", cause)
	return &corruptReadError{msg: fmt.Sprintf("group %q: %s", g.name, msg), err: err}
}

// corruptReadError is readErr's error: its text is the API's message
// (offset and reason, no file paths), and it matches ErrJournalCorrupt
// and, through the read's error, journal.ErrCorrupt.
type corruptReadError struct {
	msg string
	err error
}

func (e *corruptReadError) Error() string   { return e.msg }
func (e *corruptReadError) Unwrap() []error { return []error{ErrJournalCorrupt, e.err} }

// stuckInfo fills gi's StuckAt and JournalError when the group's reads
// met a corrupt record at an offset its cursor has not passed; once the
// cursor is at or past it (a reset), the mark is dropped.
func (m *Manager) stuckInfo(g *group, gi *GroupInfo) {
	v, ok := m.stuck.Load(g)
	if !ok {
		return
	}
	s := v.(stuckAt)
	if gi.CommittedOffset >= s.Offset {
		m.stuck.CompareAndDelete(g, v)
		return
	}
	gi.StuckAt, gi.JournalError = s.Offset, s.Message
}
