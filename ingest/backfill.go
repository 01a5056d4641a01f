package ingest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/journal"
	"github.com/pgq-dev/pgq/record"
)

// WatermarkPrefix is the logical message prefix of backfill watermarks
// (see package backfill). A watermark of this process (its Key proves it:
// Chunk.Key) is consumed by ingest and never journaled; any other message
// with the prefix is journaled as the message it is, with a WARN.
const WatermarkPrefix = "pgq.wm"

// Watermark is the content (JSON) of a watermark message.
type Watermark struct {
	// ID names the chunk (Backfills.Open).
	ID string `json:"id"`
	// Key is the chunk's Chunk.Key: a MAC of ID under a secret that never
	// leaves the process, so no other writer of logical messages can
	// make a watermark ingest takes for one.
	Key string `json:"key"`
	// Kind is "low" or "high".
	Kind string `json:"kind"`
	// Xmin, Xmax and Xip, on a high watermark, are the chunk's read
	// snapshot (pg_current_snapshot(), full transaction ids): a transaction
	// that committed before the low watermark may still be invisible to
	// the read (its commit record is written and flushed before it leaves
	// the proc array; a synchronous standby can hold it there), so its
	// keys are dropped from the chunk too. Such a transaction is in Xip,
	// or at or above Xmax when no transaction that finished later than
	// its start had finished before the snapshot.
	Xmin uint64   `json:"xmin,omitempty"`
	Xmax uint64   `json:"xmax,omitempty"`
	Xip  []uint64 `json:"xip,omitempty"`
}

// visible reports whether the committed transaction xid (the 32 bits
// pgoutput carries) is visible to the snapshot of wm, with PostgreSQL's
// rules: below xmin visible, at or above xmax invisible, in between
// invisible when in xip. Comparisons are modulo 2^32, as PostgreSQL's
// TransactionIdPrecedes.
func (wm *Watermark) visible(xid uint32) bool {
	if xidPrecedes(xid, uint32(wm.Xmin)) {
		return true
	}
	if !xidPrecedes(xid, uint32(wm.Xmax)) {
		return false
	}
	for _, x := range wm.Xip {
		if uint32(x) == xid {
			return false
		}
	}
	return true
}

func xidPrecedes(a, b uint32) bool { return int32(a-b) < 0 }

// Markers in Watch.byXid besides row keys (a row key never starts with a
// zero byte: see rowKey).
const (
	keyAll     = "\x00all"     // a truncate of the table: every key
	keyUnknown = "\x00unknown" // changes that could not be inspected
)

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

// Watch follows one table of a running backfill, from before its first
// chunk to after its last: it keeps the keys changed by each committed
// transaction, by xid, until a chunk's read snapshot shows that
// transaction visible (visibility only ever grows, so it stays visible to
// every later read). At a chunk's high watermark, the keys of every kept
// transaction the chunk's read could not see are dropped from the chunk:
// the chunk read their rows as they were before it, while the journal
// already holds the change, ahead of the chunk's record. Watch.Open
// registers the table's chunks.
type Watch struct {
	b             *Backfills
	schema, table string
	keyCols       []string
	// byXid: keys (or keyAll, keyUnknown) changed by committed
	// transactions not yet known visible to a read; guarded by b.mu.
	byXid map[uint32][]string
}

// Chunk is one chunk of a backfill between its watermarks: Watch.Open
// registers it before the low watermark is emitted, SetRecord hands ingest
// its rows before the high watermark is emitted, and Result delivers what
// ingest did at the high watermark.
type Chunk struct {
	b                       *Backfills
	w                       *Watch
	id, backfill            string
	key                     string // the MAC of id its watermarks carry
	result                  chan ChunkResult
	lowSeen, dirty, dropAll bool
	reason                  string
	changed                 map[string]struct{} // keys changed between the watermarks
	encoded                 []byte              // the rows' record, with room for its header (SetRecord)
	rows                    int                 // its changes
	hasRows                 bool
}

// Backfills is the registry between backfill runners (any goroutine) and
// the ingest goroutine, which does the window bookkeeping of every open
// chunk and journals the chunk's rows at its high watermark, right in the
// high watermark transaction's place in commit order.
type Backfills struct {
	// mu guards everything below and the watches' and chunks' fields.
	mu      sync.Mutex
	chunks  map[string]*Chunk
	byTable map[string][]*Chunk // schema.table → open chunks
	watches map[string][]*Watch // schema.table → watches
	nwatch  int                 // watches in total
	// secret keys the MAC of watermark ids (see key): random from
	// NewBackfills, or the one SetSecret loads from the data dir.
	secret []byte
	// expect is lastSubmitted as ingest left it after the previous commit
	// it saw: a different value at the next commit means a record was
	// journaled without passing the hook (a streamed or spilled
	// transaction), whose changes were not inspected.
	expect pgq.LSN
}

