package format_test

import (
	"context"
	"encoding/json"
	"fmt"
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
// the same three on that subject of the stream, the rows on theirs. Both
// bridges run again with --schemas: every message on each topic and
// subject, value and key, then passes checkConnect, and its payload
// says the same.
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
	run := startRunTables(t, db, "public.sc_t")
	pgqbin.Output(t, "ddl", "install", "--pg-url", cluster.URL(db), "--publication", "p_"+db)
	for _, g := range []string{"g", "plain", "js", "gs", "jss"} {
		run.Out(t, "groups", "create", g, "--from", "earliest")
	}
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
	bridgeKafka(t, run, brokers, "--group", "g", "--topic", "scdata", "--schema-change-topic", "scddl")
	bridgeKafka(t, run, brokers, "--group", "plain", "--topic", "scplain")
	bridgeKafka(t, run, brokers, "--group", "gs", "--topic", "scsdata", "--schema-change-topic", "scsddl", "--schemas")
	ns := bridgetest.StartNATS(t, t.TempDir(), 0)
	defer ns.Shutdown()
	for _, js := range []struct{ group, stream, schemas string }{{"js", "SCPG", ""}, {"jss", "SCPGS", "--schemas"}} {
		args := []string{"--nats-url", ns.ClientURL(), "--stream", js.stream, "--subject", js.stream + ".{table}", "--create-stream",
			"--schema-change-subject", js.stream + ".schema", "--group", js.group}
		if js.schemas != "" {
			args = append(args, js.schemas)
		}
		startBridge(t, "jetstream", run, args...)
	}
	// Each topic is read until it holds what it should.
	want := []string{`ALTER "public"."sc_t" ALTER TABLE sc_t ADD COLUMN note text`, `CREATE "public"."sc_other" CREATE TABLE sc_other (id int)`,
		`DROP "public"."sc_other" DROP TABLE sc_other`}
	for _, f := range []struct {
		data, ddl string
		schemas   bool
	}{{"scdata", "scddl", false}, {"scplain", "", false}, {"scsdata", "scsddl", true}} {
		checkRowCreates(t, f.data, bridgetest.KafkaMessagesN(t, brokers, f.data, 2), f.schemas)
		if f.ddl == "" {
			continue
		}
		got := schemaChangeEvents(t, db, bridgetest.KafkaMessagesN(t, brokers, f.ddl, 3), f.schemas)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n%s\nwant\n%s", f.ddl, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	for _, stream := range []string{"SCPG", "SCPGS"} {
		schemas := stream == "SCPGS"
		msgs := streamMessages(ctx, t, ns.ClientURL(), stream, 5)
		var subjects []string
		var rows, ddl []bridgetest.Bridged
		for _, m := range msgs {
			subjects = append(subjects, m.Subject+" "+m.Hdr["pgq-op"])
			if m.Subject == stream+".schema" {
				ddl = append(ddl, m)
			} else {
				rows = append(rows, m)
			}
		}
		if s, w := strings.Join(subjects, ","), strings.ReplaceAll("S.sc_t insert,S.schema ddl,S.sc_t insert,S.schema ddl,S.schema ddl", "S.", stream+"."); s != w {
			t.Errorf("stream %s: %s, want %s: the rows on %s.sc_t and the DDL on %s.schema", stream, s, w, stream, stream)
		}
		checkRowCreates(t, stream, rows, schemas)
		if got := schemaChangeEvents(t, db, ddl, schemas); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("stream %s:\n%s\nwant\n%s", stream, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// streamMessages reads JetStream stream until it holds n messages (30
// seconds at the most) and returns them.
func streamMessages(ctx context.Context, t *testing.T, url, stream string, n uint64) []bridgetest.Bridged {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if st, err := bridgetest.JSClient(t, url).Stream(ctx, stream); err == nil {
			if info, err := st.Info(ctx); err == nil && info.State.Msgs >= n {
				return bridgetest.JetStreamMessages(t, url, stream)
			}
		}
	}
	return nil
}

// unwrap holds m's value and key to checkConnect with schemas and
// returns their payloads (m's own without).
func unwrap(t *testing.T, m bridgetest.Bridged, schemas bool) (body []byte, key string) {
	t.Helper()
	if !schemas {
		return m.Body, m.Key
	}
	checkConnect(t, m.Body)
	checkConnect(t, []byte(m.Key))
	var v, k struct{ Payload json.RawMessage }
	if err := json.Unmarshal(m.Body, &v); err != nil {
		t.Errorf("%s: %v", m.Body, err)
	}
	if err := json.Unmarshal([]byte(m.Key), &k); err != nil {
		t.Errorf("key %s: %v", m.Key, err)
	}
	return v.Payload, string(k.Payload)
}

// checkRowCreates fails t unless rs (of place) are the 2 rows' creates.
func checkRowCreates(t *testing.T, place string, rs []bridgetest.Bridged, schemas bool) {
	t.Helper()
	if len(rs) != 2 {
		t.Errorf("%s: %d records, want the 2 rows' creates", place, len(rs))
	}
	for _, r := range rs {
		body, key := unwrap(t, r, schemas)
		var ev struct {
			Op    string
			After map[string]any
		}
		if err := json.Unmarshal(body, &ev); err != nil || ev.Op != "c" || ev.After["id"] == nil || key != fmt.Sprintf(`{"id":%v}`, ev.After["id"]) {
			t.Errorf("%s: %s key %s, want a row's create (%v)", place, body, key, err)
		}
	}
}

// schemaChangeEvents checks rs are schema change events of database db and
// returns each one's table change and statement.
func schemaChangeEvents(t *testing.T, db string, rs []bridgetest.Bridged, schemas bool) []string {
	t.Helper()
	var got []string
	for _, r := range rs {
		body, key := unwrap(t, r, schemas)
		var ev struct {
			DatabaseName, SchemaName, DDL string
			TableChanges                  []struct{ Type, ID string }
		}
		if err := json.Unmarshal(body, &ev); err != nil || ev.DatabaseName != db || ev.SchemaName != "public" ||
			key != `{"databaseName":"`+db+`"}` {
			t.Errorf("schema change %s key %s: %v", body, key, err)
		}
		if len(ev.TableChanges) != 1 {
			t.Errorf("schema change %s: want one table change", body)
			continue
		}
		got = append(got, ev.TableChanges[0].Type+" "+ev.TableChanges[0].ID+" "+ev.DDL)
	}
	return got
}

// bridgeKafka starts `pgq bridge kafka --format debezium` with args.
func bridgeKafka(t *testing.T, run *pgqbin.Run, brokers []string, args ...string) {
	t.Helper()
	startBridge(t, "kafka", run, append([]string{"--brokers", strings.Join(brokers, ","), "--create-topics", "--partitions", "1"}, args...)...)
}

// startBridge starts `pgq bridge <broker> --format debezium` with args
// on run; it is stopped when the test ends.
func startBridge(t *testing.T, broker string, run *pgqbin.Run, args ...string) {
	t.Helper()
	pgqbin.Start(t, append([]string{"bridge", broker, "--addr", run.Addr, "--format", "debezium"}, args...)...)
}
