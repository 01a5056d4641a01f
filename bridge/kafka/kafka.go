package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/opterr"
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
	// NoTombstones: no tombstone after a delete. Zero → in a format that
	// has them (Debezium's) each delete is followed by a tombstone, a
	// record of the same key and a null value, as Debezium's
	// tombstones.on.delete=true (its default) does, so a compacted topic
	// can drop the row (bridge.Tombstoner).
	NoTombstones bool
	// SchemaChangeTopic is the topic of schema change events: in a
	// format that has them (Debezium's) a ddl or gap change becomes one
	// message there, keyed by the database (bridge.SchemaChanger). Zero
	// → none: such changes are left out, never put on a table's topic.
	SchemaChangeTopic string
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
	if o.SchemaChangeTopic != "" && TopicPart(o.SchemaChangeTopic) != o.SchemaChangeTopic {
		return opterr.New(nil, "kafka: options: {} %q: only [A-Za-z0-9._-] are valid in a topic name", opterr.Of("kafka.Options.SchemaChangeTopic"), o.SchemaChangeTopic)
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
	base  []kgo.Opt // connection options, for the clients that read the last records
	names bridge.Cache
	known map[string]bool // topics created or seen to exist
	part  kgo.Partitioner // murmur2 of the key, as Kafka's Java client
	// topics holds, per topic published to, its partition count and the
	// position of each partition's last record, read on first use and
	// again after a failure (stale).
	topics map[string]*topicState
	stale  bool
	skips  atomic.Uint64
}

// topicState is what a topic's partitions hold.
type topicState struct {
	parts []kgo.TopicPartitioner // one, for the count n
	held  []bridge.Held          // per partition
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
	base := []kgo.Opt{kgo.SeedBrokers(o.Brokers...), kgo.ClientID(o.ClientID)}
	if o.TLS != nil {
		base = append(base, kgo.DialTLSConfig(o.TLS))
	}
	switch strings.ToUpper(o.Mechanism) {
	case "PLAIN":
		base = append(base, kgo.SASL(plain.Auth{User: o.User, Pass: o.Password}.AsMechanism()))
	case "SCRAM-SHA-256":
		base = append(base, kgo.SASL(scram.Auth{User: o.User, Pass: o.Password}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		base = append(base, kgo.SASL(scram.Auth{User: o.User, Pass: o.Password}.AsSha512Mechanism()))
	}
	kopts := append(slices.Clip(base),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence needs acks=all; it is on by default
		kgo.ProducerLinger(o.Linger),
		kgo.RecordDeliveryTimeout(o.DeliveryTimeout),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		// The bridge picks the partition (the key's murmur2, as the
		// default would) from the partition count it read the last
		// records of: the skip decision and the record go to one place.
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
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
	return &Publisher{o: o, cl: cl, adm: kadm.NewClient(cl), base: base, names: bridge.Cache{T: tmpl, Clean: TopicPart}, known: map[string]bool{},
		part: kgo.StickyKeyPartitioner(nil), topics: map[string]*topicState{}}, nil
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

// Binding is format.Kafka: a format's headers (CloudEvents' ce_*) are
// Kafka record headers (bridge.Binder).
func (p *Publisher) Binding() format.Binding { return format.Kafka }

// Tombstones implements bridge.Tombstoner: true unless NoTombstones.
func (p *Publisher) Tombstones() bool { return !p.o.NoTombstones }

// SchemaChanges implements bridge.SchemaChanger: true with a
// SchemaChangeTopic.
func (p *Publisher) SchemaChanges() bool { return p.o.SchemaChangeTopic != "" }

// topicName is m's topic: the SchemaChangeTopic for a schema change
// event, the template's otherwise.
func (p *Publisher) topicName(m *bridge.Message) string {
	if m.SchemaChange {
		return p.o.SchemaChangeTopic
	}
	return p.names.Name(m)
}

// ensureTopics creates the topics of msgs not seen yet (CreateTopics).
func (p *Publisher) ensureTopics(ctx context.Context, msgs []bridge.Message) error {
	if !p.o.CreateTopics {
		return nil
	}
	var todo []string
	for i := range msgs {
		n := p.topicName(&msgs[i])
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
	if p.stale {
		clear(p.topics)
		p.stale = false
	}
	err := p.produce(ctx, msgs, acked)
	if err != nil {
		p.stale = true // what failed may be stored: read the last records again
	}
	return err
}

func (p *Publisher) produce(ctx context.Context, msgs []bridge.Message, acked []bool) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // guards first, ok and done
		first error
		ok    = make([]bool, len(msgs))
		done  bool // Publish returned: late promises change nothing
		// stopped: a topic's last records could not be read; nothing
		// more is produced.
		stopped error
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
		rec := &kgo.Record{Topic: p.topicName(m), Key: m.Key, Value: m.Payload}
		ts, err := p.topic(ctx, rec.Topic, m.Group)
		if err != nil {
			stopped = err // what was produced is waited for
			break
		}
		rec.Partition = int32(ts.parts[0].Partition(partitionRecord(rec, m), len(ts.held)))
		if ts.held[rec.Partition].Covers(m) {
			p.skips.Add(1)
			mu.Lock()
			ok[i] = true
			mu.Unlock()
			continue
		}
		hs := m.Headers()
		rec.Headers = make([]kgo.RecordHeader, 0, len(hs)+1)
		for _, h := range hs {
			if h[1] != "" || h[0] != bridge.HeaderGroup {
				rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
			}
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: HeaderID, Value: []byte(m.ID)})
		for _, e := range m.Extra {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: e[0], Value: []byte(e[1])})
		}
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
	return finish(stopped)
}

// partitionRecord is what rec's partition is picked from: rec, or where
// its key is null (Debezium's key of a truncate, of a table without a
// key) a record keyed by pgq's row key (bridge.Message.RowKey), so the
// partition stays the one the resume reads, not the one a producer's
// sticky choice for a null key would give.
func partitionRecord(rec *kgo.Record, m *bridge.Message) *kgo.Record {
	if rec.Key != nil || m.RowKey == nil {
		return rec
	}
	return &kgo.Record{Topic: rec.Topic, Key: m.RowKey}
}

// HeaderID carries the message id (bridge.MessageID).
const HeaderID = "pgq-id"

// Skipped returns how many messages Publish skipped because their
// partition already held them (at or before its last record).
func (p *Publisher) Skipped() uint64 { return p.skips.Load() }

// topic returns what topic's partitions hold, reading it on first use
// (see the package doc). A partition whose last record is not group's is
// bridge.ErrShared.
func (p *Publisher) topic(ctx context.Context, topic, group string) (*topicState, error) {
	if ts := p.topics[topic]; ts != nil {
		return ts, nil
	}
	ends, err := p.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: topic %s: end offsets: %w", topic, err)
	}
	starts, err := p.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: topic %s: start offsets: %w", topic, err)
	}
	n := len(ends[topic])
	if n == 0 {
		return nil, fmt.Errorf("kafka: topic %s does not exist (create it, or use --create-topics)", topic)
	}
	ts := &topicState{parts: []kgo.TopicPartitioner{p.part.ForTopic(topic)}, held: make([]bridge.Held, n)}
	want := map[int32]kgo.Offset{}
	for part, e := range ends[topic] {
		if part < 0 || int(part) >= n {
			return nil, fmt.Errorf("kafka: topic %s: partition %d of %d", topic, part, n)
		}
		if s, ok := starts.Lookup(topic, part); ok && e.Offset > s.Offset {
			want[part] = kgo.NewOffset().At(e.Offset - 1)
		}
	}
	if len(want) > 0 {
		if err := p.readLast(ctx, topic, group, want, ts.held); err != nil {
			return nil, err
		}
	}
	p.topics[topic] = ts
	return ts, nil
}

