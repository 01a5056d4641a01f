// Package ingest reads a PostgreSQL logical replication slot (pgoutput) and
// hands every committed transaction to the journal's group committer.
//
// # Start and preflight
//
// Before streaming, a normal connection checks the server and fails with a
// FatalError wrapping one of the sentinel errors (ErrUnreachable,
// ErrAuth, ErrWALLevel, ErrSlotMissing, ErrSlotPlugin, ErrSlotInUse, ErrPubMissing,
// ErrPrivilege, ErrConfig): pgq exits with one line instead of looping.
// --create-slot and --create-publication create what is missing; every
// identifier is quoted or passed as a parameter, and slot names are
// validated because START_REPLICATION cannot take a parameter.
//
// Every restart and reconnect waits for this, so it is kept short: the
// replication connection is opened while the checks run (their errors,
// the clearer ones, take precedence), the checks use the simple query
// protocol (one round trip each), and the warnings about published tables
// without a key are read on the check connection while replication
// starts; the session's end waits for them (at most 5 s). Start to
// streaming went from a median of 56 to 32 ms on the test cluster.
//
// # Row keys
//
// A journaled relation's Column.Key flags are the row's key (design
// invariant 13): pgoutput's flags under REPLICA IDENTITY DEFAULT and
// USING INDEX (the primary key or the identity index already), the
// primary key read from pg_index when a Relation message of a FULL or
// NOTHING table arrives (rowkey.go; none without one). PostgreSQL sends a
// Relation message again after the table's definition changed, so a new
// primary key holds from the table's next change on (with DDL capture the
// ALTER TABLE is journaled in order before it). The catalog read is the
// current one, not the one of the change's time. A failed read fails the
// session, which reconnects.
//
// # Receive loop
//
// One goroutine (Run → session.loop) owns the replication connection. It
// decodes XLogData with package pgoutput, assembles transactions between
// Begin and Commit and submits them to the journal.Committer. Empty
// transactions and transactions whose end LSN is at or below the newest
// journaled one (re-sends after a restart) produce no record but are
// reported to the feedback.Tracker so the slot still advances.
// Non-transactional logical messages become records of their own with end
// LSN = message LSN + 1.
//
// The loop is built to cost the walsender as little CPU as possible: on a
// small machine the walsender's decoding is the pipeline's slowest stage
// and competes with pgq for cores, while it is not back-pressured by the
// socket (sampled during `make bench`: the walsender runs, it does not
// wait in WalSenderWriteData). So the read deadline is set only when it
// changes, each XLogData payload is copied into a shared 64 KiB block
// instead of an allocation of its own, and the decoder runs with
// pgoutput.Decoder.Reuse (the same Row, Begin and Commit every time; the
// session copies what it keeps before the next message). A small
// transaction costs three allocations on its way to the committer (its
// Transaction, its Changes and the journal.Record);
// BenchmarkHandleSmallTx and BenchmarkHandleStreamedRows measure the
// session's share. Receiving and handling stay on one goroutine: a
// hand-off to a second one would add work per message without a free
// core to run it, and would split the ordering of data, keepalives and
// feedback that the tracker relies on. Reading the socket through a
// 256 KiB buffer (pgproto3 reads at most 8 KiB per syscall) was tried and
// measured worse (more CPU per drain), so pgproto3 reads it directly.
//
// # Large transactions: streaming, spill and parts
//
// On PostgreSQL 14+ with Options.SpillDir set (package server uses
// DataDir/spill), pgq asks for proto_version '2' with streaming 'on'
// (/v1/status reports proto_version and streaming); older servers get
// version 1. The server then sends a transaction that outgrows its
// logical_decoding_work_mem before it commits, in blocks between
// StreamStart and StreamStop; blocks of several transactions interleave.
// Every change of a block is appended to the spill of its toplevel xid;
// only a fixed write buffer (128 KiB of changes) per transaction stays in
// RAM. Inside a stream a row carries the xid of the subtransaction that
// made it: the spill keeps, per toplevel xid, the set of subxids seen and
// of subxids aborted. A StreamAbort with SubXid ≠ Xid (ROLLBACK TO
// SAVEPOINT) marks that subxid aborted: its changes are dropped from the
// write buffer and skipped when the spill is read. PostgreSQL sends one
// StreamAbort per aborted subtransaction, nested ones included, so an
// exact match suffices. A StreamAbort of the whole transaction deletes the
// spill. On StreamCommit the spill's chunks are read back in order and each
// surviving chunk becomes one journal part: record.Restamp replaces its
// header (xid, LSNs, commit time, origin, part, final) and keeps its
// relations and changes byte for byte, so nothing is decoded or re-encoded.
// The feedback.Tracker counts open streams (StreamStarted when a toplevel
// xid is first seen, StreamEnded on its commit or abort). A session's
// spills die with it: after a reconnect or restart the server streams
// in-progress transactions again from their start, and New removes
// leftover spill files. Spill files hold the rows of a transaction:
// Options.FS (which also writes the coverage file) is wrapped in
// vfsutil.OwnerOnly, so the spill directory is 0700 and its files 0600,
// whatever the umask.
//
// Transactions that are not streamed are assembled in memory (the fast
// path); one whose changes outgrow MaxRecordBytes before its Commit (a
// server without streaming, or one that could not stream it) moves to a
// spill too.
//
// A spill file, SpillDir/<toplevel xid>.spill, is a sequence of chunks
//
//	uvarint(len(record)) | record
//
// where record is a record.Append frame (version, CRC32C, msgpack
// body) of a pgq.Transaction whose Xid is the subxid that made its
// changes; every chunk holds changes of a single subxid, in stream order.
// The other header fields are unused.
//
// A transaction whose changes exceed MaxRecordBytes (estimated encoded
// size; default 8 MiB) is journaled as several records, its parts: same
// xid, commit LSN, end LSN, commit time and origin, Part 0..n-1, Final on
// the last. Parts of an in-memory transaction are cut at MaxRecordBytes;
// parts of a spilled one are its chunks (at most min(128 KiB,
// MaxRecordBytes) each, smaller where the subxid changes). The session
// goroutine submits the parts back to back (nothing else is submitted in
// between, and the committer appends in submit order), one part at a time
// as the spill is read, so memory is bounded by a part plus the
// committer's MaxPendingBytes. The committer hook reports
// a batch durable only up to its last final part, so the slot is never
// confirmed past a transaction that is not completely journaled; after a
// crash between parts, journal.Open cuts the unfinished parts and the
// server's re-send is journaled again. While a large transaction is
// journaled the loop keeps sending status updates, so the walsender does
// not time out.
//
// # Feedback
//
// Standby status updates set write, flush and apply to
// feedback.Tracker.Confirmable: never past the newest fsynced record while
// anything is pending, the server's WAL end when idle. The committer's
// OnAppend hook (another goroutine) marks batches durable and wakes the
// receive loop by setting a past read deadline on the socket — the only
// cross-goroutine touch of the connection, and one net.Conn allows — so
// confirmations go out right after each fsync, not at the next message.
// Progress is reported at most every 10 ms (each update costs the
// walsender work); updates are also sent every StatusInterval and whenever
// the server asks.
//
// A status update is written with a 30 s deadline, so a server that stops
// reading ends the session (and reconnects) instead of blocking it.
//
// # Receive coalescing
//
// The walsender flushes its socket after every message, so a receiver
// that keeps up wakes once per message: one read syscall, one netpoll park
// and one wake-up per ~150 bytes, which at full speed was most of pgq's
// CPU, taken from the walsender on a small machine. When more than 32
// messages arrive within a millisecond, the loop raises the socket's
// SO_RCVLOWAT to 64 KiB and reads once per window of
// Options.ReceiveCoalesce (default 500µs, the read deadline) or per 64 KiB,
// whichever comes first; a window with fewer than 32 messages lowers it
// again. A message therefore waits at most one window, and only while the
// server streams at full speed; a trickle is read as it comes. The windows
// are counted in pgq_receive_coalesce_windows_total.
//
// # Continuity: never a silent hole
//
// PostgreSQL resumes a slot at its confirmed_flush_lsn, whatever pgq asks
// for. If that is past what the journal holds, the transactions in between
// would be missing without a trace: a slot dropped and created again (the
// new one starts at the current WAL), or a journal that lost its tail after
// the slot was confirmed past it (a data dir restored from an older backup,
// a disk that lied about fsync).
//
// pgq therefore knows, durably, up to which LSN the journal covers the
// slot: the end LSN of its last record, or further where the coverage file
// (journal/COVERAGE, see feedback.Coverage) says so. Confirming past the
// journal's last record is legitimate (transactions that published
// nothing, idle keepalives), but before pgq confirms such an LSN it
// replaces the coverage file (write, fsync, rename, directory fsync; at
// most once a second), so nothing past the covered LSN is ever confirmed.
// The file names the journal's last record; it only counts while the
// journal still holds that record, so a journal that lost a tail past it
// falls back to its own end.
//
// On every start and reconnect, after preflight, the slot's
// confirmed_flush_lsn is compared with the covered LSN. A slot that
// resumes past it, or a slot just created over a journal that has
// records, is a gap: Run fails with ErrGap and one line naming both LSNs
// and the cause. With Options.AcceptGap (--accept-gap) ingest journals one
// record holding a single change {"op":"gap","from_lsn","to_lsn"} (xid 0,
// commit and end LSN = to_lsn), waits for its fsync, and streams on; every
// consumer sees the hole in order. A brand-new data dir (empty journal, no
// coverage file) is not a gap: the journal starts wherever the slot is, and
// the log says so. A data dir written by a pgq without coverage files
// whose slot was advanced past the journal by idle keepalives reports a
// gap once; --accept-gap records it.
//
// # Initial load
//
// With Options.InitialLoad (pgq run --initial-load) a new slot's tables
// are loaded first under the slot's own snapshot, as pg_dump does:
// preflight leaves the missing slot to the session, which creates it on
// the replication connection with CREATE_REPLICATION_SLOT … (SNAPSHOT
// 'export') (EXPORT_SNAPSHOT before PostgreSQL 15; SQL's
// pg_create_logical_replication_slot exports none). The snapshot lives
// until that connection's next command, so the connection stays idle
// while InitialLoad.Read (package backfill's LoadSnapshot) has every
// reader connection import it (SET TRANSACTION SNAPSHOT in a REPEATABLE
// READ transaction) and read; START_REPLICATION comes only after the
// whole load is fsynced. The snapshot sees exactly the transactions that
// committed before the slot's consistent point, and the slot streams
// exactly those that commit after it, so the load and the stream neither
// overlap nor leave a hole, keyless tables included: no watermark is
// needed.
//
// Order in the journal: nothing is buffered and nothing interleaves. The
// load is journaled first, as one transaction at the consistent point C
// (xid 0, commit and end LSN C, commit time the slot's creation,
// Transaction.Backfill the load's id "load-<slot>-<C>"): its parts are
// the readers' chunks of read changes in the order they hand them over
// (tables and ranges interleave; ordinals count across parts), restamped
// like a spilled transaction's chunks, the last part final. Every
// streamed transaction ends after C, so it follows the load's final
// part. The slot is confirmed at C only once the final part is durable.
// Memory stays one chunk per reader (about 2 MiB) plus one held part and
// the committer's MaxPendingBytes, whatever the tables' size.
//
// Trade-offs: the slot holds WAL (and catalog_xmin) from its creation
// until the load is journaled and streaming starts, and the stream waits
// meanwhile. A load cannot resume, since no connection can import the
// snapshot again: a load that fails or is stopped drops the slot it
// created (the next start loads from scratch), and the journal's
// unfinished parts are cut at the next Open like any unfinished
// transaction's. The state file (journal/INITIAL_LOAD: the slot, C, the
// tables, start and finish) is written before the first row is read
// and again once the final part is fsynced. A start over an existing
// slot with InitialLoad streams on when the file says the load of that
// slot finished (or the journal holds its final part), and refuses with
// one line otherwise (an interrupted load after a crash: drop the slot
// and start again; a slot this data dir never loaded: use a backfill). A
// load needs an empty journal: the new slot would start after its
// records.
//
// # DDL capture and pgq's message prefixes
//
// Any role may call pg_logical_emit_message, and a pgoutput message
// carries no role, so a prefix alone proves nothing. A message with the
// DDL prefix (pgq.ddl) becomes a ddl change only when the change right
// before it in its transaction is an insert into pgq_ddl.proof whose id
// the message's "proof" names: pgq ddl install makes the capture trigger's
// function (SECURITY DEFINER, owned by the installing superuser) insert
// that row right before emitting the message, and grants nobody else
// anything on the schema or the table; nothing can run between the two.
// The session keeps that state per transaction (ddlProof: the session's
// for an assembled transaction, the spill's for a streamed one; a
// subtransaction abort in a stream resets it) and drops every change of
// the proof table. Any other message with the prefix is journaled as a
// message change with a WARN. A message with the watermark prefix
// (pgq.wm) is a backfill watermark only with the key of its chunk id
// (Backfills: an HMAC under a secret package backfill keeps in its
// store); else it too is journaled as a message with a WARN, so a
// transaction holding only such a message is not hidden. At each start
// the check connection looks for an old capture trigger (or a proof table
// the publication does not publish) and warns once.
//
// # Reconnect and stop
//
// Transient errors reconnect with exponential backoff between ReconnectMin
// and ReconnectMax, each wait drawn from [backoff/2, backoff] so that many
// instances do not reconnect in lockstep. The backoff and ReconnectGiveUp's
// clock restart only after a session that made progress (journaled a
// transaction, covered more WAL, or streamed at least ReconnectMax and
// failed between transactions): an error that recurs inside the same
// transaction, such as a full spill directory (ErrSpill, shown in
// Ingester.Status's SpillError), backs off and gives up however far each
// session streams. Configuration errors found on reconnect (slot or publication
// dropped, privilege revoked) are fatal. A slot this process created is
// dropped when Run fails before any session streamed from it (a refused
// start); a slot that existed before never is. When ctx is cancelled, the
// session waits for the in-flight group commit, sends the final
// confirmation and Run returns nil.
//
// # Errors
//
// Errors are one line and wrap a sentinel (ErrConfig, ErrSlotMissing,
// ErrGap, …; FatalError for those that stop Run). One that an option
// mends is an *opterr.Error naming it in Go terms
// ("ingest.Options.AcceptGap"), never a flag of the pgq CLI, which
// renders the same error in its own terms.
package ingest
