// Package feedback decides which LSN pgq may confirm to PostgreSQL.
//
// The rule (design invariant 1): the flush and apply LSN sent to the server
// never pass the end LSN of the newest transaction whose journal record is
// fsynced. A Tracker learns, from the ingest loop, which transactions were
// handed to the journal (Submitted), which completed without a record
// (Skipped: empty transactions and transactions the journal already holds),
// where the server's WAL ends (ServerWALEnd, from keepalives), and, from the
// group committer, how far the journal is durable (Durable).
//
// Confirmable returns:
//   - the durable end LSN while any submitted transaction is not yet fsynced;
//   - otherwise the newest completed end LSN (so empty and unpublished
//     transactions still let the slot advance), and, when no transaction is
//     being received and no streamed transaction is open, the server's WAL
//     end from the latest keepalive (invariant 3: idle never retains WAL).
//
// The result never moves backwards.
//
// # Hold floor
//
// With SetHold (pgq run --hold-slot-for, groups with hold_slot), every
// branch above, the idle advance included, is further capped by the hold
// floor: the end LSN of the last complete transaction at or below the
// oldest committed position among the groups that hold the slot (package
// consumers computes it). The confirmable LSN is then the smaller of the
// rule above and the floor, so invariant 3 becomes "idle never retains
// WAL that no holding group still needs": PostgreSQL keeps what those
// groups have not committed, and a new pgq on an empty data dir reads it
// again from the slot. The floor never takes the result below the slot's
// own confirmed_flush_lsn (SlotAt) nor below an LSN already returned: a
// window confirmed before a group held (or while it was past
// --hold-slot-max-lag) stays confirmed. The coverage file stays about the
// journal only: it never records the floor.
//
// # Coverage file
//
// Confirming past the journal's last record (idle keepalives,
// transactions that publish nothing) is legitimate, but a restart must
// tell it from a hole. Coverage is the durable statement "every
// transaction of the slot ending at or below Covered is in the journal, at
// or below Offset"; ingest stores it (StoreCoverage) before it confirms
// such an LSN. The file, journal/COVERAGE, is 29 bytes:
//
//	version (1 byte, 1) | offset u64 | end LSN u64 | covered LSN u64 | CRC32C (4 bytes)
//
// (integers little endian), replaced atomically: write a temporary file,
// fsync it, rename it over the old one, fsync the directory. Its I/O goes
// through a vfs.FS so tests can fault it. Covers says whether the journal
// still holds the record the file names (a journal that lost its tail
// does not).
//
// # Concurrency
//
// A Tracker is safe for concurrent use: the ingest goroutine and the
// journal's committer goroutine both call it; one mutex guards all of its
// state. The Tracker does no I/O; only the coverage functions do, and
// ingest calls them from its one goroutine.
package feedback
