// Package kafka is the Kafka publisher of package bridge (franz-go).
//
// Records are produced with franz-go's idempotent producer (acks=all),
// keyed by the bridge key (table and the row's primary key, also under
// REPLICA IDENTITY FULL: bridge.AppendKey; in Debezium's format its key,
// or none where that is null). The
// publisher picks each record's partition itself, murmur2 of the key as
// Kafka's Java client and franz-go's default do (deterministic; of
// bridge.Message.RowKey, pgq's key, for a record without a key, where a
// producer would pick a partition at random), from
// the partition count it read when it first published to the topic, so
// every row stays in one partition, in order. Headers: pgq-offset,
// pgq-xid, pgq-lsn, pgq-op, pgq-table, pgq-group and pgq-id (the message
// id, "<commit LSN>.<ordinal>"). In a format with tombstones
// (Debezium's) each delete is followed by a tombstone, a record of the
// delete's key and a null value, unless Options.NoTombstones
// (bridge.Tombstoner). With Options.SchemaChangeTopic a ddl or gap
// change in Debezium's format is a schema change event on that topic
// (bridge.SchemaChanger), keyed by the database, so all of them go to
// one partition in order; the resume reads that topic's partitions as
// any other's (bridge.Message.SchemaChange).
//
// Exactly once across bridge crashes: the first time a topic is
// published to, and again after any failed Publish, the publisher reads
// the last record of each partition (its end offset − 1, after the start
// offset); the record's pgq-id names the highest position the partition
// holds, and every message at or before it is counted acknowledged
// without being produced (Skipped). The idempotent producer stores a
// partition's records in order and fails the later ones with one that
// failed, so a partition holds a prefix of what was produced to it and
// its last record is its highest (see package bridge for why this is
// exact). A batch acknowledged by Kafka but not committed to pgq when
// the bridge died, a record whose delivery timed out although the broker
// stored it, and the replay of a held slot by a new pgq on an empty data
// dir are therefore not stored twice. Kafka transactions are not used.
// What still duplicates: a change of a topic's partition count (keys
// move to partitions whose last records say nothing about them; change
// it only once the bridge has drained), a record a leader stored but had
// not replicated below the high watermark when the partition's end was
// read, and a topic's first records after the bridge of a pgq before
// issue 24 (ids without a position: nothing to resume from). A partition
// whose last record has no pgq-id or is another group's is refused
// (bridge.ErrShared): a topic takes one bridge. A topic that does not
// exist is an error unless Options.CreateTopics.
//
// A Publish sends one bridge batch, at most bridge.Options.MaxInFlight
// messages (a transaction larger is published in several, each
// acknowledged before the next), and waits for all its acknowledgements.
//
// A Publisher is used by one goroutine at a time (the bridge's publishing
// goroutine).
package kafka
