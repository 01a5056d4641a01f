// Package client is the Go client of pgq's HTTP API: consumer groups,
// fetch and commit, and a Consumer that rides through pgq restarts.
//
// Construct a Client with New (it does no I/O). Types a consumer needs
// from pgq and pgq/api are re-exported here as aliases (Transaction,
// Change, Offset, LSN, GroupInfo, CreateRequest, the API errors, ...), so
// one import of pgq/client suffices.
//
// It imports the standard library, msgpack, pgx's pgtype (for typed
// values) and the small pgq, pgq/api, pgq/record (record bodies),
// internal/msgp (the msgpack reader it shares with record) and
// internal/backoff packages, and never the server
// (Pebble, tidwall/wal, Prometheus): a test fails if that changes.
//
// # Resilience
//
// Every call retries transient failures (pgq unreachable or restarting:
// network errors, 502, 503, 504) with capped, jittered exponential backoff
// (Options.Retry: 100ms doubling to 5s, each wait drawn from its upper
// half) until the call's context ends or Options.Retry.GiveUp passes. A
// commit is idempotent (committing the same offset twice is harmless), so
// a commit whose answer was lost is simply sent again.
//
// A Consumer is at-least-once. It commits after handling; when a commit is
// refused because the lease was lost (another member took over after the
// lease expired, the group was reset, or pgq restarted and forgot what it
// had delivered), it drops what it fetched and fetches again from the
// group's cursor, so handled-but-uncommitted transactions are delivered
// again. Nothing is ever skipped. A pipelining caller (the bridge) takes
// a Mark after the transactions of a batch, goes on fetching while it
// processes them, and commits exactly that batch with CommitMark.
//
// # Big transactions
//
// An exclusive fetch's answer is decoded as it arrives: FetchStream
// returns once the answer's fields are read, and its Next decodes one
// journal record (a transaction, or one part of a multi-part one; Final
// marks the last) at a time from the body (msgp.ReadValue over a 64 KiB
// read buffer), so a transaction of any size is held one part at a time.
// A Consumer's Next reads the same way (Buffered counts what the answer
// still holds, not decoded yet); its commits never land inside a
// multi-part transaction, and the end of an answer counts as done only
// once the answer was read to its end. An answer cut short (pgq aborts a
// body it cannot finish) is an error wrapping io.ErrUnexpectedEOF from
// Next, never a short answer: the Consumer fetches again from after the
// last whole transaction it returned. Fetch reads FetchStream's answer
// whole into a FetchResult.
//
// # Standby and failover
//
// Several members may run for one group; one holds the lease and the
// others wait in their fetches (unless FailFast). When the holder
// releases (Close) or dies, a standby takes over as soon as the lease is
// free or expired (within LeaseTTL). Consume renews the lease every
// LeaseTTL/3 while a handler runs, so a slow handler keeps the group.
// Commits carry the generation of the lease the records were fetched
// under, so a member whose lease was taken over or reset is always fenced
// (api.ErrFenced), never half-accepted.
//
// # Shared groups
//
// A group created with Mode "shared" is a work queue: FetchShared
// returns single changes (Message) with an ack id, settled with Ack,
// Nak (redelivered after a delay or the group's backoff), Term (parked)
// or InProgress (the ack wait restarts); Parked, Requeue and DropParked
// manage the parked ones. A SharedConsumer's Consume runs Concurrency
// handlers at once: nil acks, Term(err) parks, another error naks. It
// fetches up to Prefetch messages ahead while handlers run and settles
// what they handled in batches (many ack ids per request). A message
// whose ack wait ended went to another member: its settle answers
// api.ErrConflict, which Consume ignores (a batch with one is settled
// again one by one). Messages iterates over messages the caller settles.
// Delivery is at-least-once (see docs/http-api.md for what a restart of
// pgq delivers again).
//
// A Message's Change is the same typed *pgq.Change an exclusive group's
// transactions hold (fetched in the records form, api.MediaRecords, like
// an exclusive fetch): code that decodes changes serves both modes, and
// moving a group from exclusive to shared changes the loop around it, not
// the decoding (see the examples). FetchMessages returns the JSON form
// (api.Message) for tools that print or forward it.
//
// # Values
//
// Changes carry PostgreSQL's text form. Values decodes a row image (Image:
// NewImage or OldImage) into Go values by column name and Scan stores it
// into a struct, both through pgx's type map.
//
// # TLS
//
// An https:// address speaks TLS (HTTP/1.1). Options.TLS names the CAs
// trusted (CAFile; default the system's roots, which on Linux honour
// SSL_CERT_FILE and SSL_CERT_DIR) and a client certificate for a pgq
// that wants one (CertFile, KeyFile); the files are read by New. A call
// that fails in TLS itself (an untrusted certificate, a missing or
// refused client certificate, http against a TLS port or https against a
// plain one) returns a *TLSError (matching ErrTLS) with a hint naming
// the TLSOptions fields to change (TLSError.Hint renders it with a
// program's own names for them) and is not retried.
//
// # Concurrency
//
// A Client is safe for concurrent use. A Consumer is used by one goroutine
// (its Consume runs two background goroutines of its own: one renews the
// lease while a handler runs, one sends the commit of each handled batch
// while the next fetch waits, so a commit round trip never delays
// delivery; the two hand results back under a mutex). A
// SharedConsumer is safe for concurrent use; its Consume runs Concurrency
// handler goroutines, one fetch loop and one settle goroutine, and returns
// after they end (what was handled is settled first).
package client
