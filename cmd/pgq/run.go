package main

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/sidecar"
)

// RunCmd is `pgq run`.
type RunCmd struct {
	PGURL             string        `name:"pg-url" required:"" env:"PGQ_PG_URL" help:"PostgreSQL URL (sslmode/sslrootcert honoured)."`
	Slot              string        `required:"" env:"PGQ_SLOT" help:"Logical replication slot (pgoutput)."`
	Publication       string        `required:"" env:"PGQ_PUBLICATION" help:"Publication to stream."`
	DataDir           string        `name:"data-dir" required:"" env:"PGQ_DATA_DIR" type:"path" help:"Directory for the journal and index."`
	CreateSlot        bool          `name:"create-slot" env:"PGQ_CREATE_SLOT" help:"Create the slot when missing."`
	AcceptGap         bool          `name:"accept-gap" env:"PGQ_ACCEPT_GAP" help:"When the slot resumes past the journal's end (a new slot over an existing journal, a lost journal tail), journal a gap change naming the missing LSN range and go on, instead of refusing to start."`
	CreatePublication string        `name:"create-publication" placeholder:"all|schema.table,..." help:"Create the publication when missing."`
	Listen            string        `default:"127.0.0.1:5480" env:"PGQ_LISTEN" help:"HTTP address for /healthz, /v1/status, /metrics and the API."`
	ReconnectMin      time.Duration `name:"reconnect-min" default:"500ms" help:"First reconnect delay."`
	ReconnectMax      time.Duration `name:"reconnect-max" default:"30s" help:"Longest reconnect delay."`
	StatusInterval    time.Duration `name:"status-interval" default:"10s" help:"Longest time between standby status updates."`
	SegmentSize       int           `name:"segment-size" default:"16777216" help:"Journal segment size in bytes (the tail segment is held in memory)."`
	MaxRecordBytes    int           `name:"max-record-bytes" default:"8388608" help:"Record size limit: a larger transaction is journaled as several records (parts)."`
	MemoryLimit       int64         `name:"memory-limit" default:"201326592" help:"Soft memory limit of the Go runtime in bytes (0: none); the GOMEMLIMIT environment variable takes precedence."`
	AuthToken         string        `name:"auth-token" env:"PGQ_AUTH_TOKEN" help:"Require 'Authorization: Bearer <token>' on every HTTP call except /healthz."`
	RetainMinAge      time.Duration `name:"retain-min-age" help:"Keep journal records younger than this even when every group committed them."`
	RetainMaxAge      time.Duration `name:"retain-max-age" help:"Drop journal records older than this, even if a group still needs them (0: no cap)."`
	RetainMaxBytes    int64         `name:"retain-max-bytes" help:"Drop the oldest segments while the journal is larger than this, regardless of groups (0: no cap)."`
	RetainInterval    time.Duration `name:"retain-interval" default:"10s" help:"Time between retention passes."`
}

// Run runs the sidecar until SIGINT/SIGTERM.
func (c *RunCmd) Run(ctx context.Context, logger *slog.Logger) error {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && c.MemoryLimit > 0 {
		// Large transactions stream through pgq in bounded memory; the
		// soft limit keeps the garbage collector from letting the heap
		// double on top of that.
		debug.SetMemoryLimit(c.MemoryLimit)
	}
	s, err := sidecar.Open(ctx, sidecar.Options{
		DataDir:     c.DataDir,
		Listen:      c.Listen,
		SegmentSize: c.SegmentSize,
		Logger:      logger,
		AuthToken:   c.AuthToken,
		Retention:   consumers.RetentionOptions{MinAge: c.RetainMinAge, MaxAge: c.RetainMaxAge, MaxBytes: c.RetainMaxBytes, Interval: c.RetainInterval},
		Ingest: ingest.Options{
			PGURL: c.PGURL, Slot: c.Slot, Publication: c.Publication,
			CreateSlot: c.CreateSlot, CreatePublication: c.CreatePublication, AcceptGap: c.AcceptGap,
			ReconnectMin: c.ReconnectMin, ReconnectMax: c.ReconnectMax, StatusInterval: c.StatusInterval,
			MaxRecordBytes: c.MaxRecordBytes,
		},
	})
	if err != nil {
		return err
	}
	logger.Info("pgq running", "listen", s.Addr(), "data_dir", c.DataDir)
	return s.Run(ctx)
}
