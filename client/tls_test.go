package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/internal/testcert"
)

// tlsFixture is a CA, a server certificate it signed, a client
// certificate it signed, and the files of all three.
type tlsFixture struct {
	ca                *testcert.CA
	caFile            string
	certFile, keyFile string // client certificate
	server            tls.Certificate
	dir               string
	otherCAFile       string // a CA that signed nothing here
	clientPool        *x509.CertPool
}

func newTLSFixture(t *testing.T) *tlsFixture {
	t.Helper()
	f := &tlsFixture{dir: t.TempDir()}
	var err error
	if f.ca, err = testcert.NewCA("pgq test CA"); err != nil {
		t.Fatal(err)
	}
	if f.caFile, err = f.ca.WriteCA(f.dir, "ca.pem"); err != nil {
		t.Fatal(err)
	}
	other, err := testcert.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	if f.otherCAFile, err = other.WriteCA(f.dir, "other.pem"); err != nil {
		t.Fatal(err)
	}
	srv, err := f.ca.Server("pgq")
	if err != nil {
		t.Fatal(err)
	}
	if f.server, err = tls.X509KeyPair(srv.CertPEM, srv.KeyPEM); err != nil {
		t.Fatal(err)
	}
	cl, err := f.ca.Client("worker-1")
	if err != nil {
		t.Fatal(err)
	}
	if f.certFile, f.keyFile, err = cl.Write(f.dir, "client"); err != nil {
		t.Fatal(err)
	}
	f.clientPool = x509.NewCertPool()
	f.clientPool.AddCert(f.ca.Cert)
	return f
}

// serve starts a real TLS listener answering GET /v1/groups with an empty
// list and recording the client certificate's name; mutual asks for (and
// verifies) a client certificate.
func (f *tlsFixture) serve(t *testing.T, mutual bool) (*httptest.Server, *string) {
	t.Helper()
	var peer string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			peer = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"groups":[]}`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{f.server}}
	if mutual {
		srv.TLS.ClientCAs, srv.TLS.ClientAuth = f.clientPool, tls.RequireAndVerifyClientCert
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &peer
}

// groups calls the API once through a client of addr with o; retries
// would run until ctx's end, so a TLS error that came back at once was
// not retried.
func groups(t *testing.T, addr string, o client.Options) (time.Duration, error) {
	t.Helper()
	cl, err := client.New(addr, o)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = cl.Groups(ctx)
	if err != nil {
		t.Logf("%s: %v", addr, err)
	}
	return time.Since(start), err
}

// TestTLSTrustAndRefusals: over a real TLS listener the client trusts
// the CA of Options.TLS.CAFile; a server certificate of another CA, plain
// HTTP to the TLS port and TLS to a plain port fail at once (no retries)
// with ErrTLS and a message saying what to do.
func TestTLSTrustAndRefusals(t *testing.T) {
	f := newTLSFixture(t)
	srv, _ := f.serve(t, false)
	if _, err := groups(t, srv.URL, client.Options{TLS: client.TLSOptions{CAFile: f.caFile}}); err != nil {
		t.Fatalf("https with the server's CA: %v", err)
	}

	took, err := groups(t, srv.URL, client.Options{TLS: client.TLSOptions{CAFile: f.otherCAFile}})
	if !errors.Is(err, client.ErrTLS) || !strings.Contains(err.Error(), "not signed by a CA this client trusts") || !strings.Contains(err.Error(), "TLSOptions.CAFile") {
		t.Fatalf("another CA: %v; want ErrTLS naming the untrusted CA and TLSOptions.CAFile", err)
	}
	if client.IsTransient(err) || took > 3*time.Second {
		t.Fatalf("a certificate error was retried (%s, transient %v)", took, client.IsTransient(err))
	}

	// The test process's system roots do not hold the test CA.
	if _, err := groups(t, srv.URL, client.Options{}); !errors.Is(err, client.ErrTLS) {
		t.Fatalf("system roots: %v; want ErrTLS", err)
	}

	plainToTLS := "http://" + strings.TrimPrefix(srv.URL, "https://")
	took, err = groups(t, plainToTLS, client.Options{})
	if !errors.Is(err, client.ErrTLS) || !strings.Contains(err.Error(), "use an https:// address") || took > 3*time.Second {
		t.Fatalf("plain HTTP to the TLS port: %v after %s; want ErrTLS at once saying to use https://", err, took)
	}

	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"groups":[]}`))
	}))
	defer plain.Close()
	tlsToPlain := "https://" + strings.TrimPrefix(plain.URL, "http://")
	took, err = groups(t, tlsToPlain, client.Options{TLS: client.TLSOptions{CAFile: f.caFile}})
	if !errors.Is(err, client.ErrTLS) || !strings.Contains(err.Error(), "plain HTTP") || took > 3*time.Second {
		t.Fatalf("TLS to a plain port: %v after %s; want ErrTLS at once saying the port is plain HTTP", err, took)
	}
}

