package bridge

import (
	"fmt"
	"strings"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// Binder is implemented by a Publisher that says how its broker carries
// a message of a format (package format's bindings): the jetstream
// publisher format.NATS, the kafka one format.Kafka, the webhook
// format.Structured. A Publisher that is no Binder gets format.HTTP.
type Binder interface {
	Binding() format.Binding
}

// Tombstoner is implemented by a Publisher whose broker compacts by key
// (the kafka one): Tombstones reports whether a delete is followed by a
// tombstone (the same key, a null value) in a format that has them
// (format.Renderer.Tombstone: Debezium's, as its
// tombstones.on.delete=true). A Publisher that is no Tombstoner gets
// none: a NATS message with an empty payload, or a webhook's event, is
// no tombstone to anyone.
type Tombstoner interface {
	Tombstones() bool
}

// SchemaChanger is implemented by a Publisher that has a place for
// schema changes (the kafka one's SchemaChangeTopic, the jetstream
// one's SchemaChangeSubject): SchemaChanges reports whether one is
// configured. A ddl or gap change, which Debezium's format has no data
// event for (format.Renderer.SchemaChange), then becomes one message
// there (Message.SchemaChange, format.Renderer.AppendSchemaChange);
// otherwise, and for a Publisher that is no SchemaChanger, it is left
// out.
type SchemaChanger interface {
	SchemaChanges() bool
}

// formatter re-renders the messages of a transaction in a format other
// than pgq's own (Options.Format). It is used by Run's loop only.
type formatter struct {
	r          *format.Renderer
	bind       format.Binding
	tombstones bool      // the publisher's (Tombstoner)
	schema     bool      // the publisher's (SchemaChanger)
	in         []Message // scratch: the messages apply reads
}

// newFormatter returns nil for a format whose messages are the bridge's
// own (pgq's: format.Spec.Rewrites is false), the payloads staying as
// appendMessages builds them. The binding is the publisher's (Binder).
func newFormatter(f format.Format, o format.Options, p Publisher) (*formatter, error) {
	if s := f.Spec(); s.Name != "" && !s.Rewrites() {
		return nil, nil
	}
	r, err := format.New(f, o)
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	fm := &formatter{r: r, bind: format.HTTP}
	if b, ok := p.(Binder); ok {
		fm.bind = b.Binding()
	}
	if t, ok := p.(Tombstoner); ok {
		fm.tombstones = t.Tombstones()
	}
	if s, ok := p.(SchemaChanger); ok {
		fm.schema = s.SchemaChanges()
	}
	return fm, nil
}

// apply rewrites the messages of tx that add just appended to msgs (from
// index n on: appendMessages built them, one per change, in order) in the
// renderer's format for the publisher's binding
// (format.Renderer.AppendMessage), their payloads and keys appended to
// arena; it returns msgs and arena grown. What the format leaves out (a
// nil payload) stays as appendMessages built it; a null key
// (format.Message.NullKey) makes the message's Key nil, its RowKey
// staying for the partition. A change the format has no event for
// (format.Renderer.Events 0: a ddl or gap change in Debezium's) has no
// message: its null would be a tombstone to a Kafka Connect sink and a
// corrupt record to Flink; where the publisher has a place for schema
// changes (SchemaChanger) it is one message there instead
// (Message.SchemaChange), with the change's own id and position. A change of several events (a Debezium
// key-changing update, a multi-table truncate) has one message per event
// (AppendEventMessage), and a delete followed by a tombstone (tombstones,
// format.Renderer.Tombstone) one more: each message of a change has its
// own id (EventID) and position, numbered in the order they are
// published, so a broker's dedupe and the resume tell them apart.
func (f *formatter) apply(msgs []Message, n int, arena []byte, tx *pgq.Transaction) ([]Message, []byte) {
	f.in = append(f.in[:0], msgs[n:]...)
	msgs = msgs[:n]
	for i := range f.in {
		c := f.in[i].Index
		events := f.r.Events(tx, c)
		if events == 0 && f.schema && f.r.SchemaChange(tx, c) {
			msgs = append(msgs, f.in[i])
			m := &msgs[len(msgs)-1]
			var fm format.Message
			arena, fm = f.r.AppendSchemaChange(arena, tx, c)
			m.Payload, m.Key, m.SchemaChange = fm.Payload, fm.Key, true
			continue
		}
		var e uint32 // the next message's number within the change
		for k := range events {
			msgs = append(msgs, f.in[i])
			m := &msgs[len(msgs)-1]
			var fm format.Message
			if events == 1 {
				arena, fm = f.r.AppendMessage(arena, tx, c, f.bind)
			} else {
				arena, fm = f.r.AppendEventMessage(arena, tx, c, k, f.bind)
			}
			if events > 1 || e > 0 {
				m.setEvent(&tx.Changes[c], k, e)
			}
			e++
			if fm.Payload != nil {
				m.Payload = fm.Payload
			}
			switch {
			case fm.NullKey:
				m.Key = nil
			case fm.Key != nil:
				m.Key = fm.Key
			}
			if fm.Headers != nil {
				m.Extra = fm.Headers
			}
			if f.tombstones && f.r.Tombstone(tx, c, k) {
				msgs = append(msgs, f.in[i])
				t := &msgs[len(msgs)-1]
				t.setEvent(&tx.Changes[c], k, e)
				e++
				t.Key, t.RowKey, t.Payload = msgs[len(msgs)-2].Key, msgs[len(msgs)-2].RowKey, nil
			}
		}
	}
	clear(f.in) // no reference to this batch's strings
	return msgs, arena
}

// setEvent makes m, a copy of change c's message, the message numbered e
// among its change's messages, of the change's event k: its id and
// position, and for a truncate the table of the event (its subject or
// topic, and its keys: Debezium's is null, NullKey).
func (m *Message) setEvent(c *pgq.Change, k int, e uint32) {
	m.Event = e
	m.ID = EventID(m.ID, e)
	if c.Op == pgq.OpTruncate && k < len(c.Tables) {
		m.table = c.Tables[k]
		m.Schema, m.Table, _ = strings.Cut(m.table, ".")
		m.Key = []byte(m.table)
		m.RowKey = m.Key
	}
}