// NewBackfills returns an empty registry.
func NewBackfills() *Backfills {
	b := &Backfills{chunks: map[string]*Chunk{}, byTable: map[string][]*Chunk{}, watches: map[string][]*Watch{}, secret: make([]byte, 32)}
	_, _ = rand.Read(b.secret) // crypto/rand.Read never fails (Go 1.24+)
	return b
}

// SetSecret replaces the secret of watermark keys by one kept with the
// data dir (package backfill stores it), so that watermarks a previous
// process emitted and PostgreSQL sends again after a restart are still
// known as pgq's own and dropped, not journaled as messages. Call it
// before ingest starts and before any chunk is opened.
func (b *Backfills) SetSecret(secret []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.secret = slices.Clone(secret)
}

// key is the MAC of a chunk id its watermarks carry: HMAC-SHA256 under
// the registry's secret, 128 bits in hex. It is derived rather than kept
// per chunk so that a watermark of a chunk already closed (timed out,
// abandoned) is still recognised as pgq's own and dropped. b.mu is held.
func (b *Backfills) key(id string) string {
	m := hmac.New(sha256.New, b.secret)
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// ownWatermark decodes c, a message with the watermark prefix, and reports
// whether it is a watermark of this process; when not, it logs why.
func (b *Backfills) ownWatermark(c *pgq.Change, log *slog.Logger, lsn pgq.LSN) (Watermark, bool) {
	var wm Watermark
	reason := ""
	switch err := json.Unmarshal(c.Content, &wm); {
	case !c.Transactional:
		reason = "not transactional"
	case err != nil:
		reason = "malformed content: " + err.Error()
	case !hmac.Equal([]byte(wm.Key), []byte(b.key(wm.ID))):
		reason = "no key of this process (written by another role or another pgq, or re-sent from before a restart)"
	default:
		return wm, true
	}
	log.Warn("journaling a message with pgq's watermark prefix as a message change, not a watermark", "lsn", lsn, "reason", reason)
	return wm, false
}

// Watch starts following schema.table, keyed by keyCols. Every
// transaction ingest sees commit from now on is tracked; the caller must
// make sure that every transaction whose commit ingest may have seen
// before is visible to the first chunk's read (package backfill waits for
// committed transactions still in the proc array to leave it).
func (b *Backfills) Watch(schema, table string, keyCols []string) *Watch {
	w := &Watch{b: b, schema: schema, table: table, keyCols: keyCols, byXid: map[uint32][]string{}}
	b.mu.Lock()
	defer b.mu.Unlock()
	qt := schema + "." + table
	b.watches[qt] = append(b.watches[qt], w)
	b.nwatch++
	return w
}

// Close stops following the table; open chunks of the watch are closed.
func (w *Watch) Close() {
	b := w.b
	b.mu.Lock()
	defer b.mu.Unlock()
	qt := w.schema + "." + w.table
	l := b.watches[qt]
	if !slices.Contains(l, w) {
		return
	}
	// remove edits byTable[qt]: iterate over a copy.
	for _, c := range slices.Clone(b.byTable[qt]) {
		if c.w == w {
			b.remove(c)
		}
	}
	if l = slices.DeleteFunc(l, func(x *Watch) bool { return x == w }); len(l) == 0 {
		delete(b.watches, qt)
	} else {
		b.watches[qt] = l
	}
	b.nwatch--
	w.byXid = nil
}

// Open registers a chunk window of the watched table; call it before
// emitting the low watermark of id.
func (w *Watch) Open(id, backfill string) *Chunk {
	c := &Chunk{b: w.b, w: w, id: id, backfill: backfill, result: make(chan ChunkResult, 1), changed: map[string]struct{}{}}
	b := w.b
	b.mu.Lock()
	defer b.mu.Unlock()
	c.key = b.key(id)
	b.chunks[id] = c
	qt := w.schema + "." + w.table
	b.byTable[qt] = append(b.byTable[qt], c)
	return c
}

// SetRecord hands ingest the chunk's rows as their record: read changes
// of the watched table (Op pgq.OpRead, New the row's text values), Final,
// Backfill the chunk's backfill id, with record.Headroom bytes of room in
// front of it (record.ReadsEncoder, or record.AppendRestampable); rows
// is its number of changes. Call it before emitting the high watermark.
// The caller encodes the record as the rows arrive and keeps no other
// form of them: at the high watermark, when no row is dropped and the
// record fits MaxRecordBytes (most chunks), ingest stamps it with the
// watermark transaction's header in place and journals it as it is,
// without ever decoding it; only when keys changed in the window (to
// drop their rows and encode the rest anew) or when it is too large for
// one record (to journal it in parts) does ingest decode it into
// changes, whose values then alias encoded. So neither the replication
// loop builds 10,000 changes at the high watermark (which took it up to
// 20 ms, while nothing was read or confirmed), nor the committer encodes
// them (1.4 ms per chunk), nor the reader makes a pgq.Change per row
// and a copy of its values (a tenth of pgq's CPU in a backfill).
// encoded must stay untouched until the chunk's Result says it is no
// longer read (its record durable, or nothing of it journaled).
func (c *Chunk) SetRecord(encoded []byte, rows int) {
	c.b.mu.Lock()
	c.encoded, c.rows, c.hasRows = encoded, rows, true
	c.b.mu.Unlock()
}

// SetChanges hands ingest the chunk's rows as read changes (and, when not
// nil, their record as SetRecord takes it).
//
// Deprecated: use SetRecord, which takes the record alone; SetChanges
// encodes changes into one when encoded is nil. columns is unused.
func (c *Chunk) SetChanges(columns []pgq.Column, changes []pgq.Change, encoded []byte) {
	if encoded == nil {
		encoded = record.AppendRestampable(nil, &pgq.Transaction{Final: true, Backfill: c.backfill, Changes: changes})
	}
	c.SetRecord(encoded, len(changes))
}

// Key is what the chunk's watermarks carry in Watermark.Key: ingest takes
// a message with the watermark prefix for a watermark only with it.
func (c *Chunk) Key() string { return c.key }

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
	qt := c.w.schema + "." + c.w.table
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

// isWatermark reports whether c has the watermark prefix: a watermark
// when Backfills.ownWatermark says so.
func isWatermark(c *pgq.Change) bool {
	return c.Op == pgq.OpMessage && c.Prefix == WatermarkPrefix
}

// backfillCommit is ingest's hook for a committed transaction, called in
// commit order before it is journaled. It removes this process's
// watermark messages (others with the prefix stay, as messages),
// records the keys the transaction changed in the watches and the open
// chunk windows, and at a high watermark replaces the transaction's
// changes by the chunk's surviving rows (read changes, Transaction.Backfill
// set). spilled means the transaction's changes are in a spill and cannot
// be inspected. It returns the size estimate of what is to be journaled.
func (s *session) backfillCommit(tx *pgq.Transaction, spilled bool, size int) (int, *journal.Record) {
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
	if len(b.chunks) == 0 && b.nwatch == 0 && !hasWM {
		b.expect = s.in.lastSubmitted
		if !spilled && len(tx.Changes) > 0 && tx.EndLSN > s.in.lastSubmitted {
			b.expect = tx.EndLSN
		}
		return size, nil
	}
	if unseen {
		b.uninspected(0, false)
	}
	if spilled {
		b.uninspected(tx.Xid, true)
	}
	var highs []*Chunk
	var wms []Watermark
	if hasWM || len(b.watches) > 0 {
		highs, wms = b.takeWatermarks(tx, s.in.o.Logger)
	}
	var rec *journal.Record
	for i, ch := range highs {
		b.remove(ch)
		res, kept := ch.finish(tx, &wms[i], tx.EndLSN <= s.in.lastSubmitted)
		if !res.Redo && res.Rows > 0 {
			rec, res = ch.journal(tx, res, kept, s.in.o.MaxRecordBytes)
			// The size estimate is needed only when the changes are
			// encoded by the committer (a record encoded ahead has its
			// own size).
			if rec == nil && !res.Redo {
				size = 0
				for _, c := range tx.Changes {
					size += 32 + 16*len(c.New)
					for _, v := range c.New {
						size += len(v.Data)
					}
				}
			}
		}
		ch.result <- res
	}
	b.expect = s.in.lastSubmitted
	// A chunk's record journaled as encoded leaves tx without changes,
	// and is submitted all the same.
	if !spilled && (len(tx.Changes) > 0 || rec != nil) && tx.EndLSN > s.in.lastSubmitted {
		b.expect = tx.EndLSN
	}
	return size, rec
}

// takeWatermarks removes this process's watermarks from tx, marks the
// low ones seen and returns the high ones of open chunks, and tracks the
// keys tx's other changes touch. b.mu is held.
func (b *Backfills) takeWatermarks(tx *pgq.Transaction, log *slog.Logger) (highs []*Chunk, wms []Watermark) {
	kept := tx.Changes[:0]
	for i := range tx.Changes {
		c := &tx.Changes[i]
		if isWatermark(c) {
			if wm, own := b.ownWatermark(c, log, tx.EndLSN); own {
				ch := b.chunks[wm.ID]
				switch {
				case ch == nil: // a chunk of this process closed before (timed out, abandoned)
				case wm.Kind == "low":
					ch.lowSeen = true
				case wm.Kind == "high" && ch.lowSeen:
					highs = append(highs, ch)
					wms = append(wms, wm)
				}
				continue
			}
		}
		b.track(tx.Xid, c)
		kept = append(kept, *c)
	}
	clear(tx.Changes[len(kept):])
	tx.Changes = kept
	return highs, wms
}

// journal makes what ingest journals of the chunk's rows in tx at its
// high watermark (res from finish, with rows to journal): the record
// encoded ahead (SetRecord), stamped with tx's header, when finish
// dropped no row and it fits maxBytes; else nil, with tx.Changes the
// rows to journal, which the committer encodes (in parts when they are
// too large): the rows finish kept, or every row of the record, decoded
// now when finish did not. A record that does not decode (a bug: pgq encoded it)
// makes the chunk be read again.
func (ch *Chunk) journal(tx *pgq.Transaction, res ChunkResult, kept []pgq.Change, maxBytes int) (*journal.Record, ChunkResult) {
	if res.Dropped == 0 && len(ch.encoded) <= maxBytes {
		hdr := *tx
		hdr.Part, hdr.Final, hdr.Changes, hdr.Backfill = 0, true, nil, ch.backfill
		enc, n, err := record.RestampInPlace(ch.encoded, &hdr)
		if err == nil && n == res.Rows {
			return &journal.Record{Tx: &hdr, Encoded: enc, EncodedChanges: n, ReadsSchema: ch.w.schema, ReadsTable: ch.w.table}, res
		}
		// else a header longer than the headroom (an origin name beyond
		// PostgreSQL's limit): the committer encodes the rows.
	}
	if kept == nil {
		var err error
		if kept, err = ch.decode(); err != nil {
			return nil, ChunkResult{Redo: true, Reason: err.Error()}
		}
	}
	tx.Changes, tx.Backfill = kept, ch.backfill
	return nil, res
}

// decode materializes the chunk's rows from its record (SetRecord): one
// read change per row, values aliasing the record, which stays untouched
// while the committer encodes them.
func (ch *Chunk) decode() ([]pgq.Change, error) {
	var rows pgq.Transaction
	if len(ch.encoded) < record.Headroom+record.HeaderSize {
		return nil, fmt.Errorf("ingest: the record of chunk %s has %d bytes", ch.id, len(ch.encoded))
	}
	if err := record.DecodeBody(ch.encoded[record.Headroom+record.HeaderSize:], &rows); err != nil {
		return nil, fmt.Errorf("ingest: decode the record of chunk %s: %w", ch.id, err)
	}
	if len(rows.Changes) != ch.rows {
		return nil, fmt.Errorf("ingest: the record of chunk %s has %d rows, %d handed over", ch.id, len(rows.Changes), ch.rows)
	}
	return rows.Changes, nil
}

// backfillStreamed is ingest's hook for a streamed transaction journaled
// from its spill at its commit: its changes were not inspected.
func (s *session) backfillStreamed(xid uint32) {
	b := s.in.o.Backfills
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.chunks) > 0 || b.nwatch > 0 {
		b.uninspected(xid, true)
	}
}

