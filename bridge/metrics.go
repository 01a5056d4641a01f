package bridge

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the bridge's Prometheus metrics, labelled by group and
// broker. A nil *Metrics records nothing.
type Metrics struct {
	Registry *prometheus.Registry

	publishedC *prometheus.CounterVec
	latencyH   *prometheus.HistogramVec
	inflight   *prometheus.GaugeVec
	errors     *prometheus.CounterVec
	lagRec     *prometheus.GaugeVec
	lagSec     *prometheus.GaugeVec
	committed  *prometheus.GaugeVec
	up         *prometheus.GaugeVec
	batches    *prometheus.CounterVec

	group, broker string
}

// NewMetrics registers the metrics in a new registry (with the Go and
// process collectors).
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	l := []string{"group", "broker"}
	m := &Metrics{
		Registry:   r,
		publishedC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pgq_bridge_published_messages_total", Help: "Messages the broker acknowledged."}, l),
		latencyH: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "pgq_bridge_publish_seconds", Help: "Time from sending a batch to the broker's last acknowledgement of it (successful attempts).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, l),
		inflight:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pgq_bridge_in_flight_messages", Help: "Messages handed to the broker and not yet acknowledged, those waiting for a retry included."}, l),
		errors:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pgq_bridge_errors_total", Help: "Failed publish attempts, fetches and commits."}, append(l, "kind")),
		lagRec:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pgq_bridge_lag_records", Help: "Journal records after the group's cursor."}, l),
		lagSec:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pgq_bridge_lag_seconds", Help: "Now minus the commit time of the first record after the cursor."}, l),
		committed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pgq_bridge_committed_offset", Help: "The group's cursor."}, l),
		up:        prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pgq_bridge_broker_up", Help: "1 while the broker acknowledges, 0 from a failed publish until the next acknowledged batch."}, l),
		batches:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pgq_bridge_committed_batches_total", Help: "Batches acknowledged by the broker and committed to pgq."}, l),
	}
	r.MustRegister(m.publishedC, m.latencyH, m.inflight, m.errors, m.lagRec, m.lagSec, m.committed, m.up, m.batches)
	return m
}

func (m *Metrics) init(group, broker string) {
	if m == nil {
		return
	}
	m.group, m.broker = group, broker
	m.up.WithLabelValues(group, broker).Set(1)
	m.publishedC.WithLabelValues(group, broker)
	for _, k := range []string{"publish", "fetch", "commit"} {
		m.errors.WithLabelValues(group, broker, k)
	}
}

func (m *Metrics) published(n int) {
	if m != nil && n > 0 {
		m.publishedC.WithLabelValues(m.group, m.broker).Add(float64(n))
	}
}

func (m *Metrics) latency(d time.Duration) {
	if m != nil {
		m.latencyH.WithLabelValues(m.group, m.broker).Observe(d.Seconds())
	}
}

func (m *Metrics) inFlight(n int) {
	if m != nil {
		m.inflight.WithLabelValues(m.group, m.broker).Set(float64(n))
	}
}

func (m *Metrics) error(kind string) {
	if m != nil {
		m.errors.WithLabelValues(m.group, m.broker, kind).Inc()
	}
}

func (m *Metrics) brokerUp(up bool) {
	if m != nil {
		v := 0.0
		if up {
			v = 1
		}
		m.up.WithLabelValues(m.group, m.broker).Set(v)
	}
}

func (m *Metrics) batchCommitted() {
	if m != nil {
		m.batches.WithLabelValues(m.group, m.broker).Inc()
	}
}

func (m *Metrics) lag(records uint64, seconds float64, committed uint64) {
	if m != nil {
		m.lagRec.WithLabelValues(m.group, m.broker).Set(float64(records))
		m.lagSec.WithLabelValues(m.group, m.broker).Set(seconds)
		m.committed.WithLabelValues(m.group, m.broker).Set(float64(committed))
	}
}

// Handler serves GET /metrics (Prometheus), GET /status (Status as JSON)
// and GET /healthz for the bridge b with metrics m (nil: /metrics 404).
func Handler(b *Bridge, m *Metrics) http.Handler {
	mux := http.NewServeMux()
	if m != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(b.Status())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
