package pgoutput

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/pgq-dev/pgq"
)

// Sentinel errors. Decode wraps them with the message kind.
var (
	// ErrTruncated: the message ended before a field it announces.
	ErrTruncated = errors.New("truncated message")
	// ErrUnknownMessage: the tag byte is not a message this package knows
	// (or the payload is empty).
	ErrUnknownMessage = errors.New("unknown message type")
	// ErrUnknownRelation: a row names a relation ID no Relation message
	// has described.
	ErrUnknownRelation = errors.New("unknown relation")
	// ErrMalformed: the bytes are complete but inconsistent (bad tuple
	// kind, column count that does not match the relation, negative
	// length, stream markers out of order).
	ErrMalformed = errors.New("malformed message")
)

// Message is one decoded pgoutput message: *Begin, *Commit, *Origin,
// *Relation, *TypeMsg, *StreamStart, *StreamStop, *StreamCommit,
// *StreamAbort or *Row.
type Message interface{ isMessage() }

// Begin starts a (non-streamed) transaction.
type Begin struct {
	FinalLSN   pgq.LSN
	CommitTime time.Time
	Xid        uint32
}

// Commit ends a (non-streamed) transaction.
type Commit struct {
	Flags      uint8
	CommitLSN  pgq.LSN
	EndLSN     pgq.LSN
	CommitTime time.Time
}

// Origin names the replication origin of the current transaction.
type Origin struct {
	CommitLSN pgq.LSN
	Name      string
}

// Relation describes a table. The Decoder caches it by ID, and rows share
// its Columns. A domain column's TypeOID is the domain's: the protocol
// does not say what it is over, so Column.BaseTypeOID is left 0 for the
// caller to fill in (ingest looks it up in pg_type), as is
// Column.TypeName (an extension type's name). Each column's
// atttypmod is kept (Column.TypmodPlus1).
type Relation struct {
	Xid             uint32 // inside a stream only
	ID              uint32
	Namespace       string
	Name            string
	ReplicaIdentity byte // 'd' default, 'n' nothing, 'f' full, 'i' index
	Columns         []pgq.Column
}

// TypeMsg describes a user-defined type used by a following row.
type TypeMsg struct {
	Xid       uint32 // inside a stream only
	ID        uint32
	Namespace string
	Name      string
}

// StreamStart opens a block of a streamed in-progress transaction.
type StreamStart struct {
	Xid   uint32
	First bool
}

// StreamStop closes the current stream block.
type StreamStop struct{}

// StreamCommit commits a streamed transaction.
type StreamCommit struct {
	Xid        uint32
	Flags      uint8
	CommitLSN  pgq.LSN
	EndLSN     pgq.LSN
	CommitTime time.Time
}

// StreamAbort aborts a streamed (sub)transaction. AbortLSN and AbortTime
// are zero unless the server sent them (protocol version 4).
type StreamAbort struct {
	Xid       uint32
	SubXid    uint32
	AbortLSN  pgq.LSN
	AbortTime time.Time
}

// Row is an Insert, Update, Delete, Truncate or logical decoding Message,
// resolved against the relation cache. Xid is set only inside a stream,
// where it is the xid of the (sub)transaction that made the change (not
// necessarily StreamStart's top-level xid): a StreamAbort whose SubXid
// differs from Xid discards the rows carrying that SubXid. MessageLSN is
// set for logical decoding messages. Change.Columns is the cached
// relation's slice, shared by every row of that relation: do not modify it.
type Row struct {
	Xid        uint32
	MessageLSN pgq.LSN
	Change     pgq.Change
}

func (*Begin) isMessage()        {}
func (*Commit) isMessage()       {}
func (*Origin) isMessage()       {}
func (*Relation) isMessage()     {}
func (*TypeMsg) isMessage()      {}
func (*StreamStart) isMessage()  {}
func (*StreamStop) isMessage()   {}
func (*StreamCommit) isMessage() {}
func (*StreamAbort) isMessage()  {}
func (*Row) isMessage()          {}

