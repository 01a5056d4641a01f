package format

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/pgq-dev/pgq"
)

// debeziumEvents is the number of Debezium events of c (see
// Renderer.Events).
func debeziumEvents(c *pgq.Change) int {
	switch c.Op {
	case pgq.OpDDL, pgq.OpGap:
		return 0
	case pgq.OpTruncate:
		return max(1, len(c.Tables))
	case pgq.OpUpdate:
		if keyChanged(c) {
			return 2
		}
	}
	return 1
}

// keyChanged reports whether an update changed the row's key: Debezium
// then emits a delete of the old key and a create of the new one instead
// of an update. The key is the columns flagged Key: the primary key (or
// replica identity index), also under REPLICA IDENTITY FULL, where the
// other columns of the old row are no key. Only an update with an old
// image can tell: PostgreSQL sends the old key (replica identity default
// or index) only when it changed, the whole old row (full) always.
func keyChanged(c *pgq.Change) bool {
	if c.Old == nil || c.New == nil {
		return false
	}
	for i, col := range c.Columns {
		if !col.Key || i >= len(c.Old) || i >= len(c.New) {
			continue
		}
		o, n := c.Old[i], c.New[i]
		if n.Kind == pgq.ValueUnchangedTOAST {
			continue
		}
		if o.Kind != n.Kind || string(o.Data) != string(n.Data) {
			return true
		}
	}
	return false
}

// debeziumDelete reports whether event k of c is a delete ("d"): of a
// delete, or the first of a key-changing update's two; its key and
// before image are the old row's.
func debeziumDelete(c *pgq.Change, k int) bool {
	return c.Op == pgq.OpDelete || (c.Op == pgq.OpUpdate && k == 0 && debeziumEvents(c) == 2)
}

// eventTable is the "schema.table" of event k of c ("" for a message).
func eventTable(c *pgq.Change, k int) string {
	switch c.Op {
	case pgq.OpMessage:
		return ""
	case pgq.OpTruncate:
		if k < len(c.Tables) {
			return c.Tables[k]
		}
	}
	return c.Schema + "." + c.Table
}

// dcoState computes Debezium's data_collection_order: the position of an
// event among the transaction's events of the same table, counted from 1.
// It counts per record, carrying the counts of earlier parts of a
// transaction when it saw them just before (parts are rendered in order by
// a reader of whole transactions: an exclusive fetch, a bridge).
type dcoState struct {
	valid    bool
	lsn      pgq.LSN
	xid      uint32
	backfill string
	part     uint32
	off      pgq.Offset
	n        int
	base     map[string]uint64 // counts of the transaction's earlier parts
	rec      map[string]uint64 // counts of the record itself
	first    []int             // per change, its first event's index in pos
	pos      []uint64
}

func (s *dcoState) prepare(tx *pgq.Transaction) {
	same := s.valid && s.lsn == tx.CommitLSN && s.xid == tx.Xid && s.backfill == tx.Backfill
	if same && s.part == tx.Part && s.off == tx.Offset && s.n == len(tx.Changes) {
		return
	}
	switch {
	case same && tx.Part == s.part+1:
		for t, n := range s.rec {
			s.base[t] += n
		}
	case same && tx.Part == s.part:
		// The same record again (a copy): same base.
	default:
		s.base = map[string]uint64{}
	}
	s.valid, s.lsn, s.xid, s.backfill, s.part, s.off, s.n = true, tx.CommitLSN, tx.Xid, tx.Backfill, tx.Part, tx.Offset, len(tx.Changes)
	s.rec = map[string]uint64{}
	s.first, s.pos = s.first[:0], s.pos[:0]
	for i := range tx.Changes {
		c := &tx.Changes[i]
		s.first = append(s.first, len(s.pos))
		for k := range debeziumEvents(c) {
			t := eventTable(c, k)
			s.rec[t]++
			s.pos = append(s.pos, s.base[t]+s.rec[t])
		}
	}
}

func (s *dcoState) order(i, k int) uint64 { return s.pos[s.first[i]+k] }

// unavailable is Debezium's default unavailable.value.placeholder: the
// value of an unchanged TOASTed column PostgreSQL did not send.
const unavailable = "__debezium_unavailable_value"

