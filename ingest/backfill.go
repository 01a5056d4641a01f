package ingest

import (
	"encoding/binary"
	"encoding/json"
	"slices"
	"sync"

	"github.com/pgq-dev/pgq"
)

// WatermarkPrefix is the logical message prefix of backfill watermarks
// (see package backfill). Watermark messages are consumed by ingest and
// never journaled.
const WatermarkPrefix = "pgq.wm"

// Watermark is the content (JSON) of a watermark message.
type Watermark struct {
	// ID names the chunk (Backfills.Open).
	ID string `json:"id"`
	// Kind is "low" or "high".
	Kind string `json:"kind"`
	// Xip, on a high watermark, lists the transactions in progress in the
	// chunk's snapshot (pg_snapshot_xip): one of them that committed before
	// the low watermark was still invisible to the chunk's read, so its
	// keys are dropped from the chunk too.
	Xip []uint64 `json:"xip,omitempty"`
}

// ChunkResult is what ingest did with a chunk at its high watermark.
type ChunkResult struct {
	// Redo: the chunk was not journaled (a transaction in its window could
	// not be inspected, or the high watermark was a re-send); read it again.
	Redo   bool
	Reason string
	// Rows journaled, Dropped because their key changed in the window.
	Rows, Dropped int
	// EndLSN of the chunk's record: the chunk is durable once the journal
	// holds it. Zero when no row was left to journal.
	EndLSN pgq.LSN
}

// Chunk is one chunk of a backfill between its watermarks: Open registers
// it before the low watermark is emitted, SetRows hands ingest its rows
// before the high watermark is emitted, and Result delivers what ingest
// did at the high watermark.
type Chunk struct {
	b                       *Backfills
	id, backfill            string
	schema, table           string
	keyCols                 []string
	result                  chan ChunkResult
	lowSeen, dirty, dropAll bool
	reason                  string
	changed                 map[string]struct{}
	// pre holds keys changed before the low watermark (since Open), by
	// xid, for the high watermark's Xip.
	pre     map[uint32][]string
	columns []pgq.Column
	rows    [][]pgq.Value
	hasRows bool
}

// Backfills is the registry between backfill runners (any goroutine) and
// the ingest goroutine, which does the window bookkeeping of every open
// chunk and journals the chunk's rows at its high watermark, right in the
// high watermark transaction's place in commit order.
type Backfills struct {
	mu      sync.Mutex
	chunks  map[string]*Chunk
	byTable map[string][]*Chunk // schema.table → open chunks
	// expect is lastSubmitted as ingest left it after the previous commit
	// it saw: a different value at the next commit means a record was
	// journaled without passing the hook (a streamed or spilled
	// transaction), whose changes were not inspected.
	expect pgq.LSN
}

// NewBackfills returns an empty registry.
func NewBackfills() *Backfills {
	return &Backfills{chunks: map[string]*Chunk{}, byTable: map[string][]*Chunk{}}
}

// Open registers a chunk window for schema.table keyed by keyCols; call it
// before emitting the low watermark of id.
func (b *Backfills) Open(id, backfill, schema, table string, keyCols []string) *Chunk {
	c := &Chunk{b: b, id: id, backfill: backfill, schema: schema, table: table, keyCols: keyCols,
		result: make(chan ChunkResult, 1), changed: map[string]struct{}{}, pre: map[uint32][]string{}}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.chunks[id] = c
	qt := schema + "." + table
	b.byTable[qt] = append(b.byTable[qt], c)
	return c
}

// SetRows hands the chunk's rows (text values, one per column) to ingest;
// call it before emitting the high watermark.
func (c *Chunk) SetRows(columns []pgq.Column, rows [][]pgq.Value) {
	c.b.mu.Lock()
	c.columns, c.rows, c.hasRows = columns, rows, true
	c.b.mu.Unlock()
}

// Result delivers the outcome once ingest saw the high watermark.
func (c *Chunk) Result() <-chan ChunkResult { return c.result }

// Close unregisters the chunk. It reports false when ingest already took
// it at its high watermark: Result then has (or will have) the outcome.
func (c *Chunk) Close() bool {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	return c.b.remove(c)
}

