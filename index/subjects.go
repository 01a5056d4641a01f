package index

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/msgp"
)

// Subject is what a consumer group's filter looks at in one change: its
// op and the names it is matched by. A record's subjects are the distinct
// subjects of its changes; a group receives the record exactly when one of
// them passes its filter (package consumers), so counting the records
// whose subjects pass counts the group's records without reading them.
//
//   - insert, update, delete, read: Schema and Table of the relation;
//   - truncate: one subject per truncated table, Table the name as
//     journaled ("schema.table", unquoted) and Schema empty;
//   - ddl: Table the object identity of the DDL's object (public."MyT"),
//     Schema empty;
//   - message and gap: no names.
type Subject struct {
	Op            pgq.Op
	Schema, Table string
}

func (s Subject) compare(o Subject) int {
	if c := cmp.Compare(s.Op, o.Op); c != 0 {
		return c
	}
	if c := cmp.Compare(s.Schema, o.Schema); c != 0 {
		return c
	}
	return cmp.Compare(s.Table, o.Table)
}

// Bounds of the subject sets. A record with more distinct subjects than
// maxSetSubjects, or one that would need a set beyond maxSets, is indexed
// with set 0, "unknown": every filter counts it (an over-count, never an
// under-count). Real workloads have a few sets per table.
const (
	maxSetSubjects = 64
	maxSets        = 1 << 16
)

// prefixSet keys the subject-set dictionary: "s" + be64(id) → set value.
const prefixSet byte = 's'

// setVersion is the first byte of a set value.
const setVersion byte = 1

func setKey(id uint32) []byte {
	k := make([]byte, 9)
	k[0] = prefixSet
	binary.BigEndian.PutUint64(k[1:], uint64(id))
	return k
}

// SubjectSet is a record's set of subjects in the index's encoding (the
// dictionary's key: see appendSet), comparable; "" is the unknown set,
// which every filter counts.
type SubjectSet string

// NewSubjectSet returns the set of the distinct subjects s ("" when they
// are more than the index keeps per record: unknown). It sorts s.
func NewSubjectSet(s []Subject) SubjectSet {
	c := canonical(s)
	if c == nil {
		return ""
	}
	var buf [64]byte // one allocation, the string, for the usual set
	return SubjectSet(appendSet(buf[:0], c))
}

// Known reports whether the set is known (not "").
func (s SubjectSet) Known() bool { return s != "" }

// Subjects decodes the set; nil when unknown or malformed.
func (s SubjectSet) Subjects() []Subject {
	if s == "" {
		return nil
	}
	out, err := decodeSet(append([]byte{setVersion}, s...))
	if err != nil {
		return nil
	}
	return out
}

// SubjectsOf returns the set of the distinct subjects of changes (""
// when more than a set keeps: unknown).
func SubjectsOf(changes []pgq.Change) SubjectSet { return subjectsOf(changes) }

// subjectsOf returns the set of the distinct subjects of changes.
func subjectsOf(changes []pgq.Change) SubjectSet {
	var buf [4]Subject // most records touch one table with one or two ops
	out := buf[:0]
	var last Subject
	for i := range changes {
		c := &changes[i]
		switch c.Op {
		case pgq.OpTruncate:
			for _, t := range c.Tables {
				out = append(out, Subject{Op: c.Op, Table: t})
			}
			continue
		case pgq.OpDDL:
			out = append(out, Subject{Op: c.Op, Table: ddlObject(c.Content)})
			continue
		case pgq.OpMessage, pgq.OpGap:
			out = append(out, Subject{Op: c.Op})
			continue
		}
		// Row changes come in runs of one table and op: compare with the
		// previous one before appending (string equality of the same
		// decoded name is a pointer check).
		if len(out) > 0 && c.Op == last.Op && c.Table == last.Table && c.Schema == last.Schema {
			continue
		}
		last = Subject{Op: c.Op, Schema: c.Schema, Table: c.Table}
		out = append(out, last)
	}
	return NewSubjectSet(out)
}

