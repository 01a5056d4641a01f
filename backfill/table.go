package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/record"
)

// ErrNoKey is returned for a table without a primary key or a usable
// unique index (valid, not partial, no expressions, NOT NULL columns).
var ErrNoKey = api.Errorf(api.ErrBadRequest, "table has no primary key or usable unique index")

// table is what a chunk reader needs to know about a table.
type table struct {
	schema, name string
	columns      []pgq.Column
	types        []string // format_type of each column, for casts
	keyCols      []string
	keyIdx       []int // indexes of keyCols in columns
	estimate     int64
	// rowFilter is the publication's row filter of the table (SQL, from
	// pg_publication_tables; "": none), and'ed to every chunk's read.
	rowFilter string
	// narrowed: the publication's column list leaves columns out; a
	// chunk then reads from a subquery of the published columns, so that
	// the request's where cannot name the others either.
	narrowed bool
}

func (t *table) qualified() string { return qualifiedName(t.schema, t.name) }

// baseTypeOf is the value type of column a's type (a domain's base
// type, text[] for an array of an enum or extension type, else 0): read
// changes carry it like streamed ones (see pgq.Column.BaseTypeOID), and
// the type modifier as pgoutput sends it (atttypmod + 1 is
// pgq.Column.TypmodPlus1).
var baseTypeOf = ingest.ValueTypeOf("a.atttypid")

// typeNameOf is the name of column a's type when it is an extension's
// (pgq.Column.TypeName: "hstore", "hstore[]"), as ingest journals it
// for streamed changes, so that a read renders as a streamed row.
var typeNameOf = ingest.TypeNameOf("a.atttypid")

// describe loads the columns of the table named qualified (parseTable)
// as pgoutput sends them (not dropped, not generated, in attnum order),
// its key and its row estimate. A table of a system schema is refused
// (ErrSystemTable), before any query when the name gives its schema.
func describe(ctx context.Context, conn *pgx.Conn, qualified string) (*table, error) {
	return describeTable(ctx, conn, qualified, true)
}

// describeTable is describe; without needKey a table without a key is
// described with none (keyCols empty) instead of refused.
func describeTable(ctx context.Context, conn *pgx.Conn, qualified string, needKey bool) (*table, error) {
	ref, err := parseTable(qualified)
	if err != nil {
		return nil, err
	}
	if ref.dotted == "" {
		// Refused before the catalog is asked anything.
		if err := checkSystem(ref.schema, ref.name); err != nil {
			return nil, err
		}
	}
	schema, name, err := resolve(ctx, conn, ref)
	if err != nil {
		return nil, err
	}
	if err := checkSystem(schema, name); err != nil {
		return nil, err
	}
	t := &table{schema: schema, name: name}
	var oid uint32
	var est float64
	err = conn.QueryRow(ctx, `SELECT c.oid, c.reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')`, schema, name).Scan(&oid, &est)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, api.Errorf(api.ErrNotFound, "table %s does not exist", t.qualified())
	}
	if err != nil {
		return nil, fmt.Errorf("backfill: describe %s: %w", t.qualified(), err)
	}
	t.estimate = max(int64(est), 0) // -1: never analyzed
	rows, err := conn.Query(ctx, `SELECT attname, atttypid, format_type(atttypid, atttypmod), `+baseTypeOf+`, atttypmod + 1, `+typeNameOf+` FROM pg_attribute a
		WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum`, oid)
	if err != nil {
		return nil, fmt.Errorf("backfill: columns of %s: %w", t.qualified(), err)
	}
	for rows.Next() {
		var c pgq.Column
		var typ string
		if err := rows.Scan(&c.Name, &c.TypeOID, &typ, &c.BaseTypeOID, &c.TypmodPlus1, &c.TypeName); err != nil {
			return nil, fmt.Errorf("backfill: columns of %s: %w", t.qualified(), err)
		}
		t.columns = append(t.columns, c)
		t.types = append(t.types, typ)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("backfill: columns of %s: %w", t.qualified(), err)
	}
	// The primary key, else the narrowest usable unique index.
	err = conn.QueryRow(ctx, `SELECT array(SELECT a.attname FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
			JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum WHERE k.ord <= i.indnkeyatts ORDER BY k.ord)
		FROM pg_index i WHERE i.indrelid = $1 AND (i.indisprimary OR (i.indisunique AND i.indisvalid AND i.indpred IS NULL
			AND i.indexprs IS NULL AND NOT EXISTS (SELECT 1 FROM unnest(i.indkey::int2[]) k(attnum)
				LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
				WHERE k.attnum = 0 OR a.attnotnull IS NOT TRUE)))
		ORDER BY i.indisprimary DESC, i.indnkeyatts, i.indexrelid LIMIT 1`, oid).Scan(&t.keyCols)
	if errors.Is(err, pgx.ErrNoRows) && !needKey {
		return t, nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s (give it a primary key, or a unique index on NOT NULL columns)", ErrNoKey, t.qualified())
	}
	if err != nil {
		return nil, fmt.Errorf("backfill: key of %s: %w", t.qualified(), err)
	}
	for _, k := range t.keyCols {
		for i := range t.columns {
			if t.columns[i].Name == k {
				t.columns[i].Key = true
				t.keyIdx = append(t.keyIdx, i)
			}
		}
	}
	if len(t.keyIdx) != len(t.keyCols) {
		return nil, fmt.Errorf("%w: %s: key columns %v are not all plain columns", ErrNoKey, t.qualified(), t.keyCols)
	}
	return t, nil
}

