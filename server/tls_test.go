package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/syncbuf"
	"github.com/pgq-dev/pgq/internal/testcert"
)

// servedSerial is the serial number of the certificate a new TLS
// connection to addr gets.
func servedSerial(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	got, err := testcert.ServedSerial(addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestTLSServeAndReload runs pgq with TLS and mutual TLS on a real
// listener: a client trusting the CA and showing its certificate works,
// one without a certificate is refused, plain HTTP to the port gets no
// API, the probe listener stays plain HTTP; ReloadTLS serves new files to
// new connections, and bad new files leave the old certificate serving
// with an ERROR.
func TestTLSServeAndReload(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	dir := t.TempDir()
	set, err := testcert.NewSet(dir, "pgq test CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile := set.CAFile, set.CertFile, set.KeyFile
	clientCert, clientKey := set.ClientCertFile, set.ClientKeyFile
	first := set.Server
	logs := &syncbuf.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Open(ctx, Options{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0", ProbeListen: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		TLS:    TLSOptions{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile},
		Ingest: ingest.Options{PGURL: db.URL, Slot: "tls_" + db.Name, Publication: "tls", CreateSlot: true, CreatePublication: "all"}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	url := "https://" + s.Addr()
	call := func(o client.TLSOptions) error {
		cl, err := client.New(url, client.Options{TLS: o, Retry: client.RetryOptions{GiveUp: 5 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_, err = cl.Groups(cctx)
		return err
	}
	if err := call(client.TLSOptions{CAFile: caFile, CertFile: clientCert, KeyFile: clientKey}); err != nil {
		t.Fatalf("https with the CA and a client certificate: %v", err)
	}
	if err := call(client.TLSOptions{CAFile: caFile}); !errors.Is(err, client.ErrTLS) || !strings.Contains(err.Error(), "client certificate") {
		t.Fatalf("without a client certificate: %v; want ErrTLS asking for one", err)
	}
	resp, err := http.Get("http://" + s.Addr() + "/v1/groups")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "groups") {
			t.Fatalf("plain HTTP to the TLS port: %d %q; want 400 and no API", resp.StatusCode, body)
		}
	}
	resp, err = http.Get("http://" + s.ProbeAddr() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("probe listener over plain HTTP: %v %v", resp, err)
	}
	resp.Body.Close()

	cfg, err := set.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, s.Addr(), cfg); got != first.Cert.SerialNumber.String() {
		t.Fatalf("serving serial %s, want the first certificate's %s", got, first.Cert.SerialNumber)
	}

	second, err := set.RenewServer("pgq-2")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadTLS(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if got := servedSerial(t, s.Addr(), cfg); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after the reload serving serial %s, want the second certificate's %s", got, second.Cert.SerialNumber)
	}
	if !strings.Contains(logs.String(), "TLS files reloaded") {
		t.Fatalf("no INFO of the reload in the log:\n%s", logs)
	}

	// A renewal caught half-written: the key no longer matches.
	if _, err := set.RenewServerCertOnly("pgq-3"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadTLS(); err == nil || !strings.Contains(err.Error(), certFile) {
		t.Fatalf("reload of a certificate without its key: %v; want an error naming %s", err, certFile)
	}
	if got := servedSerial(t, s.Addr(), cfg); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after a failed reload serving serial %s, want the second certificate's %s still", got, second.Cert.SerialNumber)
	}
	if !strings.Contains(logs.String(), "level=ERROR msg=\"TLS reload failed: the certificate in use stays\"") {
		t.Fatalf("no ERROR of the failed reload in the log:\n%s", logs)
	}
	if err := call(client.TLSOptions{CAFile: caFile, CertFile: clientCert, KeyFile: clientKey}); err != nil {
		t.Fatalf("https after the failed reload: %v", err)
	}
	metrics := getOK(t, "http://"+s.ProbeAddr()+"/metrics")
	for _, want := range []string{`pgq_tls_reloads_total{result="ok"} 1`, `pgq_tls_reloads_total{result="error"} 1`, "pgq_tls_cert_not_after_seconds "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// getOK returns the body of a GET that must answer 200.
func getOK(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return string(body)
}

// TestTLSOptionsRefused: TLS files named apart, or files pgq cannot use,
// stop Open with a configuration error naming them; ReloadTLS without
// TLS says so.
func TestTLSOptionsRefused(t *testing.T) {
	dir := t.TempDir()
	set, err := testcert.NewSet(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := set.CertFile, set.KeyFile
	for name, tc := range map[string]struct {
		o    TLSOptions
		want string
	}{
		"cert without key":    {TLSOptions{CertFile: certFile}, "server.TLSOptions.CertFile and server.TLSOptions.KeyFile go together"},
		"client CA alone":     {TLSOptions{ClientCAFile: certFile}, "needs server.TLSOptions.CertFile"},
		"key for the cert":    {TLSOptions{CertFile: keyFile, KeyFile: certFile}, keyFile},
		"missing cert":        {TLSOptions{CertFile: filepath.Join(dir, "none.crt"), KeyFile: keyFile}, "none.crt"},
		"client CA not a PEM": {TLSOptions{CertFile: certFile, KeyFile: keyFile, ClientCAFile: keyFile}, "no PEM certificate"},
		"negative interval":   {TLSOptions{CertFile: certFile, KeyFile: keyFile, ReloadInterval: -time.Second}, "server.TLSOptions.ReloadInterval -1s is negative"},
	} {
		s, err := Open(context.Background(), Options{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0", TLS: tc.o,
			Ingest: ingest.Options{PGURL: "postgres://127.0.0.1:1/x", Slot: "s", Publication: "p"}})
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, ingest.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want a configuration error with %q", name, err, tc.want)
		}
	}
	s, err := Open(context.Background(), Options{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0",
		Ingest: ingest.Options{PGURL: "postgres://127.0.0.1:1/x", Slot: "s", Publication: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.ReloadTLS(); !errors.Is(err, ErrNoTLS) {
		t.Fatalf("ReloadTLS without TLS: %v", err)
	}
}

// TestCheckExposed: beyond loopback pgq refuses an API nobody needs a
// secret for unless --insecure-no-auth says so (then it warns), and warns
// about a token sent without TLS; with a token and TLS, with client
// certificates, or on loopback it says nothing.
func TestCheckExposed(t *testing.T) {
	wild := &net.TCPAddr{IP: net.IPv4zero, Port: 5480}
	pod := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 5480}
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5480}
	loop6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 5480}
	tlsOn := &certReloader{}
	for name, tc := range map[string]struct {
		addr    net.Addr
		o       Options
		tls     *certReloader
		refused bool
		want    string // "" : no warning
	}{
		"open":                {wild, Options{}, nil, true, ""},
		"open on a pod IP":    {pod, Options{}, nil, true, ""},
		"open, said insecure": {wild, Options{InsecureNoAuth: true}, nil, false, "server.Options.InsecureNoAuth:"},
		"token in clear":      {wild, Options{AuthToken: "x"}, nil, false, "clear text"},
		"token over TLS":      {wild, Options{AuthToken: "x"}, tlsOn, false, ""},
		"mutual TLS":          {wild, Options{TLS: TLSOptions{ClientCAFile: "ca.pem"}}, tlsOn, false, ""},
		"loopback, no token":  {loop, Options{}, nil, false, ""},
		"::1, no token":       {loop6, Options{}, nil, false, ""},
	} {
		logs := &syncbuf.Buffer{}
		tc.o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		s := &Server{o: tc.o, tls: tc.tls}
		err := s.checkExposed(tc.addr)
		if tc.refused != (err != nil) || err != nil && (!errors.Is(err, ErrExposed) || !errors.Is(err, ingest.ErrConfig) || !strings.Contains(err.Error(), "server.Options.InsecureNoAuth")) {
			t.Errorf("%s: %v, want refused=%v (ErrExposed naming --insecure-no-auth)", name, err, tc.refused)
		}
		got := logs.String()
		if tc.want == "" && got != "" || tc.want != "" && (!strings.Contains(got, "level=WARN") || !strings.Contains(got, tc.want)) {
			t.Errorf("%s: logged %q, want %q", name, got, tc.want)
		}
	}
}

// runTLSServer runs a pgq serving set's files over mutual TLS, reloading
// them every interval (0: never by itself), with a probe listener for
// the metrics; it stops when the test ends.
func runTLSServer(t *testing.T, set *testcert.Set, interval time.Duration) (*Server, *syncbuf.Buffer) {
	t.Helper()
	db := pgtest.Shared(t).NewDB(t)
	logs := &syncbuf.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Open(ctx, Options{DataDir: filepath.Join(t.TempDir(), "data"), Listen: "127.0.0.1:0", ProbeListen: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		TLS:    TLSOptions{CertFile: set.CertFile, KeyFile: set.KeyFile, ClientCAFile: set.CAFile, ReloadInterval: interval},
		Ingest: ingest.Options{PGURL: db.URL, Slot: "tlsw_" + db.Name, Publication: "tlsw", CreateSlot: true, CreatePublication: "all"}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return s, logs
}

// reloadCount is pgq_tls_reloads_total{result} as the probe listener's
// /metrics says (0 before the first such reload).
func reloadCount(t *testing.T, s *Server, result string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^pgq_tls_reloads_total\{result="` + result + `"\} (\d+)$`).FindStringSubmatch(getOK(t, "http://"+s.ProbeAddr()+"/metrics"))
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond every 10 ms for up to limit and fails with what
// otherwise.
func waitFor(t *testing.T, limit time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", limit, what())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTLSReloadOnFileChange: with a reload interval and no ReloadTLS call,
// renewed files are served within a few intervals (counted as ok); a
// renewal caught half-written keeps the old certificate and is counted
// and logged once, however many ticks see it; once completed it is
// served.
func TestTLSReloadOnFileChange(t *testing.T) {
	const interval = 50 * time.Millisecond
	// Generous against a loaded machine: the check runs every interval,
	// so a working watcher takes one or two.
	const within = 40 * interval
	set, err := testcert.NewSet(t.TempDir(), "pgq watch CA")
	if err != nil {
		t.Fatal(err)
	}
	s, logs := runTLSServer(t, set, interval)
	cfg, err := set.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string { return servedSerial(t, s.Addr(), cfg) }
	if got, want := serial(), set.Server.Cert.SerialNumber.String(); got != want {
		t.Fatalf("serving serial %s, want the first certificate's %s", got, want)
	}
	okBefore := reloadCount(t, s, "ok")

	second, err := set.RenewServer("pgq-2")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, within, func() bool { return serial() == second.Cert.SerialNumber.String() },
		func() string { return "renewed files not served; log:\n" + logs.String() })
	if got := reloadCount(t, s, "ok"); got <= okBefore {
		t.Fatalf(`pgq_tls_reloads_total{result="ok"} %d after the renewal, %d before`, got, okBefore)
	}
	if !strings.Contains(logs.String(), `msg="TLS files reloaded" trigger="files changed"`) {
		t.Fatalf("no INFO of the reload on change:\n%s", logs)
	}

	// A tick may have caught RenewServer between its two writes: count
	// from here.
	errBefore := reloadCount(t, s, "error")
	const failed = `level=ERROR msg="TLS reload failed: the certificate in use stays"`
	logsBefore := strings.Count(logs.String(), failed)
	third, err := set.RenewServerCertOnly("pgq-3")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, within, func() bool { return reloadCount(t, s, "error") > errBefore },
		func() string { return "a half-written renewal was not reported; log:\n" + logs.String() })
	time.Sleep(10 * interval) // ten more ticks see the same bad files
	if got := reloadCount(t, s, "error"); got != errBefore+1 {
		t.Fatalf(`pgq_tls_reloads_total{result="error"} %d, want %d: one per change, not per tick`, got, errBefore+1)
	}
	if got := strings.Count(logs.String(), failed) - logsBefore; got != 1 {
		t.Fatalf("%d ERRORs for one half-written renewal, want 1:\n%s", got, logs)
	}
	if got := serial(); got != second.Cert.SerialNumber.String() {
		t.Fatalf("with half-written files serving serial %s, want the second certificate's %s still", got, second.Cert.SerialNumber)
	}

	// The renewal completes: its key arrives.
	if err := os.WriteFile(set.KeyFile, third.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, within, func() bool { return serial() == third.Cert.SerialNumber.String() },
		func() string { return "the completed renewal was not served; log:\n" + logs.String() })
}

// TestTLSNoReloadWithoutInterval: with ReloadInterval 0 renewed files are
// not picked up by themselves, only by ReloadTLS (SIGHUP in pgq run).
func TestTLSNoReloadWithoutInterval(t *testing.T) {
	set, err := testcert.NewSet(t.TempDir(), "pgq no-watch CA")
	if err != nil {
		t.Fatal(err)
	}
	s, logs := runTLSServer(t, set, 0)
	cfg, err := set.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	first := set.Server
	second, err := set.RenewServer("pgq-2")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // ten ticks of the interval the other tests use
	if got := servedSerial(t, s.Addr(), cfg); got != first.Cert.SerialNumber.String() {
		t.Fatalf("without a reload interval serving serial %s, want the first certificate's %s", got, first.Cert.SerialNumber)
	}
	if n := reloadCount(t, s, "ok") + reloadCount(t, s, "error"); n != 0 {
		t.Fatalf("%d reloads without a reload interval or ReloadTLS; log:\n%s", n, logs)
	}
	if err := s.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, s.Addr(), cfg); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after ReloadTLS serving serial %s, want the second certificate's %s", got, second.Cert.SerialNumber)
	}
}

// TestTLSReloadSymlinkSwap renews the files as the kubelet updates a
// mounted Secret: the named files are symlinks through ..data, a symlink
// to a timestamped directory that is swapped atomically for a new one.
// The swap is seen and served; rewriting the same contents (a new mtime,
// the same bytes, as a Secret resync does) is no reload.
func TestTLSReloadSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	set, err := testcert.NewSet(dir, "pgq k8s CA") // the files pgq reads are under mount
	if err != nil {
		t.Fatal(err)
	}
	mount := filepath.Join(dir, "mount")
	// version writes the pair into its own directory and points ..data at it.
	version := func(n string, p *testcert.Pair) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(mount, n), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, _, err := p.Write(filepath.Join(mount, n), "tls"); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(mount, "..data_tmp")
		if err := os.Symlink(n, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(mount, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(mount, 0o755); err != nil {
		t.Fatal(err)
	}
	version("..v1", set.Server)
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(mount, f)); err != nil {
			t.Fatal(err)
		}
	}
	logs := &syncbuf.Buffer{}
	r, err := newCertReloader(TLSOptions{CertFile: filepath.Join(mount, "tls.crt"), KeyFile: filepath.Join(mount, "tls.key")}, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.config())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // complete each handshake, then hang up
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	cfg, err := set.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string { return servedSerial(t, ln.Addr().String(), cfg) }

	// Same bytes, new mtime: nothing to reload.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(mount, "..v1", "tls.crt"), later, later); err != nil {
		t.Fatal(err)
	}
	if err := r.ReloadIfChanged(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "TLS files reloaded") {
		t.Fatalf("files with the same contents were reloaded:\n%s", logs)
	}

	second, err := set.CA.Server("pgq-2")
	if err != nil {
		t.Fatal(err)
	}
	version("..v2", second)
	if err := r.ReloadIfChanged(); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != second.Cert.SerialNumber.String() {
		t.Fatalf("after the ..data swap serving serial %s, want the new certificate's %s; log:\n%s", got, second.Cert.SerialNumber, logs)
	}
}
