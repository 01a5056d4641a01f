// Package benchmarks measures pgq against PostgreSQL's own limit and against
// the targets of the design: ingest throughput next to pg_recvlogical on the
// same WAL range (the mix, small transactions only, one bulk transaction),
// the tail of a big streamed transaction next to a live pg_recvlogical,
// slot lag under load with a stalled consumer group,
// end-to-end latency, consumer replay throughput and footprint (journal bytes
// per change, RSS), and a peer row: pgq with a consumer writing a file
// against Conduit's PostgreSQL source writing a file (Conduit is built from
// the separate module peers/conduit, so pgq's module does not depend on
// it). Run is driven by cmd/pgqbench (`make bench`); README.md
// explains the method and how to read the table. Compare (`make
// bench-compare REF=<commit>`) runs two pgq binaries, an older build and
// the working tree's, alternately on the same WAL and writes each build's
// figures in Go benchmark format for benchstat; the driver only runs pgq
// as a binary, so it compares any build whose `pgq run` it can start.
//
// Nothing here runs under `go test`: a run needs a throwaway PostgreSQL
// cluster and minutes of wall time.
package benchmarks