// uninspected marks a committed transaction whose changes were not
// inspected: every open window is dirty (its chunk is read again), and
// when its xid is known every watch keeps it as keyUnknown, so a chunk
// whose read could not see it is read again too. b.mu is held.
func (b *Backfills) uninspected(xid uint32, known bool) {
	for _, c := range b.chunks {
		if c.lowSeen && !c.dirty {
			c.dirty, c.reason = true, "a large (spilled or streamed) transaction committed inside the chunk's window"
		}
	}
	if !known {
		return
	}
	for _, l := range b.watches {
		for _, w := range l {
			w.byXid[xid] = append(w.byXid[xid], keyUnknown)
		}
	}
}

// track records the key(s) change c of transaction xid touches in every
// watch and open window of its table. b.mu is held.
func (b *Backfills) track(xid uint32, c *pgq.Change) {
	if c.Op == pgq.OpTruncate {
		for _, t := range c.Tables {
			for _, w := range b.watches[t] {
				w.byXid[xid] = append(w.byXid[xid], keyAll)
			}
			for _, ch := range b.byTable[t] {
				if ch.lowSeen {
					ch.dropAll = true
				}
			}
		}
		return
	}
	if c.Op != pgq.OpInsert && c.Op != pgq.OpUpdate && c.Op != pgq.OpDelete {
		return
	}
	qt := c.Schema + "." + c.Table
	for _, w := range b.watches[qt] {
		var keys [2]string
		n := 0
		ok := true
		if c.New != nil {
			k, kok := rowKey(c.Columns, c.New, w.keyCols, false)
			keys[n], n, ok = k, n+1, ok && kok
		}
		if c.Old != nil {
			k, kok := rowKey(c.Columns, c.Old, w.keyCols, c.OldKind == pgq.OldKey)
			keys[n], n, ok = k, n+1, ok && kok
		}
		if !ok || n == 0 {
			w.byXid[xid] = append(w.byXid[xid], keyUnknown)
		} else {
			w.byXid[xid] = append(w.byXid[xid], keys[:n]...)
		}
		for _, ch := range b.byTable[qt] {
			if ch.w != w || !ch.lowSeen {
				continue
			}
			if !ok || n == 0 {
				ch.dirty, ch.reason = true, "a change inside the chunk's window lacks the key columns"
				continue
			}
			for _, k := range keys[:n] {
				ch.changed[k] = struct{}{}
			}
		}
	}
}