// Decoder decodes a pgoutput stream. It keeps the relation cache and
// whether it is between StreamStart and StreamStop. Use one goroutine.
type Decoder struct {
	// Reuse makes Decode return the same *Row, *Begin and *Commit every
	// time, overwritten by the next Decode, and carve tuples out of
	// shared blocks of Values: two allocations fewer per row, one per
	// Begin and Commit. The caller must copy what it keeps of a message
	// (a Change copied by value, with its New and Old slices, stays valid)
	// before the next Decode.
	Reuse bool

	rels     map[uint32]*Relation
	inStream bool
	// row, begin and commit are the messages returned under Reuse; vals
	// is the unused rest of the current block of Values.
	row    Row
	begin  Begin
	commit Commit
	vals   []pgq.Value
}

// valueBlock is how many Values a Decoder with Reuse allocates at once.
const valueBlock = 512

// values returns n zero Values: a fresh slice, or under Reuse the next n
// of the current block (capacity n, so appending to it cannot touch the
// next tuple's).
func (d *Decoder) values(n int) []pgq.Value {
	if !d.Reuse || n > valueBlock/4 {
		return make([]pgq.Value, n)
	}
	if len(d.vals) < n {
		d.vals = make([]pgq.Value, valueBlock)
	}
	v := d.vals[:n:n]
	d.vals = d.vals[n:]
	return v
}

// NewDecoder returns a Decoder with an empty relation cache.
func NewDecoder() *Decoder {
	return &Decoder{rels: make(map[uint32]*Relation)}
}

// InStream reports whether the Decoder is between StreamStart and
// StreamStop.
func (d *Decoder) InStream() bool { return d.inStream }

// Relation returns the cached relation with the given ID.
func (d *Decoder) Relation(id uint32) (*Relation, bool) {
	r, ok := d.rels[id]
	return r, ok
}

// reader is a bounds-checked big-endian cursor. After the first short read
// it stays failed and returns zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *reader) need(n int) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || len(r.b) < n {
		r.fail(ErrTruncated)
		return false
	}
	return true
}

