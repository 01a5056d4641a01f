package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
)

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{
		"4096": 4096, "16MiB": 16 << 20, "1GB": 1e9, "512KiB": 512 << 10, "1.5GiB": 3 << 29, "2 MB": 2e6, "0": 0, "10B": 10,
	} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1", "12XB", "1e400", "abc"} {
		if _, err := ParseByteSize(bad); err == nil {
			t.Errorf("ParseByteSize(%q) accepted", bad)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "1.5d": 36 * time.Hour, "90s": 90 * time.Second, "500ms": 500 * time.Millisecond, "0": 0,
	} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "d", "7days", "-1d", "1d-"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}

// parseCLI parses a command line with kong as main does.
func parseCLI(t *testing.T, args ...string) (*CLI, error) {
	t.Helper()
	var cli CLI
	p, err := kong.New(&cli, kongVars("test"), kong.Exit(func(int) {}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Parse(args)
	return &cli, err
}

// TestRunFlagsUnits parses a `pgq run` command line with kong: sizes and
// days are accepted, defaults apply, and a bad size is one clear error.
func TestRunFlagsUnits(t *testing.T) {
	parse := func(args ...string) (*CLI, error) {
		return parseCLI(t, append([]string{"run", "--pg-url", "postgres://x", "--slot", "s", "--publication", "p", "--data-dir", t.TempDir()}, args...)...)
	}
	cli, err := parse("--segment-size", "4MiB", "--retain-max-age", "7d", "--retain-max-bytes", "50GiB")
	if err != nil {
		t.Fatal(err)
	}
	r := cli.Run
	if r.SegmentSize != 4<<20 || r.RetainMaxAge.D() != 7*24*time.Hour || r.RetainMaxBytes != 50<<30 {
		t.Fatalf("parsed %d %s %d", r.SegmentSize, r.RetainMaxAge.D(), r.RetainMaxBytes)
	}
	if r.MaxRecordBytes != 8<<20 || r.MemoryLimit != 192<<20 || r.ReconnectMax.D() != 30*time.Second || r.ReceiveCoalesce.D() != 500*time.Microsecond {
		t.Fatalf("defaults: %d %d %s %s", r.MaxRecordBytes, r.MemoryLimit, r.ReconnectMax.D(), r.ReceiveCoalesce.D())
	}
	if cli, err := parse("--receive-coalesce", "0"); err != nil || cli.Run.ReceiveCoalesce != 0 {
		t.Fatalf("--receive-coalesce 0 (off): %v, %v", err, cli.Run.ReceiveCoalesce)
	}
	if _, err := parse("--segment-size", "16XB"); err == nil || !strings.Contains(err.Error(), "invalid size") {
		t.Fatalf("bad size: %v", err)
	}
}

func TestErrorLineOnePrefix(t *testing.T) {
	err := fmt.Errorf("consumers: bad request: %w", errors.New(`pgq: unknown op "x" (want insert)`))
	if got, want := errorLine(err), `bad request: unknown op "x" (want insert)`; got != want {
		t.Fatalf("errorLine = %q, want %q", got, want)
	}
	if got := errorLine(errors.New("journal: open d: disk\nfull")); got != "open d: disk full" {
		t.Fatalf("errorLine kept context badly: %q", got)
	}
}

func TestVersionString(t *testing.T) {
	v := versionString()
	if !strings.HasPrefix(v, "pgq ") || !strings.Contains(v, "go1.") {
		t.Fatalf("version %q", v)
	}
}

// TestConfigPrecedence: flag > env > file > default, for every kind of
// run flag; required flags may come from the file; unknown keys are
// refused.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfg := dir + "/pgq.yaml"
	write := func(s string) {
		if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`
pg-url: postgres://file
slot: file_slot
publication: file_pub
data_dir: ` + dir + `
segment-size: 4MiB
retain-max-age: 7d
start: latest
listen: 127.0.0.1:7000
`)
	parse := func(args ...string) (*CLI, error) {
		var cli CLI
		p, err := kong.New(&cli, kongVars("test"), kong.Exit(func(int) {}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Parse(append([]string{"run", "--config", cfg}, args...))
		return &cli, err
	}
	t.Setenv("PGQ_SLOT", "env_slot")
	t.Setenv("PGQ_PUBLICATION", "env_pub")
	t.Setenv("PGQ_LISTEN", "")
	os.Unsetenv("PGQ_LISTEN")
	cli, err := parse("--publication", "flag_pub")
	if err != nil {
		t.Fatal(err)
	}
	r := cli.Run
	if r.PGURL != "postgres://file" || r.Slot != "env_slot" || r.Publication != "flag_pub" || r.DataDir != dir {
		t.Fatalf("precedence: url %q slot %q publication %q data dir %q", r.PGURL, r.Slot, r.Publication, r.DataDir)
	}
	if r.SegmentSize != 4<<20 || r.RetainMaxAge.D() != 7*24*time.Hour || r.Start != "latest" || r.Listen != "127.0.0.1:7000" {
		t.Fatalf("file values: %d %s %q %q", r.SegmentSize, r.RetainMaxAge.D(), r.Start, r.Listen)
	}
	if r.MaxRecordBytes != 8<<20 || r.StatusInterval.D() != 10*time.Second {
		t.Fatalf("defaults under a file: %d %s", r.MaxRecordBytes, r.StatusInterval.D())
	}
	write("pg-url: x\nslott: typo\n")
	if _, err := parse("--slot", "s", "--publication", "p", "--data-dir", dir); err == nil || !strings.Contains(err.Error(), "line 2: unknown key slott") {
		t.Fatalf("unknown key: %v", err)
	}
	write("pg-url: [unclosed\n")
	if _, err := parse("--slot", "s", "--publication", "p", "--data-dir", dir); err == nil || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("bad YAML: %v", err)
	}
}

// TestEveryRunFlagHasAnEnv: every `pgq run` flag can be set from the
// environment (and so from a service's environment file).
func TestEveryRunFlagHasAnEnv(t *testing.T) {
	var cli CLI
	p, err := kong.New(&cli, kongVars("test"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range p.Model.Children {
		if n.Name != "run" {
			continue
		}
		for _, f := range n.Flags {
			if len(f.Envs) == 0 && f.Name != "help" {
				t.Errorf("--%s has no environment variable", f.Name)
			}
		}
	}
}

// TestBridgeFlags parses `pgq bridge kafka|jetstream` command lines with
// kong: the broker timeouts reach the publishers' options (defaults
// included), and a negative one is refused.
func TestBridgeFlags(t *testing.T) {
	parse := func(args ...string) (*CLI, error) { return parseCLI(t, args...) }
	cli, err := parse("bridge", "kafka", "--group", "g", "--brokers", "k1:9092,k2:9092", "--delivery-timeout", "2m", "--linger", "20ms")
	if err != nil {
		t.Fatal(err)
	}
	ko, err := cli.Bridge.Kafka.options()
	if err != nil {
		t.Fatal(err)
	}
	if ko.DeliveryTimeout != 2*time.Minute || ko.Linger != 20*time.Millisecond || len(ko.Brokers) != 2 || ko.Brokers[1] != "k2:9092" {
		t.Fatalf("kafka options: %+v", ko)
	}
	if cli, err = parse("bridge", "kafka", "--group", "g", "--brokers", "k1:9092"); err != nil {
		t.Fatal(err)
	}
	if ko, err = cli.Bridge.Kafka.options(); err != nil || ko.DeliveryTimeout != 30*time.Second || ko.Linger != 5*time.Millisecond || ko.NoTombstones {
		t.Fatalf("kafka defaults: %+v, %v", ko, err)
	}
	if cli, err = parse("bridge", "kafka", "--group", "g", "--brokers", "k1:9092", "--no-tombstones", "--provide-transaction-metadata"); err != nil {
		t.Fatal(err)
	}
	if ko, err = cli.Bridge.Kafka.options(); err != nil || !ko.NoTombstones {
		t.Fatalf("--no-tombstones: %+v, %v", ko, err)
	}
	if _, fo, err := cli.Bridge.Kafka.FormatFlags.options(); err != nil || !fo.TransactionMetadata {
		t.Fatalf("--provide-transaction-metadata: %+v, %v", fo, err)
	}
	if cli, err = parse("bridge", "kafka", "--group", "g", "--brokers", "k1:9092", "--delivery-timeout=-1s"); err != nil {
		t.Fatal(err)
	}
	if _, err = cli.Bridge.Kafka.options(); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Fatalf("negative delivery timeout: %v", err)
	}
	if cli, err = parse("bridge", "jetstream", "--group", "g", "--nats-url", "nats://127.0.0.1:4222", "--ack-timeout", "45s", "--window", "64"); err != nil {
		t.Fatal(err)
	}
	jo, err := cli.Bridge.Jetstream.options()
	if err != nil || jo.AckTimeout != 45*time.Second || jo.Window != 64 {
		t.Fatalf("jetstream options: %+v, %v", jo, err)
	}
	if jo.SchemaChangeSubject != "" || ko.SchemaChangeTopic != "" {
		t.Fatalf("schema-change defaults: %q, %q", jo.SchemaChangeSubject, ko.SchemaChangeTopic)
	}
	// A schema-change topic or subject takes a format with schema change
	// events, and a name the broker accepts.
	if cli, err = parse("bridge", "kafka", "--group", "g", "--brokers", "k1:9092", "--format", "debezium", "--schema-change-topic", "dbz.schema"); err != nil {
		t.Fatal(err)
	}
	if ko, err = cli.Bridge.Kafka.options(); err != nil || ko.SchemaChangeTopic != "dbz.schema" {
		t.Fatalf("--schema-change-topic: %+v, %v", ko, err)
	}
	for _, args := range [][]string{
		{"kafka", "--brokers", "k1:9092", "--schema-change-topic", "dbz.schema"},
		{"kafka", "--brokers", "k1:9092", "--format", "debezium", "--schema-change-topic", "dbz schema"},
		{"jetstream", "--nats-url", "nats://n", "--format", "cloudevents", "--schema-change-subject", "dbz.schema"},
		{"jetstream", "--nats-url", "nats://n", "--format", "debezium", "--schema-change-subject", "dbz.*"},
	} {
		if cli, err = parse(append([]string{"bridge", args[0], "--group", "g"}, args[1:]...)...); err != nil {
			t.Fatal(err)
		}
		if args[0] == "kafka" {
			_, err = cli.Bridge.Kafka.options()
		} else {
			_, err = cli.Bridge.Jetstream.options()
		}
		if err == nil || !strings.Contains(errorLine(err), "--schema-change-") {
			t.Errorf("%v: %v, want an error naming the flag", args, err)
		}
	}
	if cli, err = parse("bridge", "jetstream", "--group", "g", "--nats-url", "nats://n", "--format", "debezium", "--schema-change-subject", "dbz.schema"); err != nil {
		t.Fatal(err)
	}
	if jo, err = cli.Bridge.Jetstream.options(); err != nil || jo.SchemaChangeSubject != "dbz.schema" {
		t.Fatalf("--schema-change-subject: %+v, %v", jo, err)
	}
	// With --schemas too: schema change events have their Connect schema.
	if cli, err = parse("bridge", "kafka", "--group", "g", "--brokers", "k1:9092", "--format", "debezium", "--schemas", "--schema-change-topic", "dbz.schema"); err != nil {
		t.Fatal(err)
	}
	if ko, err = cli.Bridge.Kafka.options(); err != nil || ko.SchemaChangeTopic != "dbz.schema" || !cli.Bridge.Kafka.Schemas {
		t.Fatalf("--schemas --schema-change-topic: %+v, %v", ko, err)
	}
	if cli, err = parse("bridge", "jetstream", "--group", "g", "--nats-url", "nats://n", "--format", "debezium", "--schemas", "--schema-change-subject", "dbz.schema"); err != nil {
		t.Fatal(err)
	}
	if jo, err = cli.Bridge.Jetstream.options(); err != nil || jo.SchemaChangeSubject != "dbz.schema" || !cli.Bridge.Jetstream.Schemas {
		t.Fatalf("--schemas --schema-change-subject: %+v, %v", jo, err)
	}
}
