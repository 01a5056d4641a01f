package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/msgp"
)

// Version is the version byte of a self-contained record: the header
// (version byte, CRC32C of the body) and the msgpack body of 9 to 11
// elements, each listed in the package documentation (# Format), the one
// place the layout is described.
const Version = 1

// HeaderSize is the size of the version byte and the checksum that
// precede the msgpack body.
const HeaderSize = 5

// Sentinel errors of Decode and Check; returned errors wrap them.
var (
	ErrBadVersion    = errors.New("record: unknown version")
	ErrChecksum      = errors.New("record: checksum mismatch")
	ErrCorruptRecord = errors.New("record: corrupt")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// relRef is one entry of the relation table built while encoding.
type relRef struct {
	schema, table string
	cols          []pgq.Column
}

// seal writes the checksum of the framed record rec (its body, after the
// header) into its header.
func seal(rec []byte) {
	binary.LittleEndian.PutUint32(rec[1:], crc32.Checksum(rec[HeaderSize:], castagnoli))
}

// Append appends the framed record of tx (version, CRC32C, msgpack
// body) to b and returns the extended slice. tx.Offset is not encoded.
func Append(b []byte, tx *pgq.Transaction) []byte {
	start := len(b)
	b = append(b, Version, 0, 0, 0, 0)
	b = appendBody(b, tx)
	seal(b[start:])
	return b
}

func isRowOp(op pgq.Op) bool {
	return op != pgq.OpTruncate && op != pgq.OpMessage && op != pgq.OpGap && op != pgq.OpDDL
}

func sameColumns(a, b []pgq.Column) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// findRel returns the index of c's relation in rels, trying hint first,
// or -1.
func findRel(rels []relRef, hint int, c *pgq.Change) int {
	if hint >= 0 && hint < len(rels) {
		r := &rels[hint]
		if r.schema == c.Schema && r.table == c.Table && sameColumns(r.cols, c.Columns) {
			return hint
		}
	}
	for k := range rels {
		r := &rels[k]
		if r.schema == c.Schema && r.table == c.Table && sameColumns(r.cols, c.Columns) {
			return k
		}
	}
	return -1
}

func appendBody(b []byte, tx *pgq.Transaction) []byte {
	// The relation table lives on the stack for records touching up to 8
	// relations, so encoding does not allocate.
	var relsBuf [8]relRef
	rels := relationsOf(tx, relsBuf[:0])
	nbody := bodyLen(tx)
	b = appendHeaderN(b, tx, nbody)
	b = appendArrayHdr(b, len(rels))
	for k := range rels {
		b = appendRelation(b, &rels[k])
	}
	return appendChanges(b, tx, rels, nbody)
}

// relationsOf appends to rels the relation table of tx: the distinct
// relations (schema, table, columns) of its row changes, in order of
// first use.
func relationsOf(tx *pgq.Transaction, rels []relRef) []relRef {
	last := -1
	for i := range tx.Changes {
		c := &tx.Changes[i]
		if !isRowOp(c.Op) {
			continue
		}
		last = findRel(rels, last, c)
		if last < 0 {
			last = len(rels)
			rels = append(rels, relRef{c.Schema, c.Table, c.Columns})
		}
	}
	return rels
}

// appendChanges appends what follows the relation table in a body of
// nbody elements: the change array (row changes refer to rels, tx's
// relation table) and the backfill and ordinal elements.
func appendChanges(b []byte, tx *pgq.Transaction, rels []relRef, nbody int) []byte {
	b = appendArrayHdr(b, len(tx.Changes))
	last := -1
	for i := range tx.Changes {
		c := &tx.Changes[i]
		switch c.Op {
		case pgq.OpTruncate:
			b = appendArrayHdr(b, 3)
			b = appendUint(b, uint64(c.Op))
			b = appendArrayHdr(b, len(c.Tables))
			for _, t := range c.Tables {
				b = appendStr(b, t)
			}
			var flags uint64
			if c.Cascade {
				flags |= 1
			}
			if c.RestartIdentity {
				flags |= 2
			}
			b = appendUint(b, flags)
		case pgq.OpMessage, pgq.OpDDL:
			b = appendArrayHdr(b, 4)
			b = appendUint(b, uint64(c.Op))
			b = appendStr(b, c.Prefix)
			b = appendBin(b, c.Content)
			b = appendBool(b, c.Transactional)
		case pgq.OpGap:
			b = appendArrayHdr(b, 3)
			b = appendUint(b, uint64(c.Op))
			b = appendUint(b, uint64(c.FromLSN))
			b = appendUint(b, uint64(c.ToLSN))
		default:
			last = findRel(rels, last, c)
			b = appendRowChange(b, c.Op, last, c.OldKind, c.New, c.Old)
		}
	}
	if nbody >= 10 {
		b = appendStr(b, tx.Backfill)
	}
	if nbody == 11 {
		b = appendOrdinals(b, tx)
	}
	return b
}

// appendOrdinals writes element [10]: the first change's ordinal, or the
// array of every change's ordinal when they are not consecutive.
func appendOrdinals(b []byte, tx *pgq.Transaction) []byte {
	if tx.Ordinals == nil {
		return appendUint(b, uint64(tx.FirstOrdinal))
	}
	b = appendArrayHdr(b, len(tx.Ordinals))
	for _, o := range tx.Ordinals {
		b = appendUint(b, uint64(o))
	}
	return b
}

// decodeOrdinals reads element [10] (see appendOrdinals) into t's
// FirstOrdinal and Ordinals.
func (d *reader) decodeOrdinals(t *pgq.Transaction) {
	b, ok := d.Peek()
	if !ok || !(b&0xf0 == 0x90 || b == 0xdc || b == 0xdd) {
		t.FirstOrdinal = uint32(d.Uint(math.MaxUint32, "first ordinal"))
		return
	}
	n := d.ArrayLen()
	if d.Err == nil && n != len(t.Changes) {
		d.Fail("record: %d ordinals for %d changes", n, len(t.Changes))
		return
	}
	t.Ordinals = make([]uint32, n)
	for i := 0; i < n && d.Err == nil; i++ {
		t.Ordinals[i] = uint32(d.Uint(math.MaxUint32, "ordinal"))
	}
	if n > 0 {
		t.FirstOrdinal = t.Ordinals[0]
	}
}

// appendRowChange appends a change of a row (insert, update, delete,
// read) of relation rel of the record's relation table.
func appendRowChange(b []byte, op pgq.Op, rel int, oldKind pgq.OldKind, newRow, oldRow []pgq.Value) []byte {
	b = appendArrayHdr(b, 5)
	b = appendUint(b, uint64(op))
	b = appendUint(b, uint64(rel))
	b = appendUint(b, uint64(oldKind))
	b = appendValues(b, newRow)
	return appendValues(b, oldRow)
}

// appendRelation appends one entry of a record's relation table: 3
// elements, 4 with base types, 5 with type modifiers, 6 with type names
// (an element before the last one present is nil when it has nothing).
func appendRelation(b []byte, r *relRef) []byte {
	n := relationElems(r.cols)
	b = appendArrayHdr(b, n)
	b = appendStr(b, r.schema)
	b = appendStr(b, r.table)
	b = appendArrayHdr(b, 3*len(r.cols))
	for _, col := range r.cols {
		b = appendStr(b, col.Name)
		b = appendUint(b, uint64(col.TypeOID))
		b = appendBool(b, col.Key)
	}
	if n >= 4 {
		if hasBaseTypes(r.cols) {
			b = appendArrayHdr(b, len(r.cols))
			for _, col := range r.cols {
				b = appendUint(b, uint64(col.BaseTypeOID))
			}
		} else {
			b = append(b, 0xc0)
		}
	}
	if n >= 5 {
		if hasTypmods(r.cols) {
			b = appendArrayHdr(b, len(r.cols))
			for i := range r.cols {
				b = appendInt(b, int64(r.cols[i].Typmod()))
			}
		} else {
			b = append(b, 0xc0)
		}
	}
	if n == 6 {
		b = appendArrayHdr(b, len(r.cols))
		for i := range r.cols {
			b = appendStr(b, r.cols[i].TypeName)
		}
	}
	return b
}

// relationElems is the number of elements of a relation of cols: the
// last one it needs (3: names, types and keys only).
func relationElems(cols []pgq.Column) int {
	switch {
	case hasTypeNames(cols):
		return 6
	case hasTypmods(cols):
		return 5
	case hasBaseTypes(cols):
		return 4
	}
	return 3
}

// hasTypeNames reports whether a relation needs its sixth element: a
// column's type is an extension's (pgq.Column.TypeName).
func hasTypeNames(cols []pgq.Column) bool {
	for i := range cols {
		if cols[i].TypeName != "" {
			return true
		}
	}
	return false
}

// hasBaseTypes reports whether a relation needs its fourth element.
func hasBaseTypes(cols []pgq.Column) bool {
	for i := range cols {
		if cols[i].BaseTypeOID != 0 {
			return true
		}
	}
	return false
}

// hasTypmods reports whether a relation needs its fifth element: a
// column has a type modifier.
func hasTypmods(cols []pgq.Column) bool {
	for i := range cols {
		if cols[i].TypmodPlus1 != 0 {
			return true
		}
	}
	return false
}

// relationLen reads a relation's array header: 3 elements, 4 with base
// types, 5 with type modifiers, 6 with type names.
func (d *reader) relationLen() int {
	n := d.ArrayLen()
	if d.Err == nil && (n < 3 || n > 6) {
		d.Fail("relation: want 3 to 6 elements, got %d", n)
	}
	return n
}

// decodeBaseTypes reads a relation's fourth element into cols: an array
// of base type OIDs, or nil (none) in a relation of 5 or 6 elements.
func (d *reader) decodeBaseTypes(cols []pgq.Column, nrel int) {
	if nrel > 4 && d.IsNil() {
		return
	}
	if n := d.ArrayLen(); d.Err == nil && n != len(cols) {
		d.Fail("relation base types: %d for %d columns", n, len(cols))
		return
	}
	for i := 0; i < len(cols) && d.Err == nil; i++ {
		cols[i].BaseTypeOID = uint32(d.Uint(math.MaxUint32, "base type OID"))
	}
}

// decodeTypmods reads a relation's fifth element into cols: one type
// modifier per column, PostgreSQL's value (-1 for none), or nil (none)
// in a relation of 6 elements.
func (d *reader) decodeTypmods(cols []pgq.Column, nrel int) {
	if nrel > 5 && d.IsNil() {
		return
	}
	if n := d.ArrayLen(); d.Err == nil && n != len(cols) {
		d.Fail("relation type modifiers: %d for %d columns", n, len(cols))
		return
	}
	for i := 0; i < len(cols) && d.Err == nil; i++ {
		m := d.Int64()
		if d.Err == nil && (m < math.MinInt32 || m > math.MaxInt32) {
			d.Fail("relation type modifier %d out of range", m)
			return
		}
		cols[i] = cols[i].WithTypmod(int32(m))
	}
}

// decodeTypeNames reads a relation's sixth element into cols: one type
// name per column ("" for none).
func (d *reader) decodeTypeNames(cols []pgq.Column) {
	if n := d.ArrayLen(); d.Err == nil && n != len(cols) {
		d.Fail("relation type names: %d for %d columns", n, len(cols))
		return
	}
	for i := 0; i < len(cols) && d.Err == nil; i++ {
		cols[i].TypeName = d.Str()
	}
}

// bodyLen is the number of elements of tx's body array.
func bodyLen(tx *pgq.Transaction) int {
	if tx.FirstOrdinal != 0 || tx.Ordinals != nil {
		return 11
	}
	if tx.Backfill != "" {
		return 10
	}
	return 9
}

// appendHeader writes the body's array header and its seven header fields
// (everything before the relation table).
func appendHeader(b []byte, tx *pgq.Transaction) []byte {
	return appendHeaderN(b, tx, bodyLen(tx))
}

func appendHeaderN(b []byte, tx *pgq.Transaction, n int) []byte {
	return appendHeaderEnd(b, tx, n, uint64(tx.EndLSN))
}

// appendHeaderEnd is appendHeaderN with end in the end LSN's place: the
// end LSN itself (Version) or its distance from the commit LSN
// (VersionCompact).
func appendHeaderEnd(b []byte, tx *pgq.Transaction, n int, end uint64) []byte {
	b = appendArrayHdr(b, n)
	b = appendUint(b, uint64(tx.Xid))
	b = appendUint(b, uint64(tx.CommitLSN))
	b = appendUint(b, end)
	b = appendInt(b, tx.CommitTime.UnixMicro())
	b = appendStr(b, tx.Origin)
	b = appendUint(b, uint64(tx.Part))
	return appendBool(b, tx.Final)
}

func appendValues(b []byte, vs []pgq.Value) []byte {
	if vs == nil {
		return append(b, 0xc0)
	}
	b = appendArrayHdr(b, len(vs))
	for i := range vs {
		v := &vs[i]
		switch v.Kind {
		case pgq.ValueNull:
			b = append(b, 0xc0)
		case pgq.ValueUnchangedTOAST:
			b = append(b, 0xc2)
		case pgq.ValueText:
			b = appendStrBytes(b, v.Data)
		case pgq.ValueBinary:
			b = appendBin(b, v.Data)
		default:
			b = appendArrayHdr(b, 2)
			b = appendUint(b, uint64(v.Kind))
			b = appendBin(b, v.Data)
		}
	}
	return b
}

// msgpack appenders.

func appendArrayHdr(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xdc, byte(n>>8), byte(n))
	default:
		return append(b, 0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v < 128:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return append(b, 0xcd, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return append(b, 0xce, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	default:
		b = append(b, 0xcf)
		return binary.BigEndian.AppendUint64(b, v)
	}
}

func appendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return append(b, 0xd1, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		return append(b, 0xd2, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	default:
		b = append(b, 0xd3)
		return binary.BigEndian.AppendUint64(b, uint64(v))
	}
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

func appendStrHdr(b []byte, n int) []byte {
	switch {
	case n < 32:
		return append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		return append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xda, byte(n>>8), byte(n))
	default:
		return append(b, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

func appendStr(b []byte, s string) []byte {
	return append(appendStrHdr(b, len(s)), s...)
}

func appendStrBytes(b []byte, s []byte) []byte {
	return append(appendStrHdr(b, len(s)), s...)
}

func appendBin(b []byte, s []byte) []byte {
	n := len(s)
	switch {
	case n <= math.MaxUint8:
		b = append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xc5, byte(n>>8), byte(n))
	default:
		b = append(b, 0xc6, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, s...)
}

// Check verifies the version byte and the checksum of a framed record
// without decoding the body. It does not allocate.
func Check(data []byte) error {
	if len(data) < HeaderSize {
		return fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorruptRecord, len(data), HeaderSize)
	}
	if data[0] != Version {
		return fmt.Errorf("%w: %d", ErrBadVersion, data[0])
	}
	want := binary.LittleEndian.Uint32(data[1:5])
	if got := crc32.Checksum(data[HeaderSize:], castagnoli); got != want {
		return fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, want, got)
	}
	return nil
}

// Decode decodes a framed record produced by Append into tx,
// overwriting every field except Offset. It never panics; on bad input it
// returns an error wrapping ErrBadVersion, ErrChecksum or ErrCorruptRecord.
//
// Decode copies data once: the decoded byte slices (values, message
// content) share that copy, and changes of the same relation share one
// Columns slice. Callers must treat them as read-only.
func Decode(data []byte, tx *pgq.Transaction) error {
	if err := Check(data); err != nil {
		return err
	}
	body := append([]byte(nil), data[HeaderSize:]...)
	return decodeBody(body, tx)
}

// BodyDecoder decodes record bodies like DecodeBody and shares the
// decoded relations (schema, table and Columns) between the records it
// decodes, so that reading many records of a few tables allocates their
// column names once: changes of one relation share one Columns slice
// across records too, read-only as with Decode. It keeps at most
// 1024 relations. The zero value is ready; it is not safe for concurrent
// use.
type BodyDecoder struct {
	rels map[string]relRef // by the relation's encoded bytes
}

const maxCachedRelations = 1024

// Decode decodes one record body into tx as DecodeBody does.
func (bd *BodyDecoder) Decode(body []byte, tx *pgq.Transaction) error {
	return decodeBodyWith(body, tx, bd)
}

func decodeBody(body []byte, tx *pgq.Transaction) error { return decodeBodyWith(body, tx, nil) }

func decodeBodyWith(body []byte, tx *pgq.Transaction, bd *BodyDecoder) error {
	d := newReader(body)
	d.rels = bd
	var t pgq.Transaction
	t.Offset = tx.Offset
	d.decodeTx(&t)
	if d.Err == nil && d.P != len(d.B) {
		d.Fail("%d trailing bytes", len(d.B)-d.P)
	}
	if d.Err != nil {
		return d.Err
	}
	*tx = t
	return nil
}

// DecodeBody decodes one msgpack record body (see Version),
// without the version byte and checksum, into tx, overwriting every field
// except Offset. body must hold exactly one body. Unlike Decode it
// does not copy: the decoded byte slices alias body, which the caller must
// then leave unmodified. Check a framed record with Check first.
func DecodeBody(body []byte, tx *pgq.Transaction) error {
	return decodeBody(body, tx)
}

// Info is the header of a record: the fields before its relations
// and changes.
type Info struct {
	Xid        uint32
	CommitLSN  pgq.LSN
	EndLSN     pgq.LSN
	CommitTime time.Time
	Part       uint32
	Final      bool
}

// Peek checks a framed record like Check and decodes only its
// header fields (not the relations and changes). It does not allocate, so
// a reader that forwards records verbatim can still tell the parts of a
// multi-part transaction apart. Errors wrap ErrBadVersion, ErrChecksum or
// ErrCorruptRecord.
func Peek(data []byte) (Info, error) {
	if err := Check(data); err != nil {
		return Info{}, err
	}
	return peekBody(data[HeaderSize:])
}

// PeekStored is Peek for what the journal stores (CheckStored): a
// Version 1 or a compact record (VersionCompact), whose header fields are
// Version 1's but for the end LSN, stored as its distance from the commit
// LSN. It lets a reader that needs only a record's header (a filtered
// fetch passing over a record the index says it does not want) skip
// expanding and decoding it.
func PeekStored(data []byte) (Info, error) {
	if err := CheckStored(data); err != nil {
		return Info{}, err
	}
	ri, err := peekBody(data[HeaderSize:])
	if err == nil && data[0] == VersionCompact {
		ri.EndLSN += ri.CommitLSN
	}
	return ri, err
}

// peekBody decodes the header fields of a checked body.
func peekBody(body []byte) (Info, error) {
	d := newReader(body)
	var ri Info
	d.bodyArray()
	ri.Xid = uint32(d.Uint(math.MaxUint32, "xid"))
	ri.CommitLSN = pgq.LSN(d.Uint(math.MaxUint64, "commit LSN"))
	ri.EndLSN = pgq.LSN(d.Uint(math.MaxUint64, "end LSN"))
	ri.CommitTime = time.UnixMicro(d.Int64()).UTC()
	_ = d.Bytes() // origin
	ri.Part = uint32(d.Uint(math.MaxUint32, "part"))
	ri.Final = d.Bool()
	if d.Err != nil {
		return Info{}, d.Err
	}
	return ri, nil
}

// reader decodes one body: the shared msgpack reader (its errors wrap
// ErrCorruptRecord) plus the record decoder's allocation state.
type reader struct {
	msgp.Reader
	slab []pgq.Value // values are carved from here to save allocations
	// rels, when not nil, caches decoded relations across records.
	rels *BodyDecoder
	// slabHint is how many values the rest of the record probably holds
	// (changes left × widest relation × images per change): the size of
	// the next slab, so a small record does not allocate for 256 values.
	slabHint int
}

// newReader reads body.
func newReader(body []byte) reader {
	return reader{Reader: msgp.Reader{B: body, Wrap: ErrCorruptRecord}}
}

// bodyArray reads the body's array header: 9 elements, or 10 with a
// backfill id.
func (d *reader) bodyArray() int {
	n := d.ArrayLen()
	if d.Err == nil && (n < 9 || n > 11) {
		d.Fail("record: want 9 to 11 elements, got %d", n)
	}
	return n
}

// decodeTx decodes a body in its three steps: the header fields, the
// relation table, then the changes that point into it.
func (d *reader) decodeTx(t *pgq.Transaction) {
	nbody := d.bodyArray()
	d.decodeHeader(t)
	rels := d.decodeRelations()
	if d.Err != nil {
		return
	}
	d.decodeChanges(t, rels)
	if nbody >= 10 {
		t.Backfill = d.Str()
	}
	t.FirstOrdinal, t.Ordinals = 0, nil
	if nbody == 11 {
		d.decodeOrdinals(t)
	}
}

// decodeHeader reads the transaction's header fields, in body order.
func (d *reader) decodeHeader(t *pgq.Transaction) {
	t.Xid = uint32(d.Uint(math.MaxUint32, "xid"))
	t.CommitLSN = pgq.LSN(d.Uint(math.MaxUint64, "commit LSN"))
	t.EndLSN = pgq.LSN(d.Uint(math.MaxUint64, "end LSN"))
	t.CommitTime = time.UnixMicro(d.Int64()).UTC()
	t.Origin = d.Str()
	t.Part = uint32(d.Uint(math.MaxUint32, "part"))
	t.Final = d.Bool()
}

// decodeRelations reads the relation table. It stops at the first error,
// which the caller checks on d.
func (d *reader) decodeRelations() []relRef {
	nrel := d.ArrayLen()
	var rels []relRef
	if nrel > 0 {
		rels = make([]relRef, nrel)
	}
	for k := 0; k < nrel && d.Err == nil; k++ {
		d.decodeRelation(&rels[k])
	}
	return rels
}

// decodeRelation reads one relation into r. With a BodyDecoder it first
// looks the relation's encoded bytes up in the cache, so that a table seen
// before does not allocate its column names again.
func (d *reader) decodeRelation(r *relRef) {
	start := d.P
	if d.rels != nil {
		d.skipRelation()
		if d.Err != nil {
			return
		}
		if cached, ok := d.rels.rels[string(d.B[start:d.P])]; ok {
			*r = cached
			return
		}
		d.P = start
	}
	nrel := d.relationLen()
	r.schema = d.Str()
	r.table = d.Str()
	n := d.ArrayLen()
	if n%3 != 0 {
		d.Fail("relation columns: %d elements, not a multiple of 3", n)
		return
	}
	if n > 0 {
		cols := make([]pgq.Column, n/3)
		for i := range cols {
			cols[i].Name = d.Str()
			cols[i].TypeOID = uint32(d.Uint(math.MaxUint32, "type OID"))
			cols[i].Key = d.Bool()
		}
		r.cols = cols
	}
	if nrel >= 4 {
		d.decodeBaseTypes(r.cols, nrel)
	}
	if nrel >= 5 {
		d.decodeTypmods(r.cols, nrel)
	}
	if nrel == 6 {
		d.decodeTypeNames(r.cols)
	}
	if d.rels != nil && d.Err == nil {
		if d.rels.rels == nil || len(d.rels.rels) >= maxCachedRelations {
			d.rels.rels = make(map[string]relRef)
		}
		d.rels.rels[string(d.B[start:d.P])] = *r
	}
}

// decodeChanges reads the change array into t.Changes, resolving each row
// change's relation index against rels.
func (d *reader) decodeChanges(t *pgq.Transaction, rels []relRef) {
	nch := d.ArrayLen()
	if d.Err != nil {
		return
	}
	if nch > 0 {
		t.Changes = make([]pgq.Change, nch)
	}
	// The widest relation sizes the value slabs of the row changes.
	width := 1
	for k := range rels {
		width = max(width, len(rels[k].cols))
	}
	for i := 0; i < nch && d.Err == nil; i++ {
		d.decodeChange(&t.Changes[i], i, nch, rels, width)
	}
}

// decodeChange reads change i of nch into c. The element count n is
// checked per op because each op has its own fixed shape.
func (d *reader) decodeChange(c *pgq.Change, i, nch int, rels []relRef, width int) {
	n := d.ArrayLen()
	c.Op = pgq.Op(d.Uint(math.MaxUint8, "op"))
	if d.Err != nil {
		return
	}
	if c.Op == 0 {
		d.Fail("change %d: op 0", i)
		return
	}
	switch c.Op {
	case pgq.OpTruncate:
		if n != 3 {
			d.Fail("truncate: want 3 elements, got %d", n)
			return
		}
		nt := d.ArrayLen()
		if nt > 0 {
			c.Tables = make([]string, nt)
			for k := range c.Tables {
				c.Tables[k] = d.Str()
			}
		}
		flags := d.Uint(3, "truncate flags")
		c.Cascade = flags&1 != 0
		c.RestartIdentity = flags&2 != 0
	case pgq.OpMessage, pgq.OpDDL:
		if n != 4 {
			d.Fail("%s: want 4 elements, got %d", c.Op, n)
			return
		}
		c.Prefix = d.Str()
		c.Content = d.Bytes()
		c.Transactional = d.Bool()
	case pgq.OpGap:
		if n != 3 {
			d.Fail("gap: want 3 elements, got %d", n)
			return
		}
		c.FromLSN = pgq.LSN(d.Uint(math.MaxUint64, "gap from"))
		c.ToLSN = pgq.LSN(d.Uint(math.MaxUint64, "gap to"))
	default:
		if n != 5 {
			d.Fail("%s: want 5 elements, got %d", c.Op, n)
			return
		}
		d.decodeRowChange(c, i, nch, rels, width)
	}
}

// decodeRowChange reads the rest of an insert, update or delete: its
// relation index, old-image kind and the new and old values.
func (d *reader) decodeRowChange(c *pgq.Change, i, nch int, rels []relRef, width int) {
	ri := d.Uint(math.MaxUint32, "relation index")
	if d.Err == nil && ri >= uint64(len(rels)) {
		d.Fail("change %d: relation %d of %d", i, ri, len(rels))
		return
	}
	c.OldKind = pgq.OldKind(d.Uint(math.MaxUint8, "old kind"))
	images := 1
	if c.OldKind != pgq.OldNone {
		images = 2
	}
	// Size the next slab for what the rest of the record probably holds.
	d.slabHint = (nch - i) * width * images
	c.New = d.values()
	c.Old = d.values()
	if d.Err == nil {
		r := &rels[ri]
		c.Schema, c.Table, c.Columns = r.schema, r.table, r.cols
	}
}

// skipRelation steps over one entry of the relation table, checking its
// shape, without allocating.
func (d *reader) skipRelation() {
	nrel := d.relationLen()
	d.Bytes()
	d.Bytes()
	n := d.ArrayLen()
	if n%3 != 0 {
		d.Fail("relation columns: %d elements, not a multiple of 3", n)
		return
	}
	for i := 0; i < n/3 && d.Err == nil; i++ {
		d.Bytes()
		d.Uint(math.MaxUint32, "type OID")
		d.Bool()
	}
	if nrel < 4 || d.Err != nil {
		return
	}
	// An element before the last one present is nil when it holds
	// nothing.
	if nrel == 4 || !d.IsNil() {
		d.skipColumnArray(n/3, "base types", func() { d.Uint(math.MaxUint32, "base type OID") })
	}
	if nrel >= 5 && d.Err == nil && (nrel == 5 || !d.IsNil()) {
		d.skipColumnArray(n/3, "type modifiers", func() {
			if m := d.Int64(); d.Err == nil && (m < math.MinInt32 || m > math.MaxInt32) {
				d.Fail("relation type modifier %d out of range", m)
			}
		})
	}
	if nrel == 6 && d.Err == nil {
		d.skipColumnArray(n/3, "type names", func() { d.Bytes() })
	}
}

// skipColumnArray steps over a relation's array of one element per
// column (ncols), each read by elem.
func (d *reader) skipColumnArray(ncols int, what string, elem func()) {
	if nb := d.ArrayLen(); d.Err == nil && nb != ncols {
		d.Fail("relation %s: %d for %d columns", what, nb, ncols)
		return
	}
	for i := 0; i < ncols && d.Err == nil; i++ {
		elem()
	}
}

func (d *reader) values() []pgq.Value {
	if d.IsNil() {
		return nil
	}
	n := d.ArrayLen()
	if d.Err != nil {
		return nil
	}
	if n == 0 {
		return []pgq.Value{}
	}
	if n > len(d.slab) {
		// Each value takes at least one byte, so the rest of the body
		// bounds how many more values this record can hold.
		d.slab = make([]pgq.Value, max(n, min(d.slabHint, len(d.B)-d.P)))
	}
	vs := d.slab[:n:n]
	d.slab = d.slab[n:]
	for i := range vs {
		c, ok := d.Peek()
		if !ok {
			d.Fail("value: unexpected end")
			return nil
		}
		switch {
		case c == 0xc0:
			d.P++
			vs[i] = pgq.Value{Kind: pgq.ValueNull}
		case c == 0xc2:
			d.P++
			vs[i] = pgq.Value{Kind: pgq.ValueUnchangedTOAST}
		case c&0xe0 == 0xa0 || c == 0xd9 || c == 0xda || c == 0xdb:
			vs[i] = pgq.Value{Kind: pgq.ValueText, Data: d.Bytes()}
		case c == 0xc4 || c == 0xc5 || c == 0xc6:
			vs[i] = pgq.Value{Kind: pgq.ValueBinary, Data: d.Bytes()}
		default:
			d.ExpectArray(2, "value")
			k := pgq.ValueKind(d.Uint(math.MaxUint8, "value kind"))
			vs[i] = pgq.Value{Kind: k, Data: d.Bytes()}
		}
		if d.Err != nil {
			return nil
		}
	}
	return vs
}

// Restamp appends to dst a copy of the framed record with hdr's
// header fields (xid, commit and end LSN, commit time, origin, part,
// final) and a new checksum, keeping its relations and changes byte for
// byte. It returns the number of changes. A spilled chunk of an
// in-progress transaction becomes a journal part this way without
// decoding its changes. Errors wrap ErrBadVersion, ErrChecksum or
// ErrCorruptRecord.
func Restamp(dst, record []byte, hdr *pgq.Transaction) ([]byte, int, error) {
	if err := Check(record); err != nil {
		return dst, 0, err
	}
	nbody, tail, nch, err := headerEnd(record)
	if err != nil {
		return dst, 0, err
	}
	start := len(dst)
	dst = append(dst, Version, 0, 0, 0, 0)
	// A later part's first change's ordinal follows the changes (and the
	// backfill element, empty when the chunk had none).
	orig := nbody
	if nbody < 11 && hdr.FirstOrdinal != 0 {
		nbody = 11
	}
	dst = appendHeaderN(dst, hdr, nbody) // the tail keeps a backfill id
	dst = append(dst, record[tail:]...)
	if orig == 9 && nbody == 11 {
		dst = appendStr(dst, "")
	}
	if orig < 11 && nbody == 11 {
		dst = appendUint(dst, uint64(hdr.FirstOrdinal))
	}
	seal(dst[start:])
	return dst, nch, nil
}

// Headroom is the room AppendRestampable leaves in front of a record:
// more than any header's growth (the header fields of a zero
// transaction take 10 bytes, the largest ones 47 plus the origin's name,
// which PostgreSQL limits to 63 bytes).
const Headroom = 128

// AppendRestampable is Append after Headroom bytes of room, for
// RestampInPlace: a record encoded before its header fields are known
// (a backfill chunk, encoded as it is read, and journaled at its high
// watermark) gets them without a copy of its changes.
func AppendRestampable(b []byte, tx *pgq.Transaction) []byte {
	return Append(append(b, make([]byte, Headroom)...), tx)
}

// ErrNoHeadroom is RestampInPlace's error when the new header does not
// fit the room in front of the record.
var ErrNoHeadroom = errors.New("record: new header does not fit the headroom")

// RestampInPlace is Restamp without the copy, for a record
// AppendRestampable just encoded in this process (its checksum is not
// verified): buf is AppendRestampable's result, the record at
// buf[Headroom:]. It rewrites the header in front of the relations and
// changes, which do not move, and returns the restamped record, a
// subslice of buf, and its number of changes. Errors wrap
// ErrCorruptRecord or ErrNoHeadroom; buf is then unchanged.
func RestampInPlace(buf []byte, hdr *pgq.Transaction) ([]byte, int, error) {
	if len(buf) < Headroom {
		return nil, 0, fmt.Errorf("%w: %d bytes, shorter than the headroom", ErrCorruptRecord, len(buf))
	}
	nbody, tail, nch, err := headerEnd(buf[Headroom:])
	if err != nil {
		return nil, 0, err
	}
	var h [HeaderSize + 64]byte
	nh := appendHeaderN(append(h[:0], Version, 0, 0, 0, 0), hdr, nbody)
	start := Headroom + tail - len(nh)
	if start < 0 {
		return nil, 0, fmt.Errorf("%w: %d bytes", ErrNoHeadroom, len(nh))
	}
	// The record after the header fields stays as it is: its checksum
	// carries over (crc.go) rather than being summed again.
	oldCRC := binary.LittleEndian.Uint32(buf[Headroom+1:])
	oldHeadCRC := crc32.Checksum(buf[Headroom+HeaderSize:Headroom+tail], castagnoli)
	rec := buf[start:]
	copy(rec, nh)
	resealHead(rec, len(nh), oldCRC, oldHeadCRC)
	return rec, nch, nil
}

// headerEnd parses a framed record's header fields and relation table:
// the body's array length, where its relations start (after the header
// fields, from the record's start), and the number of changes.
func headerEnd(record []byte) (nbody, tail, nch int, err error) {
	if len(record) < HeaderSize {
		return 0, 0, 0, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorruptRecord, len(record), HeaderSize)
	}
	if record[0] != Version {
		return 0, 0, 0, fmt.Errorf("%w: %d", ErrBadVersion, record[0])
	}
	d := newReader(record[HeaderSize:])
	nbody = d.bodyArray()
	d.Uint(math.MaxUint32, "xid")
	d.Uint(math.MaxUint64, "commit LSN")
	d.Uint(math.MaxUint64, "end LSN")
	d.Int64()
	d.Bytes() // origin
	d.Uint(math.MaxUint32, "part")
	d.Bool()
	tail = HeaderSize + d.P // relations and changes start here
	nrel := d.ArrayLen()
	for k := 0; k < nrel && d.Err == nil; k++ {
		d.skipRelation()
	}
	nch = d.ArrayLen()
	if d.Err != nil {
		return 0, 0, 0, d.Err
	}
	return nbody, tail, nch, nil
}

// ReadsEncoder encodes a record of read changes of one relation (a
// backfill chunk) as its rows arrive, for RestampInPlace: Add encodes each
// row after room for everything that precedes the changes, and Finish
// writes that in front of them. The result is AppendRestampable's for the
// same changes, byte for byte, without holding the rows first.
type ReadsEncoder struct {
	buf    []byte
	room   int    // where the changes start: Headroom and the largest prefix
	n      int    // changes added
	prefix []byte // the relation table
}

// NewReadsEncoder starts a record of read changes of schema.table with
// columns cols in buf's storage (its contents are dropped).
func NewReadsEncoder(buf []byte, schema, table string, cols []pgq.Column) *ReadsEncoder {
	e := &ReadsEncoder{prefix: appendRelation(appendArrayHdr(nil, 1), &relRef{schema, table, cols})}
	// Frame, the header fields of a zero transaction and the changes'
	// array header take at most 5+32+5 bytes.
	e.room = Headroom + HeaderSize + 32 + len(e.prefix) + 5
	e.buf = append(buf[:0], make([]byte, e.room)...)
	return e
}

// Add encodes the read change of one row (values in the columns' order).
func (e *ReadsEncoder) Add(row []pgq.Value) {
	e.buf = appendRowChange(e.buf, pgq.OpRead, 0, pgq.OldNone, row, nil) // the table's relation is the only one
	e.n++
}

// Len is the number of changes added.
func (e *ReadsEncoder) Len() int { return e.n }

// Finish ends the record (Final, with the backfill id when not empty) and
// returns it as AppendRestampable would: Headroom bytes, then the record.
// The encoder is done: only Storage may be called after it.
func (e *ReadsEncoder) Finish(backfill string) []byte {
	if backfill != "" {
		e.buf = appendStr(e.buf, backfill)
	}
	var h [HeaderSize + 32]byte
	pre := appendHeader(append(h[:0], Version, 0, 0, 0, 0), &pgq.Transaction{Final: true, Backfill: backfill})
	if e.n == 0 {
		pre = appendArrayHdr(pre, 0) // no change uses the relation: Append lists none
	} else {
		pre = append(pre, e.prefix...)
	}
	pre = appendArrayHdr(pre, e.n)
	start := e.room - len(pre)
	copy(e.buf[start:], pre)
	rec := e.buf[start:]
	seal(rec)
	return e.buf[start-Headroom:]
}

// Storage is the whole buffer the encoder wrote into, emptied: for a next
// encoder once the record Finish returned is no longer used.
func (e *ReadsEncoder) Storage() []byte { return e.buf[:0] }
