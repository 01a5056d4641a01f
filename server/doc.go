// Package server is pgq's composition root and its embedding API: it
// opens and wires every part that `pgq run` runs, and a Go program can run
// pgq in-process the same way:
//
//	s, err := server.Open(ctx, server.Options{DataDir: dir, Ingest: ingest.Options{PGURL: url, Slot: "pgq", Publication: "pgq"}})
//	if err != nil { ... }
//	go func() { done <- s.Run(ctx) }() // streams until ctx is cancelled
//	st := s.Status()                     // what GET /v1/status answers
//	// s.Close() releases an opened Server that is never run.
//
// (Example in example_test.go.) A Server shows methods only, not its
// parts: the journal, the index, the committer, the ingester, the metrics
// registry, the group manager and the backfill manager are unexported
// (pgq's own tests in other packages reach them through
// internal/serverparts). Errors name options in Go terms: one that an
// option mends is an *opterr.Error ("server.Options.DataDir",
// "ingest.Options.CreateSlot"), which cmd/pgq renders as its flags.
//
// Open locks and opens the journal under DataDir/journal, opens and
// catches up the index under DataDir/index, opens the consumer-group
// manager and the backfill store (DataDir/backfill), prepares ingest, and
// listens on Options.Listen with the HTTP API of package httpapi
// (Options.WrapHandler may wrap it; an address that cannot be listened
// on, Listen's or ProbeListen's, is a *ListenError naming the field), over TLS with Options.TLS (mutual
// TLS with its client CAs; ReloadTLS, or ReloadTLSFor naming what asked
// for it in the log's trigger, reads the files again, keeping the
// old ones when the new cannot be used, and with TLSOptions.ReloadInterval
// Run does so itself when the files' contents change: tls.go). Run starts the group committer, the
// ingest loop, the index healer, the retention loop of the consumer
// groups, the backfill runners, the journal scrub (Options.ScrubRate:
// journal.RunScrub verifies the sealed segments against their seal-time
// checksums at that rate; the first corruption found, by it or by a
// consumer's read, shows in Status's journal_corrupt, /readyz and
// pgq_journal_corrupt: scrub.go) and the HTTP server, and stops them in
// order when ctx is cancelled or ingest fails; it closes everything on
// return. Spill files of in-progress transactions live under
// DataDir/spill. Options.FS carries every file operation of the journal,
// the index, the coverage file, the spill files and the backfill store
// (tests fault it), wrapped in vfsutil.OwnerOnly. A start that fails
// (Open's error, or Run's before it journaled anything) removes what it
// created when DataDir was missing or empty and no group or backfill was
// made; a DataDir that held anything is never touched (fresh.go).
//
// The data dir is its owner's only: it holds every change of the
// database, the backfills' where clauses and row keys and the secret that
// keys their watermarks. Open creates it and every directory under it
// 0700 and every file 0600, whatever the umask (vfsutil.OwnerOnly), and
// at start tightens what an older pgq left there (0755 and 0644 under
// umask 022, the data dir itself included) with vfsutil.TightenTree,
// logging once at INFO how many it changed and one of them; what it
// cannot tighten (a mount point owned by another user) is a WARN, not a
// refusal.
// cmd/pgq is a thin CLI over this package; nothing below it imports it.
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
// committer's publishing goroutine feeds the index and the filtered long
// polls through its OnWritten hook, at each batch's fsync (each update on a goroutine of its own, at most one at a time). Status
// is safe to call from any goroutine while Run runs. ReloadTLS is safe
// from any goroutine at any time after Open; it and Run's TLS watcher
// (one goroutine, stopped before Run returns) reload under one mutex, and
// handshakes read the files read last through an atomic pointer.
package server
