package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/bridge/kafka"
	"github.com/pgq-dev/pgq/bridge/webhook"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/format"
)

// BridgeCmd is `pgq bridge`.
type BridgeCmd struct {
	Jetstream BridgeJetStreamCmd `cmd:"" help:"Publish a consumer group into a NATS JetStream stream (resumes after the stream's last message; Nats-Msg-Id dedup as a second guard: exactly once as the stream sees it)."`
	Kafka     BridgeKafkaCmd     `cmd:"" help:"Publish a consumer group into Kafka (idempotent producer; resumes after each partition's last record: exactly once across bridge crashes)."`
	Webhook   BridgeWebhookCmd   `cmd:"" help:"POST a consumer group's changes to a URL in batches signed as Standard Webhooks (2xx = acknowledged; at least once: webhook-id names the batch, the body each change)."`
}

// BridgeWebhookCmd is `pgq bridge webhook`.
type BridgeWebhookCmd struct {
	BridgeFlags
	URL         string        `name:"url" required:"" env:"PGQ_WEBHOOK_URL" help:"URL the batches are POSTed to."`
	Secret      string        `env:"PGQ_WEBHOOK_SECRET" help:"Standard Webhooks secret, whsec_ + base64 of a key of at least 24 bytes (e.g. whsec_$(head -c 32 /dev/urandom | base64)): each request carries webhook-signature: v1,<base64 HMAC-SHA256(key, \"<webhook-id>.<webhook-timestamp>.<body>\")>. A plain secret (deprecated) still works for this release, its bytes as the key: whsec_ + its base64 is the same key."`
	BatchSize   int           `name:"batch-size" default:"100" env:"PGQ_WEBHOOK_BATCH_SIZE" help:"Most changes per request."`
	Timeout     time.Duration `name:"request-timeout" default:"10s" env:"PGQ_WEBHOOK_REQUEST_TIMEOUT" help:"A request not answered within it fails and is retried."`
	MaxAttempts int           `name:"max-attempts" default:"0" env:"PGQ_WEBHOOK_MAX_ATTEMPTS" help:"Give up (exit non-zero, naming the batch) after this many failed attempts of one batch; 0 retries forever."`
	Concurrency int           `default:"1" env:"PGQ_WEBHOOK_CONCURRENCY" help:"Requests in flight at once. 1 sends one at a time, all changes in order; above 1 the changes are shared out over that many lanes by row key, each lane in order (per-key order), for a receiver that serves requests in parallel."`
	Linger      time.Duration `default:"0s" env:"PGQ_WEBHOOK_LINGER" help:"Hold a fetched batch of fewer than --batch-size changes up to this long, fetching more into it (fuller requests for a trickle of changes, at that much latency); 0 posts what was fetched at once."`
	MaxBodyMem  ByteSize      `name:"max-body-memory" default:"8MiB" env:"PGQ_WEBHOOK_MAX_BODY_MEMORY" help:"A request body larger is written to a temporary file in --spool-dir while it is signed, sent from it and removed."`
	SpoolDir    string        `name:"spool-dir" env:"PGQ_WEBHOOK_SPOOL_DIR" type:"existingdir" help:"Directory of the spooled request bodies (default: the system's temporary directory, $TMPDIR)."`
}

// Run bridges until interrupted or the receiver failed a batch
// --max-attempts times.
func (c *BridgeWebhookCmd) Run(ctx context.Context, log *slog.Logger) error {
	fm, _, err := c.options()
	if err != nil {
		return err
	}
	tc, err := c.tlsConfig()
	if err != nil {
		return usage(err)
	}
	if c.Linger < 0 {
		return usage(fmt.Errorf("--linger %s: negative", c.Linger))
	}
	if c.MaxBodyMem <= 0 {
		return usage(fmt.Errorf("--max-body-memory %d: want a positive size", c.MaxBodyMem))
	}
	key, legacy, err := webhook.ParseSecret(c.Secret)
	if err != nil {
		return usage(fmt.Errorf("--secret: %w", err))
	}
	if legacy {
		log.Warn("--secret is a plain secret, deprecated: the next release takes only whsec_ + base64 (Standard Webhooks); whsec_ + the base64 of this secret is the same key (printf %s \"$OLD\" | base64), so receivers keep verifying", "key_bytes", len(key))
		if len(key) < webhook.MinKeyLen {
			log.Warn("--secret is shorter than the Standard Webhooks minimum; use a new random key", "key_bytes", len(key), "min", webhook.MinKeyLen)
		}
	}
	p, err := webhook.New(webhook.Options{URL: c.URL, Secret: key, Format: fm, BatchSize: c.BatchSize, Timeout: c.Timeout, MaxAttempts: c.MaxAttempts, Concurrency: c.Concurrency, TLS: tc,
		MaxBodyMemory: int64(c.MaxBodyMem), SpoolDir: c.SpoolDir})
	if err != nil {
		return usage(err)
	}
	return c.run(ctx, log, p, func(o *bridge.Options) { o.Linger, o.LingerChanges = c.Linger, c.BatchSize })
}

