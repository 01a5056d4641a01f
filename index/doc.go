// Package index is pgq's Pebble store beside the journal. It answers "which
// journal offset holds commit LSN X / commit time T", "how many bytes lie
// between two offsets" (byte lag), and it keeps the consumer groups' state.
//
// # Derived versus durable
//
// Everything except group state is derived from the journal and can be
// rebuilt from it at any time with CatchUp: derived writes (Add,
// TruncateFront, Reset) are committed without fsync. A crash may lose the
// newest of them, but never leaves the derived keys inconsistent, because
// each call is one atomic Pebble batch that also carries "m/last", and
// Pebble's WAL replays a prefix of the batches. CatchUp at start-up adds
// whatever was lost and rebuilds an index that is ahead of the journal or
// disagrees with it.
//
// Group state (PutGroup, UpdateGroup, DeleteGroup) is the index's own
// data: it is written with pebble.Sync and survives crashes. Reset and
// CatchUp never touch it. A group's entries (UpdateGroup, GroupEntries)
// are keyed records beside its value, written in the same fsynced batch
// as the value and deleted with the group.
//
// # Stale and failed; healing
//
// Package server calls Add after every durable journal batch. When an Add
// fails (a storage error, ErrGap after a lost batch, an invalid entry) the
// index does not quietly answer from what it has: it marks itself stale.
// While stale, Add is refused at once with ErrStale (the records are in
// the journal), and every lookup whose answer could lie in the records not
// indexed yet fails with an error wrapping ErrStale: SeekLSN and SeekTime
// when they find nothing up to LastOffset, EntryAt for an offset past
// LastOffset, BytesBetween to an offset past it. Answers inside the
// indexed range stay correct and are returned. A failed TruncateFront,
// Reset or CatchUp marks the index stale too.
//
// Heal (or CatchUp) clears the mark: it runs the catch-up from the journal
// that start-up runs, under the writer lock. RunHealer is the background
// loop package server runs next to the journal's committer: woken by the
// failure, it heals at once and retries with backoff while that fails, so
// the committer's after-append hook only ever calls Add and never waits
// for a heal. Stats (stale, failed, counters, last error) and Err report
// the state; going stale is logged at WARN (ERROR for a storage failure),
// healing at INFO.
//
// A storage failure is worse than a missing batch: after a failed WAL
// write or fsync Pebble's WAL keeps the error, and Pebble reports a failed
// commit, or a failed MANIFEST write, only through Logger.Fatalf, whose
// default exits the process. The index's logger never exits or panics:
// its Fatalf, and the FS wrapper on any failed write-side file operation
// (create, write, preallocate, fsync), mark the index failed (ErrFailed,
// wrapping the first cause) and stale. Every write checks the mark before
// it enters Pebble and after it commits (Pebble's commit returns nil after
// Fatalf), so a failed call returns an error and never silently succeeds
// (an unsynced derived write may return nil and be lost, which its
// contract allows), and after a failure no write reaches the broken
// Pebble, group writes included (ErrFailed) — group reads still answer.
// Heal then closes Pebble and opens it afresh, replaying its WAL: group
// state whose PutGroup returned nil is there, the derived entries are
// caught up from the journal.
//
// # File system seam and fsync latency
//
// Every file operation of the index, Pebble's included, goes through
// Options.FS (vfs.Default when nil), wrapped by the index to time fsyncs:
// Options.OnSync receives every fsync's latency (hook a histogram on it)
// and one slower than Options.SlowSync (DefaultSlowSync, 1 s) is logged at
// WARN. Tests inject faults with vfs/errorfs and crashes with
// vfs.NewCrashableMem. Options.FS is wrapped in vfsutil.OwnerOnly: the
// index's directory is 0700 and every file Pebble creates in it 0600,
// whatever the umask (it holds the consumer groups' state and entries).
//
// # On-disk format
//
// All fixed-width integers are big-endian so that byte order is numeric
// order.
//
//	"b" + u64 block start              → block value (below)
//	"l" + u64 maxLSN + u64 block start → empty (full blocks only)
//	"t" + u64 maxµs^1<<63 + u64 block start → empty (full blocks only)
//	"s" + u64 set id                   → subject set value (below)
//	"g" + group name                   → the group's opaque value
//	"h" + group name + 0x00 + key      → one of the group's entries (UpdateGroup)
//	"m/last"                           → u64 highest offset stored
//	"m/floor"                          → u64 TruncateFront floor
//
// Entries are kept in blocks of 128 consecutive offsets: block s holds
// offsets s .. s+127 with s = 128k+1 (the first block after a Reset may
// start later inside its range). A block value is version byte 4, then
// uvarints: first offset, entry count, the running byte count before the
// first entry, the first entry's running maxLSN, its running maxµs
// (zigzag varint); then per entry CommitLSN minus the previous one, EndLSN
// minus CommitLSN, CommitTime (Unix µs) minus the previous one (zigzag
// varints, the first entry's against 0), Bytes, Changes, and the record's
// subject set id shifted left by two with its End in the low two bits
// (uvarints; End 1 when the record ends its transaction, 2 when a later
// part follows, 0 unknown; 3 is corrupt). About 11 bytes per journal
// record instead of a 73-byte value and three keys per record (the first
// format: an "o" family, which Open drops; the entries are rebuilt from
// the journal).
//
// Older blocks are still read, so a data dir of an older pgq opens as it
// is: version 3 blocks, written before the end flag, have the set id
// alone (every entry's End unknown: a filtered fetch reads such a
// record's header to learn it, as before); version 2 blocks, written
// before the subject sets, have no set ids either (every entry with set 0:
// its records count as unknown, below, until retention drops them). A pgq
// older than the version it finds refuses the block as corrupt: going
// back, delete the index directory (it is rebuilt from the journal).
//
// # Subject sets: what a filtered group would receive
//
// A consumer group's filter (tables and ops; package consumers) keeps or
// drops each change by its subject (Subject: the op and the table, a
// truncate's tables, a DDL's object; a message and a gap have none). A
// record's subjects are the distinct subjects of its changes, sorted, and
// the set is what the index keeps per record: as a small id into a
// dictionary of sets, "s" + u64 id → version byte 1, then uvarint count
// and per subject the op byte and uvarint-length-prefixed schema and
// table. Ids are dense from 1 and never reused; the dictionary is written
// in the Add batch that first uses a set (before or with any block that
// refers to it, so Pebble's prefix replay keeps it consistent), read
// whole at Open, and kept across Reset and TruncateFront: it only grows,
// with new table-and-op combinations, like the journal's relation
// catalog. Set 0 is unknown: a record of a version 2 block, one whose
// subjects were not readable, one with more than 64 distinct subjects, or
// one that would need a set past 65536. A Selector (NewSelector) counts the
// records of a range whose set passes a predicate (evaluated once per
// set; unknown always passes, an over-count, never an under-count) by
// scanning the entries, and remembers its last answer so that a count
// moving forward reads only the offsets it did not read before: a group's
// lag then costs what its cursor and the journal moved. Its Verdicts
// tell, per record of a range, whether it fails the predicate, whether it
// ends its transaction and its size, so a filtered fetch passes over the
// records it does not want without reading them. Subjects come from
// the record's changes (EntryOf) or, for a record journaled from its
// encoded form, from those bytes without decoding values (EntryOfStored,
// resolving the compact form's relation ids in the journal's catalog),
// or, for a backfill chunk, from its producer's word that it holds reads
// of one table (EntryOfReads: walking ten thousand rows per chunk cost a
// tenth of pgq's CPU time in a backfill); the end from the transaction's
// Final (EntryOf, EntryOfReads) or the encoded header (EntryOfStored).
//
// Only full blocks are written while the index runs: the block being
// filled (the tail) lives in memory and is written, as a partial block
// without "l"/"t" keys, by Close; Open makes it the tail again. A crash
// loses the tail like any unsynced derived write: "m/last" names the end
// of the last stored block and CatchUp re-adds the rest from the journal.
//
// cum, the running byte count, is the sum of Bytes over every offset
// indexed up to and including this one since the index was last empty, so
// BytesBetween(a, b) is two point lookups: cum(b) - cum(a) + Bytes(a).
// A point lookup is one Get of the block and a scan of at most 128
// entries, without allocation.
//
// maxLSN and maxµs are the running maxima of CommitLSN and CommitTime over
// the same span; a full block's last running maxima (not the raw values)
// key its "l" and "t" keys. A running maximum never decreases with the
// offset, and the first offset whose running maximum reaches x is exactly
// the first offset whose own value reaches x. So one SeekGE names the
// first block that reaches x, a scan of it the offset (the tail is
// searched when no stored block reaches x): "the first offset, in offset
// order, whose CommitLSN (CommitTime) is >= x" even when values repeat
// (all parts of a multi-part transaction share one commit LSN; the first
// part is found) or go backwards (commit times from different servers'
// clocks): a later offset with an earlier time is never returned ahead of
// an earlier offset that already reached x. Because the keys are monotone
// in the block start, TruncateFront removes a prefix of each family with
// one range deletion; entries of the block holding the cut stay stored
// and are hidden by the floor. After TruncateFront the running values
// still include the removed entries, so SeekTime(t) returns the first
// retained offset when a removed one already reached t.
//
// Times are kept at microsecond precision (PostgreSQL's); SeekTime rounds
// a finer t up to the next microsecond.
//
// # Concurrency
//
// An *Index is safe for concurrent use. Pebble itself is safe for
// concurrent reads and writes; reads (SeekLSN, SeekTime, EntryAt,
// BytesBetween, LastOffset, group reads, Selector.Count) take no lock of this package
// beyond the read side of a RWMutex that only Close takes for writing, so
// no call can reach a closed Pebble. The writers of derived entries (Add,
// TruncateFront, Reset, CatchUp) are serialized by one mutex, because each
// reads the current tail (last offset, running values) before writing its
// batch; CatchUp holds it for its whole run, and an Add that waited skips
// offsets CatchUp already indexed. Group writes need no lock of ours.
// Readers start from the view (floor, end of the stored blocks, the tail,
// LastOffset): an immutable value the writers replace with one atomic
// store after their batch commits, so an offset LastOffset reports is
// always readable and a reader never sees half a write. A writer may
// append to the tail's array past the published length; no reader looks
// there. The stale mark is set by Add and
// cleared by CatchUp under the writer mutex, so an Add refused while
// stale is always covered by the CatchUp that clears the mark (it reads
// the journal's end after the refused batch was journaled). A Heal that
// reopens Pebble takes the RWMutex for writing: no call runs during the
// reopen. The health state (stale, failed, counters) is atomics plus a
// leaf mutex, so Pebble's goroutines may report a failure at any time.
//
// The subject-set dictionary is extended by the writers (under the writer
// mutex) and read under a leaf RWMutex of its own; a Selector serializes
// its own counts (and its memo) with a mutex and reads like any reader.
//
// Pebble locks its directory: a second Open of the same directory, from
// this process or another, fails with an error wrapping ErrLocked.
package index
