package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/pgq-dev/pgq/bridge"
)

// Options configure New. Zero values get the defaults noted.
type Options struct {
	// Brokers are the seed brokers ("host:port"); required.
	Brokers []string
	// Topic template; zero → "pgq.{schema}.{table}" (see
	// bridge.ParseTemplate). Placeholder values are made valid topic name
	// parts: characters other than [A-Za-z0-9._-] become '_'.
	Topic string
	// CreateTopics creates a topic (Partitions, ReplicationFactor) the
	// first time a message goes to it, if it does not exist.
	CreateTopics bool
	// Partitions and ReplicationFactor of created topics; zero → the
	// broker's defaults.
	Partitions        int32
	ReplicationFactor int16
	// DeliveryTimeout fails a record not acknowledged in time (the
	// bridge then retries the unacknowledged records); zero → 30s.
	DeliveryTimeout time.Duration
	// Linger of producer batches; zero → 5ms.
	Linger time.Duration
	// SASL: Mechanism "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512" with
	// User and Password; zero → no SASL.
	Mechanism, User, Password string
	// TLS; nil → plaintext.
	TLS *tls.Config
	// ClientID; zero → "pgq-bridge".
	ClientID string
}

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	switch {
	case len(o.Brokers) == 0:
		return errors.New("kafka: options: no brokers")
	case o.Partitions < 0 || o.ReplicationFactor < 0 || o.DeliveryTimeout < 0 || o.Linger < 0:
		return errors.New("kafka: options: negative limit")
	}
	switch strings.ToUpper(o.Mechanism) {
	case "":
		if o.User != "" {
			return errors.New("kafka: options: a SASL user needs a mechanism")
		}
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if o.User == "" {
			return errors.New("kafka: options: SASL needs a user")
		}
	default:
		return fmt.Errorf("kafka: options: unknown SASL mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", o.Mechanism)
	}
	if o.Topic != "" {
		if _, err := bridge.ParseTemplate(o.Topic); err != nil {
			return fmt.Errorf("kafka: topic: %w", err)
		}
	}
	return nil
}

// Publisher publishes bridge messages to Kafka through franz-go's
// idempotent producer.
type Publisher struct {
	o     Options
	cl    *kgo.Client
	adm   *kadm.Client
	names bridge.Cache
	known map[string]bool // topics created or seen to exist
}

// New connects (a broker must answer within ctx or 10s) and returns a
// publisher.
func New(ctx context.Context, o Options) (*Publisher, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Topic == "" {
		o.Topic = "pgq.{schema}.{table}"
	}
	if o.DeliveryTimeout == 0 {
		o.DeliveryTimeout = 30 * time.Second
	}
	if o.Linger == 0 {
		o.Linger = 5 * time.Millisecond
	}
	if o.ClientID == "" {
		o.ClientID = "pgq-bridge"
	}
	tmpl, err := bridge.ParseTemplate(o.Topic)
	if err != nil {
		return nil, fmt.Errorf("kafka: topic: %w", err)
	}
	kopts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.ClientID(o.ClientID),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence needs acks=all; it is on by default
		kgo.ProducerLinger(o.Linger),
		kgo.RecordDeliveryTimeout(o.DeliveryTimeout),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}
	if o.TLS != nil {
		kopts = append(kopts, kgo.DialTLSConfig(o.TLS))
	}
	switch strings.ToUpper(o.Mechanism) {
	case "PLAIN":
		kopts = append(kopts, kgo.SASL(plain.Auth{User: o.User, Pass: o.Password}.AsMechanism()))
	case "SCRAM-SHA-256":
		kopts = append(kopts, kgo.SASL(scram.Auth{User: o.User, Pass: o.Password}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		kopts = append(kopts, kgo.SASL(scram.Auth{User: o.User, Pass: o.Password}.AsSha512Mechanism()))
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka: no broker of %s answered: %w", strings.Join(o.Brokers, ","), err)
	}
	return &Publisher{o: o, cl: cl, adm: kadm.NewClient(cl), names: bridge.Cache{T: tmpl, Clean: TopicPart}, known: map[string]bool{}}, nil
}

// TopicPart makes s valid inside a topic name.
func TopicPart(s string) string {
	bad := func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}
	if !strings.ContainsFunc(s, bad) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if bad(r) {
			return '_'
		}
		return r
	}, s)
}

// Name implements bridge.Publisher.
func (p *Publisher) Name() string { return "kafka" }

// ensureTopics creates the topics of msgs not seen yet (CreateTopics).
func (p *Publisher) ensureTopics(ctx context.Context, msgs []bridge.Message) error {
	if !p.o.CreateTopics {
		return nil
	}
	var todo []string
	for i := range msgs {
		n := p.names.Name(&msgs[i])
		if !p.known[n] {
			p.known[n] = true
			todo = append(todo, n)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	parts, rf := p.o.Partitions, p.o.ReplicationFactor
	if parts == 0 {
		parts = -1
	}
	if rf == 0 {
		rf = -1
	}
	res, err := p.adm.CreateTopics(ctx, parts, rf, nil, todo...)
	if err == nil {
		for _, r := range res {
			if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
				err = fmt.Errorf("topic %s: %w", r.Topic, r.Err)
				break
			}
		}
	}
	if err != nil {
		for _, n := range todo {
			delete(p.known, n)
		}
		return fmt.Errorf("kafka: create topics: %w", err)
	}
	return nil
}

// Publish implements bridge.Publisher: every unacknowledged message is
// produced (keyed, so a partition keeps per-row order) and Publish waits
// for all of them. The idempotent producer keeps each partition in order
// across its own retries; a record that failed makes the later records of
// its partition fail too, so re-publishing the unacknowledged ones keeps
// the order.
func (p *Publisher) Publish(ctx context.Context, msgs []bridge.Message, acked []bool) error {
	if err := p.ensureTopics(ctx, msgs); err != nil {
		return err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // guards first, ok and done
		first error
		ok    = make([]bool, len(msgs))
		done  bool // Publish returned: late promises change nothing
	)
	// Promises write ok, copied to acked under mu when Publish returns,
	// so a promise that runs after a cancelled Publish touches nothing
	// the caller reads.
	finish := func(err error) error {
		mu.Lock()
		defer mu.Unlock()
		done = true
		for i, a := range ok {
			if a {
				acked[i] = true
			}
		}
		if err != nil {
			return err
		}
		return first
	}
	for i := range msgs {
		if acked[i] {
			continue
		}
		m := &msgs[i]
		hs := m.Headers()
		rec := &kgo.Record{Topic: p.names.Name(m), Key: m.Key, Value: m.Payload, Headers: make([]kgo.RecordHeader, 0, len(hs)+1)}
		for _, h := range hs {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: "pgq-id", Value: []byte(m.ID)})
		wg.Add(1)
		p.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			mu.Lock()
			switch { // nothing once Publish gave up waiting (ctx ended)
			case done:
			case err == nil:
				ok[i] = true
			case first == nil:
				first = fmt.Errorf("kafka: message %s to %s: %w", m.ID, rec.Topic, err)
			}
			mu.Unlock()
			wg.Done()
		})
	}
	if err := p.cl.Flush(ctx); err != nil {
		return finish(err)
	}
	wg.Wait()
	return finish(nil)
}

// Close flushes nothing (Publish already waited) and closes the client.
func (p *Publisher) Close() error {
	p.cl.Close()
	return nil
}