// BridgeFlags are the flags both brokers share.
type BridgeFlags struct {
	APIFlags
	Group       string        `required:"" env:"PGQ_BRIDGE_GROUP" help:"Consumer group to publish (must exist: pgq groups create)."`
	Member      string        `env:"PGQ_BRIDGE_MEMBER" help:"Member id prefix (default: host name); a random suffix is added per run."`
	Listen      string        `env:"PGQ_BRIDGE_LISTEN" help:"Serve /metrics (Prometheus), /status and /healthz on this address (e.g. 127.0.0.1:5481)."`
	MaxTx       int           `name:"max-tx" default:"1000" env:"PGQ_BRIDGE_MAX_TX" help:"Transactions per fetched batch."`
	MaxInFlight int           `name:"max-in-flight" default:"10000" env:"PGQ_BRIDGE_MAX_IN_FLIGHT" help:"Most changes handed to the broker and not acknowledged at once: a larger transaction is published in windows of this many, the cursor committed after its last."`
	BackoffMax  time.Duration `name:"backoff-max" default:"10s" env:"PGQ_BRIDGE_BACKOFF_MAX" help:"Longest wait between publish retries while the broker is down."`
	LeaseTTL    time.Duration `name:"lease-ttl" default:"30s" env:"PGQ_BRIDGE_LEASE_TTL" help:"Group lease; a restarted bridge waits this long for a dead one's lease."`
	TLSCA       string        `name:"tls-ca" env:"PGQ_BRIDGE_TLS_CA" type:"existingfile" help:"Broker TLS: CA certificates (PEM). Any --tls-* flag enables TLS."`
	TLSCert     string        `name:"tls-cert" env:"PGQ_BRIDGE_TLS_CERT" type:"existingfile" help:"Broker TLS: client certificate (PEM)."`
	TLSKey      string        `name:"tls-key" env:"PGQ_BRIDGE_TLS_KEY" type:"existingfile" help:"Broker TLS: client key (PEM)."`
	TLS         bool          `name:"tls" env:"PGQ_BRIDGE_TLS" help:"Broker TLS with the system roots."`

	// --format, --format-db, --format-slot
	FormatFlags `envprefix:"PGQ_BRIDGE_"`
}

// BridgeJetStreamCmd is `pgq bridge jetstream`.
type BridgeJetStreamCmd struct {
	BridgeFlags
	NatsURL      string        `name:"nats-url" required:"" env:"NATS_URL" help:"NATS server URL(s), comma-separated."`
	Stream       string        `default:"PGQ" env:"PGQ_BRIDGE_STREAM" help:"JetStream stream the subjects belong to."`
	Subject      string        `default:"pgq.{schema}.{table}" env:"PGQ_BRIDGE_SUBJECT" help:"Subject template: {schema}, {table}, {op}."`
	CreateStream bool          `name:"create-stream" env:"PGQ_BRIDGE_CREATE_STREAM" help:"Create the stream (file storage) if missing."`
	Duplicates   time.Duration `default:"2m" env:"PGQ_BRIDGE_DUPLICATES" help:"Duplicate window of a created stream (a second guard: the bridge skips what the stream holds whatever the window)."`
	Replicas     int           `default:"1" env:"PGQ_BRIDGE_REPLICAS" help:"Replicas of a created stream."`
	Window       int           `default:"4096" env:"PGQ_BRIDGE_WINDOW" help:"Messages in flight (published, not acknowledged)."`
	AckTimeout   time.Duration `name:"ack-timeout" default:"10s" env:"PGQ_BRIDGE_ACK_TIMEOUT" help:"A message the stream has not acknowledged within it fails; the bridge retries the batch's unacknowledged messages."`
	Creds        string        `type:"existingfile" env:"NATS_CREDS" help:"NATS credentials file."`
	NKey         string        `name:"nkey" type:"existingfile" env:"NATS_NKEY" help:"NATS nkey seed file."`
	User         string        `env:"NATS_USER" help:"NATS user."`
	Password     string        `env:"NATS_PASSWORD" help:"NATS password."`
	Token        string        `name:"nats-token" env:"NATS_TOKEN" help:"NATS token."`
	SchemaChange string        `name:"schema-change-subject" env:"PGQ_BRIDGE_SCHEMA_CHANGE_SUBJECT" help:"With --format debezium, publish each ddl and gap change to this subject (in --stream) as a schema change event (default: none, they are left out)."`
}

