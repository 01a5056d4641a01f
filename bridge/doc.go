// Package bridge publishes a pgq consumer group into a message broker,
// exactly once as the broker's consumers see it. It is a client of pgq
// through package client (the pgq API may be local or remote) and never
// imports pgq's server packages; one subpackage per broker implements
// Publisher: bridge/jetstream (NATS JetStream), bridge/kafka (Kafka,
// franz-go) and bridge/webhook (HTTP POSTs; at least once: it has no
// position to resume from, so what a killed bridge delivered but did not
// commit comes again under the same ids).
//
// # Delivery
//
// Run fetches a batch of transactions, turns every change into one
// Message, hands the batch to the Publisher and commits the group's cursor
// (Consumer.CommitMark) only once the broker acknowledged every message
// of it. Batches are pipelined in three stages that run at once: while
// the broker acknowledges batch N, the messages of N+1 are built (in
// their own goroutine) and N+2 is fetched and decoded (by Run, without
// long-polling); N+1 is sent only after all of N is acknowledged (so
// per-key order holds), and N's cursor is committed while N+1 is in
// flight (commits stay in order). With Options.Linger a fetched batch
// below Options.LingerChanges changes waits up to Linger for more
// (fuller webhook requests for a trickle of changes); a transaction is
// never split across batches, except one larger than Options.MaxInFlight
// (default 10000 changes): the answer is decoded as it arrives (client
// FetchStream) and cut into batches of at most MaxInFlight messages (whole
// journal records; one holding more goes alone), each acknowledged before
// the next is sent, so a transaction of any size is held a few windows at
// a time and no more than MaxInFlight messages are in flight
// (Status.InFlight, pgq_bridge_in_flight_messages); the cursor is
// committed only after the batch holding the transaction's last change was
// acknowledged. An answer cut short (pgq aborts a body it cannot finish)
// ends Run with an error: the cursor is before the transaction, and a
// restarted bridge resumes after what the broker holds. Messages the
// broker did not acknowledge are
// sent again (only those) after a capped, jittered backoff
// (Options.BackoffMin/Max), for as long as the broker is down: the cursor
// never moves past an unacknowledged message, and pgq's journal absorbs
// the backlog (the replication slot never waits for the bridge). While a
// batch waits for the broker the group's lease is renewed every third of
// LeaseTTL, so an outage longer than the lease does not fence the commit
// (which would publish the batch again). So every change reaches the
// broker at least once.
//
// # Exactly once: resuming after what the broker holds
//
// A crash (or SIGKILL) between the broker's acknowledgement and pgq's
// commit, a lost acknowledgement, or a new pgq on an empty data dir
// replaying a held slot (pgq run --hold-slot-for) make the bridge read
// changes again that the broker already holds. The publishers skip them:
// at start, after a reconnect and after any failed publish they read the
// position (Position: commit LSN, then ordinal; ParseID of the message
// id) of the last message the broker holds, and every message at or
// before it counts as acknowledged without being sent (Status.Skipped).
// That is exact because what the broker holds is always a prefix of what
// the bridge sent, in Position order, so the last message held is the
// highest and everything before it is held too:
//
//   - the bridge sends in Position order: journal order is commit order,
//     commit LSNs grow with it, ordinals grow within a transaction, and
//     a backfill chunk takes its high watermark transaction's place; a
//     batch is sent in order and only after the previous one is
//     acknowledged, and a retry sends the unacknowledged messages again
//     in order;
//   - JetStream (one position per stream): every message carries
//     Nats-Expected-Last-Sequence, the stream sequence of the message
//     sent before it, so the stream stores a message only right after
//     its predecessor; once one is not stored (lost with a connection,
//     timed out, refused) every later one in flight is refused too, and
//     the publisher reads the stream's last message again before it
//     re-sends. Re-sending only the unacknowledged messages can
//     therefore never put an earlier one after a later one;
//   - Kafka (one position per partition): the idempotent producer stores
//     each partition's records in order and fails the later records of a
//     partition with the one that failed; the bridge picks each record's
//     partition itself (murmur2 of the key, as Kafka's default
//     partitioner; deterministic) from the partition count it read the
//     last records with, so the skip decision and the record go to the
//     same partition. The last record of a partition is its highest.
//
// JetStream's duplicate window (Nats-Msg-Id) stays as a second guard.
// Kafka is thereby exactly once across bridge crashes too. What can
// still duplicate: a change of a topic's partition count (keys move to
// other partitions, whose last records say nothing about them; stop the
// bridge, let it drain, and change the count while nothing is unsent),
// a Kafka record stored by a leader but not yet below the high watermark
// when the new bridge reads the partition's end (a new bridge waits for
// the dead one's lease first), retention or a purge that removed the
// last messages (the bridge then resumes from the group's cursor: the
// duplicate window still guards JetStream), and messages of the id
// format before issue 24 (nothing to resume from).
//
// A stream or topic takes one bridge. Every message carries the group
// in HeaderGroup; a stream or partition whose last message is another
// group's, or carries no pgq id, is refused (ErrShared: Run ends with
// it), since its last position says nothing about this bridge's
// messages. Two bridges of one group do not run at once (the group's
// lease).
//
// Transactions journaled in parts before pgq recorded ordinals decode
// with ordinals from 0 in every part; the bridge counts them on across
// the parts (the number of changes before, for a group without a filter:
// the change's true ordinal), so their ids stay unique. That needs the
// earlier parts, so the bridge commits the group's cursor only at a
// transaction's end: a restart reads a transaction from its first part.
// A cursor left inside such a transaction by an older bridge is logged
// (WARN): reset the group to the transaction's first part.
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
// restored one and the old one give every change the same id and
// Position, so what a new pgq re-reads from a held slot is skipped (and
// JetStream's duplicate window drops it too) instead of new changes that
// reused an old offset being dropped. A
// backfill row's id is "<commit LSN>.<backfill id>.<index>" (its rows are
// not in the WAL). The id format changed from "<offset>.<index>" (pgq
// before issue 24): ids published before and after an upgrade never
// match, so the duplicate window does not bridge the upgrade; let the
// bridge drain before upgrading. Without synchronized_standby_slots a
// transaction pgq journaled from a primary that then failed over may never
// exist on the promoted server, which can reuse its commit LSN: such a
// phantom's id can collide with a real change's. Key is the table and the
// row's key values, its primary key also under REPLICA IDENTITY FULL
// ("public.orders|42"; see AppendKey and pgq.Column.Key),
// so Kafka's key partitioning keeps per-row order. Headers: pgq-offset,
// pgq-xid, pgq-lsn (commit LSN), pgq-op, pgq-table ("schema.table"),
// pgq-group (the group bridged).
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
// # Formats
//
// Options.Format renders the messages in another format of package
// format's table; ids, the pgq-* headers, subjects and the resume
// position stay the same, and a change keeps one message per event of
// the format (format.Renderer.Events): one, as a rule; none for a change
// the format has no event for (a ddl or gap change in debezium); one per
// event for a change of several (debezium's key-changing update, a delete
// and a create, and multi-table truncate, one per table: its subject or
// topic and pgq key those of the event's table), each with its own id
// (EventID: the change's id, then "<id>.<k>") and position (the
// Position's Event), so that JetStream's dedupe keeps both and the Kafka
// resume tells a partition holding the delete from one holding the
// create. A publisher that is a Tombstoner (kafka, unless NoTombstones)
// gets one more message after each delete of a format that has
// tombstones (format.Renderer.Tombstone: debezium's), the same key and a
// nil payload: messages of a change are numbered in publishing order
// (delete 0, tombstone 1, create 2).
// The bridge names no format: it asks the format what a change's message
// is (format.Renderer.AppendMessage, AppendEventMessage: its payload, its
// key, its headers)
// in the publisher's binding (Binder: NATS for jetstream, Kafka for
// kafka, the webhook's structured batches, HTTP otherwise). pgq (the
// default) keeps the payload above; debezium carries the change's
// Debezium value(s) keyed as Debezium keys them (no key where Debezium's
// is null; Message.RowKey, pgq's key, still picks the Kafka partition
// and the webhook lane, so they stay deterministic);
// cloudevents the binary content mode (the change as data, the
// attributes as ce-* or ce_* headers), the webhook the structured one.
// The source a format names (Debezium's source.db, the CloudEvents
// source) is pgq's own database and slot, read from its status when Run
// starts, unless Options.FormatOptions name them: the same as pgq's HTTP
// fetch names for the same change. Options.FormatOptions also carry
// Debezium's value modes (format.Options Decimal, Time, Interval,
// Hstore; pgq bridge's --decimal-handling-mode, --time-precision-mode,
// --interval-handling-mode, --hstore-handling-mode), kept as given.
//
// # Concurrency
//
// A Bridge runs one loop (Run) that owns the pgq consumer; each batch is
// published by a goroutine of its own (one at a time: the next starts
// after the previous returned); one more goroutine renews the lease while
// a batch is in flight or an answer is still being read (Bridge.busy,
// an atomic counter), and one reads the group's lag. Status is safe to call
// concurrently (Bridge.mu guards it). A Publisher is called by one
// goroutine at a time, never concurrently. A batch's payloads and keys
// share one array, reused two batches later.
package bridge
