package jetstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgq-dev/pgq/bridge"
)

// Options configure New. Zero values get the defaults noted.
type Options struct {
	// URL of the NATS server(s), comma-separated; required.
	URL string
	// Stream the subjects must belong to; zero → "PGQ". Every publish
	// expects it, so a subject captured by another stream is an error.
	Stream string
	// Subject template; zero → "pgq.{schema}.{table}" (see
	// bridge.ParseTemplate). Placeholder values are made valid subject
	// tokens: '.', '*', '>', white space and control characters become '_'.
	Subject string
	// CreateStream creates Stream (file storage, one replica, subjects
	// from the template with each placeholder token as '*', Duplicates as
	// its duplicate window) when it does not exist. Without it a missing
	// stream is an error.
	CreateStream bool
	// Duplicates is the duplicate window of a created stream; zero → 2m
	// (JetStream's default). An existing stream keeps its own.
	Duplicates time.Duration
	// Replicas of a created stream; zero → 1.
	Replicas int
	// Window is the most messages in flight (sent, not acknowledged);
	// zero → 4096.
	Window int
	// AckTimeout fails a message not acknowledged in time; zero → 10s.
	AckTimeout time.Duration
	// Credentials: a creds file (JWT + nkey), an nkey seed file, user and
	// password, or a token; all optional.
	CredsFile, NKeyFile, User, Password, Token string
	// TLS for the connection; nil → as the URL says (tls:// needs the
	// system roots).
	TLS *tls.Config
	// Name of the connection as the server shows it; zero → "pgq-bridge".
	Name string
}

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	switch {
	case o.URL == "":
		return errors.New("jetstream: options: no NATS URL")
	case o.Window < 0 || o.AckTimeout < 0 || o.Duplicates < 0 || o.Replicas < 0:
		return errors.New("jetstream: options: negative limit")
	case (o.User != "") != (o.Password != ""):
		return errors.New("jetstream: options: user and password go together")
	}
	if o.Subject != "" {
		if _, err := bridge.ParseTemplate(o.Subject); err != nil {
			return fmt.Errorf("jetstream: subject: %w", err)
		}
	}
	if o.Stream != "" && strings.ContainsAny(o.Stream, ". *>\t\r\n/\\") {
		return fmt.Errorf("jetstream: options: invalid stream name %q", o.Stream)
	}
	return nil
}

// Publisher publishes bridge messages to one JetStream stream.
type Publisher struct {
	o     Options
	nc    *nats.Conn
	js    jetstream.JetStream
	names bridge.Cache
	popts []jetstream.PublishOpt
	dups  atomic.Uint64
}

