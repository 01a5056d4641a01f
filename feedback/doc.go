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
// The package does no I/O. A Tracker is safe for concurrent use: the ingest
// goroutine and the journal's committer goroutine both call it; one mutex
// guards all of its state.
package feedback
