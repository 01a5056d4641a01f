package webhook

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/format"
)

// Header names of a request.
const (
	// HeaderSignature carries "t=<unix seconds>,v1=<hex HMAC-SHA256>"
	// (see Sign) when Options.Secret is set.
	//
	// Deprecated: it does not cover HeaderID; verify
	// HeaderWebhookSignature. Sent for one more release.
	HeaderSignature = "Pgq-Signature"
	// HeaderBatch names the batch: "<first id>..<last id>" (the stable
	// ids of its first and last change; the body names each change).
	HeaderBatch = "Pgq-Batch"
	// HeaderGroup is the group bridged.
	HeaderGroup = "Pgq-Group"
	// HeaderAttempt counts the attempts of this batch, from 1.
	HeaderAttempt = "Pgq-Attempt"
)

// Options configure New.
type Options struct {
	// URL the batches are POSTed to; required (http or https).
	URL string
	// Secret is the key that signs each request (HeaderWebhookSignature,
	// and the deprecated HeaderSignature): the decoded bytes of a whsec_
	// secret (ParseSecret); empty → unsigned.
	Secret []byte
	// Format of the changes (the bridge's Options.Format), for the
	// Content-Type: the format's batch media type
	// (format.Spec.BatchContentType: application/json for a JSON array of
	// pgq payloads or Debezium values, application/cloudevents-batch+json
	// for a CloudEvents JSON batch).
	Format format.Format
	// BatchSize is the most changes per request; zero → 100.
	BatchSize int
	// Concurrency is how many requests may be in flight at once; zero →
	// 1: one at a time, all changes in order. Above 1 the changes are
	// shared out over that many lanes by their key (bridge.AppendKey), each
	// lane one request at a time in order, so that a key's changes keep
	// their order while a slow receiver serves several requests at once.
	Concurrency int
	// Timeout of one request (a hanging receiver counts as a failure);
	// zero → 10s.
	Timeout time.Duration
	// MaxAttempts of one batch before Publish gives up (bridge.ErrGaveUp,
	// which ends the bridge); zero → retry forever.
	MaxAttempts int
	// Header are extra request headers (e.g. Authorization).
	Header http.Header
	// TLS of the connections to URL (https); nil → Go's defaults.
	TLS *tls.Config
	// Client; nil → one of its own (TLS). Whatever its CheckRedirect, the
	// publisher never follows a redirect: a 3xx is a failed attempt.
	Client *http.Client
	// Now is the signature's clock; nil → time.Now.
	Now func() time.Time
	// MaxBodyMemory bounds a request body held in memory: a larger one
	// is written (spooled) to a temporary file in SpoolDir while its
	// signature is computed, sent from the file with its Content-Length,
	// and removed once the request is done (also when it failed: a retry
	// builds it again); zero → 8 MiB.
	MaxBodyMemory int64
	// SpoolDir holds the spooled bodies; "" → os.TempDir().
	SpoolDir string
}

