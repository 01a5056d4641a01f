// Package bridge publishes a pgq consumer group into a message broker,
// exactly once as the broker's consumers see it. It is a client of pgq
// through package client (the pgq API may be local or remote) and never
// imports pgq's server packages; one subpackage per broker implements
// Publisher: bridge/jetstream (NATS JetStream) and bridge/kafka (Kafka,
// franz-go).
//
// # Delivery
//
// Run fetches a batch of transactions, turns every change into one
// Message, hands the batch to the Publisher and commits the group's cursor
// (Consumer.CommitMark) only once the broker acknowledged every message
// of it. Batches are pipelined, two at a time: while the broker
// acknowledges batch N, the next one is fetched (without long-polling)
// and built; N+1 is sent only after all of N is acknowledged (so per-key
// order holds), and N's cursor is committed while N+1 is in flight
// (commits stay in order). Messages the broker did not acknowledge are
// sent again (only those) after a capped, jittered backoff
// (Options.BackoffMin/Max), for as long as the broker is down: the cursor
// never moves past an unacknowledged message, and pgq's journal absorbs
// the backlog (the replication slot never waits for the bridge). While a
// batch waits for the broker the group's lease is renewed every third of
// LeaseTTL, so an outage longer than the lease does not fence the commit
// (which would publish the batch again). So every change reaches the
// broker at least once. A crash (or SIGKILL) between the broker's
// acknowledgement and pgq's commit publishes that batch again from the
// cursor: JetStream drops the copies by their Nats-Msg-Id within the
// stream's duplicate window (exactly once as stream consumers see it);
// Kafka's idempotent producer only deduplicates its own retries within
// one producer session, so there the re-published batch is duplicated.
// A broker restart alone duplicates nothing in Kafka as long as the
// producer's own retries deliver the batch within its delivery timeout.
//
// Each run takes a fresh member id (Options.Member plus a random suffix):
// a restarted bridge waits until the lease of the one that died expires
// (LeaseTTL) and then reads from the committed cursor.
//
// # Wire format
//
// One message per change. ID is "<commit LSN>.<ordinal>" (MessageID), as
// "16/B374D848.3": the transaction's commit LSN and the change's ordinal
// within the whole transaction (all parts, before any group filter). It
// names the change by its place in PostgreSQL's history, not by the
// journal: a fresh data dir (which numbers records from 1 again), a
// restored one and the old one give every change the same id, so
// JetStream's duplicate window drops what a new pgq re-reads from a held
// slot instead of dropping new changes that reuse an old offset. A
// backfill row's id is "<commit LSN>.<backfill id>.<index>" (its rows are
// not in the WAL). The id format changed from "<offset>.<index>" (pgq
// before issue 24): ids published before and after an upgrade never
// match, so the duplicate window does not bridge the upgrade; let the
// bridge drain before upgrading. Without synchronized_standby_slots a
// transaction pgq journaled from a primary that then failed over may never
// exist on the promoted server, which can reuse its commit LSN: such a
// phantom's id can collide with a real change's. Key is the table and the
// row's replica-identity key values ("public.orders|42"; see AppendKey),
// so Kafka's key partitioning keeps per-row order. Headers: pgq-offset,
// pgq-xid, pgq-lsn (commit LSN), pgq-op, pgq-table ("schema.table").
// Payload (JSON):
//
//	{"offset":101,"xid":750,"commit_lsn":"0/1A2B3C8","end_lsn":"0/1A2B3F0",
//	 "commit_time":"2025-01-01T00:00:01.5Z","part":0,"final":true,"index":0,"ordinal":0,"count":1,
//	 "change":{"op":"insert","schema":"public","table":"orders","new":{"id":1},"old":null}}
//
// where change is the change as `pgq journal dump` renders it. index and
// count are within the journal record (after the group's filter),
// ordinal within the whole transaction (the id's); a transaction larger than one
// record spans several records (part counts from 0, final marks the last).
// Subjects and topics come from a Template ("pgq.{schema}.{table}").
//
// # Concurrency
//
// A Bridge runs one loop (Run) that owns the pgq consumer; each batch is
// published by a goroutine of its own (one at a time: the next starts
// after the previous returned), which renews the lease while it runs; one
// more goroutine reads the group's lag. Status is safe to call
// concurrently (Bridge.mu guards it). A Publisher is called by one
// goroutine at a time, never concurrently. A batch's payloads and keys
// share one array, reused two batches later.
package bridge
