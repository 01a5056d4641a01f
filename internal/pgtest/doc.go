// Package pgtest starts throwaway PostgreSQL clusters for tests, benchmarks
// and the demo: initdb into a temporary directory, wal_level=logical, a free
// port on 127.0.0.1 and a unix socket inside the directory. initdb and
// postgres refuse to run as root, so when the process is root the cluster
// runs as the "postgres" user and its directory is owned by it.
//
// The server binaries come from $PGQ_PG_BINDIR when set (make test-matrix
// points it at each major fetched by scripts/pg-server.sh), else from
// `pg_config --bindir`, falling back to the newest /usr/lib/postgresql/*/bin.
//
// A Cluster is safe for concurrent use by the tests of one package: each
// test takes its own database with CreateDB.
package pgtest