// chunkSQL is the keyset query of one chunk: rows after the last key
// (none: from the start), in key order. After a key and with a where
// predicate, each row also has a last column, true when the row's key
// comes after it: step checks it (see ErrNoProgress), PostgreSQL
// computing it by its own types and collations; the select list comes
// before the predicate, so nothing pasted in the predicate changes it.
// Without a where the predicate is pgq's own key comparison, which
// PostgreSQL applies to every row, so the column is left out: computing
// and sending it cost the server 6-16 % of a chunk's CPU time
// (BenchmarkChunkRead, select-checked against select-text).
//
// Within a range (rb), the chunk's rows are also those whose first key
// column is above rb.after and at most rb.upTo; their parameters follow
// the key's.
func (t *table) chunkSQL(where string, after bool, limit int, rb bounds) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	t.writeColumns(&b)
	var conds []string
	if after {
		var l, r []string
		for n, i := range t.keyIdx {
			l = append(l, pgx.Identifier{t.columns[i].Name}.Sanitize())
			r = append(r, fmt.Sprintf("$%d::text::%s", n+1, t.types[i]))
		}
		past := "(" + strings.Join(l, ", ") + ") > (" + strings.Join(r, ", ") + ")"
		if checked(where) {
			b.WriteString(", " + past)
		}
		conds = append(conds, past)
	}
	n := 0
	if after {
		n = len(t.keyIdx)
	}
	k0 := pgx.Identifier{t.columns[t.keyIdx[0]].Name}.Sanitize()
	if rb.after != nil {
		n++
		conds = append(conds, fmt.Sprintf("%s > $%d::text::%s", k0, n, t.types[t.keyIdx[0]]))
	}
	if rb.upTo != nil {
		n++
		conds = append(conds, fmt.Sprintf("%s <= $%d::text::%s", k0, n, t.types[t.keyIdx[0]]))
	}
	b.WriteString(" FROM ")
	b.WriteString(t.source())
	if where != "" {
		// The newline ends a -- comment the predicate ends with.
		conds = append(conds, "("+where+"\n)")
	}
	if len(conds) > 0 {
		b.WriteString(" WHERE ")
		b.WriteString(strings.Join(conds, " AND "))
	}
	b.WriteString(" ORDER BY ")
	for n, i := range t.keyIdx {
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{t.columns[i].Name}.Sanitize())
	}
	fmt.Fprintf(&b, " LIMIT %d", limit)
	return b.String()
}

// checked reports whether a chunk read with predicate where checks that
// each row comes after the last key (see chunkSQL): only a where pasted
// into the query can make a row that does not.
func checked(where string) bool { return where != "" }

// writeColumns writes t's columns, quoted, as a select list.
func (t *table) writeColumns(b *strings.Builder) {
	for i, c := range t.columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{c.Name}.Sanitize())
	}
}

// source is what a chunk reads from: the table, or, when its publication
// narrows it (a column list, a row filter), a subquery of its published
// columns and rows named like the table (a where's t.col still works),
// whose columns are the only ones the where can name.
func (t *table) source() string {
	tbl := pgx.Identifier{t.schema, t.name}.Sanitize()
	if !t.narrowed && t.rowFilter == "" {
		return tbl
	}
	var b strings.Builder
	b.WriteString("(SELECT ")
	t.writeColumns(&b)
	b.WriteString(" FROM " + tbl)
	if t.rowFilter != "" {
		// PostgreSQL's own deparsed expression (pg_get_expr), which may
		// name columns the column list leaves out.
		b.WriteString(" WHERE (" + t.rowFilter + ")")
	}
	b.WriteString(") AS " + pgx.Identifier{t.name}.Sanitize())
	return b.String()
}

