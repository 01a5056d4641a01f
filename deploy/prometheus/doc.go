// Package prometheus checks pgq's monitoring files: the alert rules in
// pgq-alerts.yml (next to this file) and the Grafana dashboard in
// ../grafana/pgq.json. It is a Go module of its own so that Prometheus's
// packages (rulefmt, the PromQL parser) and their dependencies stay out of
// pgq's go.mod; `make test` runs its test.
//
// The test validates the rules with Prometheus's rule parser, parses every
// rule expression and every dashboard target with the PromQL parser
// (Grafana's $__rate_interval and friends replaced by a duration first),
// collects the metric names they select, and checks that each one is
// served on /metrics by a running pgq (real PostgreSQL) or by a running
// JetStream bridge (embedded nats-server). It also evaluates every alert
// expression with Prometheus's engine over series shaped like the
// alert's situation and like a healthy instance: each must fire for the
// first only.
//
// Nothing here runs outside tests; the package has no exported API.
package prometheus
