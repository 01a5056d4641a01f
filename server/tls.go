package server

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/opterr"
)

// TLSOptions turn on TLS for the API's listener (Options.TLS). The zero
// value serves plain HTTP. The files are PEM; Server.ReloadTLS reads them
// again (pgq run does on SIGHUP) without dropping a connection, and with
// ReloadInterval Run does so itself when their contents change.
type TLSOptions struct {
	// CertFile is the server's certificate, followed by any
	// intermediates; KeyFile its private key. Both or neither.
	CertFile, KeyFile string
	// ClientCAFile, when set, turns on mutual TLS: a client must present
	// a certificate that one of these CAs (a PEM bundle) signed, or the
	// handshake fails. Needs CertFile and KeyFile.
	ClientCAFile string
	// ReloadInterval, when positive, makes Run look at the three files
	// this often and reload them (as ReloadTLS does) when their contents
	// changed: a Kubernetes Secret or cert-manager renews them without a
	// signal. Zero: only ReloadTLS reloads.
	ReloadInterval time.Duration
}

// Enabled reports whether TLS is configured.
func (t TLSOptions) Enabled() bool {
	return t.CertFile != "" || t.KeyFile != "" || t.ClientCAFile != ""
}

// Validate checks that the files are named together; it does not read
// them (Open does, and fails with one line naming the bad file).
func (t TLSOptions) Validate() error {
	if (t.CertFile == "") != (t.KeyFile == "") {
		return opterr.New(ingest.ErrConfig, "{} and {} go together (a certificate and its private key)", opterr.Of("server.TLSOptions.CertFile", "server.TLSOptions.KeyFile"))
	}
	if t.ClientCAFile != "" && t.CertFile == "" {
		return opterr.New(ingest.ErrConfig, "{} (mutual TLS) needs {} and {}", opterr.Of("server.TLSOptions.ClientCAFile", "server.TLSOptions.CertFile", "server.TLSOptions.KeyFile"))
	}
	if t.ReloadInterval < 0 {
		return opterr.New(ingest.ErrConfig, "{} %s is negative (0: reload only on SIGHUP)", opterr.Of("server.TLSOptions.ReloadInterval"), t.ReloadInterval)
	}
	return nil
}

// ErrNoTLS is ReloadTLS's answer when the server serves plain HTTP.
var ErrNoTLS error = opterr.New(nil, "TLS is not configured ({}, {})", opterr.Of("server.TLSOptions.CertFile", "server.TLSOptions.KeyFile"))

// tlsFiles is one reading of the TLS files: the configuration every
// handshake until the next successful reload uses.
type tlsFiles struct {
	cfg  *tls.Config
	leaf *x509.Certificate
}

// certReloader serves the TLS files read last. A handshake takes the
// current tlsFiles through GetConfigForClient, so a reload swaps the
// certificate (and the client CAs) for new connections while open ones
// go on with the old.
type certReloader struct {
	o   TLSOptions
	log *slog.Logger
	cur atomic.Pointer[tlsFiles]
	mu  sync.Mutex // one reload at a time; guards seen
	// seen is the fingerprint of the files at the last reading, good or
	// bad: the watcher reloads only when it differs, so bad files are
	// reported once per change, not once per tick.
	seen filesSum
	// reloads counts reloads by result ("ok", "error").
	reloads *prometheus.CounterVec
}

// newCertReloader reads the files once: pgq does not start with files it
// cannot use.
func newCertReloader(o TLSOptions, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{o: o, log: log, reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgq_tls_reloads_total", Help: "Reloads of the TLS files (SIGHUP, or a change seen every --tls-reload-interval) by result: ok, or error (the certificate in use stays).",
	}, []string{"result"})}
	r.seen = o.fingerprint() // before reading: a change in between is reloaded once more, never missed
	f, err := loadTLSFiles(o)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ingest.ErrConfig, err)
	}
	r.cur.Store(f)
	r.warnExpiry(f.leaf)
	return r, nil
}

