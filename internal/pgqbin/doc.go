// Package pgqbin builds the pgq command (cmd/pgq) for tests that run it
// as a process: the CLI's exit statuses and output, signals, a kill
// in the middle of a transaction.
//
// Path builds the binary on its first call in a test process, into a
// temporary directory of its own, and returns the same path to every
// later call, so that a package's tests pay for one build. A failed
// build fails every test that asks, without building again. Remove
// deletes the directory; call it from TestMain after the tests ran:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		pgqbin.Remove()
//		os.Exit(code)
//	}
//
// Build builds into a directory the caller chose (for a binary that
// other users must reach, say), each call anew.
//
// The end-to-end tests of several packages (format, cmd/pgq) run pgq the
// same way, and share it here: Output runs a command and returns its
// standard output; Start runs one in the background until the test
// ends (a bridge, say); StartRun starts `pgq run` on a free port of
// 127.0.0.1 and waits for /readyz; a Run's Out runs a command against
// it and its WebhookEvents runs `pgq bridge webhook` into a receiver of
// its own (httptest) and returns the events it got. Every process has
// the environment Env and is killed when its test ends.
//
// Path and Remove are safe for concurrent use, and so are the process
// helpers (each test has its own processes); the go command runs in
// the test's working directory, which must lie inside pgq's module.
package pgqbin
