package prometheus

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/server"
)

const (
	rulesPath     = "pgq-alerts.yml"
	dashboardPath = "../grafana/pgq.json"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, pgtest.Options{})) }

// TestRules: Prometheus's rule parser accepts the file, and every alert
// has a severity, a `for` and both annotations the docs promise.
func TestRules(t *testing.T) {
	groups, err := ruleFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/monitoring.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is not an alert: %q", g.Name, r.Expr)
				continue
			}
			if r.For == 0 {
				t.Errorf("%s: no for:", r.Alert)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			if !bytes.Contains(doc, []byte("### "+r.Alert+"\n")) {
				t.Errorf("%s: no section in docs/monitoring.md", r.Alert)
			}
		}
	}
	if n == 0 {
		t.Fatal("no rules")
	}
}

// TestRulesParserRejects: the check fails on a broken expression and on
// a dashboard target that selects nothing by name.
func TestRulesParserRejects(t *testing.T) {
	bad := t.TempDir() + "/bad.yml"
	if err := os.WriteFile(bad, []byte("groups:\n- name: x\n  rules:\n  - alert: X\n    expr: rate(pgq_x[5m]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ruleFile(bad); err == nil {
		t.Error("a rule with an unbalanced parenthesis parsed")
	}
	if _, err := metricNames(`sum(rate({job="pgq"}[5m]))`); err == nil {
		t.Error("an expression without a metric name passed")
	}
	if got, err := metricNames(`histogram_quantile(0.99, sum by (le) (rate(a_bucket[5m]))) > on() b`); err != nil || strings.Join(got, ",") != "a_bucket,b" {
		t.Errorf("names %v, %v", got, err)
	}
}

// TestDashboard: the datasource is the DS_PROMETHEUS input on every panel
// and target, and every target parses as PromQL.
func TestDashboard(t *testing.T) {
	d, err := readDashboard(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.Inputs[0].PluginID != "prometheus" {
		t.Errorf("inputs %+v, want one Prometheus datasource DS_PROMETHEUS", d.Inputs)
	}
	const ds = `"${DS_PROMETHEUS}"`
	targets := 0
	for _, p := range d.allPanels() {
		if p.Type == "row" {
			continue
		}
		if !bytes.Contains(p.Datasource, []byte(ds)) {
			t.Errorf("panel %q: datasource %s", p.Title, p.Datasource)
		}
		for _, tg := range p.Targets {
			targets++
			if !bytes.Contains(tg.Datasource, []byte(ds)) {
				t.Errorf("panel %q: target datasource %s", p.Title, tg.Datasource)
			}
		}
	}
	if _, err := dashboardNames(d); err != nil {
		t.Error(err)
	}
	if targets == 0 {
		t.Fatal("no targets")
	}
}

// TestMetricsExist: every metric the rules and the dashboard name is on
// /metrics of a running pgq or of a running JetStream bridge.
func TestMetricsExist(t *testing.T) {
	groups, err := ruleFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	fromRules, err := rulesNames(groups)
	if err != nil {
		t.Fatal(err)
	}
	d, err := readDashboard(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	fromDashboard, err := dashboardNames(d)
	if err != nil {
		t.Fatal(err)
	}
	// The extraction finds what the files are about (not an empty list
	// that would pass trivially).
	for _, c := range []struct {
		from []string
		name string
	}{{fromRules, "pgq_slot_lag_bytes"}, {fromRules, "pgq_bridge_errors_total"}, {fromRules, "pgq_fsync_seconds_bucket"},
		{fromDashboard, "pgq_journal_size_bytes"}, {fromDashboard, "pgq_bridge_published_messages_total"}, {fromDashboard, "pgq_tail_delivery_seconds_bucket"}} {
		if !slices.Contains(c.from, c.name) {
			t.Errorf("%s not among the names extracted: %v", c.name, c.from)
		}
	}
	want := uniq(append(fromRules, fromDashboard...))

	served := map[string]bool{}
	pgqAddr := runPGQ(t)
	for n := range scrape(t, "http://"+pgqAddr+"/metrics") {
		served[n] = true
	}
	for n := range scrape(t, "http://"+runBridge(t, pgqAddr)+"/metrics") {
		served[n] = true
	}
	for _, n := range want {
		if !served[n] {
			t.Errorf("%s is named by the rules or the dashboard but served by neither pgq nor a bridge", n)
		}
	}
	t.Logf("%d metric names checked", len(want))
}

// runPGQ runs pgq against a real PostgreSQL, journals a few transactions
// and creates a group, and returns its API address.
func runPGQ(t *testing.T) string {
	t.Helper()
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE mon (id int PRIMARY KEY)`)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := server.Open(ctx, server.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler),
		Ingest: ingest.Options{PGURL: db.URL, Slot: "mon_" + db.Name, Publication: "mon", CreateSlot: true, CreatePublication: "all"}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "ingest streaming", func() bool { return serverparts.Of(s).Ingester.Status().ProtoVersion != 0 })
	cl, err := client.New(s.Addr(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateGroup(context.Background(), api.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `INSERT INTO mon VALUES (1)`, `INSERT INTO mon VALUES (2)`, `INSERT INTO mon VALUES (3)`)
	waitFor(t, "3 records", func() bool { return serverparts.Of(s).Journal.LastOffset() >= 3 })
	return s.Addr()
}

// runBridge bridges group "g" of pgq into an embedded nats-server's
// JetStream, serves the bridge's HTTP surface (what --listen serves) on
// a real listener and returns its address once a batch is acknowledged.
func runBridge(t *testing.T, pgqAddr string) string {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	ctx, cancel := context.WithCancel(context.Background())
	pub, err := jetstream.New(ctx, jetstream.Options{URL: ns.ClientURL(), CreateStream: true})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cl, err := client.New(pgqAddr, client.Options{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	m := bridge.NewMetrics()
	b, err := bridge.New(bridge.Options{Client: cl, Group: "g", Member: "mon", Publisher: pub, Wait: 200 * time.Millisecond,
		LagInterval: 100 * time.Millisecond, Metrics: m, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	srv := &http.Server{Handler: bridge.Handler(b, m), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); cancel(); <-done })
	addr := l.Addr().String()
	waitFor(t, "a batch the broker acknowledged", func() bool {
		mf := scrape(t, "http://"+addr+"/metrics")["pgq_bridge_committed_batches_total"]
		return mf != nil && len(mf.Metric) > 0 && mf.Metric[0].GetCounter().GetValue() > 0
	})
	return addr
}

// scrape reads a /metrics page with Prometheus's text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", url, resp.Status)
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	out := map[string]*dto.MetricFamily{}
	for name, f := range families {
		out[name] = f
		// A histogram's series are named with these suffixes in PromQL.
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[name+s] = f
			}
		}
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
