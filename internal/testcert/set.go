package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"time"
)

// Set is what a test of TLS with client certificates needs: a CA, a
// server certificate and a client certificate, written as PEM files into
// one directory. The server files keep their names across RenewServer,
// as an operator's renewed files do, so a reload reads them again.
type Set struct {
	CA     *CA
	Server *Pair // "pgq-1" until renewed
	Client *Pair // "worker"
	Dir    string

	CAFile                        string // Dir/ca.pem
	CertFile, KeyFile             string // Dir/server.crt, Dir/server.key
	ClientCertFile, ClientKeyFile string // Dir/worker.crt, Dir/worker.key
}

// NewSet makes a CA named caName, a server certificate "pgq-1" and a
// client certificate "worker", and writes them into dir.
func NewSet(dir, caName string) (*Set, error) {
	ca, err := NewCA(caName)
	if err != nil {
		return nil, err
	}
	s := &Set{CA: ca, Dir: dir}
	if s.CAFile, err = ca.WriteCA(dir, "ca.pem"); err != nil {
		return nil, err
	}
	if _, err = s.RenewServer("pgq-1"); err != nil {
		return nil, err
	}
	if s.Client, err = ca.Client("worker"); err != nil {
		return nil, err
	}
	if s.ClientCertFile, s.ClientKeyFile, err = s.Client.Write(dir, "worker"); err != nil {
		return nil, err
	}
	return s, nil
}

// RenewServer signs a new server certificate named name and writes it
// over the server files, as a certificate renewal does.
func (s *Set) RenewServer(name string) (*Pair, error) {
	p, err := s.CA.Server(name)
	if err != nil {
		return nil, err
	}
	if s.CertFile, s.KeyFile, err = p.Write(s.Dir, "server"); err != nil {
		return nil, err
	}
	s.Server = p
	return p, nil
}

// RenewServerCertOnly signs a new server certificate named name and
// writes only its certificate over the server's: a renewal caught half
// written, whose key file no longer matches. Server stays the old pair,
// which a reload of these files must keep serving.
func (s *Set) RenewServerCertOnly(name string) (*Pair, error) {
	p, err := s.CA.Server(name)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.CertFile, p.CertPEM, 0o644); err != nil {
		return nil, fmt.Errorf("testcert: %w", err)
	}
	return p, nil
}

// ClientConfig is a client's TLS configuration that trusts only the
// set's CA and shows the set's client certificate.
func (s *Set) ClientConfig() (*tls.Config, error) {
	pair, err := tls.X509KeyPair(s.Client.CertPEM, s.Client.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("testcert: client key pair: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(s.CA.Cert)
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}, nil
}

// dialTimeout bounds ServedSerial, so that a listener that accepts but
// never completes a handshake fails the test instead of hanging it.
const dialTimeout = 10 * time.Second

// ServedSerial is the serial number (decimal) of the certificate a new
// TLS connection to addr with cfg gets: it tells which of several
// certificates a server serves after a reload.
func ServedSerial(addr string, cfg *tls.Config) (string, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: dialTimeout}, "tcp", addr, cfg)
	if err != nil {
		return "", fmt.Errorf("testcert: TLS dial %s: %w", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}
