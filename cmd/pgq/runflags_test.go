package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgq-dev/pgq/internal/pgtest"
)

// TestRunFlagBounds: --segment-size and --max-record-bytes outside 4KiB to
// 1GiB, an empty --create-publication (from the command line, the
// environment or the config file), malformed --allowed-hosts or
// --allowed-origins, and a --listen beyond loopback with neither a token,
// client certificates nor --insecure-no-auth are refused with one line and the
// usage exit status before anything is opened; the bounds themselves are
// accepted (pgq then goes on to connect, and fails at runtime against a
// server that is not there).
func TestRunFlagBounds(t *testing.T) {
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable&connect_timeout=2", port)
	dir := t.TempDir()
	run := func(extra ...string) []string {
		return append([]string{"run", "--pg-url", url, "--slot", "s", "--publication", "p", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--no-reconnect"}, extra...)
	}
	cases := []exitCase{
		{"create-publication all", run("--create-publication", "all"), nil, exitRuntime, "server unreachable"},
		{"create-publication empty", run("--create-publication", ""), nil, exitUsage, "--create-publication is empty"},
		{"create-publication= empty", run("--create-publication="), nil, exitUsage, "--create-publication is empty"},
		{"create-publication empty from the environment", run(), []string{"PGQ_CREATE_PUBLICATION="}, exitUsage, "--create-publication is empty"},
		{"create-publication empty in the config file", []string{"run", "--config", writeFile(t, dir, "pub.yaml", "create-publication: \"\"\n"), "--pg-url", url, "--slot", "s", "--publication", "p",
			"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--no-reconnect"}, nil, exitUsage, "--create-publication is empty"},
		{"create-publication blank", run("--create-publication", " , "), nil, exitUsage, "--create-publication"},
		// Beyond loopback without a token or client certificates, as
		// Redis's protected mode: refused unless said insecure.
		{"listen beyond loopback without a token", run("--listen", "0.0.0.0:0"), nil, exitUsage, "--insecure-no-auth"},
		{"listen beyond loopback from the environment", []string{"run", "--pg-url", url, "--slot", "s", "--publication", "p", "--data-dir", t.TempDir(), "--no-reconnect"},
			[]string{"PGQ_LISTEN=0.0.0.0:0"}, exitUsage, "without a token or client certificates"},
		{"listen beyond loopback, said insecure", run("--listen", "0.0.0.0:0", "--insecure-no-auth"), nil, exitRuntime, "server unreachable"},
		{"listen beyond loopback with a token", run("--listen", "0.0.0.0:0", "--auth-token", "t"), nil, exitRuntime, "server unreachable"},
		{"allowed origin with a path", run("--allowed-origins", "https://a.example/ui"), nil, exitUsage, "--allowed-hosts/--allowed-origins: allowed origin"},
		{"allowed origin without a scheme", run("--allowed-origins", "a.example"), nil, exitUsage, "allowed origin"},
		{"allowed host with a port", run("--allowed-hosts", "pgq.svc:5480"), nil, exitUsage, "allowed host"},
		{"allowed hosts and origins", run("--allowed-hosts", "pgq.svc,*.corp.example", "--allowed-origins", "https://console.corp.example:8443"), nil, exitRuntime, "server unreachable"},
	}
	for _, flag := range []string{"--segment-size", "--max-record-bytes"} {
		for _, ok := range []string{"4KiB", "4096", "1GiB"} {
			cases = append(cases, exitCase{flag + " " + ok, run(flag, ok), nil, exitRuntime, "server unreachable"})
		}
		for _, bad := range []string{"0", "1", "10", "4095", "1073741825", "2GiB", "1TiB"} {
			cases = append(cases, exitCase{flag + " " + bad, run(flag, bad), nil, exitUsage, flag + " "})
		}
	}
	cases = append(cases,
		exitCase{"segment-size from the environment", run(), []string{"PGQ_SEGMENT_SIZE=1"}, exitUsage, "--segment-size 1 is out of range: want 4KiB to 1GiB"},
		exitCase{"max-record-bytes in the config file", []string{"run", "--config", writeFile(t, dir, "rec.yaml", "max-record-bytes: 10\n"), "--pg-url", url, "--slot", "s", "--publication", "p",
			"--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, nil, exitUsage, "--max-record-bytes 10 is out of range: want 4KiB to 1GiB"},
	)
	checkExits(t, cases)
	// Refused before anything was opened: no data dir was created.
	data := filepath.Join(dir, "never")
	if code, _ := runPgq(t, nil, append(run("--segment-size", "1"), "--data-dir", data)...); code != exitUsage {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused start created %s (%v)", data, err)
	}
}
