// Package serverparts hands pgq's own tests and tools the components of a
// *server.Server, which the server keeps unexported: an embedder sees
// only the Server's methods, while a test in another package of this
// module (consumers, ingest, console, deploy, benchmarks) can still read
// the journal or the index behind a running server. Being internal, it is
// out of an embedder's reach and promises nothing.
//
// Package server sets Of when it is initialised; importing server here
// would be a cycle, hence the any.
package serverparts

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgq-dev/pgq/backfill"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/journal"
)

// Parts are the components a server opened and runs.
type Parts struct {
	Journal   *journal.Journal
	Index     *index.Index
	Committer *journal.Committer
	Ingester  *ingest.Ingester
	Registry  *prometheus.Registry
	Consumers *consumers.Manager
	Backfills *backfill.Manager
}

// anything else: a test's mistake). It is nil until package server is
// initialised, which importing server ensures.
var Of func(s any) Parts