// checkWhere makes sure the predicate cannot change the chunk query's
// structure (checkWhereSyntax), then lets PostgreSQL parse it against the
// table.
func checkWhere(ctx context.Context, conn *pgx.Conn, t *table, where string) error {
	if where == "" {
		return nil
	}
	if err := checkWhereSyntax(where, standardStrings(conn)); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, "EXPLAIN "+t.chunkSQL(where, false, 1, bounds{}))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return api.Errorf(api.ErrBadRequest, "--where %q on %s: %s", where, t.qualified(), pgErr.Message)
	}
	if err != nil {
		return fmt.Errorf("backfill: check --where on %s: %w", t.qualified(), err)
	}
	return nil
}

// standardStrings reports the session's standard_conforming_strings,
// which decides what a backslash in a quoted literal does (PostgreSQL reports
// it to the client, and again when it changes).
func standardStrings(conn *pgx.Conn) bool {
	return conn.PgConn().ParameterStatus("standard_conforming_strings") != "off"
}

// step is one round trip of runTable, sent as one pipeline: when high or
// low is set, one transaction emits them (high first) with
// pg_logical_emit_message; when low is set, a REPEATABLE READ transaction
// then reads the chunk after lastKey: its first statement records the
// snapshot (xmin, xmax, in-progress transactions: for the chunk's high
// watermark), the second reads up to limit rows in key order, as
// PostgreSQL's text forms (what pgoutput sends), and returns them as
// their record of read changes of t for backfill backfill, encoded as
// they arrive (readChunk; see ingest.Chunk.SetRecord), in buf's storage,
// with their count and the last row's key. The low
// watermark commits before the read's snapshot is taken, as the window
// requires.
//
// The watermark transaction commits with synchronous_commit local
// whatever the server's setting: the walsender only sends flushed WAL, and
// with asynchronous commit every watermark would wait for the WAL writer
// (wal_writer_delay, 200 ms by default); local, not on, so that a
// synchronous standby that is down does not stall the backfill (the
// watermarks need no standby). An error leaves the connection in an
// unknown state: the caller closes it.
func step(ctx context.Context, conn *pgx.Conn, t *table, where string, high, low *ingest.Watermark, lastKey []string, rb bounds, limit int,
	backfill string, buf *chunkBuf) (read chunkRead, snap snapshot, err error) {
	p := conn.PgConn().StartPipeline(ctx)
	defer p.Close()
	var wms [][]byte
	for _, wm := range []*ingest.Watermark{high, low} {
		if wm != nil {
			b, _ := json.Marshal(wm)
			wms = append(wms, b)
		}
	}
	prefix := []byte(ingest.WatermarkPrefix)
	var stmts int
	send := func(sql string, args ...[]byte) {
		p.SendQueryParams(sql, args, nil, nil, nil)
		stmts++
	}
	if len(wms) > 0 {
		send("BEGIN")
		send("SET LOCAL synchronous_commit = local")
		for _, b := range wms {
			send("SELECT pg_logical_emit_message(true, $1, $2::text)", prefix, b)
		}
		send("COMMIT")
	}
	at := -1 // the chunk's SELECT among the statements
	if low != nil {
		send("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
		// The first statement takes the snapshot the SELECT then uses.
		send("SELECT pg_current_snapshot()::text")
		args := make([][]byte, len(lastKey), len(lastKey)+2)
		for i, k := range lastKey {
			args[i] = []byte(k)
		}
		for _, b := range []*string{rb.after, rb.upTo} {
			if b != nil {
				args = append(args, []byte(*b))
			}
		}
		at = stmts
		send(t.chunkSQL(where, lastKey != nil, limit, rb), args...)
		send("COMMIT")
	}
	if err := p.Sync(); err != nil {
		return chunkRead{}, snapshot{}, fmt.Errorf("backfill: chunk of %s: send: %w", t.qualified(), err)
	}
	what := func(i int) string {
		switch {
		case at < 0 || i < at-2:
			return "emit watermarks"
		case i == at-1:
			return "snapshot"
		case i == at:
			return "read chunk"
		}
		return "chunk transaction"
	}
	for i := 0; i < stmts; i++ {
		r, err := p.GetResults()
		if err != nil {
			return chunkRead{}, snapshot{}, fmt.Errorf("backfill: %s of %s: %w", what(i), t.qualified(), err)
		}
		rr, ok := r.(*pgconn.ResultReader)
		if !ok {
			return chunkRead{}, snapshot{}, fmt.Errorf("backfill: %s of %s: unexpected %T", what(i), t.qualified(), r)
		}
		switch i {
		case at - 1:
			for rr.NextRow() {
				snap, err = parseSnapshot(rr.Values()[0])
			}
		case at:
			var after []string // the key each row is checked to come after
			if checked(where) {
				after = lastKey
			}
			read, err = readChunk(rr, t, after, backfill, buf)
		}
		if _, cerr := rr.Close(); cerr != nil || err != nil {
			return chunkRead{}, snapshot{}, fmt.Errorf("backfill: %s of %s: %w", what(i), t.qualified(), errors.Join(cerr, err))
		}
	}
	r, err := p.GetResults()
	if err != nil {
		return chunkRead{}, snapshot{}, fmt.Errorf("backfill: chunk of %s: %w", t.qualified(), err)
	}
	if _, ok := r.(*pgconn.PipelineSync); !ok {
		return chunkRead{}, snapshot{}, fmt.Errorf("backfill: chunk of %s: unexpected %T at the end of the pipeline", t.qualified(), r)
	}
	if err := p.Close(); err != nil {
		return chunkRead{}, snapshot{}, fmt.Errorf("backfill: chunk of %s: %w", t.qualified(), err)
	}
	return read, snap, nil
}

// chunkRead is what readChunk made of a chunk's rows.
type chunkRead struct {
	rows int
	// encoded is their record of read changes (record.ReadsEncoder: the
	// form ingest.Chunk.SetRecord takes), in the chunk's storage; nil
	// without rows.
	encoded []byte
	// lastKey is the last row's key (text forms), where the next chunk
	// starts; nil without rows or without a key (an initial load's
	// keyless table).
	lastKey []string
}

// readChunk encodes the rows of a chunk's read into their record of read
// changes (see step), each row as it arrives, while the server is still
// sending the next ones: straight from pgconn's buffer into the record,
// with no pgq.Change per row and no copy of the values besides the
// record's own (ingest decodes the record into changes only when it
// needs them: see ingest.Chunk.SetRecord). After a key (lastKey, given
// only when the query checks it: chunkSQL), it checks each row's last
// column and leaves it out of the record: a row that does not come
// after lastKey is an ErrNoProgress (the rest is read and dropped).
func readChunk(rr *pgconn.ResultReader, t *table, lastKey []string, backfill string, buf *chunkBuf) (chunkRead, error) {
	enc := record.NewReadsEncoder(buf.encoded[:0], t.schema, t.name, t.columns)
	n := len(t.columns)
	if cap(buf.row) < n {
		buf.row = make([]pgq.Value, n)
	}
	row := buf.row[:n]
	// The current row's key values, one after the other, ends where each
	// stops: rr.Values() is only valid until the next row, and the last
	// row is only known once there is none.
	key, ends := buf.key[:0], make([]int, len(t.keyIdx))
	var err error
	for rr.NextRow() {
		vals := rr.Values()
		if err == nil && len(vals) < n {
			err = fmt.Errorf("backfill: a row of %s has %d values for %d columns", t.qualified(), len(vals), n)
		}
		if lastKey != nil && err == nil && (len(vals) != n+1 || string(vals[n]) != "t") {
			err = fmt.Errorf("%w: a row of %s read after key %v does not come after it", ErrNoProgress, t.qualified(), lastKey)
		}
		if err != nil {
			continue
		}
		// The values point into pgconn's buffer only while Add encodes
		// them; PostgreSQL sends a NULL as no value at all.
		for i, v := range vals[:n] {
			if v == nil {
				row[i] = pgq.Value{Kind: pgq.ValueNull}
			} else {
				row[i] = pgq.Value{Kind: pgq.ValueText, Data: v}
			}
		}
		enc.Add(row)
		key = key[:0]
		for k, i := range t.keyIdx {
			key = append(key, vals[i]...)
			ends[k] = len(key)
		}
	}
	clear(row) // nothing may point into pgconn's buffer after the read
	buf.key = key
	var c chunkRead
	if c.rows = enc.Len(); c.rows > 0 {
		c.encoded = enc.Finish(backfill)
		buf.encoded = enc.Storage()
		if len(ends) > 0 {
			c.lastKey = make([]string, len(ends))
			start := 0
			for k, end := range ends {
				c.lastKey[k], start = string(key[start:end]), end
			}
		}
	}
	return c, err
}

// chunkBuf is the storage of one chunk's record, recycled from chunk to
// chunk (see runTable): a backfill's heap stays the size of the chunks in
// flight instead of taking a new 2 to 5 MB per chunk, each first touched
// page a fault (a fresh pgq's first backfill ran 15 garbage collections
// while its heap grew to 100 MB; 3 with recycled storage). The rows
// themselves are kept nowhere else: readChunk encodes them as they
// arrive.
type chunkBuf struct {
	encoded []byte      // the record (record.ReadsEncoder's storage)
	row     []pgq.Value // one row's values while it is encoded
	key     []byte      // the current row's key values
}

// snapshot is a read's pg_snapshot, full transaction ids.
type snapshot struct {
	xmin, xmax uint64
	xip        []uint64
}

// parseSnapshot parses pg_snapshot's text form, "xmin:xmax:xip,xip,...".
func parseSnapshot(b []byte) (snapshot, error) {
	var s snapshot
	f := strings.Split(string(b), ":")
	if len(f) != 3 {
		return s, fmt.Errorf("snapshot %q: want xmin:xmax:xip", b)
	}
	var err error
	if s.xmin, err = strconv.ParseUint(f[0], 10, 64); err != nil {
		return s, fmt.Errorf("snapshot %q: %w", b, err)
	}
	if s.xmax, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return s, fmt.Errorf("snapshot %q: %w", b, err)
	}
	if f[2] == "" {
		return s, nil
	}
	for _, x := range strings.Split(f[2], ",") {
		v, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return s, fmt.Errorf("snapshot %q: %w", b, err)
		}
		s.xip = append(s.xip, v)
	}
	return s, nil
}