// readLast reads the record at each of want's offsets (each partition's
// last) into held.
func (p *Publisher) readLast(ctx context.Context, topic, group string, want map[int32]kgo.Offset, held []bridge.Held) error {
	rd, err := kgo.NewClient(append(slices.Clip(p.base), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		return fmt.Errorf("kafka: topic %s: reader: %w", topic, err)
	}
	defer rd.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	seen := map[int32]bool{}
	var bad error
	for len(seen) < len(want) && bad == nil {
		fs := rd.PollFetches(rctx)
		if rctx.Err() != nil {
			return fmt.Errorf("kafka: topic %s: read %d of %d last records: %w", topic, len(seen), len(want), rctx.Err())
		}
		fs.EachError(func(_ string, part int32, err error) {
			if bad == nil {
				bad = fmt.Errorf("kafka: topic %s partition %d: last record: %w", topic, part, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if seen[r.Partition] || bad != nil {
				return
			}
			seen[r.Partition] = true
			var id, g string
			for _, h := range r.Headers {
				switch h.Key {
				case HeaderID:
					id = string(h.Value)
				case bridge.HeaderGroup:
					g = string(h.Value)
				}
			}
			h, err := bridge.CheckOwner(id, g, group)
			if err != nil {
				bad = fmt.Errorf("kafka: topic %s partition %d offset %d: %w", topic, r.Partition, r.Offset, err)
			}
			held[r.Partition] = h
		})
	}
	return bad
}

// Close flushes nothing (Publish already waited) and closes the client.
func (p *Publisher) Close() error {
	p.cl.Close()
	return nil
}