// BridgeKafkaCmd is `pgq bridge kafka`.
type BridgeKafkaCmd struct {
	BridgeFlags
	Brokers           []string      `required:"" env:"KAFKA_BROKERS" help:"Seed brokers host:port, comma-separated."`
	Topic             string        `default:"pgq.{schema}.{table}" env:"PGQ_BRIDGE_TOPIC" help:"Topic template: {schema}, {table}, {op}."`
	CreateTopics      bool          `name:"create-topics" env:"PGQ_BRIDGE_CREATE_TOPICS" help:"Create missing topics on first use."`
	Partitions        int32         `default:"0" env:"PGQ_BRIDGE_PARTITIONS" help:"Partitions of created topics (0: the broker's default)."`
	ReplicationFactor int16         `name:"replication-factor" default:"0" env:"PGQ_BRIDGE_REPLICATION_FACTOR" help:"Replication factor of created topics (0: the broker's default)."`
	DeliveryTimeout   time.Duration `name:"delivery-timeout" default:"30s" env:"PGQ_BRIDGE_DELIVERY_TIMEOUT" help:"The producer's own retries of a record end after it; the bridge then reads the partitions' last records and produces the batch's records not stored again."`
	Linger            time.Duration `default:"5ms" env:"PGQ_BRIDGE_LINGER" help:"How long the producer waits to fill a batch."`
	SASLMechanism     string        `name:"sasl-mechanism" enum:",PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" default:"" env:"KAFKA_SASL_MECHANISM" help:"SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."`
	SASLUser          string        `name:"sasl-user" env:"KAFKA_SASL_USER" help:"SASL user."`
	SASLPassword      string        `name:"sasl-password" env:"KAFKA_SASL_PASSWORD" help:"SASL password."`
	Tombstones        bool          `default:"true" negatable:"" env:"PGQ_BRIDGE_TOMBSTONES" help:"With --format debezium, follow each delete with a tombstone (same key, null value), as Debezium's tombstones.on.delete=true; --no-tombstones leaves them out."`
	SchemaChangeTopic string        `name:"schema-change-topic" env:"PGQ_BRIDGE_SCHEMA_CHANGE_TOPIC" help:"With --format debezium, publish each ddl and gap change to this topic as a schema change event (default: none, they are left out)."`
}

// schemaChanges refuses a schema-change topic or subject (flag, v) with
// a format that has no schema change events: there it would stay
// empty, the ddl and gap changes being the format's own messages.
func (f *BridgeFlags) schemaChanges(flag, v string) error {
	if v == "" {
		return nil
	}
	fm, err := format.Parse(f.Format)
	if err != nil {
		return err
	}
	if s := fm.Spec(); !s.SchemaChanges() {
		return fmt.Errorf("%s: --format %s has no schema change events", flag, s.Name)
	}
	return nil
}

