// Package bridgetest holds what the bridge tests of several packages
// share (bridge, bridge/jetstream, bridge/kafka, bridge/webhook and the
// end-to-end tests in e2e): a Source, an in-process pgq API over a real
// journal and index (no PostgreSQL) that journals transactions (among
// them changes Debezium has no event for, and a key change: two events)
// and remembers every change's message id and key; an embedded nats-server
// and a kfake Kafka cluster; readers of a stream or topic; the checks
// that every change arrived (exactly once, or at least once) in per-key
// order; the child bridge process (Main, StartChild) that the kill tests
// SIGKILL; and the benchmarks' timed bridge round (BridgeRound, CPUTime).
//
// It is imported by tests only; its functions fail the test they are
// given rather than return errors.
package bridgetest
