package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestTLSSet serves a Set's files over a real TLS listener that demands
// a client certificate signed by the set's CA: ClientConfig gets through
// and ServedSerial names the server certificate; a renewal is served once
// the files are read again; a half-written renewal leaves files that do
// not load; a client without a certificate is refused.
func TestTLSSet(t *testing.T) {
	s, err := NewSet(t.TempDir(), "set CA")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{s.CAFile, s.CertFile, s.KeyFile, s.ClientCertFile, s.ClientKeyFile} {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := s.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	serve := func() string {
		t.Helper()
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		caPEM, err := os.ReadFile(s.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			t.Fatal("no certificate in", s.CAFile)
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				// The handshake runs on the first read; a refused client
				// makes it fail, which closes the connection.
				go func(c net.Conn) { defer c.Close(); _, _ = c.Read(make([]byte, 1)) }(c)
			}
		}()
		return ln.Addr().String()
	}

	addr := serve()
	got, err := ServedSerial(addr, cfg)
	if err != nil || got != s.Server.Cert.SerialNumber.String() {
		t.Fatalf("served serial %q (%v), want the server certificate's %s", got, err, s.Server.Cert.SerialNumber)
	}
	if s.Server.CommonName != "pgq-1" || s.Client.CommonName != "worker" {
		t.Fatalf("names %q and %q, want pgq-1 and worker", s.Server.CommonName, s.Client.CommonName)
	}
	if refused(addr, cfg) {
		t.Fatal("the set's client certificate was refused")
	}
	bare := cfg.Clone()
	bare.Certificates = nil
	if !refused(addr, bare) {
		t.Fatal("a client without a certificate got through")
	}

	renewed, err := s.RenewServer("pgq-2")
	if err != nil {
		t.Fatal(err)
	}
	if s.Server != renewed {
		t.Fatal("RenewServer did not make the renewed pair the set's server")
	}
	if got, err := ServedSerial(serve(), cfg); err != nil || got != renewed.Cert.SerialNumber.String() {
		t.Fatalf("after RenewServer served serial %q (%v), want %s", got, err, renewed.Cert.SerialNumber)
	}

	if _, err := s.RenewServerCertOnly("pgq-3"); err != nil {
		t.Fatal(err)
	}
	if s.Server != renewed {
		t.Fatal("RenewServerCertOnly replaced the set's server pair")
	}
	if _, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile); err == nil {
		t.Fatal("files of a half-written renewal load")
	}
}

// refused tells whether the server at addr refuses a TLS client with
// cfg. TLS 1.3 reports a refused client certificate on the first read,
// not in the handshake; a read that only times out was let through.
func refused(addr string, cfg *tls.Config) bool {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return true
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}