// New connects, checks (or creates) the stream and returns a publisher.
// An unreachable server or a missing stream is an error at once.
func New(ctx context.Context, o Options) (*Publisher, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Stream == "" {
		o.Stream = "PGQ"
	}
	if o.Subject == "" {
		o.Subject = "pgq.{schema}.{table}"
	}
	if o.Duplicates == 0 {
		o.Duplicates = 2 * time.Minute
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Window == 0 {
		o.Window = 4096
	}
	if o.AckTimeout == 0 {
		o.AckTimeout = 10 * time.Second
	}
	if o.Name == "" {
		o.Name = "pgq-bridge"
	}
	tmpl, err := bridge.ParseTemplate(o.Subject)
	if err != nil {
		return nil, fmt.Errorf("jetstream: subject: %w", err)
	}
	nopts := []nats.Option{
		nats.Name(o.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		// No reconnect buffer: a publish while disconnected fails at once
		// instead of being sent after messages that failed before it,
		// which would break per-key order.
		nats.ReconnectBufSize(-1),
	}
	if o.CredsFile != "" {
		nopts = append(nopts, nats.UserCredentials(o.CredsFile))
	}
	if o.NKeyFile != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("jetstream: nkey: %w", err)
		}
		nopts = append(nopts, opt)
	}
	if o.User != "" {
		nopts = append(nopts, nats.UserInfo(o.User, o.Password))
	}
	if o.Token != "" {
		nopts = append(nopts, nats.Token(o.Token))
	}
	if o.TLS != nil {
		nopts = append(nopts, nats.Secure(o.TLS))
	}
	nc, err := nats.Connect(o.URL, nopts...)
	if err != nil {
		return nil, fmt.Errorf("jetstream: connect %s: %w", o.URL, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(o.Window+1), jetstream.WithPublishAsyncTimeout(o.AckTimeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	p := &Publisher{o: o, nc: nc, js: js, names: bridge.Cache{T: tmpl, Clean: Token},
		popts: []jetstream.PublishOpt{jetstream.WithExpectStream(o.Stream)}}
	if err := p.ensureStream(ctx, tmpl); err != nil {
		nc.Close()
		return nil, err
	}
	return p, nil
}

// StreamSubjects returns the subject filter a template publishes to: each
// token holding a placeholder becomes '*'.
func StreamSubjects(t string) string {
	toks := strings.Split(t, ".")
	for i, tok := range toks {
		if strings.Contains(tok, "{") {
			toks[i] = "*"
		}
	}
	return strings.Join(toks, ".")
}

func (p *Publisher) ensureStream(ctx context.Context, tmpl bridge.Template) error {
	_, err := p.js.Stream(ctx, p.o.Stream)
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("jetstream: stream %s: %w", p.o.Stream, err)
	}
	if !p.o.CreateStream {
		return fmt.Errorf("jetstream: stream %s does not exist (create it, or use --create-stream)", p.o.Stream)
	}
	_, err = p.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: p.o.Stream, Subjects: []string{StreamSubjects(tmpl.String())},
		Storage: jetstream.FileStorage, Replicas: p.o.Replicas, Duplicates: p.o.Duplicates,
	})
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("jetstream: create stream %s: %w", p.o.Stream, err)
	}
	return nil
}

// Token makes s a valid subject token.
func Token(s string) string {
	if !strings.ContainsFunc(s, badSubjectRune) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if badSubjectRune(r) {
			return '_'
		}
		return r
	}, s)
}

func badSubjectRune(r rune) bool {
	return r == '.' || r == '*' || r == '>' || r <= ' ' || r == 0x7f
}

// Name implements bridge.Publisher.
func (p *Publisher) Name() string { return "jetstream" }

// Duplicates returns how many messages the stream acknowledged as
// duplicates (already stored under their Nats-Msg-Id).
func (p *Publisher) Duplicates() uint64 { return p.dups.Load() }

type pending struct {
	i   int
	paf jetstream.PubAckFuture
}

// Publish implements bridge.Publisher: async publishes with at most
// Window messages in flight, each with Nats-Msg-Id = "<offset>.<index>".
// On the first failure it sends nothing more and waits for what is in
// flight.
func (p *Publisher) Publish(ctx context.Context, msgs []bridge.Message, acked []bool) error {
	var (
		inflight = make([]pending, 0, min(len(msgs), p.o.Window))
		head     int
		first    error
	)
	wait := func(pd pending) error {
		select {
		case ack := <-pd.paf.Ok():
			if ack.Duplicate {
				p.dups.Add(1)
			}
			acked[pd.i] = true
			return nil
		case err := <-pd.paf.Err():
			return fmt.Errorf("jetstream: message %s: %w", msgs[pd.i].ID, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range msgs {
		if acked[i] {
			continue
		}
		for len(inflight)-head >= p.o.Window {
			if err := wait(inflight[head]); err != nil && first == nil {
				first = err
			}
			head++
			if first != nil {
				break
			}
		}
		if first != nil {
			break
		}
		m := &msgs[i]
		nm := nats.NewMsg(p.names.Name(m))
		nm.Data = m.Payload
		nm.Header.Set(jetstream.MsgIDHeader, m.ID)
		for _, h := range m.Headers() {
			nm.Header.Set(h[0], h[1])
		}
		nm.Header.Set("pgq-key", string(m.Key))
		paf, err := p.js.PublishMsgAsync(nm, p.popts...)
		if err != nil {
			first = fmt.Errorf("jetstream: publish %s: %w", m.ID, err)
			break
		}
		inflight = append(inflight, pending{i, paf})
	}
	for ; head < len(inflight); head++ {
		if err := wait(inflight[head]); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// Close drains and closes the connection.
func (p *Publisher) Close() error {
	p.nc.Close()
	return nil
}
