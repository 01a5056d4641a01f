package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/pgq-dev/pgq"
)

// Record framing. A journal record is
//
//	version (1 byte, Version) | CRC32C of body (4 bytes, little endian) | body
//
// and the body is one msgpack array of 9 elements:
//
//	[0] xid           uint
//	[1] commit LSN    uint
//	[2] end LSN       uint
//	[3] commit time   int (microseconds since the Unix epoch, UTC)
//	[4] origin        str
//	[5] part          uint
//	[6] final         bool
//	[7] relations     array of [schema str, table str, columns array]
//	                  where columns is flat: name str, type OID uint, key bool, ...
//	[8] changes       array of changes, each an array whose first element is the op:
//	    insert/update/delete (and any unknown op):
//	        [op, relation index uint, old kind uint, new values|nil, old values|nil]
//	    truncate: [op, tables array of str, flags uint (1 cascade, 2 restart identity)]
//	    message and ddl: [op, prefix str, content bin, transactional bool]
//	    gap:      [op, from LSN uint, to LSN uint]
//	[9] backfill      str, only in records of a backfill chunk (read
//	                  changes): the body is then an array of 10 elements.
//	                  Every other record keeps 9, byte for byte as before.
//
// A value is nil (NULL), false (unchanged TOAST), str (text form), bin
// (binary form), or [kind uint, data bin] for any other kind. Each relation
// (schema, table and column list) is stored once per record and referenced by
// index, so a transaction touching one table stores its column names once.
// The record offset is not encoded: it is the journal position.
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

// Append appends the framed record of tx (version, CRC32C, msgpack
// body) to b and returns the extended slice. tx.Offset is not encoded.
func Append(b []byte, tx *pgq.Transaction) []byte {
	start := len(b)
	b = append(b, Version, 0, 0, 0, 0)
	b = appendBody(b, tx)
	binary.LittleEndian.PutUint32(b[start+1:], crc32.Checksum(b[start+HeaderSize:], castagnoli))
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
	rels := relsBuf[:0]
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

	b = appendHeader(b, tx)

	b = appendArrayHdr(b, len(rels))
	for k := range rels {
		r := &rels[k]
		b = appendArrayHdr(b, 3)
		b = appendStr(b, r.schema)
		b = appendStr(b, r.table)
		b = appendArrayHdr(b, 3*len(r.cols))
		for _, col := range r.cols {
			b = appendStr(b, col.Name)
			b = appendUint(b, uint64(col.TypeOID))
			b = appendBool(b, col.Key)
		}
	}

	b = appendArrayHdr(b, len(tx.Changes))
	last = -1
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
			b = appendArrayHdr(b, 5)
			b = appendUint(b, uint64(c.Op))
			last = findRel(rels, last, c)
			b = appendUint(b, uint64(last))
			b = appendUint(b, uint64(c.OldKind))
			b = appendValues(b, c.New)
			b = appendValues(b, c.Old)
		}
	}
	if tx.Backfill != "" {
		b = appendStr(b, tx.Backfill)
	}
	return b
}

// bodyLen is the number of elements of tx's body array.
func bodyLen(tx *pgq.Transaction) int {
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
	b = appendArrayHdr(b, n)
	b = appendUint(b, uint64(tx.Xid))
	b = appendUint(b, uint64(tx.CommitLSN))
	b = appendUint(b, uint64(tx.EndLSN))
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
	d := reader{b: body, rels: bd}
	var t pgq.Transaction
	t.Offset = tx.Offset
	d.decodeTx(&t)
	if d.err == nil && d.p != len(d.b) {
		d.fail("%d trailing bytes", len(d.b)-d.p)
	}
	if d.err != nil {
		return d.err
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
	d := reader{b: data[HeaderSize:]}
	var ri Info
	d.bodyArray()
	ri.Xid = uint32(d.uint(math.MaxUint32, "xid"))
	ri.CommitLSN = pgq.LSN(d.uint(math.MaxUint64, "commit LSN"))
	ri.EndLSN = pgq.LSN(d.uint(math.MaxUint64, "end LSN"))
	ri.CommitTime = time.UnixMicro(d.int64()).UTC()
	_ = d.bytes() // origin
	ri.Part = uint32(d.uint(math.MaxUint32, "part"))
	ri.Final = d.bool()
	if d.err != nil {
		return Info{}, d.err
	}
	return ri, nil
}

// reader is a bounds-checked msgpack reader over one body. After the first
// error every method returns zero values and d.err keeps the first error.
type reader struct {
	b    []byte
	p    int
	err  error
	slab []pgq.Value // values are carved from here to save allocations
	// rels, when not nil, caches decoded relations across records.
	rels *BodyDecoder
	// slabHint is how many values the rest of the record probably holds
	// (changes left × widest relation × images per change): the size of
	// the next slab, so a small record does not allocate for 256 values.
	slabHint int
}

func (d *reader) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: at body byte %d: %s", ErrCorruptRecord, d.p, fmt.Sprintf(format, args...))
	}
}