// canonical sorts and deduplicates subjects; nil beyond maxSetSubjects.
func canonical(s []Subject) []Subject {
	if len(s) > 1 {
		slices.SortFunc(s, Subject.compare)
		s = slices.Compact(s)
	}
	if len(s) > maxSetSubjects {
		return nil
	}
	if s == nil {
		return []Subject{} // no changes: known and empty
	}
	return s
}

// ddlObject reads the object identity of a DDL change's content (the
// JSON pgq's event trigger writes); "" when it has none.
func ddlObject(content []byte) string {
	var d struct {
		Object string `json:"object"`
	}
	_ = json.Unmarshal(content, &d)
	return d.Object
}

// RelationFunc returns a relation of the journal's relation catalog by id
// (one element of a record's relation table, encoded: [schema, table,
// columns...]); journal.Journal.Relation.
type RelationFunc func(id uint64) ([]byte, error)

// EntryOfStored is EntryOf for a record of which only the encoded form is
// at hand (a journal.Record with Encoded set: a spilled part or a
// backfill chunk), in the journal's stored form (record.VersionCompact,
// whose relation ids rel resolves) or record.Version. The subjects are
// read from the encoded changes without decoding their values; a record
// that does not parse is indexed with unknown subjects. Whether it ends
// its transaction is read from the encoded header too (EndUnknown when
// that does not parse).
func EntryOfStored(tx *pgq.Transaction, stored []byte, bytes, changes int, rel RelationFunc) Entry {
	e := Entry{Offset: tx.Offset, CommitLSN: tx.CommitLSN, EndLSN: tx.EndLSN, CommitTime: tx.CommitTime, Bytes: bytes, Changes: changes}
	s, end, err := storedSubjects(stored, rel)
	if err == nil {
		e.Subjects = NewSubjectSet(s)
	}
	e.End = end
	return e
}

// EntryOfReads is EntryOfStored for a record its producer says holds
// only reads of schema.table (a backfill chunk: journal.Record's
// ReadsTable): its subjects without walking its changes (a tenth of
// pgq's CPU time in a backfill went to that walk).
func EntryOfReads(tx *pgq.Transaction, bytes, changes int, schema, table string) Entry {
	e := Entry{Offset: tx.Offset, CommitLSN: tx.CommitLSN, EndLSN: tx.EndLSN, CommitTime: tx.CommitTime, Bytes: bytes, Changes: changes, End: endOf(tx.Final)}
	e.Subjects = NewSubjectSet([]Subject{{Op: pgq.OpRead, Schema: schema, Table: table}})
	return e
}

var errSubjects = errors.New("index: record subjects")

// storedSubjects walks a framed record (version byte, CRC, msgpack body;
// see package record) for its subjects and whether it ends its
// transaction (known as soon as the header parses, also when the
// subjects then do not).
func storedSubjects(rec []byte, rel RelationFunc) ([]Subject, End, error) {
	const header = 5
	if len(rec) < header || (rec[0] != 1 && rec[0] != 2) {
		return nil, EndUnknown, fmt.Errorf("%w: not a record", errSubjects)
	}
	compact := rec[0] == 2
	d := msgp.Reader{B: rec[header:], Wrap: errSubjects}
	if n := d.ArrayLen(); d.Err == nil && (n < 9 || n > 11) {
		return nil, EndUnknown, fmt.Errorf("%w: body of %d elements", errSubjects, n)
	}
	for range 6 { // xid, commit LSN, end LSN, commit time, origin, part
		d.Skip()
	}
	final := d.Bool()
	if d.Err != nil {
		return nil, EndUnknown, d.Err
	}
	end := endOf(final)
	s, err := storedChanges(&d, compact, rel)
	return s, end, err
}