// settle waits until every transaction ingest may have seen commit
// before the table's watch began is visible to new snapshots, so that the
// watch (which tracks only later commits) covers every committed
// transaction a chunk's read can still miss. A transaction writes and
// flushes its commit record, marks itself committed in the commit log,
// and only then leaves the proc array, waiting for a synchronous standby
// in between if there is one: in that gap it is committed in the WAL, and
// in the journal, yet invisible to a new snapshot. Such a transaction has
// an xid below the one settle assigns now (b), so once b committed, every
// snapshot lists it in xip until it is visible. PostgreSQL does not tell
// such a transaction from a running one (pg_xact_status looks at the proc
// array first), so settle waits while a transaction below b is in xip and
// either waits for a synchronous standby (wait event SyncRep in
// pg_stat_activity, which needs the pg_read_all_stats role to see other
// users' sessions) or was first seen there, or last seen waiting for a
// standby, less than settleGrace ago (a committing backend descheduled in
// that gap; or one its standby, or a cancel, just released: it stops
// waiting before it leaves the proc array, and on a busy machine that
// takes more than one poll; short transactions leave xip at once, so
// this costs a few milliseconds). Transactions below b that
// are still in xip after that are running ones: their commits come after
// the watch began. The wait is short, unless a synchronous standby is
// down; then it waits for it (or for the transactions to be cancelled)
// and says so in the log.
func (m *Manager) settle(ctx context.Context, conn *pgx.Conn, j *job, t *table) error {
	var b string
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = local"); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "SELECT pg_current_xact_id()::text").Scan(&b)
	})
	if err != nil {
		return fmt.Errorf("backfill: %s: assign a transaction id: %w", t.qualified(), err)
	}
	start, warned := time.Now(), false
	seen := map[uint64]time.Time{} // first seen in xip, or last seen waiting for a standby
	for {
		rows, err := conn.Query(ctx, `SELECT x::text::bigint, bool_or(coalesce(a.wait_event = 'SyncRep', false))
			FROM pg_snapshot_xip(pg_current_snapshot()) x
			LEFT JOIN pg_stat_activity a ON a.backend_xid::text = (x::text::bigint % 4294967296)::text
			WHERE x < $1::xid8 GROUP BY x`, b)
		if err != nil {
			return fmt.Errorf("backfill: %s: wait for committed transactions: %w", t.qualified(), err)
		}
		now := time.Now()
		waiting, syncRep := 0, 0
		var x uint64
		var sr bool
		_, err = pgx.ForEachRow(rows, []any{&x, &sr}, func() error {
			if _, ok := seen[x]; !ok || sr {
				seen[x] = now
			}
			if sr {
				syncRep++
			}
			if sr || now.Sub(seen[x]) < settleGrace {
				waiting++
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("backfill: %s: wait for committed transactions: %w", t.qualified(), err)
		}
		if waiting == 0 {
			m.o.Logger.Debug("backfill settled", "table", t.qualified(), "took", time.Since(start))
			return nil
		}
		if !warned && syncRep > 0 && now.Sub(start) > 5*time.Second {
			m.o.Logger.Warn("backfill waits for transactions waiting for a synchronous standby",
				"id", j.st.ID, "table", t.qualified(), "transactions", syncRep)
			warned = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// settleGrace is how long settle waits for each older transaction in a
// snapshot's xip that waits for nothing it can see.
const settleGrace = 100 * time.Millisecond