// finish decides what becomes of the chunk in tx's place at its high
// watermark wm (journal then makes it), and forgets the watch's
// transactions wm's snapshot shows visible. When keys changed in the
// window it decodes the rows to find theirs, and kept is the rows left
// after the drops (all of them when none was dropped: journal then still
// journals the record as it is, and takes kept only when the record is
// too large, without decoding it again); nil when it decoded nothing.
func (ch *Chunk) finish(tx *pgq.Transaction, wm *Watermark, resend bool) (res ChunkResult, kept []pgq.Change) {
	w := ch.w
	// Keys of transactions the read could not see, though they committed
	// before the high watermark (before the low one, or inside the window,
	// where ch.changed has them too).
	unknown := false
	for xid, keys := range w.byXid {
		if wm.visible(xid) {
			delete(w.byXid, xid) // visible to every later read too
			continue
		}
		for _, k := range keys {
			switch k {
			case keyAll:
				ch.dropAll = true
			case keyUnknown:
				unknown = true
			default:
				ch.changed[k] = struct{}{}
			}
		}
	}
	switch {
	case resend:
		return ChunkResult{Redo: true, Reason: "the high watermark was re-sent after a reconnect"}, nil
	case ch.dirty:
		return ChunkResult{Redo: true, Reason: ch.reason}, nil
	case unknown:
		return ChunkResult{Redo: true, Reason: "a transaction the chunk's read could not see yet changed rows that could not be inspected"}, nil
	case !ch.hasRows:
		return ChunkResult{Redo: true, Reason: "the chunk's rows were not handed over before its high watermark"}, nil
	case len(tx.Changes) > 0:
		return ChunkResult{Redo: true, Reason: "the high watermark's transaction has other changes"}, nil
	}
	res = ChunkResult{Rows: ch.rows}
	if ch.dropAll {
		return ChunkResult{Dropped: ch.rows}, nil
	}
	if len(ch.changed) > 0 { // most windows see no change of the table
		rows, err := ch.decode()
		if err != nil {
			return ChunkResult{Redo: true, Reason: err.Error()}, nil
		}
		// The decoded rows alias the record, and their slice is ingest's
		// own: the survivors move down in place.
		kept = rows[:0]
		for _, c := range rows {
			if k, ok := rowKey(c.Columns, c.New, w.keyCols, false); ok {
				if _, hit := ch.changed[k]; hit {
					res.Dropped++
					continue
				}
			}
			kept = append(kept, c)
		}
		res.Rows -= res.Dropped
	}
	if res.Rows > 0 { // else nothing to journal, nothing to wait for
		res.EndLSN = tx.EndLSN
	}
	return res, kept
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