func (d *reader) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.p {
		d.fail("need %d bytes, have %d", n, len(d.b)-d.p)
		return nil
	}
	s := d.b[d.p : d.p+n : d.p+n]
	d.p += n
	return s
}

func (d *reader) byte1() byte {
	s := d.take(1)
	if s == nil {
		return 0
	}
	return s[0]
}

func (d *reader) peek() (byte, bool) {
	if d.err != nil || d.p >= len(d.b) {
		return 0, false
	}
	return d.b[d.p], true
}

func (d *reader) be(n int) uint64 {
	s := d.take(n)
	var v uint64
	for _, c := range s {
		v = v<<8 | uint64(c)
	}
	return v
}

// arrayLen reads an array header and checks that n elements can fit in the
// remaining bytes (each takes at least one byte).
func (d *reader) arrayLen() int {
	c := d.byte1()
	var n uint64
	switch {
	case d.err != nil:
		return 0
	case c&0xf0 == 0x90:
		n = uint64(c & 0x0f)
	case c == 0xdc:
		n = d.be(2)
	case c == 0xdd:
		n = d.be(4)
	default:
		d.fail("want array, got 0x%02x", c)
		return 0
	}
	if n > uint64(len(d.b)-d.p) {
		d.fail("array of %d elements in %d bytes", n, len(d.b)-d.p)
		return 0
	}
	return int(n)
}

func (d *reader) expectArray(n int, what string) {
	if got := d.arrayLen(); d.err == nil && got != n {
		d.fail("%s: want %d elements, got %d", what, n, got)
	}
}

func (d *reader) int64() int64 {
	c := d.byte1()
	switch {
	case d.err != nil:
		return 0
	case c < 0x80:
		return int64(c)
	case c >= 0xe0:
		return int64(int8(c))
	}
	switch c {
	case 0xcc:
		return int64(d.be(1))
	case 0xcd:
		return int64(d.be(2))
	case 0xce:
		return int64(d.be(4))
	case 0xcf:
		v := d.be(8)
		if v > math.MaxInt64 {
			d.fail("integer %d overflows int64", v)
			return 0
		}
		return int64(v)
	case 0xd0:
		return int64(int8(d.be(1)))
	case 0xd1:
		return int64(int16(d.be(2)))
	case 0xd2:
		return int64(int32(d.be(4)))
	case 0xd3:
		return int64(d.be(8))
	}
	d.fail("want integer, got 0x%02x", c)
	return 0
}

func (d *reader) uint(max uint64, what string) uint64 {
	c, _ := d.peek()
	var v uint64
	switch {
	case c == 0xcf:
		d.p++
		v = d.be(8)
	default:
		i := d.int64()
		if d.err != nil {
			return 0
		}
		if i < 0 {
			d.fail("%s: negative %d", what, i)
			return 0
		}
		v = uint64(i)
	}
	if d.err == nil && v > max {
		d.fail("%s: %d out of range", what, v)
		return 0
	}
	return v
}

func (d *reader) bool() bool {
	switch c := d.byte1(); {
	case d.err != nil:
		return false
	case c == 0xc3:
		return true
	case c == 0xc2:
		return false
	default:
		d.fail("want bool, got 0x%02x", c)
		return false
	}
}

// bytes reads a str or bin (the two are interchangeable here) and returns
// a sub-slice of the body.
func (d *reader) bytes() []byte {
	c := d.byte1()
	var n uint64
	switch {
	case d.err != nil:
		return nil
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		n = d.be(1)
	case c == 0xda || c == 0xc5:
		n = d.be(2)
	case c == 0xdb || c == 0xc6:
		n = d.be(4)
	default:
		d.fail("want str or bin, got 0x%02x", c)
		return nil
	}
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.p) {
		d.fail("string of %d bytes in %d bytes", n, len(d.b)-d.p)
		return nil
	}
	return d.take(int(n))
}