func (b *Backfills) remove(c *Chunk) bool {
	if b.chunks[c.id] != c {
		return false
	}
	delete(b.chunks, c.id)
	qt := c.schema + "." + c.table
	l := slices.DeleteFunc(b.byTable[qt], func(x *Chunk) bool { return x == c })
	if len(l) == 0 {
		delete(b.byTable, qt)
	} else {
		b.byTable[qt] = l
	}
	return true
}

// OpenChunks is the number of registered chunks.
func (b *Backfills) OpenChunks() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.chunks)
}

// isWatermark reports whether c is a watermark message.
func isWatermark(c *pgq.Change) bool {
	return c.Op == pgq.OpMessage && c.Transactional && c.Prefix == WatermarkPrefix
}

// backfillCommit is ingest's hook for a committed transaction, called in
// commit order before it is journaled. It removes watermark messages,
// records the keys the transaction changed in open chunk windows, and at
// a high watermark replaces the transaction's changes by the chunk's
// surviving rows (read changes, Transaction.Backfill set). spilled means
// the transaction's changes are in a spill and cannot be inspected. It
// returns the size estimate of what is to be journaled.
func (s *session) backfillCommit(tx *pgq.Transaction, spilled bool, size int) int {
	b := s.in.o.Backfills
	hasWM := false
	for i := range tx.Changes {
		if isWatermark(&tx.Changes[i]) {
			hasWM = true
			break
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	unseen := b.expect != s.in.lastSubmitted
	if len(b.chunks) == 0 && !hasWM {
		b.expect = s.in.lastSubmitted
		if !spilled && len(tx.Changes) > 0 && tx.EndLSN > s.in.lastSubmitted {
			b.expect = tx.EndLSN
		}
		return size
	}
	if unseen || spilled {
		for _, c := range b.chunks {
			if c.lowSeen && !c.dirty {
				c.dirty, c.reason = true, "a large (spilled or streamed) transaction committed inside the chunk's window"
			}
		}
	}
	var highs []*Chunk
	var xips [][]uint64
	if hasWM || len(b.byTable) > 0 {
		kept := tx.Changes[:0]
		for i := range tx.Changes {
			c := &tx.Changes[i]
			if isWatermark(c) {
				var wm Watermark
				if err := json.Unmarshal(c.Content, &wm); err != nil {
					s.in.o.Logger.Warn("ignoring a malformed backfill watermark", "lsn", tx.EndLSN, "error", err)
					continue
				}
				ch := b.chunks[wm.ID]
				switch {
				case ch == nil: // another pgq's, or an abandoned chunk's
				case wm.Kind == "low":
					ch.lowSeen = true
				case wm.Kind == "high" && ch.lowSeen:
					highs = append(highs, ch)
					xips = append(xips, wm.Xip)
				}
				continue
			}
			b.track(tx.Xid, c)
			kept = append(kept, *c)
		}
		clear(tx.Changes[len(kept):])
		tx.Changes = kept
	}
	for i, ch := range highs {
		b.remove(ch)
		res := ch.finish(tx, xips[i], tx.EndLSN <= s.in.lastSubmitted, s.in.o.MaxRecordBytes)
		if !res.Redo {
			size = 0
			for _, c := range tx.Changes {
				size += 32 + 16*len(c.New)
				for _, v := range c.New {
					size += len(v.Data)
				}
			}
		}
		ch.result <- res
	}
	b.expect = s.in.lastSubmitted
	if !spilled && len(tx.Changes) > 0 && tx.EndLSN > s.in.lastSubmitted {
		b.expect = tx.EndLSN
	}
	return size
}

// track records the key(s) change c touches in every open window of its
// table.
func (b *Backfills) track(xid uint32, c *pgq.Change) {
	if c.Op == pgq.OpTruncate {
		for _, t := range c.Tables {
			for _, ch := range b.byTable[t] {
				if ch.lowSeen {
					ch.dropAll = true
				} else {
					ch.pre[xid] = append(ch.pre[xid], "") // "": every key
				}
			}
		}
		return
	}
	if c.Op != pgq.OpInsert && c.Op != pgq.OpUpdate && c.Op != pgq.OpDelete {
		return
	}
	chunks := b.byTable[c.Schema+"."+c.Table]
	for _, ch := range chunks {
		var keys []string
		ok := true
		if c.New != nil {
			k, kok := rowKey(c.Columns, c.New, ch.keyCols, false)
			keys, ok = append(keys, k), ok && kok
		}
		if c.Old != nil {
			k, kok := rowKey(c.Columns, c.Old, ch.keyCols, c.OldKind == pgq.OldKey)
			keys, ok = append(keys, k), ok && kok
		}
		if !ok || len(keys) == 0 {
			if ch.lowSeen {
				ch.dirty, ch.reason = true, "a change inside the chunk's window lacks the key columns"
			} else {
				ch.pre[xid] = append(ch.pre[xid], "")
			}
			continue
		}
		if ch.lowSeen {
			for _, k := range keys {
				ch.changed[k] = struct{}{}
			}
		} else {
			ch.pre[xid] = append(ch.pre[xid], keys...)
		}
	}
}

// finish builds the chunk's record in tx's place at its high watermark.
func (ch *Chunk) finish(tx *pgq.Transaction, xip []uint64, resend bool, maxBytes int) ChunkResult {
	switch {
	case resend:
		return ChunkResult{Redo: true, Reason: "the high watermark was re-sent after a reconnect"}
	case ch.dirty:
		return ChunkResult{Redo: true, Reason: ch.reason}
	case !ch.hasRows:
		return ChunkResult{Redo: true, Reason: "the chunk's rows were not handed over before its high watermark"}
	case len(tx.Changes) > 0:
		return ChunkResult{Redo: true, Reason: "the high watermark's transaction has other changes"}
	}
	for _, x := range xip {
		for _, k := range ch.pre[uint32(x)] { // xip holds full xids; records hold 32 bits
			if k == "" {
				ch.dropAll = true
			}
			ch.changed[k] = struct{}{}
		}
	}
	var res ChunkResult
	if ch.dropAll {
		res.Dropped = len(ch.rows)
		return res
	}
	changes := make([]pgq.Change, 0, len(ch.rows))
	for _, row := range ch.rows {
		if len(ch.changed) > 0 { // most windows see no change of the table
			if k, ok := rowKey(ch.columns, row, ch.keyCols, false); ok {
				if _, hit := ch.changed[k]; hit {
					res.Dropped++
					continue
				}
			}
		}
		changes = append(changes, pgq.Change{Op: pgq.OpRead, Schema: ch.schema, Table: ch.table, Columns: ch.columns, New: row})
	}
	res.Rows = len(changes)
	if len(changes) > 0 { // nothing to journal, nothing to wait for
		tx.Changes = changes
		tx.Backfill = ch.backfill
		res.EndLSN = tx.EndLSN
	}
	return res
}

// rowKey encodes the key columns of a row image: per column 'n' for NULL,
// or 'v', a uvarint length and PostgreSQL's text form. ok is false when a
// key column is missing from the image.
func rowKey(cols []pgq.Column, vals []pgq.Value, keyCols []string, keyOnly bool) (string, bool) {
	var buf [64]byte
	k := buf[:0]
	for _, name := range keyCols {
		found := false
		for i, col := range cols {
			if col.Name != name || i >= len(vals) {
				continue
			}
			if keyOnly && !col.Key {
				return "", false
			}
			v := vals[i]
			switch v.Kind {
			case pgq.ValueNull:
				k = append(k, 'n')
			case pgq.ValueText, pgq.ValueBinary:
				k = append(k, 'v')
				k = binary.AppendUvarint(k, uint64(len(v.Data)))
				k = append(k, v.Data...)
			default:
				return "", false
			}
			found = true
			break
		}
		if !found {
			return "", false
		}
	}
	return string(k), true
}

// Backfills returns the ingester's chunk registry.
func (in *Ingester) Backfills() *Backfills { return in.o.Backfills }
