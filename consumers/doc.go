// Package consumers serves consumer groups over a pgq journal: named,
// durable cursors (kept in the index's Pebble store), long-poll fetch,
// cumulative commit, one leased member per group, reset, retention and
// lag. It knows nothing of HTTP: package httpapi serves a Manager, the Go
// client lives in package client, and the wire types both share in
// package api, so a client never imports this server package. Errors wrap
// the sentinels of package api (their code) and carry their own message
// (api.Errorf). Files by concern: manager.go (the Manager and its groups),
// admin.go (create, delete, reset, list), leases.go, fetch.go, records.go
// (fetch for a wire encoder), commit.go, lag.go, lagsel.go (the lag and
// retention rule of a filtered group: only records it would receive
// count), retention.go, and
// shared.go and shared_store.go for shared groups.
//
// # Semantics
//
// A group's cursor is the last committed offset. Fetch delivers whole
// transactions after the member's delivery position (all parts of a
// multi-part transaction, never a trailing incomplete one), filtered by the
// group's tables (schema.table globs, see tables.go) and ops: changes that
// do not pass are removed, records left empty are skipped (a record the
// index knows the filter does not pass is passed over without being read
// when the index knows whether it ends its transaction and by its header
// alone when not, never decoded: index.Selector's Verdicts). next_offset
// moves past skipped records; committing next_offset-1 moves the cursor
// over them. Commit is cumulative, fsynced, and rejected (ErrInvalidCommit)
// when backwards, beyond what was delivered, or on a non-final part of a
// multi-part transaction, so a cursor never lands between parts; nor does
// a start position (Resolve) or a fetch's from. Delivery
// is at-least-once: a new lease (another member, an expired lease, a
// release or a reset) restarts delivery after the cursor, and so does a
// new session of the lease holder (a consumer process that restarted with
// the same member id); a fetch's from (what the consumer has) moves
// delivery back when an answer was lost. Each lease has a generation that
// commits may carry: a commit of an ended generation is fenced.
//
// One member holds a group at a time, with a lease renewed by fetch, commit
// and heartbeat. Another member's fetch waits up to its wait for the lease
// (or fails at once with ErrConflict when fail_fast); a member whose lease
// expired or was taken over gets ErrFenced on commit. A cursor below the
// journal's start (retention) gives ErrOutOfRange until the group is reset;
// an exclusive filtered group is moved over dropped records its filter
// passes none of instead (retention.go). A group's lag counts only the
// records its filter passes (lagsel.go says what is exact).
//
// # Shared groups
//
// A group created with mode "shared" has no lease: any number of members
// fetch at once and each gets single changes (messages) with an ack id,
// settled one by one with Ack, Nak (redeliver after a delay or the next
// backoff step) or Term (park). A message not acked within the group's
// ack wait is redelivered; after max_deliver deliveries it is parked
// instead. Messages with the same ordering key (table and replica
// identity key by default) are never in flight together and go out in
// commit order; a truncate orders against every message of its tables.
// The group's cursor is its acked low-water mark; acks above it, delivery
// counts, nak delays and parked messages are index group entries beside
// the group's value, written by group commit before a call answers, so a
// restart delivers again only what was in flight. See shared.go.
//
// # Wire formats
//
// consumers hands out changes, never their rendering: Fetch returns
// transactions, FetchShared and Parked return SharedMessages (the
// filtered record and the change's index), and package httpapi renders
// them through package format. The HTTP encodings (JSON, msgpack, the Go
// client's records form) are httpapi's; FetchStream hands it records
// unchanged by the group's filter as their journaled bytes, so the
// records form splices them without decoding. An exclusive fetch first chooses its records
// (each read once and checked, only its offset kept), then
// RecordStream.Records reads them again one at a time as the answer is
// written: a fetch holds one journal part at a time, whatever the
// transaction's size. docs/http-api.md lists every endpoint.
//
// # Concurrency
//
// A Manager is safe for concurrent use. Manager.ddl serializes group
// create and delete and is held across their fsynced Pebble write;
// Manager.mu guards only the groups map and is never held across I/O, so
// a slow fsync never stalls group lookups. Each group has a sem
// (capacity-1 channel) that serializes its fetches, waited for with the
// caller's context; a mutex mu that guards its state (cursor, config,
// lease, generation, session, delivery position, non-final parts) and is
// never held while waiting; and a mutex pmu that serializes the fsynced
// Pebble writes of its state and is held across each. A commit holds pmu,
// not mu, during its write and publishes the new cursor only after it, so
// the cursor in memory never runs ahead of disk while a fetch of the same
// group (which writes only to take a new lease) goes on meanwhile; every
// other write (new lease, reset, release) holds both. A shared group's
// calls change its state under mu, queue the change, and wait for it with
// pmu: the holder of pmu writes everything queued in one fsynced batch
// (taking mu only to take the queue and publish the result). Lock order:
// Manager.ddl before group.pmu before Manager.mu before group.mu. Waiting
// fetches of groups without a filter wake on journal.Changed (no polling);
// those of filtered groups wait in the wakers registry (wake.go), which
// takes in each appended record once, from Appended (the subject sets of
// the index entries the server's after-append hook made, with
// ManagerOptions.WakeFromAppends: no record read) or else by its one
// goroutine reading it while anyone waits, and wakes only the waiters
// whose filter the finished transaction passes (its state under
// wakers.mu); a woken fetch starts collecting at the first part of that
// transaction when the registry knows everything before it rejected
// (waiter.hint, wakeStart; the bytes it passes over come from the
// journal's lock-free ring, journal.Journal.StoredBytes). With
// WakeFromAppends, the waiting members of a shared group queue per group instead
// (sharedwait.go; Manager.sw, its own mutex, taken after group.mu, never
// before): an append or a settle wakes one of them, and a member that
// delivered wakes the next, so a hundred members do not all run for each
// transaction. Every waiting fetch also wakes on lease release, on Close
// and on its context.
package consumers