// storedChanges reads the relation table and the changes' subjects of a
// record body past its header fields.
func storedChanges(d *msgp.Reader, compact bool, rel RelationFunc) ([]Subject, error) {
	nrel := d.ArrayLen()
	if d.Err != nil || nrel > d.Left() {
		return nil, fmt.Errorf("%w: relations", errSubjects)
	}
	rels := make([]Subject, nrel)
	for k := range rels {
		var r []byte
		if compact {
			id := d.Uint(math.MaxUint64, "relation id")
			if d.Err != nil {
				break
			}
			var err error
			if r, err = rel(id); err != nil {
				return nil, err
			}
		} else {
			r = d.Skip()
		}
		rd := msgp.Reader{B: r, Wrap: errSubjects}
		rd.ArrayLen()
		rels[k].Schema, rels[k].Table = rd.Str(), rd.Str()
		if rd.Err != nil {
			return nil, rd.Err
		}
	}
	return changeSubjects(d, rels)
}

// changeSubjects reads the change array of a record body whose relation
// table is rels, skipping values.
func changeSubjects(d *msgp.Reader, rels []Subject) ([]Subject, error) {
	nch := d.ArrayLen()
	var out []Subject
	last := -1
	for i := 0; i < nch && d.Err == nil; i++ {
		n := d.ArrayLen()
		op := pgq.Op(d.Uint(math.MaxUint8, "op"))
		switch op {
		case pgq.OpTruncate:
			nt := d.ArrayLen()
			for k := 0; k < nt && d.Err == nil; k++ {
				out = append(out, Subject{Op: op, Table: d.Str()})
			}
			d.Skip()
		case pgq.OpDDL:
			d.Skip()
			out = append(out, Subject{Op: op, Table: ddlObject(d.Bytes())})
			d.Skip()
		case pgq.OpMessage, pgq.OpGap:
			out = append(out, Subject{Op: op})
			for k := 1; k < n; k++ {
				d.Skip()
			}
		default:
			ri := d.Uint(math.MaxUint32, "relation index")
			if d.Err != nil || ri >= uint64(len(rels)) {
				return nil, fmt.Errorf("%w: change %d: relation %d of %d", errSubjects, i, ri, len(rels))
			}
			s := rels[ri]
			s.Op = op
			if last < 0 || out[last] != s {
				out = append(out, s)
				last = len(out) - 1
			}
			for k := 2; k < n; k++ {
				d.Skip()
			}
		}
	}
	if d.Err != nil {
		return nil, d.Err
	}
	return out, nil
}

// appendSet encodes canonical subjects as the dictionary's key (and, after
// the version byte, its value): uvarint count, then per subject the op
// byte and the schema and table, each a uvarint length and the bytes.
func appendSet(b []byte, s []Subject) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	for _, x := range s {
		b = append(b, byte(x.Op))
		b = binary.AppendUvarint(b, uint64(len(x.Schema)))
		b = append(b, x.Schema...)
		b = binary.AppendUvarint(b, uint64(len(x.Table)))
		b = append(b, x.Table...)
	}
	return b
}

func decodeSet(v []byte) ([]Subject, error) {
	if len(v) == 0 || v[0] != setVersion {
		return nil, fmt.Errorf("%w: subject set: version %d", ErrCorrupt, firstByte(v))
	}
	r := varintReader{b: v[1:]}
	n := r.uvarint()
	if n > maxSetSubjects {
		return nil, fmt.Errorf("%w: subject set of %d", ErrCorrupt, n)
	}
	out := make([]Subject, 0, n)
	str := func() string {
		l := r.uvarint()
		if r.bad || l > uint64(len(r.b)) {
			r.bad = true
			return ""
		}
		s := string(r.b[:l])
		r.b = r.b[l:]
		return s
	}
	for range n {
		if len(r.b) == 0 {
			r.bad = true
			break
		}
		op := pgq.Op(r.b[0])
		r.b = r.b[1:]
		schema := str()
		table := str()
		out = append(out, Subject{Op: op, Schema: schema, Table: table})
	}
	if r.bad || len(r.b) != 0 {
		return nil, fmt.Errorf("%w: subject set", ErrCorrupt)
	}
	return out, nil
}