func (f *BridgeFlags) tlsConfig() (*tls.Config, error) {
	if !f.TLS && f.TLSCA == "" && f.TLSCert == "" && f.TLSKey == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.TLSCA != "" {
		pem, err := os.ReadFile(f.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca: no PEM certificate in %s", f.TLSCA)
		}
	}
	if (f.TLSCert == "") != (f.TLSKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if f.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(f.TLSCert, f.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// Run bridges until interrupted.
func (c *BridgeJetStreamCmd) Run(ctx context.Context, log *slog.Logger) error {
	o, err := c.options()
	if err != nil {
		return usage(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	p, err := jetstream.New(cctx, o)
	if err != nil {
		return err
	}
	defer p.Close()
	return c.run(ctx, log, p)
}

// options are the publisher's options the flags give.
func (c *BridgeJetStreamCmd) options() (jetstream.Options, error) {
	tc, err := c.tlsConfig()
	if err != nil {
		return jetstream.Options{}, err
	}
	o := jetstream.Options{URL: c.NatsURL, Stream: c.Stream, Subject: c.Subject, CreateStream: c.CreateStream, Duplicates: c.Duplicates,
		Replicas: c.Replicas, Window: c.Window, AckTimeout: c.AckTimeout, CredsFile: c.Creds, NKeyFile: c.NKey, User: c.User, Password: c.Password, Token: c.Token, TLS: tc,
		SchemaChangeSubject: c.SchemaChange}
	if err := c.schemaChanges("--schema-change-subject", c.SchemaChange); err != nil {
		return o, err
	}
	return o, o.Validate()
}

// Run bridges until interrupted.
func (c *BridgeKafkaCmd) Run(ctx context.Context, log *slog.Logger) error {
	o, err := c.options()
	if err != nil {
		return usage(err)
	}
	p, err := kafka.New(ctx, o)
	if err != nil {
		return err
	}
	defer p.Close()
	return c.run(ctx, log, p)
}

// options are the producer's options the flags give.
func (c *BridgeKafkaCmd) options() (kafka.Options, error) {
	tc, err := c.tlsConfig()
	if err != nil {
		return kafka.Options{}, err
	}
	var brokers []string
	for _, b := range c.Brokers {
		for _, s := range strings.Split(b, ",") {
			if s = strings.TrimSpace(s); s != "" {
				brokers = append(brokers, s)
			}
		}
	}
	o := kafka.Options{Brokers: brokers, Topic: c.Topic, CreateTopics: c.CreateTopics, Partitions: c.Partitions, ReplicationFactor: c.ReplicationFactor,
		DeliveryTimeout: c.DeliveryTimeout, Linger: c.Linger, Mechanism: c.SASLMechanism, User: c.SASLUser, Password: c.SASLPassword, TLS: tc,
		NoTombstones: !c.Tombstones, SchemaChangeTopic: c.SchemaChangeTopic}
	if err := c.schemaChanges("--schema-change-topic", c.SchemaChangeTopic); err != nil {
		return o, err
	}
	return o, o.Validate()
}

func (f *BridgeFlags) run(ctx context.Context, log *slog.Logger, p bridge.Publisher, opts ...func(*bridge.Options)) error {
	cl, err := client.New(f.Addr, client.Options{Token: f.AuthToken, TLS: f.tls()})
	if err != nil {
		return usage(err)
	}
	// Fail at once on a missing group or a bad token; pgq being down is
	// waited out by the bridge itself.
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = cl.Group(gctx, f.Group)
	cancel()
	if err != nil && !client.IsTransient(err) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("group %q at %s: %w", f.Group, f.Addr, err)
	}
	fm, fo, err := f.options()
	if err != nil {
		return err
	}
	m := bridge.NewMetrics()
	if f.MaxInFlight <= 0 {
		return usage(fmt.Errorf("--max-in-flight %d: want a positive number of changes", f.MaxInFlight))
	}
	o := bridge.Options{Client: cl, Group: f.Group, Member: f.Member, Publisher: p, MaxTransactions: f.MaxTx, MaxInFlight: f.MaxInFlight,
		BackoffMax: f.BackoffMax, LeaseTTL: f.LeaseTTL, Metrics: m, Logger: log,
		Format: fm, FormatOptions: fo}
	for _, set := range opts {
		set(&o)
	}
	if err := checkListen("--listen", f.Listen); err != nil {
		return usage(err)
	}
	b, err := bridge.New(o)
	if err != nil {
		return err
	}
	if f.Listen != "" {
		ln, err := net.Listen("tcp", f.Listen)
		if err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
		srv := &http.Server{Handler: bridge.Handler(b, m), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}
	log.Info("bridge running", "group", f.Group, "broker", p.Name(), "member", b.Status().Member)
	return b.Run(ctx)
}
