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
// Group state (PutGroup, DeleteGroup) is the index's own data: it is
// written with pebble.Sync and survives crashes. Reset and CatchUp never
// touch it.
//
// # On-disk format
//
// All integers are big-endian so that byte order is numeric order.
//
//	"o" + u64 offset              → entry value (below)
//	"l" + u64 maxLSN + u64 offset → empty
//	"t" + u64 maxµs^1<<63 + u64 offset → empty
//	"g" + group name              → the group's opaque value
//	"m/last"                      → u64 highest indexed offset
//
// An entry value is 73 bytes: version byte 1, then nine u64: CommitLSN,
// EndLSN, CommitTime as Unix µs (two's complement), Bytes, Changes, the
// running byte count cum, maxLSN, maxµs, and a reserved zero.
//
// cum is the sum of Bytes over every offset indexed up to and including
// this one since the index was last empty, so BytesBetween(a, b) is two
// point lookups: cum(b) - cum(a) + Bytes(a).
//
// maxLSN and maxµs are the running maxima of CommitLSN and CommitTime over
// the same span, and they (not the raw values) key the "l" and "t"
// families. A running maximum never decreases with the offset, and the
// first offset whose running maximum reaches x is exactly the first offset
// whose own value reaches x. So one SeekGE answers "the first offset, in
// offset order, whose CommitLSN (CommitTime) is >= x" even when values
// repeat (all parts of a multi-part transaction share one commit LSN; the
// first part is found) or go backwards (commit times from different
// servers' clocks): a later offset with an earlier time is never returned
// ahead of an earlier offset that already reached x. Because the keys are
// monotone in the offset, TruncateFront removes a prefix of each family
// with one range deletion. After TruncateFront the running values still
// include the removed entries, so SeekTime(t) returns the first retained
// offset when a removed one already reached t.
//
// Times are kept at microsecond precision (PostgreSQL's); SeekTime rounds
// a finer t up to the next microsecond.
//
// # Concurrency
//
// An *Index is safe for concurrent use. Pebble itself is safe for
// concurrent reads and writes; reads (SeekLSN, SeekTime, EntryAt,
// BytesBetween, LastOffset, group reads) take no lock of this package
// beyond the read side of a RWMutex that only Close takes for writing, so
// no call can reach a closed Pebble. The writers of derived entries (Add,
// TruncateFront, Reset, CatchUp) are serialized by one mutex, because each
// reads the current tail (last offset, running values) before writing its
// batch; CatchUp holds it for its whole run, and an Add that waited skips
// offsets CatchUp already indexed. Group writes need no lock of ours.
// LastOffset is an atomic load, updated after the batch commits, so an
// offset it reports is always readable.
//
// Pebble locks its directory: a second Open of the same directory, from
// this process or another, fails with an error wrapping ErrLocked.
package index
