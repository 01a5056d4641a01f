package server

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// registerIngestMetrics registers the gauges that the dashboard and the
// alert rules under deploy/ need beyond ingest's own collectors: they are
// computed at scrape time from the journal and ingest's state, so they
// cost nothing on the streaming path.
func (s *Server) registerIngestMetrics(context.Context) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgq_journal_size_bytes",
			Help: "Bytes of the journal's segment files on disk (what retention's size cap bounds)."},
			func() float64 { return float64(s.journal.Size()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgq_slot_lag_bytes",
			Help: "Server WAL end (latest keepalive) minus the LSN last confirmed to PostgreSQL: WAL the slot makes the server keep that pgq has not confirmed (0 until both are known)."},
			func() float64 {
				st := s.ingester.Status()
				return float64(slotLag(st.ServerWALEnd, st.ConfirmedLSN))
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgq_covered_lsn",
			Help: "LSN up to which the journal holds every transaction of the slot (as a number): ingest's durable position, which also moves while hold_slot groups keep the confirmed LSN back."},
			func() float64 { return float64(s.ingester.Status().CoveredLSN) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgq_ingest_connected",
			Help: "1 while ingest holds a replication connection to PostgreSQL."},
			func() float64 {
				if s.ingester.Status().Connected {
					return 1
				}
				return 0
			}),
	} {
		if err := s.registry.Register(c); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	return nil
}

// slotLag is walEnd − confirmed, 0 while either is unknown or the
// keepalive that reported walEnd is older than the last confirmation.
func slotLag[L ~uint64](walEnd, confirmed L) uint64 {
	if walEnd == 0 || confirmed == 0 || walEnd <= confirmed {
		return 0
	}
	return uint64(walEnd - confirmed)
}
