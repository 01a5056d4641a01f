// Package pgq holds the domain types every pgq package shares: LSNs,
// journal offsets, changes and committed transactions. Rendering them as
// bytes (the JSON lines of `pgq journal dump` and `pgq consume`, and every
// other format) is package format's.
//
// pgq turns a PostgreSQL logical replication slot into a durable local
// queue: package ingest reads pgoutput (decoded by package pgoutput),
// package journal appends one record per committed transaction and fsyncs,
// package feedback decides which LSN may be confirmed to PostgreSQL, package
// index keeps the Pebble lookups (LSN/time → offset, group cursors),
// package consumers runs the consumer groups (leases, fetch/commit, acks,
// retention; no HTTP), package httpapi serves them over HTTP and package
// client reads them as a Go library.
//
// Values are stored losslessly as PostgreSQL sent them (text form, or binary
// for a bytea-like binary tuple) together with the column's type OID;
// Value.Decode turns one into a Go value through pgx/v5/pgtype. Each change
// has an ordinal, its position in its whole transaction before any group
// filter (Transaction.Ordinal): with the commit LSN it names the change
// the same way in every journal.
//
// Types here are plain values: no locking, safe to share read-only.
package pgq