func (d *reader) str() string { return string(d.bytes()) }

func (d *reader) isNil() bool {
	if c, ok := d.peek(); ok && c == 0xc0 {
		d.p++
		return true
	}
	return false
}

// bodyArray reads the body's array header: 9 elements, or 10 with a
// backfill id.
func (d *reader) bodyArray() int {
	n := d.arrayLen()
	if d.err == nil && n != 9 && n != 10 {
		d.fail("record: want 9 or 10 elements, got %d", n)
	}
	return n
}

func (d *reader) decodeTx(t *pgq.Transaction) {
	nbody := d.bodyArray()
	t.Xid = uint32(d.uint(math.MaxUint32, "xid"))
	t.CommitLSN = pgq.LSN(d.uint(math.MaxUint64, "commit LSN"))
	t.EndLSN = pgq.LSN(d.uint(math.MaxUint64, "end LSN"))
	t.CommitTime = time.UnixMicro(d.int64()).UTC()
	t.Origin = d.str()
	t.Part = uint32(d.uint(math.MaxUint32, "part"))
	t.Final = d.bool()

	nrel := d.arrayLen()
	var rels []relRef
	if nrel > 0 {
		rels = make([]relRef, nrel)
	}
	for k := 0; k < nrel && d.err == nil; k++ {
		start := d.p
		if d.rels != nil {
			d.skipRelation()
			if d.err != nil {
				return
			}
			if r, ok := d.rels.rels[string(d.b[start:d.p])]; ok {
				rels[k] = r
				continue
			}
			d.p = start
		}
		d.expectArray(3, "relation")
		rels[k].schema = d.str()
		rels[k].table = d.str()
		n := d.arrayLen()
		if n%3 != 0 {
			d.fail("relation columns: %d elements, not a multiple of 3", n)
			return
		}
		if n > 0 {
			cols := make([]pgq.Column, n/3)
			for i := range cols {
				cols[i].Name = d.str()
				cols[i].TypeOID = uint32(d.uint(math.MaxUint32, "type OID"))
				cols[i].Key = d.bool()
			}
			rels[k].cols = cols
		}
		if d.rels != nil && d.err == nil {
			if d.rels.rels == nil || len(d.rels.rels) >= maxCachedRelations {
				d.rels.rels = make(map[string]relRef)
			}
			d.rels.rels[string(d.b[start:d.p])] = rels[k]
		}
	}

	nch := d.arrayLen()
	if d.err != nil {
		return
	}
	if nch > 0 {
		t.Changes = make([]pgq.Change, nch)
	}
	width := 1
	for k := range rels {
		width = max(width, len(rels[k].cols))
	}
	for i := 0; i < nch && d.err == nil; i++ {
		c := &t.Changes[i]
		n := d.arrayLen()
		c.Op = pgq.Op(d.uint(math.MaxUint8, "op"))
		if d.err != nil {
			return
		}
		if c.Op == 0 {
			d.fail("change %d: op 0", i)
			return
		}
		switch c.Op {
		case pgq.OpTruncate:
			if n != 3 {
				d.fail("truncate: want 3 elements, got %d", n)
				return
			}
			nt := d.arrayLen()
			if nt > 0 {
				c.Tables = make([]string, nt)
				for k := range c.Tables {
					c.Tables[k] = d.str()
				}
			}
			flags := d.uint(3, "truncate flags")
			c.Cascade = flags&1 != 0
			c.RestartIdentity = flags&2 != 0
		case pgq.OpMessage, pgq.OpDDL:
			if n != 4 {
				d.fail("%s: want 4 elements, got %d", c.Op, n)
				return
			}
			c.Prefix = d.str()
			c.Content = d.bytes()
			c.Transactional = d.bool()
		case pgq.OpGap:
			if n != 3 {
				d.fail("gap: want 3 elements, got %d", n)
				return
			}
			c.FromLSN = pgq.LSN(d.uint(math.MaxUint64, "gap from"))
			c.ToLSN = pgq.LSN(d.uint(math.MaxUint64, "gap to"))
		default:
			if n != 5 {
				d.fail("%s: want 5 elements, got %d", c.Op, n)
				return
			}
			ri := d.uint(math.MaxUint32, "relation index")
			if d.err == nil && ri >= uint64(len(rels)) {
				d.fail("change %d: relation %d of %d", i, ri, len(rels))
				return
			}
			c.OldKind = pgq.OldKind(d.uint(math.MaxUint8, "old kind"))
			images := 1
			if c.OldKind != pgq.OldNone {
				images = 2
			}
			d.slabHint = (nch - i) * width * images
			c.New = d.values()
			c.Old = d.values()
			if d.err == nil {
				r := &rels[ri]
				c.Schema, c.Table, c.Columns = r.schema, r.table, r.cols
			}
		}
	}
	if nbody == 10 {
		t.Backfill = d.str()
	}
}

