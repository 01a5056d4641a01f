package pgq_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// floors are the layers of pgq's packages, bottom first: a package imports
// only packages on lower floors (the README's architecture diagram draws
// the same). internal/ holds leaf helpers, and internal/serverparts (the
// server's unexported parts, for pgq's own tests) under server; the composition root
// (server) and the HTTP surface (httpapi) sit on top of the domain
// packages, with only the CLI and the benchmarks above them. deploy and
// e2e hold only doc.go and tests (deploy's files', the cross-package
// end-to-end ones); internal/bridgetest, the bridge tests' shared harness,
// sits beside server, and internal/servertest, a server on a fresh
// database for the consumers and CLI tests, beside the CLI.
var floors = [][]string{
	{"internal/msgp", "internal/backoff", "internal/vfsutil", "internal/pebblefs", "internal/pgtest", "internal/testcert", "internal/pgqbin", "internal/syncbuf", "internal/srclit", "internal/connectcheck", "deploy", "e2e"},
	{"", "internal/wal", "internal/pgtest/pgtestd"},
	{"api", "record", "pgoutput", "feedback", "index", "format", "console", "opterr"},
	{"journal", "client"},
	{"consumers", "ingest", "bridge"},
	{"backfill", "bridge/jetstream", "bridge/kafka", "bridge/webhook"},
	{"httpapi", "internal/serverparts"},
	{"server", "httpapi/apitest", "internal/bridgetest"},
	{"cmd/pgq", "benchmarks", "benchmarks/bigtx", "internal/servertest"},
	{"benchmarks/cmd/bigtx", "benchmarks/cmd/pgqbench"},
}

// noHTTP are the domain packages that must not import net/http: HTTP is
// httpapi's. (api does, for the status of each error code: that table is
// the wire contract client and server share.)
var noHTTP = []string{"consumers", "backfill", "ingest", "journal", "index", "record", "pgoutput", "feedback"}

// TestLayers fails on an import that runs up (or sideways) between
// pgq's packages, on a domain package that imports net/http, and on a
// package that has no floor yet (give it one here and in the README).
func TestLayers(t *testing.T) {
	const mod = "github.com/pgq-dev/pgq"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	floor := map[string]int{}
	for i, f := range floors {
		for _, p := range f {
			floor[p] = i
		}
	}
	rel := func(p string) (string, bool) {
		if p == mod {
			return "", true
		}
		r, ok := strings.CutPrefix(p, mod+"/")
		return r, ok
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, _ := rel(fields[0])
		from, ok := floor[pkg]
		if !ok {
			t.Errorf("package %q has no floor in layers_test.go", pkg)
			continue
		}
		seen++
		for _, imp := range fields[1:] {
			if imp == "net/http" && slices.Contains(noHTTP, pkg) {
				t.Errorf("%s imports net/http: HTTP belongs to httpapi", pkg)
			}
			to, ours := rel(imp)
			if !ours {
				continue
			}
			if f, ok := floor[to]; ok && f >= from {
				t.Errorf("%s (floor %d) imports %s (floor %d): imports must run down", pkg, from, to, f)
			}
		}
	}
	if seen < 20 {
		t.Fatalf("go list found only %d packages", seen)
	}
}
