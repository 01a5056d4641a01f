// Package servertest runs pgq's server (server.Open and Run) on a fresh
// PostgreSQL database for the tests of several packages: consumers'
// integration tests and the CLI's (cmd/pgq), which drive the pgq binary
// against it.
//
// Start creates a database on the cluster it is given with tables
// t(id serial, v text) and u(id int), opens the server on a temporary
// data dir with every HTTP answer held to openapi.json
// (httpapi/apitest), and returns once ingest streams. Env.Insert writes
// rows into t and waits until the journal and index hold them. The test's
// cleanup stops the server and drops its slot.
//
// It is imported by tests only; its functions fail the test they are
// given rather than return errors.
package servertest
