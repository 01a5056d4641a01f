package jetstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
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
	dups  atomic.Uint64

	mu  sync.Mutex  // guards cur and its fields
	cur *batchState // the Publish in progress; nil between calls
}

// HeaderKey carries the bridge key (bridge.AppendKey).
const HeaderKey = "pgq-key"

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
	p := &Publisher{o: o, nc: nc, names: bridge.Cache{T: tmpl, Clean: Token}}
	// Acks and errors come to callbacks (no channel per message). nats.go's
	// own cap is above Window: publishes of a Publish that gave up (ctx
	// ended) may still be pending there until they time out.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*o.Window+1), jetstream.WithPublishAsyncTimeout(o.AckTimeout),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, ack *jetstream.PubAck) { p.resolved(m, ack, nil) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) { p.resolved(m, nil, err) }))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	p.js = js
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

// batchState is the Publish call in progress, as the ack callbacks see
// it.
type batchState struct {
	msgs  []bridge.Message
	acked []bool
	index map[*nats.Msg]int // sent, not yet resolved → index in msgs
	slots chan struct{}     // one token per message in flight (the window)
	err   error             // the first failure
}

// resolved is the ack and error callback of every async publish: it
// records the outcome in the current batch and frees a window slot. A
// callback for a batch whose Publish has returned changes nothing.
func (p *Publisher) resolved(m *nats.Msg, ack *jetstream.PubAck, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.cur
	if st == nil {
		return
	}
	i, ok := st.index[m]
	if !ok {
		return
	}
	delete(st.index, m)
	switch {
	case err != nil:
		if st.err == nil {
			st.err = fmt.Errorf("jetstream: message %s: %w", st.msgs[i].ID, err)
		}
	default:
		if ack.Duplicate {
			p.dups.Add(1)
		}
		st.acked[i] = true
	}
	<-st.slots
}

// Publish implements bridge.Publisher: async publishes with at most
// Window messages in flight, each with Nats-Msg-Id = "<offset>.<index>".
// On the first failure it sends nothing more and waits for what is in
// flight.
func (p *Publisher) Publish(ctx context.Context, msgs []bridge.Message, acked []bool) error {
	st := &batchState{msgs: msgs, acked: make([]bool, len(msgs)), index: make(map[*nats.Msg]int, min(len(msgs), p.o.Window)),
		slots: make(chan struct{}, p.o.Window)}
	p.mu.Lock()
	p.cur = st
	p.mu.Unlock()
	// The callbacks write st.acked; it is copied to acked under mu once
	// nothing is in flight or Publish gives up, so a late callback touches
	// nothing the caller reads.
	finish := func(err error) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.cur = nil
		for i, a := range st.acked {
			if a {
				acked[i] = true
			}
		}
		if err != nil {
			return err
		}
		return st.err
	}
	failed := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return st.err != nil
	}
	for i := range msgs {
		if acked[i] {
			continue
		}
		select {
		case st.slots <- struct{}{}:
		case <-ctx.Done():
			return finish(ctx.Err())
		}
		if failed() {
			<-st.slots
			break
		}
		nm := p.natsMsg(&msgs[i])
		p.mu.Lock()
		st.index[nm] = i
		p.mu.Unlock()
		if _, err := p.js.PublishMsgAsync(nm); err != nil {
			p.mu.Lock()
			if _, ok := st.index[nm]; ok { // not resolved by a callback
				delete(st.index, nm)
				<-st.slots
				if st.err == nil {
					st.err = fmt.Errorf("jetstream: publish %s: %w", msgs[i].ID, err)
				}
			}
			p.mu.Unlock()
			break
		}
	}
	// Filling the window waits for everything in flight.
	for range cap(st.slots) {
		select {
		case st.slots <- struct{}{}:
		case <-ctx.Done():
			return finish(ctx.Err())
		}
	}
	return finish(nil)
}

// natsMsg builds the NATS message of m: one header map and one backing
// array for the header values.
func (p *Publisher) natsMsg(m *bridge.Message) *nats.Msg {
	hs := m.Headers()
	vals := [...]string{m.ID, p.o.Stream, hs[0][1], hs[1][1], hs[2][1], hs[3][1], hs[4][1], string(m.Key)}
	vs := vals[:]
	h := make(nats.Header, len(vals))
	h[jetstream.MsgIDHeader] = vs[0:1:1]
	h[jetstream.ExpectedStreamHeader] = vs[1:2:2]
	for j := range hs {
		h[hs[j][0]] = vs[2+j : 3+j : 3+j]
	}
	h[HeaderKey] = vs[7:8:8]
	return &nats.Msg{Subject: p.names.Name(m), Data: m.Payload, Header: h}
}

// Close drains and closes the connection.
func (p *Publisher) Close() error {
	p.nc.Close()
	return nil
}
