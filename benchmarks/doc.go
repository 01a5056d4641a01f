// Package benchmarks measures pgq against PostgreSQL's own limit and against
// the targets of the design: ingest throughput next to pg_recvlogical on the
// same WAL range (the mix, small transactions only, one bulk transaction),
// the tail of a big streamed transaction next to a live pg_recvlogical,
// slot lag under load with a stalled consumer group,
// end-to-end latency, consumer replay throughput and footprint (journal bytes
// per change, RSS). Run is driven by cmd/pgqbench (`make bench`); README.md
// explains the method and how to read the table.
//
// Nothing here runs under `go test`: a run needs a throwaway PostgreSQL
// cluster and minutes of wall time.
package benchmarks