// skipRelation steps over one entry of the relation table, checking its
// shape, without allocating.
func (d *reader) skipRelation() {
	d.expectArray(3, "relation")
	d.bytes()
	d.bytes()
	n := d.arrayLen()
	if n%3 != 0 {
		d.fail("relation columns: %d elements, not a multiple of 3", n)
		return
	}
	for i := 0; i < n/3 && d.err == nil; i++ {
		d.bytes()
		d.uint(math.MaxUint32, "type OID")
		d.bool()
	}
}

func (d *reader) values() []pgq.Value {
	if d.isNil() {
		return nil
	}
	n := d.arrayLen()
	if d.err != nil {
		return nil
	}
	if n == 0 {
		return []pgq.Value{}
	}
	if n > len(d.slab) {
		// Each value takes at least one byte, so the rest of the body
		// bounds how many more values this record can hold.
		d.slab = make([]pgq.Value, max(n, min(d.slabHint, len(d.b)-d.p)))
	}
	vs := d.slab[:n:n]
	d.slab = d.slab[n:]
	for i := range vs {
		c, ok := d.peek()
		if !ok {
			d.fail("value: unexpected end")
			return nil
		}
		switch {
		case c == 0xc0:
			d.p++
			vs[i] = pgq.Value{Kind: pgq.ValueNull}
		case c == 0xc2:
			d.p++
			vs[i] = pgq.Value{Kind: pgq.ValueUnchangedTOAST}
		case c&0xe0 == 0xa0 || c == 0xd9 || c == 0xda || c == 0xdb:
			vs[i] = pgq.Value{Kind: pgq.ValueText, Data: d.bytes()}
		case c == 0xc4 || c == 0xc5 || c == 0xc6:
			vs[i] = pgq.Value{Kind: pgq.ValueBinary, Data: d.bytes()}
		default:
			d.expectArray(2, "value")
			k := pgq.ValueKind(d.uint(math.MaxUint8, "value kind"))
			vs[i] = pgq.Value{Kind: k, Data: d.bytes()}
		}
		if d.err != nil {
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
	d := reader{b: record[HeaderSize:]}
	nbody := d.bodyArray()
	d.uint(math.MaxUint32, "xid")
	d.uint(math.MaxUint64, "commit LSN")
	d.uint(math.MaxUint64, "end LSN")
	d.int64()
	d.bytes() // origin
	d.uint(math.MaxUint32, "part")
	d.bool()
	tail := d.p // relations and changes start here
	nrel := d.arrayLen()
	for k := 0; k < nrel && d.err == nil; k++ {
		d.expectArray(3, "relation")
		d.bytes()
		d.bytes()
		n := d.arrayLen()
		if n%3 != 0 {
			d.fail("relation columns: %d elements, not a multiple of 3", n)
		}
		for i := 0; i < n/3 && d.err == nil; i++ {
			d.bytes()                          // name
			d.uint(math.MaxUint32, "type OID") // type
			d.bool()                           // key
		}
	}
	nch := d.arrayLen()
	if d.err != nil {
		return dst, 0, d.err
	}
	start := len(dst)
	dst = append(dst, Version, 0, 0, 0, 0)
	dst = appendHeaderN(dst, hdr, nbody) // the tail keeps a backfill id
	dst = append(dst, d.b[tail:]...)
	binary.LittleEndian.PutUint32(dst[start+1:], crc32.Checksum(dst[start+HeaderSize:], castagnoli))
	return dst, nch, nil
}