// appendDebezium appends event k of change i of tx as the value of a
// Debezium PostgreSQL change event (JSON converter, schemas disabled).
func (r *Renderer) appendDebezium(b []byte, tx *pgq.Transaction, i, k int) []byte {
	c := &tx.Changes[i]
	if c.Op == pgq.OpMessage {
		return r.appendDebeziumMessage(b, tx, i, c)
	}
	var (
		op            byte
		before, after []pgq.Value
		keyOnly       bool
		// toast fills the new image's unchanged TOAST values: the old
		// image's, when it holds the whole row (REPLICA IDENTITY FULL).
		toast []pgq.Value
	)
	switch c.Op {
	case pgq.OpInsert:
		op, after = 'c', c.New
	case pgq.OpRead:
		op, after = 'r', c.New
	case pgq.OpDelete:
		op, before, keyOnly = 'd', c.Old, c.OldKind == pgq.OldKey
	case pgq.OpTruncate:
		op = 't'
	case pgq.OpUpdate:
		switch {
		case debeziumEvents(c) == 1:
			op, before, after, keyOnly = 'u', c.Old, c.New, c.OldKind == pgq.OldKey
			if c.OldKind == pgq.OldFull {
				toast = c.Old
			}
		case k == 0:
			op, before, keyOnly = 'd', c.Old, c.OldKind == pgq.OldKey
		default:
			op, after = 'c', c.New
		}
	}
	schema, table := c.Schema, c.Table
	if c.Op == pgq.OpTruncate {
		schema, table, _ = strings.Cut(eventTable(c, k), ".")
	}
	b = append(b, `{"before":`...)
	b = r.appendRow(b, c.Columns, before, keyOnly, nil)
	b = append(b, `,"after":`...)
	b = r.appendRow(b, c.Columns, after, false, toast)
	b = append(b, `,"source":`...)
	b = r.appendSource(b, tx, i, schema, table, c.Op == pgq.OpRead, true)
	b = append(b, `,"transaction":`...)
	if c.Op == pgq.OpRead || !r.o.TransactionMetadata {
		b = append(b, "null"...)
	} else {
		r.dco.prepare(tx)
		b = appendTxBlock(b, tx, i, r.dco.order(i, k))
	}
	b = append(b, `,"op":"`...)
	b = append(b, op, '"')
	return r.appendNow(b)
}

// appendDebeziumMessage appends a logical decoding message as Debezium's
// message event: no before/after, the prefix and the content (base64, the
// JSON converter's form of bytes); txId only when it is transactional.
func (r *Renderer) appendDebeziumMessage(b []byte, tx *pgq.Transaction, i int, c *pgq.Change) []byte {
	b = append(b, `{"source":`...)
	b = r.appendSource(b, tx, i, "", "", false, c.Transactional)
	b = append(b, `,"op":"m"`...)
	b = r.appendNow(b)
	b = b[:len(b)-1]
	b = append(b, `,"message":{"prefix":`...)
	b = appendString(b, c.Prefix)
	b = append(b, `,"content":"`...)
	b = base64.StdEncoding.AppendEncode(b, c.Content)
	return append(b, `"}}`...)
}

// appendNow appends the top-level ts_ms, ts_us and ts_ns (the time the
// event was rendered, as Debezium's are the time it processed the event)
// and closes the object.
func (r *Renderer) appendNow(b []byte) []byte {
	now := r.o.Now()
	ns := now.UnixNano()
	b = append(b, `,"ts_ms":`...)
	b = strconv.AppendInt(b, now.UnixMilli(), 10)
	b = append(b, `,"ts_us":`...)
	b = strconv.AppendInt(b, now.UnixMicro(), 10)
	b = append(b, `,"ts_ns":`...)
	b = strconv.AppendInt(b, ns, 10)
	return append(b, '}')
}

// appendSource appends Debezium's source block of change i. pgq keeps one
// LSN per transaction, not per change: lsn is the commit LSN. A backfill
// read is a row of Debezium's incremental snapshot: snapshot
// "incremental", and no txId or lsn, as Debezium writes them. sequence
// names the change (appendSequence).
func (r *Renderer) appendSource(b []byte, tx *pgq.Transaction, i int, schema, table string, read, withTx bool) []byte {
	us := tx.CommitTime.UnixMicro()
	b = append(b, `{"version":`...)
	b = appendString(b, r.o.Version)
	b = append(b, `,"connector":"postgresql","name":`...)
	b = appendString(b, r.o.Name)
	b = append(b, `,"ts_ms":`...)
	b = strconv.AppendInt(b, floorDiv(us, 1000), 10)
	b = append(b, `,"snapshot":`...)
	if read {
		b = append(b, `"incremental"`...)
	} else {
		b = append(b, `"false"`...)
	}
	b = append(b, `,"db":`...)
	b = appendString(b, r.o.Database)
	b = append(b, `,"sequence":`...)
	b = appendSequence(b, tx, i)
	b = append(b, `,"ts_us":`...)
	b = strconv.AppendInt(b, us, 10)
	b = append(b, `,"ts_ns":`...)
	b = strconv.AppendInt(b, us*1000, 10)
	b = append(b, `,"schema":`...)
	b = appendString(b, schema)
	b = append(b, `,"table":`...)
	b = appendString(b, table)
	b = append(b, `,"txId":`...)
	if read || !withTx {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendUint(b, uint64(tx.Xid), 10)
	}
	b = append(b, `,"lsn":`...)
	if read {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendUint(b, uint64(tx.CommitLSN), 10)
	}
	b = append(b, `,"xmin":null`...)
	if tx.Origin != "" {
		b = append(b, `,"origin":`...)
		b = appendString(b, tx.Origin)
	}
	return append(b, '}')
}

