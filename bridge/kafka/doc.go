// Package kafka is the Kafka publisher of package bridge (franz-go).
//
// Records are produced with franz-go's idempotent producer (acks=all),
// keyed by the bridge key (table and replica-identity key), so the
// default partitioner (murmur2, as Kafka's Java client) keeps every row in
// one partition, in order. Headers: pgq-offset, pgq-xid, pgq-lsn, pgq-op,
// pgq-table and pgq-id ("<offset>.<index>", for consumers that
// deduplicate).
//
// Duplicates: the idempotent producer removes the duplicates of its own
// retries within one producer session. Kafka transactions are not used.
// So a bridge crash after Kafka acknowledged a batch and before pgq
// committed it re-publishes that batch on restart: its records appear
// twice (the second copy after the first, so per-key order of first
// occurrences holds). Consumers that need exactly once skip records whose
// pgq-id they have seen, or keep per key the highest pgq-offset. A broker
// outage or restart alone duplicates nothing as long as the producer's own
// retries (same producer id and sequence numbers) deliver the records
// within Options.DeliveryTimeout; a record that times out is produced
// again by the bridge as a new record, a duplicate if the broker had in
// fact stored the first.
//
// A Publisher is used by one goroutine at a time (the bridge's publishing
// goroutine).
package kafka
