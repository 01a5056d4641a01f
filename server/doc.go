// Package sidecar wires pgq's parts into the process `pgq run` starts: it
// locks and opens the journal under DataDir/journal, opens and catches up
// the index under DataDir/index, runs the group committer, the ingest loop,
// the index healer, the retention loop of the consumer groups, backfills
// and the HTTP listener (/healthz, /readyz, /v1/status, /metrics, the
// consumer and backfill APIs, behind the bearer token when one is set; the
// mux's own 404 and 405 answers are JSON errors), and stops them in order.
// Spill files of in-progress transactions live under DataDir/spill.
// Options.FS carries every file operation of the journal, the index, the
// coverage file and the backfill store (tests fault it).
//
// Storage failures: the journal is fail-stop, so a failed write or fsync
// stops Run with that error (status and /readyz show it meanwhile). The
// index is derived: the committer waits at most 2 s for an index update,
// a failed one marks the index stale, and the healer catches it up from
// the journal. The backfill store (DataDir/backfill) is fail-stop on its
// own: its writes fail with 503 until one after the disk recovers reopens
// it (package backfill); streaming is not affected.
//
// Concurrency: Run owns the lifetime of every goroutine it starts; the
// committer goroutine feeds the index through the ingest OnAppend hook
// (each update on a goroutine of its own, at most one at a time).
package server