// TestTLSClientCertificate: a server that wants client certificates
// refuses a client without one (ErrTLS, naming TLSOptions.CertFile) and takes
// the one Options.TLS names.
func TestTLSClientCertificate(t *testing.T) {
	f := newTLSFixture(t)
	srv, peer := f.serve(t, true)
	took, err := groups(t, srv.URL, client.Options{TLS: client.TLSOptions{CAFile: f.caFile}})
	if err == nil || !errors.Is(err, client.ErrTLS) || !strings.Contains(err.Error(), "TLSOptions.CertFile") || took > 3*time.Second {
		t.Fatalf("no client certificate: %v after %s; want ErrTLS at once naming TLSOptions.CertFile", err, took)
	}
	other, err := testcert.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := other.Client("stranger")
	if err != nil {
		t.Fatal(err)
	}
	sCert, sKey, err := stranger.Write(f.dir, "stranger")
	if err != nil {
		t.Fatal(err)
	}
	took, err = groups(t, srv.URL, client.Options{TLS: client.TLSOptions{CAFile: f.caFile, CertFile: sCert, KeyFile: sKey}})
	if !errors.Is(err, client.ErrTLS) || !strings.Contains(err.Error(), "signed by a CA of its --tls-client-ca") || took > 3*time.Second {
		t.Fatalf("a client certificate of another CA: %v after %s; want ErrTLS at once naming pgq's client CAs", err, took)
	}
	if _, err := groups(t, srv.URL, client.Options{TLS: client.TLSOptions{CAFile: f.caFile, CertFile: f.certFile, KeyFile: f.keyFile}}); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	if *peer != "worker-1" {
		t.Fatalf("server saw client certificate %q, want worker-1", *peer)
	}
}

// TestTLSOptionsRefused: TLS options are refused with an http://
// address (the token would go in clear text), with an HTTPClient of the
// caller's, half a client certificate, or a CA file without a PEM
// certificate.
func TestTLSOptionsRefused(t *testing.T) {
	f := newTLSFixture(t)
	for name, tc := range map[string]struct {
		addr string
		o    client.Options
		want string
	}{
		"http address":   {"http://127.0.0.1:1", client.Options{TLS: client.TLSOptions{CAFile: f.caFile}}, "need an https:// address"},
		"own HTTPClient": {"https://127.0.0.1:1", client.Options{HTTPClient: &http.Client{}, TLS: client.TLSOptions{CAFile: f.caFile}}, "not both"},
		"cert, no key":   {"https://127.0.0.1:1", client.Options{TLS: client.TLSOptions{CertFile: f.certFile}}, "go together"},
		"CA not PEM":     {"https://127.0.0.1:1", client.Options{TLS: client.TLSOptions{CAFile: f.keyFile}}, "no PEM certificate"},
		"CA missing":     {"https://127.0.0.1:1", client.Options{TLS: client.TLSOptions{CAFile: f.dir + "/none.pem"}}, "no such file"},
	} {
		if _, err := client.New(tc.addr, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error with %q", name, err, tc.want)
		}
	}
}
