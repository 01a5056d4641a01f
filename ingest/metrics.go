package ingest

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are ingest's Prometheus collectors.
type Metrics struct {
	RecordsWritten prometheus.Counter
	ChangesWritten prometheus.Counter
	BytesReceived  prometheus.Counter
	TxSkipped      *prometheus.CounterVec
	Reconnects     prometheus.Counter
	BatchSize      prometheus.Histogram
	// CommitToDurable is the time from PostgreSQL's commit timestamp to the
	// fsync of the transaction's final record: ingest latency, including
	// any clock difference between the two hosts.
	CommitToDurable prometheus.Histogram
	ConfirmedLSN    prometheus.Gauge
	ServerWALEnd    prometheus.Gauge
	ReceivedLSN     prometheus.Gauge
	JournalLastOff  prometheus.Gauge
	JournalFirstOff prometheus.Gauge
	StreamsStarted  prometheus.Counter
	SpilledBytes    prometheus.Counter
	// CoverageSync is the time to store the coverage file durably.
	CoverageSync prometheus.Histogram
	// Gaps counts gap changes journaled with --accept-gap.
	Gaps prometheus.Counter
	// CoalesceWindows counts the windows in which the receive loop let
	// messages gather in the socket (see Options.ReceiveCoalesce).
	CoalesceWindows prometheus.Counter
}

// NewMetrics creates the collectors and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		RecordsWritten:  prometheus.NewCounter(prometheus.CounterOpts{Name: "pgq_records_written_total", Help: "Journal records fsynced."}),
		ChangesWritten:  prometheus.NewCounter(prometheus.CounterOpts{Name: "pgq_changes_written_total", Help: "Changes in fsynced journal records."}),
		BytesReceived:   prometheus.NewCounter(prometheus.CounterOpts{Name: "pgq_pgoutput_bytes_received_total", Help: "pgoutput payload bytes received from the walsender."}),
		TxSkipped:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pgq_transactions_skipped_total", Help: "Transactions that produced no record.", ConstLabels: nil}, []string{"reason"}),
		Reconnects:      prometheus.NewCounter(prometheus.CounterOpts{Name: "pgq_reconnects_total", Help: "Replication reconnects."}),
		BatchSize:       prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pgq_group_commit_records", Help: "Records per fsynced group commit.", Buckets: prometheus.ExponentialBuckets(1, 4, 8)}),
		CommitToDurable: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pgq_commit_to_durable_seconds", Help: "PostgreSQL commit timestamp to the fsync of the transaction's final record (includes clock skew between hosts).", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		ConfirmedLSN:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "pgq_confirmed_lsn", Help: "LSN last confirmed to PostgreSQL (as a number)."}),
		ServerWALEnd:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "pgq_server_wal_end_lsn", Help: "Server WAL end from the latest keepalive (as a number)."}),
		ReceivedLSN:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "pgq_received_lsn", Help: "WAL end of the latest received data (as a number)."}),
		JournalLastOff:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "pgq_journal_last_offset", Help: "Last journal offset."}),
		JournalFirstOff: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pgq_journal_first_offset", Help: "First journal offset."}),
		StreamsStarted:  prometheus.NewCounter(prometheus.CounterOpts{Name: "pgq_streamed_transactions_total", Help: "In-progress transactions the server started streaming (protocol v2)."}),
		SpilledBytes:    prometheus.NewCounter(prometheus.CounterOpts{Name: "pgq_spilled_bytes_total", Help: "Spill file bytes of journaled transactions."}),
		CoverageSync:    prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pgq_coverage_sync_seconds", Help: "Time to store the coverage file (write, fsync, rename, directory fsync).", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		Gaps:            prometheus.NewCounter(prometheus.CounterOpts{Name: "pgq_gaps_total", Help: "Gap changes journaled because the operator accepted a hole (--accept-gap)."}),
		CoalesceWindows: prometheus.NewCounter(prometheus.CounterOpts{Name: "pgq_receive_coalesce_windows_total", Help: "Windows in which the receive loop let messages gather in the socket because the server sent at full speed (--receive-coalesce)."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.RecordsWritten, m.ChangesWritten, m.BytesReceived, m.TxSkipped, m.Reconnects,
			m.BatchSize, m.CommitToDurable, m.ConfirmedLSN, m.ServerWALEnd, m.ReceivedLSN, m.JournalLastOff, m.JournalFirstOff, m.StreamsStarted, m.SpilledBytes, m.CoverageSync, m.Gaps, m.CoalesceWindows} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("ingest: register metrics: %w", err)
			}
		}
	}
	return m, nil
}
