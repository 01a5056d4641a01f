// Package e2e holds pgq's cross-package end-to-end tests: the pgq
// binary against a real PostgreSQL with a bridge and a broker around it,
// where no one package is what is under test. Each package's own tests,
// end-to-end ones included, live beside it.
//
// nodeloss_test.go kills pgq's node under write load (its data dir lost)
// and checks that a bridge into JetStream or Kafka delivers every row
// with a new pgq that holds the slot for the bridge's group.
//
// The package has no code; `make test` runs its tests, with -race too.
package e2e
