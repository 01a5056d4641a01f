package format_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/internal/bridgetest"
	"github.com/pgq-dev/pgq/internal/pgqbin"
)

// TestSchemaChangeTopicEndToEnd: DDL captured by `pgq ddl install`
// through a real PostgreSQL and `pgq run`, bridged by `pgq bridge kafka
// --format debezium --schema-change-topic` into Kafka (kfake): each DDL
// statement is one schema change event on that topic (ALTER, CREATE and
// DROP, in order), the data topic holds only the rows' events; a bridge
// of another group without the flag publishes the rows alone. `pgq
// bridge jetstream --schema-change-subject` into a real nats-server puts
// the same three on that subject of the stream, the rows on theirs.
func TestSchemaChangeTopicEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, err := cluster.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Exec(ctx, db, "CREATE TABLE sc_t (id int PRIMARY KEY, v text)"); err != nil {
		t.Fatal(err)
	}
	addr := startRunTables(t, db, "public.sc_t")
	cmd := exec.CommandContext(ctx, pgqbin.Path(t), "ddl", "install", "--pg-url", cluster.URL(db), "--publication", "p_"+db)
	cmd.Env = pgqbin.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgq ddl install: %v\n%s", err, out)
	}
	pgqOut(t, addr, "groups", "create", "g", "--from", "earliest")
	pgqOut(t, addr, "groups", "create", "plain", "--from", "earliest")
	pgqOut(t, addr, "groups", "create", "js", "--from", "earliest")
	if err := cluster.Exec(ctx, db,
		"INSERT INTO sc_t VALUES (1, 'a')",
		"ALTER TABLE sc_t ADD COLUMN note text",
		"INSERT INTO sc_t VALUES (2, 'b', 'n')",
		"CREATE TABLE sc_other (id int)",
		"DROP TABLE sc_other",
	); err != nil {
		t.Fatal(err)
	}
	brokers := bridgetest.KafkaBrokers(t)
	bridgeKafka(ctx, t, addr, brokers, "--group", "g", "--topic", "scdata", "--schema-change-topic", "scddl")
	bridgeKafka(ctx, t, addr, brokers, "--group", "plain", "--topic", "scplain")
	ns := bridgetest.StartNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	startBridge(ctx, t, "jetstream", addr, "--nats-url", ns.ClientURL(), "--stream", "SCPG", "--subject", "SCPG.{table}", "--create-stream",
		"--schema-change-subject", "SCPG.schema", "--group", "js")
	// Each topic is read until it holds what it should and nothing more
	// came for a second.

	for _, topic := range []string{"scdata", "scplain"} {
		rs := bridgetest.KafkaMessagesN(t, brokers, topic, 2)
		if len(rs) != 2 {
			t.Errorf("%s: %d records, want the 2 rows' creates", topic, len(rs))
		}
		for _, r := range rs {
			var ev struct {
				Op    string
				After map[string]any
			}
			if err := json.Unmarshal(r.Body, &ev); err != nil || ev.Op != "c" || ev.After["id"] == nil {
				t.Errorf("%s: %s, want a row's create (%v)", topic, r.Body, err)
			}
		}
	}
	var got []string
	for _, r := range bridgetest.KafkaMessagesN(t, brokers, "scddl", 3) {
		var ev struct {
			DatabaseName, SchemaName, DDL string
			TableChanges                  []struct{ Type, ID string }
		}
		if err := json.Unmarshal(r.Body, &ev); err != nil || ev.DatabaseName != db || ev.SchemaName != "public" ||
			r.Key != `{"databaseName":"`+db+`"}` {
			t.Errorf("schema change %s key %s: %v", r.Body, r.Key, err)
		}
		if len(ev.TableChanges) != 1 {
			t.Errorf("schema change %s: want one table change", r.Body)
			continue
		}
		got = append(got, ev.TableChanges[0].Type+" "+ev.TableChanges[0].ID+" "+ev.DDL)
	}
	var msgs []bridgetest.Bridged
	for deadline := time.Now().Add(30 * time.Second); len(msgs) < 5 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if st, err := bridgetest.JSClient(t, ns.ClientURL()).Stream(ctx, "SCPG"); err == nil {
			if info, err := st.Info(ctx); err == nil && info.State.Msgs >= 5 {
				msgs = bridgetest.JetStreamMessages(t, ns.ClientURL(), "SCPG")
			}
		}
	}
	var subjects []string
	for _, m := range msgs {
		subjects = append(subjects, m.Subject+" "+m.Hdr["pgq-op"])
	}
	if s := strings.Join(subjects, ","); s != "SCPG.sc_t insert,SCPG.schema ddl,SCPG.sc_t insert,SCPG.schema ddl,SCPG.schema ddl" {
		t.Errorf("stream SCPG: %s, want the rows on SCPG.sc_t and the DDL on SCPG.schema", s)
	}
	want := []string{`ALTER "public"."sc_t" ALTER TABLE sc_t ADD COLUMN note text`, `CREATE "public"."sc_other" CREATE TABLE sc_other (id int)`,
		`DROP "public"."sc_other" DROP TABLE sc_other`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("schema changes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// bridgeKafka starts `pgq bridge kafka --format debezium` with args.
func bridgeKafka(ctx context.Context, t *testing.T, addr string, brokers []string, args ...string) {
	t.Helper()
	startBridge(ctx, t, "kafka", addr, append([]string{"--brokers", strings.Join(brokers, ","), "--create-topics", "--partitions", "1"}, args...)...)
}

// startBridge starts `pgq bridge <broker> --format debezium` with args;
// it is stopped when the test ends.
func startBridge(ctx context.Context, t *testing.T, broker, addr string, args ...string) {
	t.Helper()
	bctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(bctx, pgqbin.Path(t), append([]string{"bridge", broker, "--addr", addr, "--format", "debezium"}, args...)...)
	cmd.Env = pgqbin.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("pgq bridge %s %v:\n%s", broker, args, stderr.String())
		}
	})
}
