package bridgetest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/bridge/kafka"
	"github.com/pgq-dev/pgq/bridge/webhook"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/internal/pgqbin"
)

// runChild bridges PGQ_ADDR's group "g" into the broker at BROKER_URL until
// killed.
// WebhookSecret is a Standard Webhooks secret (the specification's
// example: a 24-byte key); the webhook child signs with its key.
const WebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// Main is a test package's TestMain: it runs the test binary as a bridge
// process when PGQ_BRIDGE_CHILD names a broker (StartChild; the kill tests
// SIGKILL it), else runs the tests and removes the pgq binary that
// internal/pgqbin may have built. It returns the exit status:
//
//	func TestMain(m *testing.M) { os.Exit(bridgetest.Main(m)) }
func Main(m *testing.M) int {
	if broker := os.Getenv("PGQ_BRIDGE_CHILD"); broker != "" {
		if err := runChild(broker); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		return 0
	}
	code := m.Run()
	pgqbin.Remove() // the pgq the NodeLoss tests and the latency bench ran
	return code
}

// runChild bridges PGQ_ADDR's group "g" into the broker at BROKER_URL until
// killed.
func runChild(broker string) error {
	ctx := context.Background()
	var pub bridge.Publisher
	switch broker {
	case "jetstream":
		p, err := jetstream.New(ctx, jetstream.Options{URL: os.Getenv("BROKER_URL"), Window: 256})
		if err != nil {
			return err
		}
		pub = p
	case "kafka":
		p, err := kafka.New(ctx, kafka.Options{Brokers: []string{os.Getenv("BROKER_URL")}, CreateTopics: true, Partitions: 6})
		if err != nil {
			return err
		}
		pub = p
	case "webhook":
		key, _, err := webhook.ParseSecret(WebhookSecret)
		if err != nil {
			return err
		}
		p, err := webhook.New(webhook.Options{URL: os.Getenv("BROKER_URL"), Secret: key, BatchSize: 50, Timeout: 5 * time.Second})
		if err != nil {
			return err
		}
		pub = p
	}
	return runBridge(ctx, pub, os.Getenv("PGQ_ADDR"), "g", "child")
}

func runBridge(ctx context.Context, pub bridge.Publisher, addr, group, member string) error {
	cl, err := client.New(addr, client.Options{Retry: client.RetryOptions{Min: 10 * time.Millisecond, Max: 200 * time.Millisecond}})
	if err != nil {
		return err
	}
	b, err := bridge.New(bridge.Options{Client: cl, Group: group, Member: member, Publisher: pub, MaxTransactions: 200,
		Wait: 200 * time.Millisecond, LeaseTTL: time.Second, BackoffMin: 20 * time.Millisecond, BackoffMax: 500 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	return b.Run(ctx)
}

// StartChild runs the test binary as a bridge process.
func StartChild(t *testing.T, broker, brokerURL, pgqAddr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PGQ_BRIDGE_CHILD="+broker, "BROKER_URL="+brokerURL, "PGQ_ADDR="+pgqAddr)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}
