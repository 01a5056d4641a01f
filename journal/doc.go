// Package journal stores committed transactions as an append-only, durable
// sequence of records: the local backlog between a PostgreSQL replication
// slot and pgq's consumers. Ingest appends (through a Committer for group
// commit) and confirms a slot LSN only once the records up to it are
// fsynced; consumers read records by offset at their own pace.
//
// # On-disk format
//
// A journal directory holds a LOCK file and tidwall/wal (v1.2.1, binary
// format) segment files. A segment file is named by the offset of its first
// record, as 20 zero-padded decimal digits, and holds entries
//
//	uvarint(len(payload)) | payload
//
// back to back. A segment is closed once it reaches Options.SegmentSize
// (the last entry may overshoot it) and a new one is started; the directory
// is fsynced when that happens. Offsets are tidwall/wal indexes: dense,
// starting at 1, never reused (retention removes whole prefixes) except
// those of unfinished parts cut at Open (see Multi-part transactions).
//
// The payload is a record framed by pgq.AppendRecord:
//
//	version (1 byte, currently 1) | CRC32C/Castagnoli of body (4 bytes LE) | body
//
// The body is one msgpack array: xid, commit LSN, end LSN, commit time
// (Unix microseconds), origin, part, final, a relation table (schema,
// table and the flat name/type OID/key list of each relation used in the
// record) and the changes, each referring to its relation by index. A record
// therefore decodes on its own. pgq.RecordVersion documents the full layout.
// The offset is not stored in the payload; it is the entry's position.
//
// # Repair
//
// tidwall/wal refuses to open a log whose last entry is torn, and it has no
// checksums (zeros appended by a crash read back as empty entries). Before
// opening the log, Open walks the last segment file (the tail) and truncates
// it after the last entry that is complete and whose payload passes the
// version and CRC32C check; everything from the first bad entry onward is
// cut and the cut is logged at warning level (file, records kept, first cut
// offset, bytes cut). Only the tail is repaired: earlier segments were
// fsynced before the tail was created, so damage there is real corruption,
// reported as ErrCorrupt by Read and by Verify, which never repairs. After
// opening, Open decodes the last record, cuts an unfinished multi-part
// transaction off the tail (see below), and the EndLSN of the last record
// left is LastEndLSN.
//
// Nothing past the last fsync was ever reported durable, so cutting an
// unsynced tail never loses a transaction whose LSN was confirmed to
// PostgreSQL: the server re-sends it.
//
// # Multi-part transactions
//
// A transaction too large for one record (ingest's record size limit) is
// stored as consecutive records, its parts: each carries the transaction's
// xid, commit LSN, end LSN and commit time, Part 0..n-1, and Final is true
// on the last only. The writer submits all parts of a transaction back to
// back, so no other record sits between two of them; a Committer batch may
// end between two parts. LastEndLSN counts final records only, and ingest
// reports a transaction durable (and confirms it to PostgreSQL) only once
// its final part is fsynced. A crash between parts leaves non-final parts
// at the tail: Open cuts them off (tidwall/wal TruncateBack to just before
// part 0, logged at warning level), and the unconfirmed transaction, which
// PostgreSQL sends again, is journaled again completely. The offsets of the
// cut parts are reused. TruncateFront never starts the journal inside a
// multi-part transaction: a cut at a later part moves back to its part 0.
//
// # Concurrency
//
// A directory has one Journal at a time: Open takes an exclusive flock on
// Dir/LOCK and a second Open, from this or another process, fails with
// ErrLocked. Within a Journal:
//
//   - There is a single writer. Append, TruncateFront, Segments and Close
//     are serialized by appendMu, which also guards the encode buffer, the
//     wal.Batch and the tail-size tracking. In production the writer is the
//     Committer's Run goroutine.
//   - Reads (Read, ReadRaw, Reader.Next) are serialized by readMu, because
//     concurrent tidwall/wal reads race on its segment cache
//     (tidwall/wal#34). A read never waits for an fsync; wal's own RWMutex
//     orders it against the in-memory part of a write.
//   - mu guards the published state: first and last offsets, LastEndLSN,
//     the closed flag and the Changed channel. It is held only briefly and
//     never across I/O.
//
// Changed returns a channel closed by the next Append: readers take it,
// check LastOffset, and wait on it, so they never poll and never miss a
// wake-up.
//
// The Committer turns many producers into few fsyncs: Submit queues, one Run
// goroutine appends everything queued as one batch, publishes Durable and
// closes the DurableChanged channel. It uses no timers: an idle committer
// writes a single transaction immediately, and under load the queue fills
// while the previous fsync runs. MaxPendingBytes bounds the memory held by
// queued and in-flight transactions.
package journal