// sets is the subject-set dictionary in memory. ids is written under the
// index's writer lock only; list is read by any goroutine under mu.
type sets struct {
	ids  map[string]uint32 // appendSet encoding → id
	mu   sync.RWMutex
	list [][]Subject // id-1 → subjects
}

// lookup returns the subjects of set id (1-based); false for 0 or an
// unknown id.
func (s *sets) lookup(id uint32) ([]Subject, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if id == 0 || int(id) > len(s.list) {
		return nil, false
	}
	return s.list[id-1], true
}

// load reads the dictionary from Pebble.
func (ix *Index) loadSets() error {
	lo, hi := prefixBounds(prefixSet)
	it, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("index: load subject sets: %w", err)
	}
	defer it.Close()
	ids := make(map[string]uint32)
	var list [][]Subject
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("index: load subject sets: %w", err)
		}
		if len(k) != 9 || binary.BigEndian.Uint64(k[1:]) != uint64(len(list)+1) {
			// Ids are dense from 1 and written in order; a hole means a
			// set was lost with every block using it (a prefix of the
			// batches survives): stop there, later ids are reassigned.
			break
		}
		s, err := decodeSet(v)
		if err != nil {
			return err
		}
		ids[string(appendSet(nil, s))] = uint32(len(list) + 1)
		list = append(list, s)
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("index: load subject sets: %w", err)
	}
	ix.sets.mu.Lock()
	ix.sets.ids, ix.sets.list = ids, list
	ix.sets.mu.Unlock()
	return nil
}

// pendingSets are the sets an Add assigns: written in its batch and
// published to the dictionary only once the batch committed.
type pendingSets struct {
	next  uint32
	ids   map[string]uint32
	list  [][]Subject
	vals  [][]byte
	start uint32
}

// setID returns the id of the known set ss, assigning a pending one to a
// new set; 0 when the dictionary is full.
func (ix *Index) setID(p *pendingSets, ss SubjectSet) uint32 {
	if id, ok := ix.sets.ids[string(ss)]; ok {
		return id
	}
	if id, ok := p.ids[string(ss)]; ok {
		return id
	}
	if p.ids == nil {
		p.ids = make(map[string]uint32)
		p.start = uint32(len(ix.sets.ids)) + 1
		p.next = p.start
	}
	if p.next > maxSets {
		return 0
	}
	subjects := ss.Subjects()
	if subjects == nil {
		return 0
	}
	id := p.next
	p.next++
	p.ids[string(ss)] = id
	p.list = append(p.list, subjects)
	p.vals = append(p.vals, append([]byte{setVersion}, ss...))
	return id
}

// writeSets adds the pending sets to b.
func (p *pendingSets) write(b *pebble.Batch) error {
	for i, v := range p.vals {
		if err := b.Set(setKey(p.start+uint32(i)), v, nil); err != nil {
			return err
		}
	}
	return nil
}

// publish makes the pending sets part of the dictionary (after the batch
// holding them committed).
func (ix *Index) publishSets(p *pendingSets) {
	if len(p.list) == 0 {
		return
	}
	for k, id := range p.ids {
		ix.sets.ids[k] = id
	}
	ix.sets.mu.Lock()
	ix.sets.list = append(ix.sets.list, p.list...)
	ix.sets.mu.Unlock()
}

// SetSubjects returns the subjects of subject set id as the index stores
// it per record (Selector's predicate sees them); false for 0, the
// unknown set.
func (ix *Index) SetSubjects(id uint32) ([]Subject, bool) { return ix.sets.lookup(id) }

// setOf returns the SubjectSet of set id, "" for 0.
func (ix *Index) setOf(id uint32) SubjectSet {
	s, ok := ix.sets.lookup(id)
	if !ok {
		return ""
	}
	return SubjectSet(appendSet(nil, s))
}
