package server

import (
	"context"
	"path/filepath"

	"github.com/pgq-dev/pgq/backfill"
)

// startBackfills opens the backfill store (DataDir/backfill), mounts the
// backfill API and resumes running backfills. stop waits for the runners
// (after ctx is cancelled) and closes the store.
func (s *Server) startBackfills(ctx context.Context) (stop func(), err error) {
	m, err := backfill.Open(backfill.Options{
		PGURL:    s.o.Ingest.PGURL,
		Dir:      filepath.Join(s.o.DataDir, "backfill"),
		Registry: s.Ingester.Backfills(),
		FS:       s.o.FS,
		Durable:  s.Journal.LastEndLSN,
		Logger:   s.o.Logger,
	})
	if err != nil {
		return nil, err
	}
	m.Register(s.Mux)
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(bctx) }()
	return func() {
		cancel()
		<-done
		if err := m.Close(); err != nil {
			s.o.Logger.Error("closing the backfill store", "error", err)
		}
	}, nil
}
