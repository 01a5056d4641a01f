package bridge_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/bridge/jetstream"
	"github.com/pgq-dev/pgq/bridge/kafka"
	"github.com/pgq-dev/pgq/format"
	"github.com/pgq-dev/pgq/internal/bridgetest"
	"github.com/pgq-dev/pgq/internal/connectcheck"
)

// schemaChangeEvent is what the test reads of a schema change event.
type schemaChangeEvent struct {
	DatabaseName string
	DDL          string
	TableChanges []struct{ Type, ID string }
	Gap          *struct{ FromLsn, ToLsn uint64 }
	Source       struct{ Sequence string }
}

// TestDebeziumSchemaChangeTopic: with a schema-change topic (Kafka) or
// subject (JetStream), each ddl and gap change of the journal is one
// schema change event there, keyed by the database, and none is on the
// data topic or subject; a second bridge that starts again from the
// group's first record (its cursor reset) publishes only what is new:
// the schema-change topic takes part in the resume, every message is
// there once. (Without the option they are left out:
// TestDebeziumLeavesOutNonEvents.) Each broker runs twice, the second
// time with format.Options.Schemas: every message, on the data topics
// and on the schema-change one, value and key, is then what Kafka
// Connect's JSON converter with schemas reads (connectcheck), and the
// payloads say the same.
func TestDebeziumSchemaChangeTopic(t *testing.T) {
	type publisher interface {
		bridge.Publisher
		Close() error
	}
	run := func(t *testing.T, schemas bool, newPub func() publisher, read func() []bridgetest.Bridged, schemaPlace string) {
		src := bridgetest.StartSource(t, 50)
		for round := range 2 {
			src.AppendNonEvents()
			if round == 1 {
				if _, err := src.Manager.Reset(context.Background(), "g", "earliest", false); err != nil {
					t.Fatal(err)
				}
			}
			p := newPub()
			bridgetest.BridgeFormatOptions(t, p, src, format.Debezium, format.Options{Database: "db", Slot: "s", Schemas: schemas})
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[string]bool{}
		var data, schema []bridgetest.Bridged
		for _, m := range read() {
			id := m.Hdr["pgq-id"]
			if seen[id] {
				t.Errorf("message %s twice", id)
			}
			seen[id] = true
			if schemas {
				connectcheck.Assert(t, m.Body)
				connectcheck.Assert(t, []byte(m.Key))
				m.Body, m.Key = payloadOf(t, m.Body), string(payloadOf(t, []byte(m.Key)))
			}
			if m.Subject == schemaPlace {
				schema = append(schema, m)
			} else {
				data = append(data, m)
			}
		}
		if len(data) != src.Changes {
			t.Errorf("%d data messages, want %d", len(data), src.Changes)
		}
		for _, m := range data {
			if op := m.Hdr[bridge.HeaderOp]; op != "update" {
				t.Errorf("data message %s on %s: op %s", m.Hdr["pgq-id"], m.Subject, op)
			}
		}
		ops := ""
		for _, m := range schema {
			var ev schemaChangeEvent
			if err := json.Unmarshal(m.Body, &ev); err != nil {
				t.Fatalf("%s: %v", m.Body, err)
			}
			if m.Key != `{"databaseName":"db"}` || ev.DatabaseName != "db" || ev.Source.Sequence == "" {
				t.Errorf("schema change %s key %s", m.Body, m.Key)
			}
			switch op := m.Hdr[bridge.HeaderOp]; op {
			case "ddl":
				if ev.DDL != "ALTER TABLE t ADD note text" || len(ev.TableChanges) != 1 || ev.TableChanges[0].Type != "ALTER" ||
					ev.TableChanges[0].ID != `"public"."t"` || ev.Gap != nil {
					t.Errorf("ddl event %s", m.Body)
				}
			case "gap":
				if ev.Gap == nil || ev.Gap.ToLsn != ev.Gap.FromLsn+50 || ev.DDL != "" || len(ev.TableChanges) != 0 {
					t.Errorf("gap event %s", m.Body)
				}
			default:
				t.Errorf("op %s on the schema-change place", op)
			}
			ops += m.Hdr[bridge.HeaderOp] + " "
		}
		if ops != "ddl gap ddl gap " {
			t.Errorf("schema changes %q, want the two ddl and gap changes once each, in order", ops)
		}
	}
	for _, schemas := range []bool{false, true} {
		sfx := ""
		if schemas {
			sfx = "-schemas"
		}
		t.Run("kafka"+sfx, func(t *testing.T) {
			brokers := bridgetest.KafkaBrokers(t)
			data, ddl := "scdata"+sfx, "scddl"+sfx
			var skipped uint64
			var last *kafka.Publisher
			run(t, schemas, func() publisher {
				if last != nil {
					skipped += last.Skipped()
				}
				p, err := kafka.New(context.Background(), kafka.Options{Brokers: brokers, Topic: data + ".{table}", CreateTopics: true, Partitions: 3,
					SchemaChangeTopic: ddl})
				if err != nil {
					t.Fatal(err)
				}
				last = p
				return p
			}, func() []bridgetest.Bridged {
				skipped += last.Skipped()
				if skipped == 0 {
					t.Error("the second bridge skipped nothing: the resume did not read what the topics held")
				}
				return append(bridgetest.KafkaMessages(t, brokers, data+".t"), bridgetest.KafkaMessages(t, brokers, ddl)...)
			}, ddl)
		})
		t.Run("jetstream"+sfx, func(t *testing.T) {
			ns := bridgetest.StartNATS(t, t.TempDir(), 0)
			defer ns.Shutdown()
			run(t, schemas, func() publisher {
				p, err := jetstream.New(context.Background(), jetstream.Options{URL: ns.ClientURL(), Stream: "SC", Subject: "SC.data.{table}", CreateStream: true,
					SchemaChangeSubject: "SC.schema"})
				if err != nil {
					t.Fatal(err)
				}
				return p
			}, func() []bridgetest.Bridged { return bridgetest.JetStreamMessages(t, ns.ClientURL(), "SC") }, "SC.schema")
		})
	}
}

// payloadOf is the payload of msg, a message of the schema form
// ({"schema":…,"payload":…}).
func payloadOf(t *testing.T, msg []byte) []byte {
	t.Helper()
	var w struct{ Payload json.RawMessage }
	if err := json.Unmarshal(msg, &w); err != nil {
		t.Fatalf("%s: %v", msg, err)
	}
	return w.Payload
}
