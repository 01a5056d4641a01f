package pgq

import (
	"fmt"
	"time"
)

// Op is the kind of a change.
type Op uint8

// The change kinds pgoutput reports. Zero is not a valid Op.
const (
	OpInsert Op = 1 + iota
	OpUpdate
	OpDelete
	OpTruncate
	OpMessage
	// OpGap is not from PostgreSQL: pgq journals it when the operator
	// accepts a hole (--accept-gap) between the journal's end and the
	// slot's resume position. FromLSN and ToLSN bound what is missing.
	OpGap
	// OpDDL is a schema change captured by pgq's event trigger (pgq ddl
	// install): Content holds its JSON (command, object, schema,
	// object_type, statement), journaled in the transaction of the DDL.
	OpDDL
	// OpRead is a row of a backfill (pgq backfill): the table's existing
	// row read in a chunk, carried like an insert (New, Columns with the
	// backfill's key columns marked Key). Records of read changes carry
	// Transaction.Backfill.
	OpRead
)

var opNames = [...]string{OpInsert: "insert", OpUpdate: "update", OpDelete: "delete", OpTruncate: "truncate", OpMessage: "message", OpGap: "gap", OpDDL: "ddl", OpRead: "read"}

// String returns the contract name of the op ("insert", ...).
func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// ParseOp parses a contract op name.
func ParseOp(s string) (Op, error) {
	for i, n := range opNames {
		if n != "" && n == s {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("pgq: unknown op %q (want insert, update, delete, truncate, message, gap, ddl or read)", s)
}

// ValueKind mirrors pgoutput's TupleData column kinds.
type ValueKind byte

// Value kinds, with pgoutput's own byte values.
const (
	ValueNull           ValueKind = 'n'
	ValueUnchangedTOAST ValueKind = 'u'
	ValueText           ValueKind = 't'
	ValueBinary         ValueKind = 'b'
)

// Value is one column value exactly as PostgreSQL sent it.
type Value struct {
	Kind ValueKind
	// Data is PostgreSQL's text form (ValueText) or binary form
	// (ValueBinary); empty for the other kinds.
	Data []byte
}

// Column describes one column of a relation at the time of the change.
type Column struct {
	Name    string
	TypeOID uint32
	// Key is true when the column is part of the row's key: the table's
	// primary key, or its replica identity index under REPLICA IDENTITY
	// USING INDEX (design invariant 13). Under REPLICA IDENTITY FULL
	// pgoutput flags every column, but ingest journals the primary key
	// (none for a table without one); records journaled before pgq did so
	// carry pgoutput's flags (every column under FULL). Under DEFAULT and
	// USING INDEX these are also the columns an OldKey image holds.
	Key bool
	// BaseTypeOID is the type a column's values are rendered and decoded
	// by when it is not TypeOID: the base type of a domain (through
	// domains over domains; a domain over int4 is a number like int4), and
	// text[] for an array of a type whose OID is not fixed (an enum, an
	// extension type such as citext, ltree or hstore; an array of a domain
	// reads as the array of its base type). 0 when TypeOID is read as
	// itself, or when pgq did not know (records journaled before pgq
	// recorded base types, or, for such arrays, before this release:
	// their values render as PostgreSQL's text form, as they always did).
	BaseTypeOID uint32
	// TypmodPlus1 is the column's type modifier (pg_attribute.atttypmod,
	// which pgoutput's Relation message carries) plus one, so that the
	// zero Column has none: numeric(10,3)'s precision and scale,
	// timestamp(3)'s precision, varchar(n)'s length. Read it with Typmod.
	// 0 is PostgreSQL's -1: the type takes no modifier, the column has
	// none, or pgq did not know it (records journaled before pgq recorded
	// it; see package record).
	TypmodPlus1 int32
	// TypeName names the column's value type when it is an extension's
	// base type, whose OID is not fixed (pg_type.typname, without its
	// schema: "hstore", "citext", "ltree", "geometry"), or an array of
	// one (the element's name and "[]": "hstore[]"), through domains; ""
	// for every other type, and when pgq did not know it (records
	// journaled before pgq recorded it, or a failed catalog lookup).
	// Renderers tell such types apart by it, as Debezium does by name
	// (the Debezium format's hstore, package format).
	TypeName string
}

// Typmod is the column's type modifier as PostgreSQL states it
// (pg_attribute.atttypmod): -1 for none or unknown.
func (c *Column) Typmod() int32 { return c.TypmodPlus1 - 1 }

// WithTypmod returns c with its type modifier set to PostgreSQL's value
// m (-1 for none).
func (c Column) WithTypmod(m int32) Column {
	c.TypmodPlus1 = m + 1
	return c
}

// ValueType is the type OID the column's values are rendered and decoded
// by: BaseTypeOID when known, else TypeOID.
func (c *Column) ValueType() uint32 {
	if c.BaseTypeOID != 0 {
		return c.BaseTypeOID
	}
	return c.TypeOID
}

// OldKind says what Change.Old holds.
type OldKind byte

// Old image kinds, with pgoutput's own byte values.
const (
	OldNone OldKind = 0
	// OldKey: only the replica-identity key columns are meaningful.
	OldKey OldKind = 'K'
	// OldFull: the whole old row (REPLICA IDENTITY FULL).
	OldFull OldKind = 'O'
)

// Change is one change inside a committed transaction.
type Change struct {
	Op     Op
	Schema string
	Table  string

	// Columns, New and Old are set for insert, update and delete. New and Old
	// are nil when absent and otherwise have one Value per column.
	Columns []Column
	New     []Value
	Old     []Value
	OldKind OldKind

	// Truncate: the truncated tables as "schema.table".
	Tables          []string
	Cascade         bool
	RestartIdentity bool

	// Message (pg_logical_emit_message).
	Prefix        string
	Content       []byte
	Transactional bool

	// Gap: changes committed after FromLSN and up to ToLSN are not in the
	// journal.
	FromLSN LSN
	ToLSN   LSN
}

// Transaction is one journal record: a committed transaction, or one part
// of a transaction too large for a single record.
type Transaction struct {
	// Offset is the journal position of the record. Readers set it; it is
	// not part of the encoded record.
	Offset     Offset
	Xid        uint32
	CommitLSN  LSN
	EndLSN     LSN
	CommitTime time.Time // UTC, microsecond precision
	Origin     string
	// Part is the 0-based part number; Final is true on the last part. A
	// transaction that fits one record has Part 0 and Final true.
	Part  uint32
	Final bool
	// FirstOrdinal is the ordinal (see Ordinal) of the record's first
	// change: 0 for part 0, the number of changes of the earlier parts for
	// the others.
	FirstOrdinal uint32
	// Ordinals holds one ordinal per change when they are not
	// FirstOrdinal, FirstOrdinal+1, ... (a group's filter dropped changes
	// in between); nil otherwise.
	Ordinals []uint32
	Changes  []Change
	// Backfill is the id of the backfill whose chunk of read changes the
	// record holds (see package backfill); empty for everything else.
	Backfill string
}

// Ordinal returns the position of change i within its whole transaction
// (all parts, counted from 0, before any group filter). With the commit
// LSN it names the change in PostgreSQL's history, the same in every
// journal: a fresh data dir, a restored one and the old one (design
// invariant 9).
func (tx *Transaction) Ordinal(i int) uint32 {
	if i < len(tx.Ordinals) {
		return tx.Ordinals[i]
	}
	return tx.FirstOrdinal + uint32(i)
}

// PGEpoch is PostgreSQL's timestamp epoch (2000-01-01 UTC).
var PGEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// TimeFromPG converts a PostgreSQL timestamp (µs since 2000-01-01) to UTC.
func TimeFromPG(us int64) time.Time {
	return PGEpoch.Add(time.Duration(us) * time.Microsecond)
}