// Validate checks the options.
func (o Options) Validate() error {
	u, err := url.Parse(o.URL)
	switch {
	case o.URL == "":
		return errors.New("webhook: options: no URL")
	case err != nil:
		return fmt.Errorf("webhook: options: URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("webhook: options: URL %q: want http or https", o.URL)
	case o.Format.Spec().Name == "":
		return fmt.Errorf("webhook: options: invalid format %d", o.Format)
	case o.BatchSize < 0 || o.Timeout < 0 || o.MaxAttempts < 0 || o.Concurrency < 0 || o.MaxBodyMemory < 0:
		return errors.New("webhook: options: negative limit")
	}
	return nil
}

// Publisher POSTs batches of messages to a URL (bridge.Publisher).
type Publisher struct {
	o     Options
	ct    string
	lanes []*lane
}

// New returns a publisher.
func New(o Options) (*Publisher, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.BatchSize == 0 {
		o.BatchSize = 100
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = max(4, o.Concurrency)
		if o.TLS != nil {
			tr.TLSClientConfig = o.TLS
		}
		o.Client = &http.Client{Transport: tr}
	}
	o.Client = noRedirects(o.Client)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxBodyMemory == 0 {
		o.MaxBodyMemory = 8 << 20
	}
	if o.SpoolDir == "" {
		o.SpoolDir = os.TempDir()
	}
	p := &Publisher{o: o, ct: o.Format.Spec().BatchContentType}
	for range o.Concurrency {
		p.lanes = append(p.lanes, &lane{})
	}
	return p, nil
}

// Name is "webhook".
func (p *Publisher) Name() string { return "webhook" }

// Binding is format.Structured: each message is a whole event, batched
// into one JSON array per request (bridge.Binder).
func (p *Publisher) Binding() format.Binding { return format.Structured }

// Publish POSTs the unacknowledged messages in order, BatchSize at a
// time, one request at a time per lane (Options.Concurrency; one lane:
// all in order): a 2xx answer acknowledges the request's messages;
// anything else (a status, a network error, Timeout) stops the lane and
// Publish returns the error once the other lanes are done, so the bridge
// retries from that request after its backoff and no later change of the
// lane's keys is sent before it (per-key order). After MaxAttempts
// failed attempts of the same request the error wraps bridge.ErrGaveUp
// and names the batch.
func (p *Publisher) Publish(ctx context.Context, msgs []bridge.Message, acked []bool) error {
	if len(p.lanes) == 1 {
		return p.lanes[0].run(ctx, p, msgs, acked, nil)
	}
	idx := make([][]int, len(p.lanes))
	for i := range msgs {
		if !acked[i] {
			l := laneOf(msgs[i].RowKey, len(p.lanes))
			idx[l] = append(idx[l], i)
		}
	}
	errs := make([]error, len(p.lanes))
	var wg sync.WaitGroup
	for l, ln := range p.lanes {
		if len(idx[l]) == 0 {
			continue
		}
		wg.Go(func() { errs[l] = ln.run(ctx, p, msgs, acked, idx[l]) })
	}
	wg.Wait()
	var gaveUp error
	for _, err := range errs {
		if errors.Is(err, bridge.ErrGaveUp) {
			gaveUp = err
		}
	}
	if gaveUp != nil {
		return gaveUp
	}
	return errors.Join(errs...)
}

// laneOf is the lane of a message key: FNV-1a of the key, so that a
// key's changes always go through one lane, in order.
func laneOf(key []byte, lanes int) int {
	h := fnv.New32a()
	_, _ = h.Write(key) // never fails
	return int(h.Sum32() % uint32(lanes))
}

// lane sends one share of the messages, one request at a time. Each lane
// is used by one goroutine at a time (Publish is never called
// concurrently).
type lane struct {
	attempt int    // failed attempts of the request named failed
	failed  string // HeaderBatch of the request that failed last
	body    bytes.Buffer
	sel     []int // the request's message indexes
}

// run posts the unacknowledged msgs named by idx (nil: all of msgs), in
// order, stopping at the first failure.
func (ln *lane) run(ctx context.Context, p *Publisher, msgs []bridge.Message, acked []bool, idx []int) error {
	n := len(msgs)
	if idx != nil {
		n = len(idx)
	}
	at := func(k int) int {
		if idx == nil {
			return k
		}
		return idx[k]
	}
	for k := 0; k < n; {
		if acked[at(k)] {
			k++
			continue
		}
		ln.sel = ln.sel[:0]
		for k < n && len(ln.sel) < p.o.BatchSize && !acked[at(k)] {
			ln.sel = append(ln.sel, at(k))
			k++
		}
		first, last := msgs[ln.sel[0]].ID, msgs[ln.sel[len(ln.sel)-1]].ID
		batch := first + ".." + last
		attempt := 1
		if batch == ln.failed {
			attempt = ln.attempt + 1
		}
		if err := ln.post(ctx, p, msgs, batch, attempt); err != nil {
			ln.failed, ln.attempt = batch, attempt
			err = fmt.Errorf("webhook: batch %s (%d changes), attempt %d: %w", batch, len(ln.sel), attempt, err)
			if p.o.MaxAttempts > 0 && attempt >= p.o.MaxAttempts {
				return fmt.Errorf("%w: %w", bridge.ErrGaveUp, err)
			}
			return err
		}
		ln.failed, ln.attempt = "", 0
		for _, i := range ln.sel {
			acked[i] = true
		}
	}
	return nil
}

// post sends one request: the messages ln.sel names. The body is built
// in ln.body, or spooled to a file past MaxBodyMemory, and signed as it
// is built.
func (ln *lane) post(ctx context.Context, p *Publisher, msgs []bridge.Message, batch string, attempt int) error {
	ln.body.Reset()
	bw := &bodyWriter{buf: &ln.body, limit: p.o.MaxBodyMemory, dir: p.o.SpoolDir}
	defer bw.remove()
	group := msgs[ln.sel[0]].Group
	id := BatchID(group, p.o.Format.String(), func(yield func(string) bool) {
		for _, i := range ln.sel {
			if !yield(msgs[i].ID) {
				return
			}
		}
	})
	now := p.o.Now()
	if len(p.o.Secret) > 0 {
		bw.sig = NewSigning(p.o.Secret, id, now)
	}
	bw.write([]byte{'['})
	for k, i := range ln.sel {
		if k > 0 {
			bw.write([]byte{','})
		}
		bw.write(msgs[i].Payload)
	}
	bw.write([]byte{']'})
	body, err := bw.reader()
	if err != nil {
		return fmt.Errorf("spool the body: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, p.o.URL, body)
	if err != nil {
		return err
	}
	req.ContentLength = bw.n
	for k, v := range p.o.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", p.ct)
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HeaderBatch, batch)
	req.Header.Set(HeaderAttempt, strconv.Itoa(attempt))
	if group != "" {
		req.Header.Set(HeaderGroup, group)
	}
	if bw.sig != nil {
		req.Header.Set(HeaderWebhookSignature, bw.sig.Signature())
		req.Header.Set(HeaderSignature, bw.sig.LegacySignature())
	}
	resp, err := p.o.Client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // keeps the connection reusable
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if loc := resp.Header.Get("Location"); loc != "" {
			return fmt.Errorf("receiver answered %s (Location: %q; redirects are not followed)", resp.Status, loc)
		}
		return fmt.Errorf("receiver answered %s", resp.Status)
	}
	return nil
}

// noRedirects returns a copy of c that hands a redirect back as the answer
// instead of following it. Go's client would turn a POST answered with 301,
// 302 or 303 into a GET without the body, and count the receiver's 2xx for
// that GET as a delivery the receiver never saw (invariant 14).
func noRedirects(c *http.Client) *http.Client {
	cp := *c
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// bodyWriter builds a request body in buf until it passes limit, then in
// a temporary file in dir (spooled), feeding sig (when set) as it goes.
type bodyWriter struct {
	buf   *bytes.Buffer
	limit int64
	dir   string
	sig   *Signing
	f     *os.File // the spool file; nil: in buf
	w     *bufio.Writer
	n     int64 // bytes written
	err   error
}

func (b *bodyWriter) write(p []byte) {
	if b.err != nil {
		return
	}
	b.n += int64(len(p))
	if b.sig != nil {
		_, _ = b.sig.Write(p) // never fails
	}
	if b.f == nil && b.n > b.limit {
		if b.f, b.err = os.CreateTemp(b.dir, "pgq-webhook-*.json"); b.err != nil {
			return
		}
		b.w = bufio.NewWriterSize(b.f, 64<<10)
		_, b.err = b.w.Write(b.buf.Bytes())
		b.buf.Reset()
	}
	if b.f != nil {
		if b.err == nil {
			_, b.err = b.w.Write(p)
		}
		return
	}
	b.buf.Write(p)
}

// reader returns the body to send: buf's bytes, or the spool file from
// its start (closed by the request; remove deletes it).
func (b *bodyWriter) reader() (io.Reader, error) {
	if b.err != nil {
		return nil, b.err
	}
	if b.f == nil {
		return bytes.NewReader(b.buf.Bytes()), nil
	}
	if err := b.w.Flush(); err != nil {
		return nil, err
	}
	if _, err := b.f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.NopCloser(b.f), nil
}

// remove closes and deletes the spool file, if any.
func (b *bodyWriter) remove() {
	if b.f != nil {
		_ = b.f.Close()
		_ = os.Remove(b.f.Name())
	}
}
