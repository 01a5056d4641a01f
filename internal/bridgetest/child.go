package bridgetest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/bridge/kafka"
	"github.com/pgq-dev/pgq/bridge/webhook"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/format"
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
	f, err := format.Parse(os.Getenv("PGQ_BRIDGE_FORMAT"))
	if err != nil {
		return err
	}
	if id := os.Getenv("PGQ_BRIDGE_KILL_AFTER"); id != "" {
		pub = &killAfter{Publisher: pub, id: id}
	}
	return runBridge(ctx, pub, os.Getenv("PGQ_ADDR"), "g", "child", f)
}

// killAfter publishes through the real publisher and SIGKILLs its own
// process as soon as the broker acknowledged the message of id: the kill
// tests stop a bridge at a chosen point between the messages of one
// change (a delete and its tombstone, the delete and the create of a
// key-changing update), which a kill from outside hits by chance only.
// It passes on what the bridge asks of the publisher (Binder,
// Tombstoner).
type killAfter struct {
	bridge.Publisher
	id string
}

func (k *killAfter) Publish(ctx context.Context, msgs []bridge.Message, acked []bool) error {
	for j := range msgs {
		if msgs[j].ID != k.id {
			continue
		}
		if err := k.Publisher.Publish(ctx, msgs[:j+1], acked[:j+1]); err != nil {
			return err
		}
		return syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	return k.Publisher.Publish(ctx, msgs, acked)
}

func (k *killAfter) Binding() format.Binding {
	if b, ok := k.Publisher.(bridge.Binder); ok {
		return b.Binding()
	}
	return format.HTTP
}

func (k *killAfter) Tombstones() bool {
	t, ok := k.Publisher.(bridge.Tombstoner)
	return ok && t.Tombstones()
}

func runBridge(ctx context.Context, pub bridge.Publisher, addr, group, member string, f format.Format) error {
	cl, err := client.New(addr, client.Options{Retry: client.RetryOptions{Min: 10 * time.Millisecond, Max: 200 * time.Millisecond}})
	if err != nil {
		return err
	}
	b, err := bridge.New(bridge.Options{Client: cl, Group: group, Member: member, Publisher: pub, MaxTransactions: 200,
		Wait: 200 * time.Millisecond, LeaseTTL: time.Second, BackoffMin: 20 * time.Millisecond, BackoffMax: 500 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Format: f, FormatOptions: format.Options{Database: "db", Slot: "s"}})
	if err != nil {
		return err
	}
	return b.Run(ctx)
}

// StartChild runs the test binary as a bridge process.
func StartChild(t *testing.T, broker, brokerURL, pgqAddr string) *exec.Cmd {
	return StartChildEnv(t, broker, brokerURL, pgqAddr)
}

// StartChildEnv is StartChild with more environment: PGQ_BRIDGE_FORMAT
// (a format's name; "" is pgq's) and PGQ_BRIDGE_KILL_AFTER (the id of
// the message after whose acknowledgement the child SIGKILLs itself).
func StartChildEnv(t *testing.T, broker, brokerURL, pgqAddr string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PGQ_BRIDGE_CHILD="+broker, "BROKER_URL="+brokerURL, "PGQ_ADDR="+pgqAddr)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// KillBetween runs a bridge process in format f (a format's name) once
// per id of after, each SIGKILLing itself right after the broker
// acknowledged the message of that id (PGQ_BRIDGE_KILL_AFTER), then one
// until the group caught up with src's journal.
func KillBetween(t *testing.T, broker, brokerURL string, src *Source, f string, after ...string) {
	t.Helper()
	for _, id := range after {
		cmd := StartChildEnv(t, broker, brokerURL, src.Addr, "PGQ_BRIDGE_FORMAT="+f, "PGQ_BRIDGE_KILL_AFTER="+id)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("the bridge did not reach %s", id)
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("bridge ended with %v, want killed after %s", cmd.ProcessState, id)
		}
	}
	cmd := StartChildEnv(t, broker, brokerURL, src.Addr, "PGQ_BRIDGE_FORMAT="+f)
	src.WaitCaughtUp(t, 30*time.Second)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}
