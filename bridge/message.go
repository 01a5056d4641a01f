package bridge

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// Message is one broker message: one change of a journal record (or one
// event of it, when the format renders the change to several: Event).
type Message struct {
	// Offset is the journal offset of the record, Index the change's
	// position in it and Count the number of changes in it.
	Offset    pgq.Offset
	Index     int
	Count     int
	Xid       uint32
	CommitLSN pgq.LSN
	Op        string
	Schema    string
	Table     string
	// Ordinal is the change's position within its whole transaction
	// (all parts, before any group filter; pgq.Transaction.Ordinal), or a
	// backfill row's index in its chunk.
	Ordinal uint32
	// Event is the message's number among its change's messages when
	// the format renders the change to several, each its own message, in
	// the order they are published (a Debezium key-changing update: 0 the
	// delete, 1 the create; with tombstones 0 the delete, 1 its
	// tombstone, 2 the create; a delete: 0, and 1 its tombstone); 0
	// otherwise.
	Event uint32
	// Backfill is the backfill id of a backfill chunk's row; "" otherwise.
	Backfill string
	// Group is the pgq consumer group the bridge reads (HeaderGroup); ""
	// from AppendMessages.
	Group string
	// ID is "<commit LSN>.<ordinal>" (see MessageID; an event after a
	// change's first "<commit LSN>.<ordinal>.<event>", EventID): the change's place
	// in PostgreSQL's history, the same whichever journal (a fresh data
	// dir, a restored one) it was read from (JetStream's Nats-Msg-Id,
	// Kafka's pgq-id header).
	ID string
	// Key is the message's key: RowKey in pgq's format and CloudEvents',
	// the format's key in Debezium's ({"id":1}), nil where Debezium's key
	// is null (a truncate, a table without a key): Kafka's record key,
	// JetStream's pgq-key header.
	Key []byte
	// RowKey is the table and the key values of the row (its primary
	// key, also under REPLICA IDENTITY FULL; see AppendKey), whatever the
	// format: what a publisher picks a partition or lane by, so a row's
	// messages keep one (and the resume one place to look) also where Key
	// is nil.
	RowKey []byte
	// Payload is the JSON document (see the package doc); nil for a
	// tombstone (Tombstoner).
	Payload []byte
	// CommitTime of the transaction, for end-to-end latency.
	CommitTime time.Time
	// SchemaChange: the message is a schema change event (a ddl or gap
	// change in Debezium's format; SchemaChanger), published to the
	// publisher's schema-change topic or subject, not the template's.
	SchemaChange bool
	// Extra are headers of the message's format (Options.Format): the
	// CloudEvents binary mode's ce-* (or Kafka's ce_*) headers; nil in
	// pgq's and Debezium's formats. Publishers send them after the pgq
	// headers.
	Extra [][2]string

	hdr   *txHeaders // set by AppendMessages; nil → computed by Headers
	table string     // "schema.table"; "" → computed by Headers
}

// Header names carried by every message.
const (
	HeaderOffset = "pgq-offset"
	HeaderXid    = "pgq-xid"
	HeaderLSN    = "pgq-lsn"
	HeaderOp     = "pgq-op"
	HeaderTable  = "pgq-table"
	// HeaderGroup names the group whose bridge published the message: a
	// publisher resuming from a stream or topic refuses one whose last
	// message is another group's (ErrShared).
	HeaderGroup = "pgq-group"
)

// Headers returns the pgq headers of m as name/value pairs, in a fixed
// order.
func (m *Message) Headers() [6][2]string {
	h := m.hdr
	if h == nil {
		h = &txHeaders{}
	}
	h.once.Do(func() {
		h.offset, h.xid, h.lsn = strconv.FormatUint(uint64(m.Offset), 10), strconv.FormatUint(uint64(m.Xid), 10), m.CommitLSN.String()
	})
	table := m.table
	if table == "" {
		table = m.Schema + "." + m.Table
	}
	return [6][2]string{
		{HeaderOffset, h.offset},
		{HeaderXid, h.xid},
		{HeaderLSN, h.lsn},
		{HeaderOp, m.Op},
		{HeaderTable, table},
		{HeaderGroup, m.Group},
	}
}

