// Package journal stores committed transactions as an append-only, durable
// sequence of records: the local backlog between a PostgreSQL replication
// slot and pgq's consumers. Ingest appends (through a Committer for group
// commit) and confirms a slot LSN only once the records up to it are
// fsynced; consumers read records by offset at their own pace.
//
// # On-disk format
//
// A journal directory holds a LOCK file and segment files in tidwall/wal's
// binary format (v1.2.1), written by internal/wal, a fork of tidwall/wal
// that keeps the format byte for byte. A segment file is named by the offset of its first
// record, as 20 zero-padded decimal digits, and holds entries
//
//	uvarint(len(payload)) | payload
//
// back to back. The tail segment's entries are kept in memory too, for
// readers of recent records, but those of 256 KiB or more (a backfill
// chunk, a big transaction's part), which internal/wal writes to the file
// straight from the batch's buffer and reads back from it (through one
// read-only handle per segment, kept while the segment is the tail or
// cached, closed by retention and Close). A segment is closed once it reaches Options.SegmentSize
// (the last entry may overshoot it) and a new one is started: the old
// segment is fsynced, the new file created and the directory fsynced, all
// inside the write that rolled, before Append returns. Offsets are tidwall/wal indexes: dense,
// starting at 1, never reused (retention removes whole prefixes) except
// those of unfinished parts cut at Open (see Multi-part transactions).
//
// The payload is a record in its stored form, record.VersionCompact: the
// self-contained record (record.Version) with its end LSN stored as a
// distance from the commit LSN and its relation table replaced by the ids
// of its relations in the relation catalog, so that a relation's schema,
// table and column list is stored once per journal instead of once per
// record. Append encodes a transaction straight into that form
// (record.AppendCompact) at the end of the batch's buffer: one encoding
// pass, one checksum, no copy. Both layouts are described once, in package record's
// documentation (# Format). Journals written before hold Version 1
// records (record.Append's frame, relation table included); both
// versions are read, and one journal may hold both. The offset is not
// stored in the payload; it is the entry's position.
//
// A compact record does not decode alone: every reader of the journal
// (Read, ReadRaw, Reader, Scan, Verify) expands it (record.Expand) to the
// Version 1 record it came from, byte for byte, which does. So the fetch
// path, the Go client, dump and the bridge see self-contained Version 1
// records as before; only the bytes on disk depend on the catalog.
//
// # Sealed segments
//
// When a segment is sealed (the roll above, internal/wal's OnSeal hook),
// its checksum file NAME.sum (SumSuffix) is written beside it, through
// Options.FS, to NAME.sum.tmp, fsynced and renamed, before the next
// segment file is created (the directory fsync of the roll covers it):
//
//	"PGQS" | version (1 byte, 1) | file length (8 bytes LE) |
//	CRC32C of the file (4 bytes LE) | CRC32C of the preceding 17 bytes (4 bytes LE)
//
// The length and CRC32C are the ones internal/wal kept while it wrote the
// segment: nothing is read or summed again at the seal.
//
// RunScrub (a goroutine of pgq run's, --scrub-rate) reads every sealed
// segment at a bounded rate, pass after pass: it checks each entry's
// record (version and CRC32C), the record count against the next
// segment's first offset, and the file's CRC32C and length against its
// checksum file. A segment without a valid checksum file (a journal from
// before them, a crash between the seal and the rename, the first segment
// rewritten by TruncateFront, a damaged .sum) gets one when all its
// records verify; checksum files of removed segments are removed. Open
// reads none of this: start-up stays O(1) in the journal's size. The
// first corruption found, by the scrub or by a read (Read, ReadRaw,
// Reader), is kept (Corruption) and logged; ScrubStatus reports progress.
// The scrub never changes a segment file.
//
// # Relation catalog
//
// Dir/relations (CatalogFile) holds the catalog: entries
//
//	uvarint(len(relation)) | CRC32C of relation (4 bytes LE) | relation
//
// back to back, where relation is one element of a Version 1 relation
// table ([schema, table, flat columns]); an entry's id is its 1-based
// position. Append interns the relations of a batch and, when the batch
// introduced new ones, writes and fsyncs them before the batch's records:
// a durable record never refers to a relation that is not durable. A torn
// last entry (a crash during that write) is ignored at Open and
// overwritten by the next one. Retention never shortens the catalog; it
// grows only with new relation shapes (a new table or a schema change).
//
// # Durable point
//
// Dir/DURABLE (DurableFile) records the last fsynced record, so that Open
// can tell a torn write from corruption without PostgreSQL. It is 1024
// bytes: two 512-byte slots, each
//
//	"pgqD" | version (1 byte, 1) | 3 reserved bytes | seq (8 bytes LE) |
//	last offset (8 LE) | tail segment's first offset (8 LE) |
//	bytes of entries in that segment (8 LE) | CRC32C of the 40 bytes before (4 LE)
//
// and zeros after. The valid slot with the higher seq is the durable
// point; each update writes the other slot (WriteAt) and fdatasyncs the
// file, so a torn update leaves the previous point. An update happens
// after a batch's fsync returned and before the batch is reported
// durable: Append returns after it, and the Committer runs it on its
// publishing goroutine before the OnAppend hook (which lets ingest
// confirm), so its fsync overlaps the next batch's write and fsync; the
// batches that became durable while one update ran are covered together
// by the next (one marker fsync for several batches under load), and
// while the Committer's appending goroutine is writing the next batch (or
// has one queued) an update waits for up to 4 batches, at most 25 ms past
// the oldest one's fsync, so that a stream of small batches pays about one
// marker fsync per 4 data fsyncs rather than one per batch. It waits only
// while at most 256 KiB (estimated) are queued or being written: behind
// big records (a backfill's chunks, a large transaction's parts) the next
// fsync is megabytes away, and the update is written at once, so that
// what is already durable is confirmed without waiting for them.
// Readers woken by Changed may see a batch before its mark. A failed
// update fails the journal like a failed fsync. The marker therefore
// never names a record that was not fsynced, and every record ingest
// confirmed is at or before it.
//
// # Repair
//
// tidwall/wal refuses to open a log whose last entry is torn, and it has no
// checksums (zeros appended by a crash read back as empty entries). Before
// opening the log, Open reads the durable point and walks the last segment
// file (the tail) to its first entry that is incomplete or fails the
// version and CRC32C check, and decides by position:
//
//   - past the durable point (the end of the last write, which a crash may
//     leave half written, with zeroed or stale pages even before entries
//     that reached the disk intact): the tail is cut after the last good
//     entry, and the cut is logged at warning level (file, records kept,
//     first cut offset, bytes cut, durable offset). The cut is a rewrite:
//     the kept prefix goes to a temporary file (NAME.REPAIR), which is
//     fsynced and renamed over the tail, and the directory is fsynced, so
//     a crash during the repair leaves the old tail or the new one (a
//     leftover .REPAIR file is removed at the next Open that proceeds);
//   - at or before the durable point (or a tail that ends before it):
//     corruption. Open returns a *TailCorruptError (errors.Is ErrCorrupt)
//     whose one line names the segment file, the offset, the byte,
//     `pgq journal verify` and `pgq journal repair --truncate-at OFFSET`,
//     and changes nothing on disk: no cut, no rename, no new file.
//
// Without a usable marker (a journal written by a pgq before it, a
// marker of an unknown version, or both slots torn) no durable point is
// known, and Open cuts only when no complete entry passing the check
// follows the bad one at any byte (what a crash of the last write leaves);
// otherwise it refuses as above. This is conservative: such a journal may
// have been confirmed up to its end.
//
// After the tail check Open decodes the last record, cuts an unfinished
// multi-part transaction off the tail (see below; the marker is lowered
// first), and the EndLSN of the last record left is LastEndLSN. Records
// kept past the durable point (an unsynced write that reached the disk
// complete) are then fsynced and the marker moved to the last record:
// from then on damage in them is corruption.
//
// Only the tail is checked: earlier segments were fsynced before the
// tail was created, so damage there is corruption, reported as
// ErrCorrupt by Read and by Verify, which never repairs.
//
// So cutting the tail never loses a transaction whose LSN was confirmed to
// PostgreSQL: only records past the durable point are cut, none of them
// was confirmed, and the server re-sends them. Cutting corruption is the
// operator's explicit act, never Open's: TruncateAt (`pgq journal repair
// --truncate-at OFFSET`) takes the lock (ErrLocked while pgq runs), lowers
// the marker, removes the later segment files and rewrites the segment
// holding OFFSET to the records before it; what it cuts is lost unless
// the slot can send it again. It refuses a cut after a bad record of the
// same segment, or of the segment before when OFFSET starts one: a
// record of 256 KiB or more ends its segment, so a damaged one is often
// the last before a segment's first record.
//
// # Page cache
//
// Once a segment is sealed and fsynced, the journal advises the kernel to
// drop its pages from the page cache (internal/wal Options.DropSealed,
// POSIX_FADV_DONTNEED; Options.KeepSealedCached keeps them). Writing a
// file fills the page cache with pages the kernel must find first, and a
// journal written at hundreds of MB/s (a backfill) would otherwise take
// fresh memory for every segment: on a virtual machine whose host takes
// back free guest memory (free page reporting), touching it again is the
// bulk of the write's cost. Measured on the 2-core development VM,
// 600 MB in 1.2 MB writes with an fdatasync every four and a new 64 MiB
// file each time one filled: 1.19–1.27 s of CPU when each file's pages
// stayed cached, 0.27 s when each was dropped as it was closed (the next
// file took the pages just freed); a backfill's journal writes were
// 43 % of pgq's CPU. Readers of the tail segment read it from memory as
// before (internal/wal keeps its small entries); a reader of a sealed
// segment reads its file from disk rather than from the cache, once (a
// sealed segment a read loads is kept in internal/wal's segment cache).
//
// # File system
//
// Every file operation of the journal (segments, repair, the durable
// point, directory listing and fsyncs, the LOCK file) goes through Options.FS, a pebble
// vfs.FS: nil means vfs.Default, the operating system's. This is the seam
// for fault injection (vfs/errorfs) and crash simulation
// (vfs.NewCrashableMem and CrashClone), which the tests use; their
// workloads mix big records (256 KiB and more, internal/wal's path
// straight to the file) among small ones, so that every fault and crash
// point is hit on both paths. Open creates
// Dir if needed and then fsyncs its parent. Scan and Verify read the
// operating system's files.
//
// The journal holds every change of the database: Options.FS is wrapped
// in vfsutil.OwnerOnly, so Dir (and the parents Open creates) is 0700 and
// every file the journal creates or writes (segments, checksum files,
// relations, DURABLE, LOCK) is 0600, whatever the umask.
//
// # Fail-stop
//
// The first write or fsync error (of an Append's write or fsync, of the
// fsyncs and file creation of a segment roll, of TruncateFront) fails the
// journal: that call and every later Append and TruncateFront return an
// error wrapping both ErrFailed and the original cause, so
// errors.Is(err, ErrFailed) and, say, errors.Is(err, syscall.ENOSPC) both
// hold, and Err reports it (nil while healthy). An fsync is never retried:
// after a failed fsync the kernel may have dropped the dirty pages and
// marked them clean, so a second fsync can succeed without the data being
// on disk (PostgreSQL's "fsyncgate"). A failed batch publishes nothing:
// LastOffset, LastEndLSN and Changed stay, its transactions get no
// Offset, and the Committer stops with the error. Reads of what was
// appended before go on. Close after a failure closes the files without
// another fsync.
//
// Recovery is Close and Open. Open treats the failed journal like one
// after a crash: the repair cuts whatever the failed write left at the
// tail (a torn entry), the records acknowledged before the failure are all
// there, and the unacknowledged tail, if it reached the disk complete, is
// kept as ordinary records: PostgreSQL re-sends those transactions and
// ingest drops what the journal already holds (end LSN at most
// LastEndLSN).
//
// Options.OnSync receives the latency of every fsync of segment data, of
// the durable-point marker and
// of the directory (a Prometheus histogram in package server), and an fsync
// slower than Options.SlowSync (1 s by default) is logged at warning
// level.
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
// A directory has one Journal at a time: Open takes the lock on Dir/LOCK
// with vfs.FS.Lock (an fcntl lock for the default FS, which also refuses a
// second lock from the same process) and a second Open, from this or
// another process, fails with ErrLocked. Within a Journal:
//
//   - There is a single writer. Append, AppendRecords, TruncateFront, Segments and Close
//     are serialized by appendMu, which also guards the encode buffers,
//     the wal.Batch and the catalog's writer state; the catalog's
//     relations are published by an atomic pointer that readers load
//     without a lock. In production the writer is the
//     Committer's Run goroutine.
//   - Reads (Read, ReadRaw, Reader.Next) are serialized by readMu. The
//     fork fixes the race of concurrent reads on the segment cache
//     (tidwall/wal#34); readMu stays as a second guard, and it orders reads
//     against TruncateFront. A read never waits for an Append's fsync in
//     flight (the fork holds only its writers' lock across it), so a
//     consumer woken by one Append reads its records while the next batch
//     is being fsynced. Reads are bounded by the published LastOffset,
//     never by what the fork has written, so a record is never read
//     before its fsync ended.
//   - The durable-point marker has its own mutex (its writes come from
//     Append or from the Committer's publishing goroutine); a mark that
//     arrives after a later one is dropped.
//   - mu guards the published state: first and last offsets, LastEndLSN,
//     the closed flag, the failure and the Changed channel. It is held only briefly and
//     never across I/O.
//   - WrittenAt and StoredBytes read rings of the last 65,536 records'
//     write times (the fsync's return) and running stored sizes
//     (written.go) with atomic loads and no lock: Append stores a batch's
//     slots before it publishes the batch, so a record that can be read
//     has them. They serve latency metrics
//     (pgq_journal_to_delivery_seconds) and a woken fetch's skip-ahead,
//     and are not kept across restarts.
//
// Changed returns a channel closed by the next Append: readers take it,
// check LastOffset, and wait on it, so they never poll and never miss a
// wake-up.
//
// What Append writes is a Record: a transaction to encode, or one already
// encoded by its producer (ingest's restamped spill chunks), written as is.
// AppendRecords sets each record's offset (Tx.Offset) and encoded size
// (Bytes); ReadSized returns the size again, so that the index (byte lag)
// never re-encodes a record to learn it. pgq.Transaction itself carries
// no transport fields.
//
// The Committer turns many producers into few fsyncs: Submit (or
// SubmitRecord) queues, one Run goroutine appends what is queued as one
// batch (up to MaxBatch records, at most one of them big, 256 KiB or more
// by the Submit size estimate: a backfill's chunk records queued together
// are fsynced one by one, so that a small transaction queued ahead of or
// between them is durable after one of them, not all; small records
// alone are never split), and a second goroutine runs the OnWritten hook of each batch as
// it takes it over (package server's index update and the filtered
// readers' wake-ups, which need the fsync but not the marker), and the
// OnAppend hook of each durable batch after its marker (ingest's slot
// bookkeeping and confirmation), then
// publishes Durable and closes the DurableChanged channel, in batch order,
// while the next batch is written: neither the hook nor the durable-point
// marker delays the next fsync. Up to 8 durable batches wait for that
// goroutine; those that waited are marked with one write and handed to
// the hook in one call (and while the next batch is being written, the
// marker waits for it, up to 4 batches or 25 ms: see "Durable point").
// Appending uses no timers: an idle committer writes a single transaction
// immediately (and marks and publishes it at once), and under load the queue fills while the previous fsync
// runs. Consumers do not wait for the hook either: Append closes Changed
// as soon as the fsync returned. MaxPendingBytes bounds the memory held by
// queued and in-flight transactions.
package journal
