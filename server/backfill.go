package server

import (
	"context"
	"path/filepath"

	"github.com/pgq-dev/pgq/backfill"
)

// openBackfills opens the backfill store (DataDir/backfill).
func (s *Server) openBackfills() (*backfill.Manager, error) {
	return backfill.Open(backfill.Options{
		PGURL:    s.o.Ingest.PGURL,
		Dir:      filepath.Join(s.o.DataDir, "backfill"),
		Registry: s.Ingester.Backfills(),
		FS:       s.o.FS,
		Durable:  s.Journal.LastEndLSN,
		Logger:   s.o.Logger,
	})
}

// runBackfills resumes running backfills; stop waits for the runners
// (after ctx is cancelled). The store is closed with the others.
func (s *Server) runBackfills(ctx context.Context) (stop func()) {
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.Backfills.Run(bctx) }()
	return func() {
		cancel()
		<-done
	}
}
