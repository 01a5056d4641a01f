package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pgq-dev/pgq/api"
)

// Limits bound what HTTP clients can hold of pgq: connections (file
// descriptors), time, and through both memory. Nothing a client does,
// however slow, can take the file descriptors the journal and the index
// need. Zero values get the defaults noted.
type Limits struct {
	// MaxConns caps the API's concurrent connections; zero → 256. Beyond
	// it ProbeConns more are accepted, each for one request with a short
	// deadline that only GET /healthz and GET /readyz answer (others get
	// 503 unavailable), so a slow-client flood cannot get pgq killed by
	// its own probes; beyond those, new connections wait in the kernel's
	// accept queue, holding none of pgq's file descriptors.
	MaxConns int
	// ProbeConns is the overflow for probes above; zero → 8.
	ProbeConns int
	// HeaderTimeout bounds reading a request's headers; zero → 10s.
	HeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body; zero → 30s.
	BodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle that long; zero →
	// 60s.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing an answer, set per request: a fetch gets
	// its long-poll bound (MaxWait) on top, so a long poll is never cut by
	// it; zero → 30s.
	WriteTimeout time.Duration
	// MaxWait is the longest wait a fetch may ask for (consumers'
	// ManagerOptions.MaxWait); zero → 5m.
	MaxWait time.Duration
}

// probeDeadline is how long an overflow connection may take for its one
// request and answer.
const probeDeadline = 2 * time.Second

// Validate checks the limits and fills defaults.
func (l *Limits) Validate() error {
	if l.MaxConns < 0 || l.ProbeConns < 0 || l.HeaderTimeout < 0 || l.BodyTimeout < 0 || l.IdleTimeout < 0 || l.WriteTimeout < 0 || l.MaxWait < 0 {
		return errors.New("httpapi: limits must not be negative")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if l.MaxConns == 0 {
		l.MaxConns = 256
	}
	if l.ProbeConns == 0 {
		l.ProbeConns = 8
	}
	def(&l.HeaderTimeout, 10*time.Second)
	def(&l.BodyTimeout, 30*time.Second)
	def(&l.IdleTimeout, 60*time.Second)
	def(&l.WriteTimeout, 30*time.Second)
	def(&l.MaxWait, 5*time.Minute)
	return nil
}

// NewServer returns the http.Server of handler h under the limits l
// (validated), and Listener wraps its listener.
func NewServer(h http.Handler, l Limits) (*http.Server, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &http.Server{
		Handler:           deadlines(l, h),
		ReadHeaderTimeout: l.HeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		// No ReadTimeout or WriteTimeout: both would count from the start
		// of the request and cut long polls; deadlines sets them per
		// request instead.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn() // TLSListener wraps the limited connection
			}
			if lc, ok := c.(*limitedConn); ok && lc.probe {
				return context.WithValue(ctx, probeConnKey{}, true)
			}
			return ctx
		},
	}, nil
}

type probeConnKey struct{}

// deadlines sets each request's read deadline for its body (lifted once
// the body is read, so that the server's watch for a closed connection
// does not cancel a long poll) and its write deadline (WriteTimeout, plus
// MaxWait for a fetch), and answers only probes on overflow connections.
func deadlines(l Limits, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(probeConnKey{}) != nil {
			w.Header().Set("Connection", "close")
			if r.Method != http.MethodGet || (r.URL.Path != "/healthz" && r.URL.Path != "/readyz") {
				WriteError(w, api.Errorf(api.ErrUnavailable, "too many connections (the API serves %d at a time): retry later", l.MaxConns))
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		now := time.Now()
		write := l.WriteTimeout
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/fetch") {
			write += l.MaxWait
		}
		_ = rc.SetWriteDeadline(now.Add(write))
		if r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(now.Add(l.BodyTimeout))
			r.Body = &bodyDeadline{ReadCloser: r.Body, rc: rc}
		}
		next.ServeHTTP(w, r)
	})
}

// bodyDeadline lifts the read deadline once the body has been read to
// its end.
type bodyDeadline struct {
	io.ReadCloser
	rc     *http.ResponseController
	lifted bool
}

func (b *bodyDeadline) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.lifted {
		b.lifted = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// TLSListener serves TLS with cfg on ln, which Listener made: the
// connection caps count connections before their handshake, which the
// server's header timeout bounds. Only HTTP/1.1 is offered (cfg's
// NextProtos are replaced), so that a connection carries one request at a
// time as the caps assume.
func TLSListener(ln net.Listener, cfg *tls.Config) net.Listener {
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"http/1.1"}
	return tls.NewListener(ln, cfg)
}

// Listener wraps ln so that it holds at most l.MaxConns connections plus
// l.ProbeConns probe connections (see Limits); l must be validated.
func Listener(ln net.Listener, l Limits) net.Listener {
	return &limitedListener{Listener: ln, conns: make(chan struct{}, l.MaxConns), probes: make(chan struct{}, l.ProbeConns), closed: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	conns  chan struct{} // a token per open connection
	probes chan struct{} // a token per open overflow (probe) connection
	closed chan struct{} // closed by Close: wakes an Accept waiting for a slot
	once   sync.Once
}

func (l *limitedListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// Accept takes a connection slot before accepting, so that beyond the
// caps new connections stay in the kernel's queue. An overflow slot is
// taken only while every ordinary slot is busy.
func (l *limitedListener) Accept() (net.Conn, error) {
	var slot chan struct{}
	select {
	case l.conns <- struct{}{}:
		slot = l.conns
	default:
		select {
		case l.conns <- struct{}{}:
			slot = l.conns
		case l.probes <- struct{}{}:
			slot = l.probes
		case <-l.closed:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-slot
		return nil, err
	}
	lc := &limitedConn{Conn: c, release: func() { <-slot }, probe: slot == l.probes}
	if lc.probe {
		lc.until = time.Now().Add(probeDeadline)
		_ = c.SetDeadline(lc.until)
	}
	return lc, nil
}

// limitedConn gives its slot back once, when closed. A probe
// connection's deadlines never reach past its accept time plus
// probeDeadline, whatever the server sets.
type limitedConn struct {
	net.Conn
	probe   bool
	until   time.Time // a probe connection's last moment
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

func (c *limitedConn) clamp(t time.Time) time.Time {
	if c.probe && (t.IsZero() || t.After(c.until)) {
		return c.until
	}
	return t
}

func (c *limitedConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.clamp(t)) }
func (c *limitedConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.clamp(t)) }
func (c *limitedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.clamp(t)) }

// String names the limits for logs and errors.
func (l Limits) String() string {
	return fmt.Sprintf("max %d connections (+%d for probes), header %s, body %s, idle %s, write %s (+%s for a fetch)",
		l.MaxConns, l.ProbeConns, l.HeaderTimeout, l.BodyTimeout, l.IdleTimeout, l.WriteTimeout, l.MaxWait)
}