// txHeaders are the header values shared by the messages of one record,
// rendered by the first Headers call (a publisher that sends no pgq
// headers, the webhook, never pays for them); once guards the strings.
type txHeaders struct {
	once             sync.Once
	offset, xid, lsn string
}

// AppendMessages appends one Message per change of tx to dst. The
// payloads and keys of one call share one array (each capped to its
// length, so appending to one never overwrites another).
func AppendMessages(dst []Message, tx *pgq.Transaction) []Message {
	dst, _, _ = appendMessages(dst, nil, nil, tx, "")
	return dst
}

// appendMessages is AppendMessages writing payloads and keys into arena
// (returned, grown); prefix is scratch space for the record's part of the
// payload (returned for reuse).
func appendMessages(dst []Message, arena, prefix []byte, tx *pgq.Transaction, group string) (_ []Message, _, _ []byte) {
	n := len(tx.Changes)
	if n == 0 {
		return dst, arena, prefix
	}
	hdr := &txHeaders{}
	prefix = format.AppendPayloadHead(prefix[:0], tx)
	if arena == nil {
		arena = make([]byte, 0, n*(len(prefix)+256))
	}
	var table, tableOf string // "schema.table" of the last change
	for i := range tx.Changes {
		c := &tx.Changes[i]
		dst = append(dst, Message{
			Offset: tx.Offset, Index: i, Count: n, Xid: tx.Xid, CommitLSN: tx.CommitLSN,
			Op: c.Op.String(), Schema: c.Schema, Table: c.Table, CommitTime: tx.CommitTime, hdr: hdr,
			Backfill: tx.Backfill, Group: group,
		})
		m := &dst[len(dst)-1] // filled in place: a Message is 250 bytes
		if c.Op == pgq.OpTruncate && m.Table == "" && len(c.Tables) > 0 {
			m.Schema, m.Table, _ = strings.Cut(c.Tables[0], ".")
		}
		if tableOf == "" || len(tableOf) != len(m.Schema)+1+len(m.Table) || tableOf[:len(m.Schema)] != m.Schema || tableOf[len(m.Schema)+1:] != m.Table {
			table = m.Schema + "." + m.Table
			tableOf = table
		}
		m.table = table
		m.Ordinal = tx.Ordinal(i)
		m.ID = MessageID(tx.CommitLSN, m.Ordinal, tx.Backfill)
		start := len(arena)
		arena = AppendKey(arena, c)
		m.Key = arena[start:len(arena):len(arena)]
		m.RowKey = m.Key
		start = len(arena)
		arena = append(arena, prefix...)
		arena = format.AppendPayloadChange(arena, tx, i)
		m.Payload = arena[start:len(arena):len(arena)]
	}
	return dst, arena, prefix
}

// MessageID is the message id of the change with ordinal ord in the
// transaction committed at commit: "<commit LSN>.<ordinal>", as
// "16/B374D848.3". A backfill chunk's rows are not in PostgreSQL's
// history: their ids name the backfill too, "<commit LSN>.<backfill
// id>.<index>", where commit is the chunk's high watermark.
func MessageID(commit pgq.LSN, ord uint32, backfill string) string {
	var buf [64]byte // one allocation, the string's
	b := append(commit.Append(buf[:0]), '.')
	if backfill != "" {
		b = append(append(b, backfill...), '.')
	}
	return string(strconv.AppendUint(b, uint64(ord), 10))
}

// EventID is the id of event k of the change whose id (MessageID) is
// id, when the format renders the change to several events, each its own
// message: the first event keeps the change's id, event k > 0 is
// "<id>.<k>" ("16/B374D848.3.1"), so that each has its own (JetStream's
// Nats-Msg-Id drops a repeated one) and its own resume position.
func EventID(id string, k uint32) string {
	if k == 0 {
		return id
	}
	return id + "." + strconv.FormatUint(uint64(k), 10)
}