// loadTLSFiles reads and checks the certificate, its key and the client
// CAs.
func loadTLSFiles(o TLSOptions) (*tlsFiles, error) {
	cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s with key %s: %w", o.CertFile, o.KeyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("tls: certificate %s: %w", o.CertFile, err)
		}
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		// HTTP/1.1 only: the API's limits count connections, and one
		// HTTP/2 connection would carry many requests past them.
		NextProtos: []string{"http/1.1"},
	}
	if o.ClientCAFile != "" {
		pemBytes, err := os.ReadFile(o.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("tls: client CA %s: no PEM certificate in it", o.ClientCAFile)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return &tlsFiles{cfg: cfg, leaf: leaf}, nil
}

// config is the listener's tls.Config: every handshake gets the files
// read last.
func (r *certReloader) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.cur.Load().cfg, nil
		},
	}
}

// Reload reads the files again. On an error the files read before stay in
// use (a half-written renewal must not take the API down) and the error
// is logged at ERROR and returned; trigger says who asked for it.
func (r *certReloader) Reload(trigger string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reloadLocked(r.o.fingerprint(), trigger)
}

// ReloadIfChanged reloads the files when their fingerprint differs from
// the last reading's (nil, and nothing logged, when it does not). Bad
// files are thus reported once; the next tick after they change again
// (the renewal completed) reloads them.
func (r *certReloader) ReloadIfChanged() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sum := r.o.fingerprint()
	if sum == r.seen {
		return nil
	}
	return r.reloadLocked(sum, "files changed")
}

// reloadLocked reads the files, whose fingerprint was sum just before, and
// serves them when they can be used. r.mu is held.
func (r *certReloader) reloadLocked(sum filesSum, trigger string) error {
	r.seen = sum
	f, err := loadTLSFiles(r.o)
	if err != nil {
		r.reloads.WithLabelValues("error").Inc()
		old := r.cur.Load().leaf
		r.log.Error("TLS reload failed: the certificate in use stays", "error", err, "trigger", trigger,
			"serving_subject", old.Subject.String(), "serving_not_after", old.NotAfter.UTC())
		return err
	}
	r.cur.Store(f)
	r.reloads.WithLabelValues("ok").Inc()
	r.log.Info("TLS files reloaded", "trigger", trigger, "subject", f.leaf.Subject.String(), "serial", f.leaf.SerialNumber.String(), "not_after", f.leaf.NotAfter.UTC(),
		"client_ca", r.o.ClientCAFile != "")
	r.warnExpiry(f.leaf)
	return nil
}

// watch calls ReloadIfChanged every interval until ctx is done.
func (r *certReloader) watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = r.ReloadIfChanged() // logged and counted by reloadLocked
		}
	}
}

// filesSum is a fingerprint of the TLS files' contents.
type filesSum [sha256.Size]byte

// fingerprint hashes the contents of the certificate, key and client-CA
// files. Contents, not stat: a renewed certificate usually has the very
// size of the old one, mtimes are coarse on some file systems and kept by
// some copiers (cp -p, tar, rsync -t), and Kubernetes swaps a symlink to a
// new directory, which stat of the link misses; reading through the path
// sees whatever a reload would read. The files are a few KiB, read once
// per interval. A file that cannot be read counts by its error, so its
// disappearance and its return are changes too.
func (o TLSOptions) fingerprint() filesSum {
	h := sha256.New()
	for _, name := range []string{o.CertFile, o.KeyFile, o.ClientCAFile} {
		if name == "" {
			fmt.Fprint(h, "none;")
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintf(h, "error %q;", err.Error())
			continue
		}
		fmt.Fprintf(h, "%d:", len(b)) // lengths keep the files apart
		h.Write(b)
	}
	var sum filesSum
	h.Sum(sum[:0])
	return sum
}

