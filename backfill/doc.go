// Package backfill reads the rows already in tables into the journal while
// streaming goes on, with the watermark algorithm of Netflix's DBLog (as
// in Debezium's incremental snapshots): no table lock, no long snapshot
// transaction, no pause of the stream.
//
// # Algorithm
//
// A backfill reads each table in chunks of its key (the primary key, or
// else the narrowest unique index on NOT NULL columns), by keyset
// pagination on its own connection: rows after the last chunk's last key,
// in key order, LIMIT chunk size, optionally AND the --where predicate.
// Before a table's first chunk the runner starts an ingest.Watch of the
// table and waits until every transaction committed before it is visible
// to new snapshots (settle, below). For each chunk the runner
//
//  1. registers the chunk with ingest (ingest.Watch.Open),
//  2. emits a low watermark, pg_logical_emit_message(true, 'pgq.wm',
//     {"id","kind":"low"}), in its own transaction,
//  3. reads the chunk in a REPEATABLE READ transaction whose first
//     statement records the snapshot (pg_current_snapshot: xmin, xmax,
//     in-progress transactions),
//  4. hands the rows (PostgreSQL's text forms, as pgoutput sends them) to
//     ingest as their record of read changes, encoded straight from the
//     connection's buffer as the rows arrive, with no change per row and
//     no other copy of their values (ingest.Chunk.SetRecord;
//     record.ReadsEncoder), and emits the high watermark
//     {"kind":"high", "xmin","xmax","xip":[...]} in its own transaction.
//
// A chunk is read by a SELECT in text result format: each value is its
// type's output function's text, the bytes pgoutput sends for the same
// row, so a backfilled row journals exactly what a streamed one does
// (TestBackfillValuesEqualStreamed in package ingest compares a corpus of
// every type, byte for byte). COPY (SELECT …) TO STDOUT of a chunk is no
// cheaper: the server runs the same output functions and spent as much
// CPU time on it (BenchmarkChunkRead, two runs: 0.99–1.07× the SELECT's),
// it cannot join the chunk's pipeline (one more round trip per chunk),
// and it takes no parameters (the last key would be pasted as a
// literal). Binary transfer saved 13–30 % of the server's CPU time on
// the benchmark's table, mostly in timestamptz and numeric output, but
// the journal holds text forms: pgq would have to render timestamptz in
// the session's time zone and DateStyle with PostgreSQL's zone rules to
// keep the bytes equal, which it does not attempt; numeric alone in
// binary saved nothing measurable (BenchmarkChunkRead). Without a where
// predicate the chunk's SELECT sends the table's columns only (with
// one, each row also says whether it comes after the last key: see
// ErrNoProgress); that column cost the server up to a sixth of a chunk's
// CPU time. Neither chunks bounded by key intervals instead of ORDER BY
// … LIMIT (the same index scan), nor a prepared statement, nor 50,000-row
// chunks cost the server measurably less (benchmarks/README.md).
//
// Chunks are pipelined, in one round trip each: one pipeline (pgconn)
// sends the transaction that emits chunk N's high watermark and chunk
// N+1's low watermark, then N+1's read transaction. Round trips follow
// one another on the range's connection while a completer goroutine
// takes the chunks whose high watermark went out, in order: it waits
// for ingest's result (ingest takes N at its high watermark: decodes up
// to it, journals and fsyncs the record), then for the record to be
// durable, and stores N's progress (a synced write). So the server reads
// N+1, N+2, … while N is journaled and its progress stored, up to a
// depth of chunks in memory per range: 4 for one or two ranges, 2 for
// four or more (at most 8 chunks per table beyond the least of 2 per
// range; rangeDepth), and more than 2 only while the storage of a
// range's chunks in memory stays within its share of 96 MiB per table
// (wide rows or a large chunk size read two deep, as before). Each chunk keeps its own window, from its low to
// its high watermark, and the read of N+1 still starts after its low
// watermark committed; the high watermark of N and the low watermark of
// N+1 sharing a transaction only makes N+1's window start where N's
// ends. When N must be read again, the chunk read after it whose high
// watermark was not emitted is abandoned (ingest ignores a chunk without
// one), the completer stores no progress for those after N whose high
// watermark went out (they may still be journaled: each chunk is exact
// alone, and consumers see those rows again, as after a restart), and
// reading restarts at N's first key.
//
// Ingest's goroutine sees the watermarks in commit order, in the slot
// itself. Between the low and the high watermark it collects the keys of
// the table changed by committed transactions (old and new keys of
// updates; a truncate drops the whole chunk). At the high watermark it
// drops every chunk row whose key changed in that window, and journals
// the rest as one record of read changes (op "read", rendered like an
// insert, record field "backfill": id) in the high watermark
// transaction's place: right after everything committed before it and
// before everything after it. When no row was dropped (most windows see
// no change of the table), that record is the one encoded as the rows
// arrived, stamped with the high watermark transaction's header in place
// (record.RestampInPlace), so the committer only compacts and writes it,
// and no one decodes it; otherwise (keys of the table changed in the
// window, or a record larger than ingest.Options.MaxRecordBytes) ingest
// decodes it into read changes, and the committer encodes the surviving
// rows (in parts when too large). A row that did not
// change between the watermarks had the same value at the high watermark
// as in the chunk's snapshot, so a consumer applying the journal in order
// (insert, update and read as upsert by key, delete, truncate as clear)
// converges on the table.
//
// A transaction can commit before the low watermark and still be invisible
// to the chunk's read: PostgreSQL writes and flushes its commit record
// (which the slot then carries), marks it committed, and only then removes
// it from the proc array; a synchronous standby keeps it in between for as
// long as it does not answer, and with several transactions committing at
// once the low watermark's can leave first. The read then has the row's
// older value while the journal has its change before the low watermark.
// So the table's Watch keeps the keys of every committed transaction by
// xid, and at each high watermark the chunk also drops the keys of every
// kept transaction its snapshot could not see (in xip, or at or above
// xmax); transactions the snapshot sees are forgotten, as every later
// snapshot sees them too. A transaction whose changes ingest could not
// inspect (a large one, streamed or spilled) makes such a chunk read
// again instead. The watch only sees commits after it began; settle
// covers the ones before: it assigns itself an xid b, and waits while a
// snapshot's xip holds an xid below b that waits for a synchronous
// standby (pg_stat_activity, wait event SyncRep; other users' sessions
// are visible to it with the pg_read_all_stats role), or for at most
// 100 ms for one that waits for nothing visible (a committing backend
// descheduled in that gap), counted from when it was last seen waiting
// for a standby (a released one stops waiting before it leaves the proc
// array). What is still below b after that is running,
// and commits after the watch began. A synchronous standby that is down
// holds a new table's backfill until it answers or the waiting
// transactions are cancelled (logged after 5 s). Watermarks themselves
// commit with synchronous_commit local: they need no standby. Watermark
// messages are never journaled. A watermark carries, beside its chunk id,
// the chunk's key (ingest.Chunk.Key: HMAC-SHA256 of the id under a secret
// this store creates on first open and hands ingest.Backfills.SetSecret at
// every Open), and ingest takes a message with the watermark prefix for a
// watermark only with it: any role can emit messages with the prefix,
// none can make the key. Others (another role's, another pgq's over the
// same database) are journaled as message changes with a WARN. The secret
// lives with the data dir, not the process, because watermarks emitted
// since the slot's last confirmation are sent again after a restart and
// must still be known as pgq's own.
//
// A chunk is read again (ChunkResult.Redo, counted in "redone") when a
// transaction in its window could not be inspected cheaply (a large
// transaction streamed or spilled to disk), when a change lacks the key
// columns, when the high watermark is a re-send after a reconnect, or
// when ingest does not reach the high watermark in time. A chunk read
// again Options.MaxRedos times in a row (8 by default; large transactions
// committing in every one of its windows, or ingest stuck behind one)
// fails the backfill with ErrRedoLimit and an error that says so, rather
// than retrying forever.
//
// # Parallel key ranges
//
// A table is read in Status.Parallelism key ranges of its first key
// column at once (splitRanges: equal spans of an integer column between
// its min and max, else pg_stats histogram bounds; one range without
// statistics), each by its own runner goroutine on its own connection
// with its own ingest.Watch. A watch forgets a kept transaction once a
// chunk's snapshot sees it, which holds only for the later chunks of the
// same runner (their snapshots are newer); chunks of other ranges may
// have older ones, so each range needs its own. Every watch begins
// before the table's settle, which thus covers all of them. A range's
// chunks add "first key column > after AND <= up_to" to the keyset query;
// each chunk is exact alone, so the ranges' chunks may reach the journal
// in any order. The ranges are made when the table starts and stored
// with the backfill (range_list), each with its last key, rows and
// whether it is done; a backfill stored before ranges (last_key_list
// only) resumes as one range.
//
// # What a backfill reads
//
// A backfill reads only what the slot itself would carry: tables of
// Options.Publication (pgq's publication), as pg_publication_tables lists
// them (FOR ALL TABLES, FOR TABLES IN SCHEMA and partitions resolved as
// the walsender does), checked at Start and again each time a table
// starts or resumes reading, so that a table taken out of the publication
// fails the backfill. On PostgreSQL 15 and later the publication's column
// list narrows the columns read (one leaving out a key column is refused)
// and its row filter the rows; a chunk then reads from a subquery of the
// published columns and rows, so a where predicate cannot name the
// others. Tables of system schemas (pg_catalog, information_schema,
// pg_toast, any other pg_*) are refused whatever the publication says.
// Refusals are api.ErrBadRequest errors wrapping ErrNotPublished or
// ErrSystemTable, naming the table (and the publication). A where
// predicate is otherwise still SQL run with the connection's role: a
// subquery in it can read other tables that role can read.
//
// # Pacing
//
// Unthrottled, a backfill reads as fast as PostgreSQL serves its chunks,
// and on a small machine that takes CPU and disk from the stream (the
// benchmark's slot lag p99 under a steady stream grew by 40-70 % on 2
// cores). Status.MaxRate (request max_rate; changed on a running backfill
// by Manager.Throttle, PATCH /v1/backfills/{id}) caps the rows read per
// second with a token bucket (golang.org/x/time/rate) whose burst is one
// chunk: before each read the runner takes a chunk's worth of tokens, so
// the database, pgq and the disk are idle between chunks. When the tokens
// are not there yet while a chunk read earlier still waits for its high
// watermark, that watermark goes out alone in a round trip of its own
// first, so a chunk's window and its stay in memory do not grow with the
// wait. The cap is stored with the backfill and kept on resume; 0 (the
// default) means none.
//
// # Durability and resume
//
// Progress lives in a Pebble store (DataDir/backfill): key "b/<id>" holds
// the backfill's JSON (Status plus the last key as a list of text forms),
// key "seq" the last id number. The store holds the watermark secret,
// where clauses and row key values: every file operation goes through
// Options.FS wrapped in vfsutil.OwnerOnly, so its directory is 0700 and
// its files 0600, whatever the umask. A chunk's progress is stored (synced)
// only after its record is durable in the journal, so after a SIGKILL or
// a PostgreSQL restart the backfill resumes after the last completed
// chunk; a chunk journaled but not yet recorded as complete is read and
// journaled again. Consumers see that whole chunk twice, which is
// harmless under upsert semantics. Watermark ids carry a per-process
// nonce, so a re-sent watermark of an earlier process never matches a
// chunk of this one.
//
// # A failing disk
//
// The store is fail-stop like the index (see index/doc.go, "Stale and
// failed", and package internal/pebblefs): a failed write-side file
// operation of Pebble (through Options.FS, wrapped by pebblefs.WatchFS) or
// Pebble's Logger.Fatalf (its only report of a failed commit, whose
// default exits the process) marks the store failed; pgq never exits for
// it. From then on every write fails with ErrStoreFailed (an
// api.ErrUnavailable: the API answers 503) without entering Pebble: Start
// and Cancel return it (a cancel still stops the runner), runners pause
// and retry with backoff. The next write first heals the store: it closes
// the failed Pebble, probes the disk with a small synced file and, when
// that works, opens Pebble again (replaying its WAL) and stores every
// backfill's status again, so nothing refused meanwhile is lost.
//
// # Initial load under an exported snapshot
//
// LoadSnapshot is the reader of ingest's initial load (pgq run
// --initial-load; ingest's package documentation, "Initial load", says
// how the load is journaled and why it needs no watermark). It works as
// pg_dump -j: Parallelism connections (DefaultParallelism when zero)
// each begin a REPEATABLE READ READ ONLY transaction and import the
// slot's exported snapshot before anything is read, then take tasks from
// one queue. A task is a table, or on PostgreSQL 14+ one of Parallelism
// ranges of its pages (ctid ranges, TID range scans, as PeerDB reads;
// the last range open-ended): a large table is read in parallel with or
// without a key. A table is read as a backfill reads it (the
// publication's columns and row filter, PostgreSQL's text forms,
// readChunk), through a cursor, one FETCH per chunk, sized to about
// 2 MiB after the first one; a keyless table's read changes mark no key
// column. Each chunk's record is handed to ingest, which copies it
// before the reader reads the next one into the same storage. The first
// error stops every reader and the load. (A FETCH sent one ahead in a
// pipeline, so that the server would produce the next chunk while
// ingest takes this one, showed no gain beyond the shared machine's
// noise in two A/B series, benchmarks/README.md, and was removed.)
//
// # Concurrency
//
// Each running backfill has one goroutine, and per key range of the
// current table one goroutine and one database connection (used by a
// second, short-lived goroutine during each round trip, while the first
// waits for the previous chunk and stores its progress); tables of a
// backfill are read one after the other, their ranges at once, each
// range's chunks up to its depth at a time (above), with one more
// goroutine per range, the completer. Ranges share the backfill's pace
// (a rate.Limiter, safe for concurrent use) and store their progress
// through the Manager's mutex. The Manager's mutex
// guards the statuses; ingest.Backfills has its own mutex, taken by
// ingest's goroutine at each commit while chunks are open. Memory is
// bounded by the chunk size times the parallelism times the depth (the
// chunks in flight per range, at most 8 per table beyond 2 per range,
// each as its encoded record; a chunk whose keys changed in its window,
// or too large for one record, also as the read changes ingest decodes
// from it while it journals them; and the keys changed in their
// windows), plus the keys of the transactions a watch keeps until the
// next chunk's snapshot sees them. A chunk's storage serves a
// later chunk once nothing refers to it (ingest never took the chunk,
// journaled none of it, or its record is durable), so a running backfill
// allocates it about twice, not once per chunk: 5 MB of fresh heap per
// chunk cost page faults on first touch and frequent garbage collection.
package backfill
