package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/syncbuf"
	"github.com/pgq-dev/pgq/internal/testcert"
)

// TestTLSEndToEnd runs the pgq binary with --tls-cert, --tls-key and
// --tls-client-ca against a real PostgreSQL: the CLI reaches it over an
// https:// --addr (or PGQ_ADDR) trusting the CA from --ca-cert,
// PGQ_CA_CERT or SSL_CERT_FILE and showing its certificate; without the
// CA, without a certificate or over plain HTTP it fails with one line
// saying why (usage exit status). SIGHUP makes pgq serve renewed files,
// and bad ones leave the old certificate serving with an ERROR
// (--tls-reload-interval 0: the signal alone, not a tick, reloads).
func TestTLSEndToEnd(t *testing.T) {
	c, err := pgtest.Start(pgtest.Options{}) // cmd/pgq has no shared cluster
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	dir := t.TempDir()
	set, err := testcert.NewSet(dir, "pgq e2e CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile := set.CAFile, set.CertFile, set.KeyFile
	clientCert, clientKey := set.ClientCertFile, set.ClientKeyFile
	other, err := testcert.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	otherFile, err := other.WriteCA(dir, "other.pem")
	if err != nil {
		t.Fatal(err)
	}
	first := set.Server
	port, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	stderr := &syncbuf.Buffer{}
	run := exec.Command(pgqbin.Path(t), "run", "--pg-url", db.URL, "--slot", "tls_e2e", "--publication", "tls_e2e", "--create-slot", "--create-publication", "all",
		"--data-dir", filepath.Join(dir, "data"), "--listen", addr, "--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", caFile, "--tls-reload-interval", "0")
	run.Env = append(cliEnv(), "PGQ_LOG_FORMAT=json")
	run.Stderr = stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = run.Wait(); close(exited) }()
	defer func() {
		_ = run.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = run.Process.Kill()
			<-exited
		}
	}()

	cfg, err := set.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string {
		got, _ := testcert.ServedSerial(addr, cfg) // "" until pgq serves TLS
		return got
	}
	waitSerial := func(want, what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for serial() != want {
			select {
			case <-exited:
				t.Fatalf("pgq exited; stderr:\n%s", stderr)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: serving serial %q, want %s; stderr:\n%s", what, serial(), want, stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitSerial(first.Cert.SerialNumber.String(), "pgq listening over TLS")

	url := "https://" + addr
	cli := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(pgqbin.Path(t), args...)
		cmd.Env = append(cliEnv(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := cli(nil, "groups", "create", "g", "--addr", url, "--ca-cert", caFile, "--client-cert", clientCert, "--client-key", clientKey); err != nil {
		t.Fatalf("groups create over https with --ca-cert: %v %s", err, out)
	}
	if out, err := cli([]string{"PGQ_ADDR=" + url, "PGQ_CA_CERT=" + caFile, "PGQ_CLIENT_CERT=" + clientCert, "PGQ_CLIENT_KEY=" + clientKey}, "groups", "list"); err != nil || !strings.Contains(out, `"g"`) {
		t.Fatalf("groups list with PGQ_ADDR and PGQ_CA_CERT: %v %s", err, out)
	}
	if out, err := cli([]string{"SSL_CERT_FILE=" + caFile}, "groups", "info", "g", "--addr", url, "--client-cert", clientCert, "--client-key", clientKey); err != nil {
		t.Fatalf("groups info trusting SSL_CERT_FILE: %v %s", err, out)
	}

	// pgq healthcheck in pgq's container: pgq run's environment, no --addr.
	if out, err := cli([]string{"PGQ_LISTEN=" + addr, "PGQ_TLS_CERT=" + certFile, "PGQ_CA_CERT=" + caFile, "PGQ_CLIENT_CERT=" + clientCert, "PGQ_CLIENT_KEY=" + clientKey}, "healthcheck"); err != nil {
		t.Fatalf("healthcheck at PGQ_LISTEN with PGQ_TLS_CERT: %v %s", err, out)
	}

	withCert := []string{"--client-cert", clientCert, "--client-key", clientKey}
	checkExits(t, []exitCase{
		{"untrusted CA", append([]string{"groups", "list", "--addr", url}, withCert...), []string{"SSL_CERT_FILE=" + otherFile}, exitUsage, "not signed by a CA this client trusts"},
		{"another CA by --ca-cert", append([]string{"groups", "list", "--addr", url, "--ca-cert", otherFile}, withCert...), nil, exitUsage, "give that CA with --ca-cert or SSL_CERT_FILE"},
		{"no client certificate", []string{"groups", "list", "--addr", url, "--ca-cert", caFile}, nil, exitUsage, "requires a client certificate signed by a CA of its --tls-client-ca (mutual TLS): give one with --client-cert and --client-key"},
		{"plain HTTP to the TLS port", []string{"groups", "list", "--addr", addr}, nil, exitUsage, "use an https:// address"},
		{"CA file with an http address", []string{"groups", "list", "--addr", addr, "--ca-cert", caFile}, nil, exitUsage, "need an https:// address"},
		{"client cert without key", []string{"groups", "list", "--addr", url, "--client-cert", clientCert}, nil, exitUsage, "go together"},
		{"tls-cert without tls-key", []string{"run", "--pg-url", db.URL, "--slot", "s", "--publication", "p", "--data-dir", t.TempDir(), "--tls-cert", certFile}, nil, exitUsage, "--tls-cert and --tls-key go together"},
		{"tls-cert missing", []string{"run", "--pg-url", db.URL, "--slot", "s", "--publication", "p", "--data-dir", t.TempDir(), "--tls-cert", filepath.Join(dir, "none.crt"), "--tls-key", keyFile}, nil, exitUsage, "none.crt"},
	})

	// Renewed files, then SIGHUP: new connections get the new certificate.
	second, err := set.RenewServer("pgq-2")
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitSerial(second.Cert.SerialNumber.String(), "after SIGHUP with renewed files")
	// The line is logged after the swap that waitSerial saw.
	waitLog := func(line, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(stderr.String(), line) {
			if time.Now().After(deadline) {
				t.Fatalf("%s; stderr:\n%s", what, stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitLog(`"msg":"TLS files reloaded","trigger":"signal"`, "the SIGHUP reload is not logged with trigger signal")

	// A certificate whose key is not there yet: SIGHUP keeps the old one.
	if _, err := set.RenewServerCertOnly("pgq-3"); err != nil {
		t.Fatal(err)
	}
	if err := run.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(`"level":"ERROR","msg":"TLS reload failed: the certificate in use stays"`, "no ERROR of the failed reload")
	if got := serial(); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after SIGHUP with bad files serving serial %q, want the second certificate's %s", got, second.Cert.SerialNumber)
	}
	if out, err := cli(nil, "groups", "info", "g", "--addr", url, "--ca-cert", caFile, "--client-cert", clientCert, "--client-key", clientKey); err != nil {
		t.Fatalf("groups info after the failed reload: %v %s", err, out)
	}
}

// TestTLSReloadIntervalFlag: --tls-reload-interval defaults to 1m, is
// read from PGQ_TLS_RELOAD_INTERVAL, takes 0 (only SIGHUP), reaches
// server.TLSOptions.ReloadInterval, and a negative one is refused.
func TestTLSReloadIntervalFlag(t *testing.T) {
	set, err := testcert.NewSet(t.TempDir(), "flag CA")
	if err != nil {
		t.Fatal(err)
	}
	run := func(extra ...string) []string {
		return append([]string{"run", "--pg-url", "postgres://127.0.0.1:1/x", "--slot", "s", "--publication", "p", "--data-dir", t.TempDir(),
			"--tls-cert", set.CertFile, "--tls-key", set.KeyFile}, extra...)
	}
	interval := func(args ...string) time.Duration {
		t.Helper()
		cli, err := parseCLI(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return cli.Run.options().ReloadInterval
	}
	if got := interval(run()...); got != time.Minute {
		t.Errorf("default --tls-reload-interval %s, want 1m", got)
	}
	if got := interval(run("--tls-reload-interval", "0")...); got != 0 {
		t.Errorf("--tls-reload-interval 0 gave %s", got)
	}
	t.Setenv("PGQ_TLS_RELOAD_INTERVAL", "50ms")
	if got := interval(run()...); got != 50*time.Millisecond {
		t.Errorf("PGQ_TLS_RELOAD_INTERVAL=50ms gave %s", got)
	}
	if _, err := parseCLI(t, run("--tls-reload-interval=-1s")...); err == nil || !strings.Contains(errorLine(err), "--tls-reload-interval -1s is negative") {
		t.Errorf("--tls-reload-interval=-1s: %v; want it refused as negative", err)
	}
}
