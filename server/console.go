package server

import (
	"fmt"
	"time"

	"github.com/pgq-dev/pgq/console"
)

// openHistory prepares the console's in-memory samples (Run samples).
func (s *Server) openHistory() error {
	h, err := console.NewHistory(console.HistoryOptions{})
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	s.history = h
	return nil
}

// sample is one point of the console's charts: the same figures as the
// gauges pgq_ingest_connected, pgq_slot_lag_bytes and
// pgq_journal_size_bytes.
func (s *Server) sample() console.Sample {
	st := s.ingester.Status()
	return console.Sample{
		Time:           time.Now().UTC(),
		Connected:      st.Connected,
		SlotLagBytes:   slotLag(st.ServerWALEnd, st.ConfirmedLSN),
		JournalBytes:   s.journal.Size(),
		ChangesWritten: st.ChangesWritten,
	}
}

// historyDoc is the document of GET /v1/status/history.
func (s *Server) historyDoc() console.StatusHistory {
	r := s.o.Retention
	return console.StatusHistory{
		Interval:  s.history.Interval().String(),
		Window:    s.history.Window().String(),
		Retention: console.HistoryRetention{MinAge: r.MinAge.String(), MaxAge: r.MaxAge.String(), MaxBytes: r.MaxBytes},
		Samples:   s.history.Snapshot(),
	}
}
