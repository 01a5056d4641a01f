package server

import (
	"context"
	"path/filepath"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/backfill"
	"github.com/pgq-dev/pgq/ingest"
)

// openBackfills opens the backfill store (DataDir/backfill).
func (s *Server) openBackfills() (*backfill.Manager, error) {
	return backfill.Open(backfill.Options{
		PGURL: s.o.Ingest.PGURL,
		// A backfill reads only what pgq's slot publishes.
		Publication: s.o.Ingest.Publication,
		Dir:         filepath.Join(s.o.DataDir, "backfill"),
		Registry:    s.ingester.Backfills(),
		FS:          s.o.FS,
		// The committer's published LSN, not the journal's fsynced one: a
		// chunk's buffer is reused once its record is durable, and the
		// committer's OnWritten hook (indexBatch) still reads the
		// encoded record after the fsync, before it publishes.
		Durable: func() pgq.LSN { _, lsn := s.committer.Durable(); return lsn },
		Logger:  s.o.Logger,
	})
}

// wireInitialLoad makes package backfill read an initial load
// (ingest.Options.InitialLoad) unless the embedder gave its own reader.
func (s *Server) wireInitialLoad(l *ingest.InitialLoad) {
	if len(l.Tables) == 0 || l.Read != nil {
		return
	}
	o := backfill.SnapshotOptions{PGURL: s.o.Ingest.PGURL, Publication: s.o.Ingest.Publication, Logger: s.o.Logger}
	l.Read = func(ctx context.Context, req ingest.LoadRequest, emit func(ingest.LoadChunk) error) error {
		return backfill.LoadSnapshot(ctx, o, req, emit)
	}
}

// runBackfills resumes running backfills; stop waits for the runners
// (after ctx is cancelled). The store is closed with the others.
func (s *Server) runBackfills(ctx context.Context) (stop func()) {
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.backfills.Run(bctx) }()
	return func() {
		cancel()
		<-done
	}
}