// AppendPayload appends the JSON payload of change i of tx: the
// transaction metadata and the change as `pgq journal dump` renders it.
func AppendPayload(b []byte, tx *pgq.Transaction, i int) []byte {
	return format.AppendPayloadChange(format.AppendPayloadHead(b, tx), tx, i)
}

// AppendKey appends the message key of c: "schema.table" followed, for
// each key column (pgq.Column.Key: the primary key, or the replica
// identity index, also under REPLICA IDENTITY FULL), by '|' and the column's text value
// ('|' and '\' inside values escaped with '\'; NULL as an empty value).
// Deletes take the key from the old image, inserts and updates from the
// new one. A table without key columns (no primary key, FULL ones too; or a truncate, a message, a gap)
// has the table alone as key, so all its changes stay in one partition.
// Logical messages are keyed by "message:" and their prefix.
func AppendKey(b []byte, c *pgq.Change) []byte {
	switch c.Op {
	case pgq.OpMessage:
		return append(append(b, "message:"...), c.Prefix...)
	case pgq.OpGap:
		return append(b, "gap"...)
	case pgq.OpTruncate:
		if len(c.Tables) > 0 {
			return append(b, c.Tables[0]...)
		}
	}
	b = append(append(append(b, c.Schema...), '.'), c.Table...)
	vals := c.New
	if c.Op == pgq.OpDelete || vals == nil {
		vals = c.Old
	}
	for i, col := range c.Columns {
		if !col.Key || i >= len(vals) {
			continue
		}
		b = append(b, '|')
		for _, ch := range vals[i].Data {
			if ch == '|' || ch == '\\' {
				b = append(b, '\\')
			}
			b = append(b, ch)
		}
	}
	return b
}

// Template renders a subject or topic name from "{schema}", "{table}" and
// "{op}" placeholders and literal text.
type Template struct {
	parts []string // literal, placeholder, literal, ...
	src   string
}

// ParseTemplate parses s; unknown placeholders and unbalanced braces are
// errors.
func ParseTemplate(s string) (Template, error) {
	if s == "" {
		return Template{}, errors.New("bridge: empty template")
	}
	t := Template{src: s}
	rest := s
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			if strings.IndexByte(rest, '}') >= 0 {
				return Template{}, fmt.Errorf("bridge: template %q: unbalanced '}'", s)
			}
			t.parts = append(t.parts, rest)
			return t, nil
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return Template{}, fmt.Errorf("bridge: template %q: unbalanced '{'", s)
		}
		name := rest[i+1 : i+j]
		switch name {
		case "schema", "table", "op":
		default:
			return Template{}, fmt.Errorf("bridge: template %q: unknown placeholder {%s} (want {schema}, {table} or {op})", s, name)
		}
		if strings.IndexByte(rest[:i], '}') >= 0 {
			return Template{}, fmt.Errorf("bridge: template %q: unbalanced '}'", s)
		}
		t.parts = append(t.parts, rest[:i], name)
		rest = rest[i+j+1:]
	}
}

// String returns the template's source.
func (t Template) String() string { return t.src }

// Render fills in the placeholders for m, each value passed through clean
// (which makes it a valid subject token or topic name part).
func (t Template) Render(m *Message, clean func(string) string) string {
	var sb strings.Builder
	for i, p := range t.parts {
		if i%2 == 0 {
			sb.WriteString(p)
			continue
		}
		var v string
		switch p {
		case "schema":
			v = m.Schema
		case "table":
			v = m.Table
		case "op":
			v = m.Op
		}
		if v == "" {
			v = "_"
		}
		sb.WriteString(clean(v))
	}
	return sb.String()
}

// Cache memoizes Template.Render per schema, table and op. It is not safe
// for concurrent use.
type Cache struct {
	T     Template
	Clean func(string) string
	m     map[[3]string]string
}

// Name returns the rendered name for m.
func (c *Cache) Name(m *Message) string {
	k := [3]string{m.Schema, m.Table, m.Op}
	if s, ok := c.m[k]; ok {
		return s
	}
	if c.m == nil {
		c.m = make(map[[3]string]string)
	}
	s := c.T.Render(m, c.Clean)
	c.m[k] = s
	return s
}
