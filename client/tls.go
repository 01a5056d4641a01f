package client

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/pgq-dev/pgq/opterr"
)

// TLSOptions say how the client verifies pgq's certificate and which
// certificate it shows pgq (mutual TLS). They apply to an https://
// address; the zero value trusts the system's roots, which on Linux and
// the BSDs honour the SSL_CERT_FILE and SSL_CERT_DIR environment
// variables. The files are read when the client is made.
type TLSOptions struct {
	// CAFile is a PEM bundle of the CAs that sign pgq's certificate: only
	// they are trusted (not the system's roots).
	CAFile string
	// CertFile and KeyFile are the client's certificate and private key
	// (PEM), for a pgq started with --tls-client-ca. Both or neither.
	CertFile, KeyFile string
	// Config, when set, is the base of the client's tls.Config (cloned;
	// the files above are added to the clone).
	Config *tls.Config
}

// ErrTLS marks a call that failed in TLS itself: pgq's certificate is not
// trusted or not for the address's host, pgq refused the client's
// certificate or wants one, or one side speaks TLS and the other does
// not. Such a call is not retried: it would fail the same way.
var ErrTLS = errors.New("TLS")

func (t TLSOptions) set() bool {
	return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.Config != nil
}

func (t TLSOptions) validate() error {
	if (t.CertFile == "") != (t.KeyFile == "") {
		return errors.New("client: options: TLS CertFile and KeyFile go together (a client certificate and its key)")
	}
	return nil
}

// tlsConfig is the transport's tls.Config for the address u (nil: Go's
// default, the system's roots). TLS options with an http:// address are
// refused: whoever set them expects the token to travel encrypted.
func tlsConfig(o Options, u *url.URL) (*tls.Config, error) {
	if !o.TLS.set() {
		return nil, nil
	}
	if u.Scheme != "https" {
		return nil, fmt.Errorf("client: dial %s: TLS options (a CA or a client certificate) need an https:// address", u.Redacted())
	}
	if o.HTTPClient != nil {
		return nil, errors.New("client: options: set TLS on the HTTPClient's transport, or TLS without an HTTPClient, not both")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.TLS.Config != nil {
		cfg = o.TLS.Config.Clone()
	}
	if o.TLS.CAFile != "" {
		data, err := os.ReadFile(o.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("client: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("client: CA file %s: no PEM certificate in it", o.TLS.CAFile)
		}
		cfg.RootCAs = pool
	}
	if o.TLS.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.TLS.CertFile, o.TLS.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client: client certificate %s with key %s: %w", o.TLS.CertFile, o.TLS.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// TLSError is a call that failed in TLS itself, with what to do about
// it (errors.Is(err, ErrTLS) holds for it). Options are the TLSOptions
// fields whose value would end the failure, in opterr's terms
// ("client.TLSOptions.CAFile"; "client.TLSOptions.CertFile",
// "client.TLSOptions.KeyFile"), none when only a change on pgq's side or
// of the address would; Hint renders the remedy with a program's own
// names for them, as opterr.Error.Render does for every other option.
type TLSError struct {
	Err     error
	Options []opterr.Option
	remedy  *opterr.Error // the hint, one placeholder per Options
}

func (e *TLSError) Error() string   { return e.Err.Error() + " (" + e.Hint(nil) + ")" }
func (e *TLSError) Unwrap() []error { return []error{ErrTLS, e.Err} }

// Hint is what to do, naming each field of Options as name returns it
// (nil: "client.TLSOptions.CAFile", the client's own terms).
func (e *TLSError) Hint(name func(o opterr.Option, env bool) string) string {
	if name == nil {
		name = func(o opterr.Option, _ bool) string { return string(o) }
	}
	return e.remedy.Render(name)
}

// remedy is a TLSError without its Err whose hint names opts.
func remedy(hint string, opts ...opterr.Option) *TLSError {
	return &TLSError{Options: opts, remedy: opterr.New(nil, hint, opts)}
}

// tlsHint marks err, a failed request's error, as ErrTLS with a hint
// when TLS failed; other errors come back as they are.
func tlsHint(err error) error {
	if e := tlsCause(err); e != nil {
		e.Err = err
		return e
	}
	return err
}

// tlsCause says what a TLS failure means (a TLSError without its Err),
// nil for other errors. Go names two cases only in its messages: an
// alert pgq sent (net.OpError "remote error") and an https request
// answered in plain HTTP.
func tlsCause(err error) *TLSError {
	var cv *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	var op *net.OpError
	switch {
	case errors.As(err, &cv):
		return verifyCause(cv.Err)
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"), errors.As(err, &rh):
		return remedy("pgq serves plain HTTP on this port: use an http:// address, or start pgq with --tls-cert and --tls-key")
	case errors.As(err, &op) && op.Op == "remote error":
		if strings.Contains(op.Err.Error(), "certificate required") {
			return remedy("pgq requires a client certificate signed by a CA of its --tls-client-ca (mutual TLS): give one with {} and {}; one of another CA is not sent",
				"client.TLSOptions.CertFile", "client.TLSOptions.KeyFile")
		}
		return remedy("pgq refused the TLS handshake: check the client certificate ({}, {}) against pgq's --tls-client-ca",
			"client.TLSOptions.CertFile", "client.TLSOptions.KeyFile")
	}
	return nil
}

// verifyCause explains why pgq's certificate was not accepted.
func verifyCause(err error) *TLSError {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	switch {
	case errors.As(err, &ua):
		return remedy("pgq's certificate is not signed by a CA this client trusts: give that CA with {} or SSL_CERT_FILE",
			"client.TLSOptions.CAFile")
	case errors.As(err, &hn):
		return remedy("pgq's certificate is not for this address's host: connect by a name the certificate lists")
	case errors.As(err, &ci) && ci.Reason == x509.Expired:
		return remedy("pgq's certificate has expired or is not valid yet (or a clock is wrong)")
	}
	return remedy("pgq's certificate was not accepted")
}

// plainToTLS recognizes Go's answer to a plain HTTP request on a TLS
// port (a 400 with this body), nil otherwise.
func plainToTLS(status int, body []byte) error {
	if status != http.StatusBadRequest || !bytes.Contains(body, []byte("HTTP request to an HTTPS server")) {
		return nil
	}
	e := remedy("pgq serves TLS here: use an https:// address")
	e.Err = errors.New("plain HTTP sent to a TLS port")
	return e
}
