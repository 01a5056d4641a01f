package httpapi_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/httpapi"
	"github.com/pgq-dev/pgq/internal/testcert"
)

// TestTLSListenerKeepsCaps: over TLSListener the connection caps hold as
// in plain HTTP (a connection over the cap answers only probes, which it
// can tell through the TLS connection), and only HTTP/1.1 is offered,
// even to a client asking for HTTP/2.
func TestTLSListenerKeepsCaps(t *testing.T) {
	ca, err := testcert.NewCA("ca")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Server("pgq")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	lim := httpapi.Limits{MaxConns: 1, ProbeConns: 1}
	srv, err := httpapi.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}), lim)
	if err != nil {
		t.Fatal(err)
	}
	_ = lim.Validate()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = srv.Serve(httpapi.TLSListener(httpapi.Listener(ln, lim), &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}))
	}()
	defer srv.Close()

	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	dial := func() *tls.Conn {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	get := func(c *tls.Conn, path string) int {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	holder := dial()
	if p := holder.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Fatalf("negotiated %q, want http/1.1", p)
	}
	if got := get(holder, "/v1/groups"); got != 200 {
		t.Fatalf("GET /v1/groups within the cap: %d", got)
	}
	// holder keeps the one ordinary slot (keep-alive): the next
	// connection is an overflow one.
	if got := get(dial(), "/v1/groups"); got != 503 {
		t.Fatalf("GET /v1/groups over the cap through TLS: %d, want 503", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots})
		if err == nil {
			code := get(c, "/healthz")
			c.Close()
			if code == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("GET /healthz over the cap through TLS never answered 200")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
