package server

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/journal"
)

// runScrub starts the journal scrub (Options.ScrubRate; none at zero) on
// a goroutine of its own and returns the function that stops it and
// waits for it.
func (s *Server) runScrub(ctx context.Context) (stop func()) {
	if s.o.ScrubRate <= 0 {
		return func() {}
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.journal.RunScrub(sctx, journal.ScrubOptions{Rate: s.o.ScrubRate}); err != nil {
			s.o.Logger.Warn("journal scrub stopped", "error", err)
		}
	}()
	return func() { cancel(); <-done }
}

// scrubStatus fills the status document's journal_corrupt (c) and
// journal_scrub (st).
func scrubStatus(doc *api.Status, c *journal.Corruption, st journal.ScrubStatus) {
	doc.JournalCorrupt = corruptStatus(c)
	sc := api.ScrubStatus{Running: st.Running, Passes: st.Passes, Segments: st.Segments, Bytes: st.Bytes, SumsWritten: st.SumsWritten}
	if !st.LastPassEnd.IsZero() {
		t := st.LastPassEnd
		sc.LastPassEnd = &t
	}
	doc.JournalScrub = sc
}

// corruptStatus is c as api.JournalCorrupt, nil for none.
func corruptStatus(c *journal.Corruption) *api.JournalCorrupt {
	if c == nil {
		return nil
	}
	return &api.JournalCorrupt{Segment: c.Segment, Offset: c.Offset, Reason: c.Reason, FoundBy: c.Source, At: c.At}
}

// scrubMetrics are the journal corruption and scrub metrics.
func (s *Server) scrubMetrics() []prometheus.Collector {
	st := func(f func(journal.ScrubStatus) uint64) func() float64 {
		return func() float64 { return float64(f(s.journal.ScrubStatus())) }
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgq_journal_corrupt", Help: "1 once a corrupt journal record was found (by a read or the scrub; see journal_corrupt in /v1/status), else 0."},
			func() float64 {
				if s.journal.Corruption() != nil {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgq_journal_scrub_passes_total", Help: "Completed passes of the journal scrub over every sealed segment."},
			st(func(x journal.ScrubStatus) uint64 { return x.Passes })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgq_journal_scrub_segments_total", Help: "Sealed journal segments the scrub verified."},
			st(func(x journal.ScrubStatus) uint64 { return x.Segments })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pgq_journal_scrub_bytes_total", Help: "Bytes of sealed journal segments the scrub verified."},
			st(func(x journal.ScrubStatus) uint64 { return x.Bytes })),
	}
}
