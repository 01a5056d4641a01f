package jetstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/opterr"
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
	// SchemaChangeSubject is the subject of schema change events: in a
	// format that has them (Debezium's) a ddl or gap change becomes one
	// message there (bridge.SchemaChanger), in Stream like the data
	// (CreateStream adds it to the stream's subjects). Zero → none: such
	// changes are left out, never put on a table's subject.
	SchemaChangeSubject string
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
	if s := o.SchemaChangeSubject; s != "" && !validSubject(s) {
		return opterr.New(nil, "jetstream: options: {} %q: want dot-separated tokens, no wildcards or white space", opterr.Of("jetstream.Options.SchemaChangeSubject"), s)
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
	skips atomic.Uint64
	// rescan: read the stream's last message again before the next
	// publish (at start, after a reconnect, a failure or a duplicate).
	rescan atomic.Bool
	// lastSeq is the stream sequence the next message expects as the
	// stream's last (Nats-Expected-Last-Sequence); held is the position of
	// the stream's last message. Both are used by Publish only.
	lastSeq uint64
	held    bridge.Held

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
	p := &Publisher{}
	nopts := []nats.Option{
		nats.Name(o.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		// No reconnect buffer: a publish while disconnected fails at once
		// instead of being sent after messages that failed before it,
		// which would break per-key order.
		nats.ReconnectBufSize(-1),
		// What was in flight when the connection dropped may or may not
		// be stored: read the stream's last message again.
		nats.ReconnectHandler(func(*nats.Conn) { p.rescan.Store(true) }),
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
	p.o, p.nc, p.names = o, nc, bridge.Cache{T: tmpl, Clean: Token}
	p.rescan.Store(true)
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
		return opterr.New(nil, "jetstream: stream %s does not exist (create it, or use {})", opterr.Of("jetstream.Options.CreateStream"), p.o.Stream)
	}
	subjects := []string{StreamSubjects(tmpl.String())}
	if s := p.o.SchemaChangeSubject; s != "" && !subjectMatches(subjects[0], s) {
		subjects = append(subjects, s)
	}
	_, err = p.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: p.o.Stream, Subjects: subjects,
		Storage: jetstream.FileStorage, Replicas: p.o.Replicas, Duplicates: p.o.Duplicates,
	})
	if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("jetstream: create stream %s: %w", p.o.Stream, err)
	}
	return nil
}

// validSubject reports whether s is a subject a message can go to:
// non-empty tokens, no wildcards.
func validSubject(s string) bool {
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || strings.ContainsFunc(tok, badSubjectRune) {
			return false
		}
	}
	return true
}

// subjectMatches reports whether subject s is captured by filter f
// ('*' one token, '>' the rest): a stream refuses a subject its others
// already capture.
func subjectMatches(f, s string) bool {
	ft, st := strings.Split(f, "."), strings.Split(s, ".")
	for i, t := range ft {
		switch {
		case t == ">":
			return len(st) > i
		case i >= len(st) || (t != "*" && t != st[i]):
			return false
		}
	}
	return len(ft) == len(st)
}

// SchemaChanges implements bridge.SchemaChanger: true with a
// SchemaChangeSubject.
func (p *Publisher) SchemaChanges() bool { return p.o.SchemaChangeSubject != "" }

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

// Binding is format.NATS: a format's headers (CloudEvents' ce-*) are NATS
// headers (bridge.Binder).
func (p *Publisher) Binding() format.Binding { return format.NATS }

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
			// Not appended: the stream's last sequence is not the one
			// the next message expects.
			p.dups.Add(1)
			p.rescan.Store(true)
		}
		st.acked[i] = true
	}
	<-st.slots
}

// Skipped returns how many messages Publish skipped because the stream
// already held them (at or before the position of its last message).
func (p *Publisher) Skipped() uint64 { return p.skips.Load() }

// scan reads the stream's last sequence and the position of its last
// message (see the package doc); a last message that is not group's is
// bridge.ErrShared.
func (p *Publisher) scan(ctx context.Context, group string) error {
	st, err := p.js.Stream(ctx, p.o.Stream)
	if err != nil {
		return fmt.Errorf("jetstream: stream %s: %w", p.o.Stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("jetstream: stream %s: %w", p.o.Stream, err)
	}
	p.lastSeq, p.held = info.State.LastSeq, bridge.Held{}
	if info.State.Msgs == 0 {
		return nil
	}
	m, err := st.GetMsg(ctx, info.State.LastSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) { // the last one was deleted
		m, err = st.GetLastMsgForSubject(ctx, ">")
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("jetstream: stream %s: last message: %w", p.o.Stream, err)
	}
	held, err := bridge.CheckOwner(m.Header.Get(jetstream.MsgIDHeader), m.Header.Get(bridge.HeaderGroup), group)
	if err != nil {
		return fmt.Errorf("jetstream: stream %s, message %d: %w", p.o.Stream, m.Sequence, err)
	}
	p.held = held
	return nil
}

// Publish implements bridge.Publisher: async publishes with at most
// Window messages in flight, each with Nats-Msg-Id = the message's ID and
// Nats-Expected-Last-Sequence = the sequence of the message before it, so
// the stream stores a prefix of what is sent. Messages at or before the
// stream's last message (read at the start and after a reconnect or a
// failure) are not sent again: they count as acknowledged. On the first
// failure it sends nothing more and waits for what is in flight.
func (p *Publisher) Publish(ctx context.Context, msgs []bridge.Message, acked []bool) error {
	if len(msgs) > 0 && p.rescan.Swap(false) {
		if err := p.scan(ctx, msgs[0].Group); err != nil {
			p.rescan.Store(true)
			return err
		}
	}
	for i := range msgs {
		if !acked[i] && p.held.Covers(&msgs[i]) {
			acked[i] = true
			p.skips.Add(1)
		}
	}
	err := p.publish(ctx, msgs, acked)
	if err != nil {
		p.rescan.Store(true)
	}
	return err
}

func (p *Publisher) publish(ctx context.Context, msgs []bridge.Message, acked []bool) error {
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
	vals := [...]string{m.ID, p.o.Stream, strconv.FormatUint(p.lastSeq, 10), string(m.Key), hs[0][1], hs[1][1], hs[2][1], hs[3][1], hs[4][1], hs[5][1]}
	p.lastSeq++
	vs := vals[:]
	h := make(nats.Header, len(vals))
	h[jetstream.MsgIDHeader] = vs[0:1:1]
	h[jetstream.ExpectedStreamHeader] = vs[1:2:2]
	h[jetstream.ExpectedLastSeqHeader] = vs[2:3:3]
	if len(m.Key) > 0 { // none where the format's key is null
		h[HeaderKey] = vs[3:4:4]
	}
	for j := range hs {
		if hs[j][1] != "" || hs[j][0] != bridge.HeaderGroup {
			h[hs[j][0]] = vs[4+j : 5+j : 5+j]
		}
	}
	for _, e := range m.Extra {
		h[e[0]] = []string{e[1]}
	}
	subject := p.o.SchemaChangeSubject
	if !m.SchemaChange {
		subject = p.names.Name(m)
	}
	return &nats.Msg{Subject: subject, Data: m.Payload, Header: h}
}

// Close drains and closes the connection.
func (p *Publisher) Close() error {
	p.nc.Close()
	return nil
}
