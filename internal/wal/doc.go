// Package wal is a fork of github.com/tidwall/wal v1.2.1 (MIT licence, see
// LICENSE in this directory): a segmented append-only log whose entries are
// numbered by dense indexes. pgq's journal stores its records in it.
//
// The on-disk format is byte-identical to tidwall/wal's binary format: a
// directory of segment files named by the index of their first entry (20
// zero-padded decimal digits), each holding entries
//
//	uvarint(len(data)) | data
//
// back to back, plus the transient NAME.START and NAME.END files of an
// interrupted TruncateFront or TruncateBack, which Open finishes. A log
// written by either library opens with the other.
//
// What changed from tidwall/wal v1.2.1:
//
//   - Every file operation goes through a github.com/cockroachdb/pebble/v2/vfs
//     FS (Options.FS; nil means vfs.Default), so tests can inject faults
//     (vfs/errorfs) and simulate crashes (vfs.NewCrashableMem).
//   - The directory is fsynced whenever the set of segment files changes:
//     after a segment is created by a cycle (before the write that follows
//     it returns), after the first segment of a new log is created, after
//     Open finishes an interrupted truncation, and after TruncateFront and
//     TruncateBack. tidwall/wal never fsyncs a directory. NoSync skips these
//     too.
//   - Fail-stop: the first failed write, fsync or segment cycle marks the log
//     failed; every later Write, WriteBatch, TruncateFront, TruncateBack and
//     Sync returns an error wrapping ErrFailed and the cause, and Close
//     releases the files without another fsync (an fsync is never retried:
//     after a failed fsync the kernel may have dropped the dirty pages and a
//     second fsync would report success). Reads of entries written before
//     the failure keep working. tidwall/wal kept accepting writes after a
//     short write, appending after the torn bytes, so those entries were
//     acknowledged and later lost. A truncation that fails after its
//     START/END file is in place fails the log the same way (upstream marks
//     it corrupt, which refuses reads too); the in-memory state changes only
//     once the files are done, so reads stay right.
//   - Options.OnSync reports the latency of every fsync (segment data and
//     directory).
//   - Options.OnSeal receives a segment's path, file length and CRC32C
//     (Castagnoli) of its file's bytes when a cycle seals it (after its
//     fsync, before the next segment file is created): pgq's journal
//     writes the segment's checksum file there. The log keeps the CRC
//     running as it writes the tail (a tail read from its file starts
//     from the CRC of what was read), since big entries are not in
//     memory to sum at the seal.
//   - Concurrent Read calls no longer race on the segment cache
//     (tidwall/wal#34): loading a sealed segment into the cache is
//     serialized by a mutex of its own.
//   - The fsync that ends Write and WriteBatch holds only a writers' lock
//     (wmu), not the lock readers share: a Read never waits for an fsync
//     in flight (upstream holds its RWMutex across the write and the
//     fsync, so a reader of old entries waited for the next write's disk
//     flush). Entries are readable once written, before their fsync ends:
//     callers that must expose only durable entries publish their own
//     bound after the call returns, as pgq's journal does.
//   - The tail segment's bytes (but its big entries, below) are kept in
//     memory in blocks of 1 MiB (tail.go) rather than one buffer grown by
//     append: an entry is
//     copied once, into the last block and the ones it takes next, and
//     nothing written is copied again as the segment grows (append grows
//     a large slice by 1.25×, which copied a 16 MiB tail about 20 times,
//     a fifth of pgq's CPU with megabyte entries; the doubling buffer
//     that replaced it still copied and faulted in up to a segment and a
//     quarter per segment, a tenth of pgq's CPU during a backfill). A
//     fresh log takes one block for its first entry, not a segment's
//     worth, and a write goes to the file a block at a time. The blocks
//     of a segment the cache evicts serve the next tail segment.
//   - An entry of 256 KiB or more (bigEntry, tail.go) is written to the
//     segment file straight from the batch's bytes (after the smaller
//     entries before it, so the file is the same) and is not kept in
//     the tail's memory: it skips the copy into the blocks, whose page
//     faults of fresh memory were the cost of a backfill's megabyte
//     records. A read of such an entry reads the file (a ReadAt into
//     the slice it returns, as other reads copy out of memory); a
//     sealed segment keeps them out of the cache the same way, and a
//     truncation that keeps them reads them back from the file. The
//     reads of a segment's big entries share one read-only handle
//     (segment.rf, tail.go), opened through Options.FS by the first of
//     them and kept while the segment keeps its big entries: closed
//     when the cache evicts the segment (it is then read whole from its
//     file, as before), by TruncateFront and TruncateBack (before their
//     files change), and by Close; so at most the tail and the cached
//     segments hold one, SegmentCacheSize+1 files beside the tail's
//     (an open and a close per read cost a fifth of the CPU of reading
//     300 KiB entries). Concurrency: Log.hmu guards the handles'
//     opening and closing; a ReadAt runs outside it (a pread, safe
//     beside others), and a handle is closed only where no read of its
//     segment can run: with mu held exclusively, or, for a segment the
//     cache evicts, with cmu, which every read of a sealed segment
//     holds (tail reads, which share mu, never touch a sealed segment). Entries read from a file (the
//     tail at Open or after a truncation, a segment loaded by a read)
//     are kept whole in memory, as before.
//     Memory: the tail holds the small entries written to it, rounded
//     up to a block, and what Open or a truncation read; the cached
//     segments each up to their size (less their big entries when
//     sealed from the tail), as before.
//   - Options.DropSealed advises the kernel, after a cycle's fsync of
//     the segment it seals, to drop the segment's pages from the page
//     cache (vfsutil.DropCache; pgq's journal sets it: see its package
//     documentation, "Page cache").
//   - Removed: the JSON log format (and the gjson dependency), NoCopy,
//     FilePerms, ClearCache and the ":memory:" path check. Paths are used
//     as given, not made absolute.
//   - Every file operation goes through Options.FS wrapped in
//     vfsutil.OwnerOnly: the log directory (and missing parents) is 0700
//     and every segment and NAME.START/NAME.END file 0600, whatever the
//     umask (upstream: DirPerms 0750 and FilePerms 0640, subject to the
//     umask); DirPerms defaults to 0700.
package wal