// appendSequence appends source.sequence of change i: a JSON string
// holding a JSON array of strings, as Debezium's PostgreSQL connector
// writes it ("[\"<last commit LSN>\",\"<LSN>\"]"), but pgq's pair is
// the commit LSN (a number, as source.lsn) and the change's ordinal in
// its transaction, with the backfill id as a third element for a
// backfill row: the change's place in PostgreSQL's history (ChangeID),
// set also where transaction is null (a backfill read, a
// non-transactional message, a Debezium pipeline that drops the block).
func appendSequence(b []byte, tx *pgq.Transaction, i int) []byte {
	if tx.Backfill != "" {
		var buf [96]byte
		in := append(buf[:0], `["`...)
		in = strconv.AppendUint(in, uint64(tx.CommitLSN), 10)
		in = append(in, `","`...)
		in = strconv.AppendUint(in, uint64(tx.Ordinal(i)), 10)
		in = append(in, `",`...)
		in = appendString(in, tx.Backfill)
		in = append(in, ']')
		return appendString(b, string(in))
	}
	// Digits only: nothing to escape but the quotes.
	b = append(b, `"[\"`...)
	b = strconv.AppendUint(b, uint64(tx.CommitLSN), 10)
	b = append(b, `\",\"`...)
	b = strconv.AppendUint(b, uint64(tx.Ordinal(i)), 10)
	return append(b, `\"]"`...)
}

// appendTxBlock appends the transaction block: the id Debezium writes,
// "<txid>:<lsn>", with the commit LSN (the same for every event of the
// transaction; Debezium's LSN part varies); total_order is the change's
// ordinal + 1 (its position among all the transaction's changes, shared
// by the events of one change); data_collection_order is dco.
func appendTxBlock(b []byte, tx *pgq.Transaction, i int, dco uint64) []byte {
	b = append(b, `{"id":"`...)
	b = strconv.AppendUint(b, uint64(tx.Xid), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(tx.CommitLSN), 10)
	b = append(b, `","total_order":`...)
	b = strconv.AppendUint(b, uint64(tx.Ordinal(i))+1, 10)
	b = append(b, `,"data_collection_order":`...)
	b = strconv.AppendUint(b, dco, 10)
	return append(b, '}')
}

// appendRow appends a row image: every column, in column order; null for
// an absent image; with keyOnly (an old image holding the replica
// identity's key) the other columns are null, as Debezium's struct has
// them. An unchanged TOAST value takes the value of toast (the old
// image of an update under REPLICA IDENTITY FULL, which holds the whole
// row) where it has one, as Debezium does since DBZ-7193, else renders
// as the placeholder.
func (r *Renderer) appendRow(b []byte, cols []pgq.Column, vals []pgq.Value, keyOnly bool, toast []pgq.Value) []byte {
	if vals == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	for i := range cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, cols[i].Name)
		b = append(b, ':')
		if i >= len(vals) || (keyOnly && !cols[i].Key) {
			b = append(b, "null"...)
			continue
		}
		v := vals[i]
		if v.Kind == pgq.ValueUnchangedTOAST && i < len(toast) && toast[i].Kind != pgq.ValueUnchangedTOAST {
			v = toast[i]
		}
		b = r.appendColumn(b, &cols[i], v)
	}
	return append(b, '}')
}

// AppendDebeziumKey appends the key of event k of change i as Debezium
// keys it (JSON converter, schemas disabled): an object of the row's
// key columns (pgq.Column.Key; from the old image for a delete, and for
// the delete half of a key-changing update), null for a table without a
// key and for a truncate; a message's key is {"prefix":…}. pgq's ddl and
// gap changes have no Debezium event and no key: null.
func (r *Renderer) AppendDebeziumKey(b []byte, tx *pgq.Transaction, i, k int) []byte {
	c := &tx.Changes[i]
	switch c.Op {
	case pgq.OpMessage:
		b = append(b, `{"prefix":`...)
		b = appendString(b, c.Prefix)
		return append(b, '}')
	case pgq.OpTruncate, pgq.OpDDL, pgq.OpGap:
		return append(b, "null"...)
	}
	vals := c.New
	if debeziumDelete(c, k) || vals == nil {
		vals = c.Old
	}
	first := true
	for i := range c.Columns {
		col := &c.Columns[i]
		if !col.Key {
			continue
		}
		if first {
			b = append(b, '{')
			first = false
		} else {
			b = append(b, ',')
		}
		b = appendString(b, col.Name)
		b = append(b, ':')
		if i < len(vals) {
			b = r.appendColumn(b, col, vals[i])
		} else {
			b = append(b, "null"...)
		}
	}
	if first {
		return append(b, "null"...)
	}
	return append(b, '}')
}

func floorDiv(a, d int64) int64 {
	q := a / d
	if a%d != 0 && (a < 0) != (d < 0) {
		q--
	}
	return q
}
