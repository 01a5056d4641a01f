// Package sidecar wires pgq's parts into the process `pgq run` starts: it
// locks and opens the journal under DataDir/journal, opens and catches up
// the index under DataDir/index, runs the group committer, the ingest loop
// the retention loop of the consumer groups and the HTTP listener
// (/healthz, /v1/status, /metrics and the consumer API, behind the bearer
// token when one is set), and stops them in order. Spill files of
// in-progress transactions live under DataDir/spill.
//
// Concurrency: Run owns the lifetime of every goroutine it starts; the
// committer goroutine feeds the index through the ingest OnAppend hook.
package sidecar