// warnExpiry warns about a certificate that expired or is not valid yet:
// pgq serves it anyway (clocks differ), but clients will refuse it.
func (r *certReloader) warnExpiry(leaf *x509.Certificate) {
	now := time.Now()
	if now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		r.log.Warn("the TLS certificate is not valid now: clients will refuse it", "subject", leaf.Subject.String(), "not_before", leaf.NotBefore.UTC(), "not_after", leaf.NotAfter.UTC())
	}
}

// collectors are the reloader's metrics: the reload counter and the
// expiry of the certificate served.
func (r *certReloader) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.reloads,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pgq_tls_cert_not_after_seconds", Help: "Expiry (Unix time) of the TLS certificate the API serves: alert well before it."},
			func() float64 { return float64(r.cur.Load().leaf.NotAfter.Unix()) }),
	}
}

// ReloadTLS reads Options.TLS's files again (pgq run does on SIGHUP):
// connections made afterwards get the new certificate and client CAs,
// open ones keep theirs. When the new files are bad (missing, a key that
// does not match, a half-written renewal) the old ones stay in use and the
// error is logged at ERROR and returned. ErrNoTLS without TLS.
func (s *Server) ReloadTLS() error { return s.ReloadTLSFor("request") }

// ReloadTLSFor is ReloadTLS, logging trigger as what asked for it
// (ReloadTLS's is "request"; pgq run's SIGHUP is "signal").
func (s *Server) ReloadTLSFor(trigger string) error {
	if s.tls == nil {
		return ErrNoTLS
	}
	return s.tls.Reload(trigger)
}

// openTLS reads Options.TLS's files and registers the TLS metrics; a
// no-op without TLS.
func (s *Server) openTLS() error {
	if !s.o.TLS.Enabled() {
		return nil
	}
	r, err := newCertReloader(s.o.TLS, s.o.Logger)
	if err != nil {
		return err
	}
	for _, c := range r.collectors() {
		if err := s.registry.Register(c); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	s.tls = r
	return nil
}

// watchTLS starts the goroutine that reloads changed TLS files every
// Options.TLS.ReloadInterval (none without TLS or with a zero interval);
// Run calls the returned stop, which waits for it to end.
func (s *Server) watchTLS(ctx context.Context) (stop func()) {
	every := s.o.TLS.ReloadInterval
	if s.tls == nil || every <= 0 {
		return func() {}
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.tls.watch(wctx, every)
	}()
	return func() {
		cancel()
		<-done
	}
}

// ErrExposed: the API would listen beyond loopback with nothing keeping
// strangers out (no token, no client certificates) and
// Options.InsecureNoAuth does not say so. Wraps ingest.ErrConfig.
var ErrExposed = fmt.Errorf("%w: the API listens beyond loopback without a token or client certificates", ingest.ErrConfig)

// checkExposed refuses an API that listens beyond loopback with nothing
// keeping strangers out, as Redis's protected mode does, unless
// Options.InsecureNoAuth says so (then it warns, at every start); and it
// warns about a token that crosses the network in clear text (no TLS).
func (s *Server) checkExposed(addr net.Addr) error {
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	o := &s.o
	switch {
	case o.AuthToken == "" && o.TLS.ClientCAFile == "" && !o.InsecureNoAuth:
		return fmt.Errorf("%w (%s): %w", ErrExposed, addr, opterr.New(nil, "anyone who can reach it could read every change and move every group; set {+env} or {}, listen on 127.0.0.1, or accept it with {}", opterr.Of("server.Options.AuthToken", "server.TLSOptions.ClientCAFile", "server.Options.InsecureNoAuth")))
	case o.AuthToken == "" && o.TLS.ClientCAFile == "":
		o.Logger.Warn("server.Options.InsecureNoAuth: the API listens on a non-loopback address without server.Options.AuthToken: anyone who can reach it can read every change and move every group", "listen", addr.String())
	case o.AuthToken != "" && s.tls == nil:
		o.Logger.Warn("the API listens on a non-loopback address without TLS: the bearer token and every change cross the network in clear text (server.TLSOptions.CertFile, server.TLSOptions.KeyFile)", "listen", addr.String())
	}
	return nil
}