func (r *reader) u8() uint8 {
	if !r.need(1) {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u16() uint16 {
	if !r.need(2) {
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *reader) u32() uint32 {
	if !r.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64() uint64 {
	if !r.need(8) {
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) lsn() pgq.LSN    { return pgq.LSN(r.u64()) }
func (r *reader) time() time.Time { return pgq.TimeFromPG(int64(r.u64())) }

// bytes returns the next n bytes, aliasing the input.
func (r *reader) bytes(n int) []byte {
	if !r.need(n) {
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// str reads a NUL-terminated string (copied).
func (r *reader) str() string {
	if r.err != nil {
		return ""
	}
	for i, c := range r.b {
		if c == 0 {
			s := string(r.b[:i])
			r.b = r.b[i+1:]
			return s
		}
	}
	r.fail(ErrTruncated)
	return ""
}

func wrap(kind string, err error) error {
	return fmt.Errorf("pgoutput: %s: %w", kind, err)
}

// Decode decodes one XLogData payload. Returned values may alias data
// (Value.Data, Change.Content): the caller must not reuse the buffer.
// On error the Decoder's state is unchanged, except that a Relation
// message is only cached when it decodes completely.
func (d *Decoder) Decode(data []byte) (Message, error) {
	if len(data) == 0 {
		return nil, wrap("decode", fmt.Errorf("empty payload: %w", ErrUnknownMessage))
	}
	if d.rels == nil {
		d.rels = make(map[uint32]*Relation)
	}
	r := &reader{b: data[1:]}
	switch data[0] {
	case 'B':
		m := &d.begin
		if !d.Reuse {
			m = &Begin{}
		}
		*m = Begin{FinalLSN: r.lsn(), CommitTime: r.time(), Xid: r.u32()}
		return done(r, "begin", m)
	case 'C':
		m := &d.commit
		if !d.Reuse {
			m = &Commit{}
		}
		*m = Commit{Flags: r.u8(), CommitLSN: r.lsn(), EndLSN: r.lsn(), CommitTime: r.time()}
		return done(r, "commit", m)
	case 'O':
		m := &Origin{CommitLSN: r.lsn(), Name: r.str()}
		return done(r, "origin", m)
	case 'R':
		return d.relation(r)
	case 'Y':
		m := &TypeMsg{}
		m.Xid = d.xid(r)
		m.ID = r.u32()
		m.Namespace = r.str()
		m.Name = r.str()
		return done(r, "type", m)
	case 'I':
		return d.insert(r)
	case 'U':
		return d.update(r)
	case 'D':
		return d.delete(r)
	case 'T':
		return d.truncate(r)
	case 'M':
		return d.message(r)
	case 'S':
		m := &StreamStart{Xid: r.u32(), First: r.u8() == 1}
		if r.err == nil && d.inStream {
			r.fail(fmt.Errorf("stream start inside a stream: %w", ErrMalformed))
		}
		if r.err != nil {
			return nil, wrap("stream start", r.err)
		}
		d.inStream = true
		return m, nil
	case 'E':
		if !d.inStream {
			return nil, wrap("stream stop", fmt.Errorf("stream stop outside a stream: %w", ErrMalformed))
		}
		d.inStream = false
		return &StreamStop{}, nil
	case 'c':
		m := &StreamCommit{Xid: r.u32(), Flags: r.u8(), CommitLSN: r.lsn(), EndLSN: r.lsn(), CommitTime: r.time()}
		return done(r, "stream commit", m)
	case 'A':
		m := &StreamAbort{Xid: r.u32(), SubXid: r.u32()}
		if r.err == nil && len(r.b) >= 16 {
			m.AbortLSN = r.lsn()
			m.AbortTime = r.time()
		}
		return done(r, "stream abort", m)
	}
	return nil, wrap("decode", fmt.Errorf("%w %q (0x%02x)", ErrUnknownMessage, data[0], data[0]))
}

func done[M Message](r *reader, kind string, m M) (Message, error) {
	if r.err != nil {
		return nil, wrap(kind, r.err)
	}
	return m, nil
}

// xid reads the leading transaction ID that v2 adds inside a stream.
func (d *Decoder) xid(r *reader) uint32 {
	if !d.inStream {
		return 0
	}
	return r.u32()
}

func (d *Decoder) relation(r *reader) (Message, error) {
	m := &Relation{}
	m.Xid = d.xid(r)
	m.ID = r.u32()
	m.Namespace = r.str()
	m.Name = r.str()
	m.ReplicaIdentity = r.u8()
	n := int(r.u16())
	// Each column takes at least flags(1) + NUL(1) + type(4) + typmod(4).
	if r.need(n * 10) {
		m.Columns = make([]pgq.Column, n)
		for i := range m.Columns {
			flags := r.u8()
			m.Columns[i] = pgq.Column{Name: r.str(), TypeOID: r.u32(), Key: flags&1 != 0}
			m.Columns[i].TypmodPlus1 = int32(r.u32()) + 1 // atttypmod
		}
	}
	if r.err != nil {
		return nil, wrap("relation", r.err)
	}
	d.rels[m.ID] = m
	return m, nil
}

// rel looks the relation up by the ID that follows in r.
func (d *Decoder) rel(r *reader) (*Relation, uint32) {
	id := r.u32()
	if r.err != nil {
		return nil, id
	}
	rel, ok := d.rels[id]
	if !ok {
		r.fail(fmt.Errorf("%w %d", ErrUnknownRelation, id))
		return nil, id
	}
	return rel, id
}

func (d *Decoder) newRow(op pgq.Op, xid uint32, rel *Relation) *Row {
	row := &d.row
	if !d.Reuse {
		row = &Row{}
	}
	*row = Row{Xid: xid, Change: pgq.Change{
		Op:      op,
		Schema:  rel.Namespace,
		Table:   rel.Name,
		Columns: rel.Columns,
	}}
	return row
}

// tuple reads TupleData for rel. Values alias the input.
func (d *Decoder) tuple(r *reader, rel *Relation) []pgq.Value {
	n := int(r.u16())
	if r.err != nil {
		return nil
	}
	if n != len(rel.Columns) {
		r.fail(fmt.Errorf("tuple has %d columns, relation %s.%s (%d) has %d: %w",
			n, rel.Namespace, rel.Name, rel.ID, len(rel.Columns), ErrMalformed))
		return nil
	}
	if !r.need(n) { // at least one kind byte per column
		return nil
	}
	vals := d.values(n)
	for i := range vals {
		k := r.u8()
		switch k {
		case 'n', 'u':
			vals[i].Kind = pgq.ValueKind(k)
		case 't', 'b':
			l := int32(r.u32())
			if r.err != nil {
				return nil
			}
			if l < 0 {
				r.fail(fmt.Errorf("column %d: negative length %d: %w", i, l, ErrMalformed))
				return nil
			}
			vals[i] = pgq.Value{Kind: pgq.ValueKind(k), Data: r.bytes(int(l))}
		default:
			if r.err == nil {
				r.fail(fmt.Errorf("column %d: unknown value kind %q: %w", i, k, ErrMalformed))
			}
		}
		if r.err != nil {
			return nil
		}
	}
	return vals
}

func expect(r *reader, want byte) {
	if k := r.u8(); r.err == nil && k != want {
		r.fail(fmt.Errorf("tuple marker %q, want %q: %w", k, want, ErrMalformed))
	}
}

func (d *Decoder) insert(r *reader) (Message, error) {
	xid := d.xid(r)
	rel, _ := d.rel(r)
	expect(r, 'N')
	if r.err != nil {
		return nil, wrap("insert", r.err)
	}
	row := d.newRow(pgq.OpInsert, xid, rel)
	row.Change.New = d.tuple(r, rel)
	return done(r, "insert", row)
}

func (d *Decoder) update(r *reader) (Message, error) {
	xid := d.xid(r)
	rel, _ := d.rel(r)
	k := r.u8()
	if r.err != nil {
		return nil, wrap("update", r.err)
	}
	row := d.newRow(pgq.OpUpdate, xid, rel)
	switch k {
	case 'K', 'O':
		row.Change.OldKind = pgq.OldKind(k)
		row.Change.Old = d.tuple(r, rel)
		expect(r, 'N')
	case 'N':
	default:
		r.fail(fmt.Errorf("tuple marker %q, want 'K', 'O' or 'N': %w", k, ErrMalformed))
	}
	if r.err != nil {
		return nil, wrap("update", r.err)
	}
	row.Change.New = d.tuple(r, rel)
	return done(r, "update", row)
}

func (d *Decoder) delete(r *reader) (Message, error) {
	xid := d.xid(r)
	rel, _ := d.rel(r)
	k := r.u8()
	if r.err == nil && k != 'K' && k != 'O' {
		r.fail(fmt.Errorf("tuple marker %q, want 'K' or 'O': %w", k, ErrMalformed))
	}
	if r.err != nil {
		return nil, wrap("delete", r.err)
	}
	row := d.newRow(pgq.OpDelete, xid, rel)
	row.Change.OldKind = pgq.OldKind(k)
	row.Change.Old = d.tuple(r, rel)
	return done(r, "delete", row)
}

// Truncate option bits.
const (
	truncateCascade         = 1
	truncateRestartIdentity = 2
)

func (d *Decoder) truncate(r *reader) (Message, error) {
	row := &Row{Xid: d.xid(r)}
	n := int(r.u32())
	opts := r.u8()
	if !r.need(4 * n) {
		return nil, wrap("truncate", r.err)
	}
	c := &row.Change
	c.Op = pgq.OpTruncate
	c.Cascade = opts&truncateCascade != 0
	c.RestartIdentity = opts&truncateRestartIdentity != 0
	c.Tables = make([]string, n)
	for i := range c.Tables {
		rel, _ := d.rel(r)
		if r.err != nil {
			return nil, wrap("truncate", r.err)
		}
		c.Tables[i] = rel.Namespace + "." + rel.Name
	}
	return row, nil
}

func (d *Decoder) message(r *reader) (Message, error) {
	row := &Row{Xid: d.xid(r)}
	flags := r.u8()
	row.MessageLSN = r.lsn()
	c := &row.Change
	c.Op = pgq.OpMessage
	c.Transactional = flags&1 != 0
	c.Prefix = r.str()
	n := int32(r.u32())
	if r.err == nil && n < 0 {
		r.fail(fmt.Errorf("negative content length %d: %w", n, ErrMalformed))
	}
	c.Content = r.bytes(int(n))
	return done(r, "message", row)
}
