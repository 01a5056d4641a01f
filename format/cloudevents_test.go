package format_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

func cloudEventsSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "cloudevents", "cloudevents.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("cloudevents.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("cloudevents.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCloudEventsSchema renders every kind of change (and a backfill
// read) as a structured CloudEvent, validates each against the
// CloudEvents 1.0 JSON schema, checks the attributes pgq promises (id
// the change's stable id, ChangeID, which bridge's TestMessageIDIsChangeID
// holds to the bridges' message id; type, subject, time, data the pgq
// change) and compares the stream with testdata/cloudevents/events.jsonl.
func TestCloudEventsSchema(t *testing.T) {
	schema := cloudEventsSchema(t)
	r, err := format.New(format.CloudEvents, format.Options{Database: "shop", Slot: "pgq"})
	if err != nil {
		t.Fatal(err)
	}
	tx := eventsTx()
	bf := testTx(pgq.Change{Op: pgq.OpRead, Schema: "public", Table: "customers", Columns: customers, New: customer("3", "Bo")})
	bf.Backfill = "bf1"
	var lines bytes.Buffer
	for _, x := range []*pgq.Transaction{tx, bf} {
		for i := range x.Changes {
			if n := r.Events(x, i); n != 1 {
				t.Fatalf("change %d: %d events", i, n)
			}
			ev := r.AppendEvent(nil, x, i, 0)
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(ev))
			if err != nil {
				t.Fatalf("change %d: invalid JSON: %v\n%s", i, err, ev)
			}
			if err := schema.Validate(inst); err != nil {
				t.Errorf("change %d: not a CloudEvent: %v\n%s", i, err, ev)
			}
			var got struct {
				SpecVersion, ID, Source, Type, Subject, Time, DataContentType string
				Data                                                          json.RawMessage
			}
			if err := json.Unmarshal(ev, &got); err != nil {
				t.Fatal(err)
			}
			c := &x.Changes[i]
			if id := format.ChangeID(x.CommitLSN, x.Ordinal(i), x.Backfill); got.ID != id {
				t.Errorf("change %d: id %q, want the bridges' message id %q", i, got.ID, id)
			}
			if got.Type != "pgq."+c.Op.String() || got.Source != "/pgq/shop/pgq" || got.Time != format.CommitTime(x.CommitTime) ||
				got.SpecVersion != "1.0" || got.DataContentType != "application/json" {
				t.Errorf("change %d: attributes %s", i, ev)
			}
			if !bytes.Equal(got.Data, format.AppendChangeJSONOrdinal(nil, c, x.Ordinal(i), format.JSONEmbedded)) {
				t.Errorf("change %d: data %s, want the pgq change", i, got.Data)
			}
			lines.Write(ev)
			lines.WriteByte('\n')
		}
	}
	goldenLines(t, filepath.Join("testdata", "cloudevents", "events.jsonl"), lines.Bytes())
}

// TestCloudEventsSchemaRejects: the schema check can fail (an event
// without id, one with a bad specversion type).
func TestCloudEventsSchemaRejects(t *testing.T) {
	schema := cloudEventsSchema(t)
	for _, bad := range []string{
		`{"specversion":"1.0","source":"/pgq/shop/pgq","type":"pgq.insert"}`,
		`{"specversion":1,"id":"1","source":"/pgq/shop/pgq","type":"pgq.insert"}`,
	} {
		inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(bad))
		if schema.Validate(inst) == nil {
			t.Errorf("schema accepted %s", bad)
		}
	}
}

// TestCloudEventsBinary: the binary-mode headers of each binding carry
// the same attributes as the structured event, and the data is the pgq
// change.
func TestCloudEventsBinary(t *testing.T) {
	r, _ := format.New(format.CloudEvents, format.Options{Database: "my db", Slot: "pgq"})
	tx := eventsTx()
	a := r.CloudEventAttributes(tx, 0)
	want := map[format.Binding][][2]string{
		format.HTTP: {{"ce-specversion", "1.0"}, {"ce-id", "16/B374D848.0"}, {"ce-source", "/pgq/my%2520db/pgq"}, {"ce-type", "pgq.insert"},
			{"ce-subject", "public.customers"}, {"ce-time", "2026-12-04T10:30:00.123456Z"}, {"Content-Type", "application/json"},
			{"ce-pgqlsn", "16/B374D848"}, {"ce-pgqxid", "556"}},
		format.NATS: {{"ce-specversion", "1.0"}, {"ce-id", "16/B374D848.0"}, {"ce-source", "/pgq/my%2520db/pgq"}, {"ce-type", "pgq.insert"},
			{"ce-subject", "public.customers"}, {"ce-time", "2026-12-04T10:30:00.123456Z"}, {"ce-datacontenttype", "application/json"},
			{"ce-pgqlsn", "16/B374D848"}, {"ce-pgqxid", "556"}},
		format.Kafka: {{"ce_specversion", "1.0"}, {"ce_id", "16/B374D848.0"}, {"ce_source", "/pgq/my%20db/pgq"}, {"ce_type", "pgq.insert"},
			{"ce_subject", "public.customers"}, {"ce_time", "2026-12-04T10:30:00.123456Z"}, {"content-type", "application/json"},
			{"ce_pgqlsn", "16/B374D848"}, {"ce_pgqxid", "556"}},
	}
	for bind, w := range want {
		if got := a.Headers(bind); !reflect.DeepEqual(got, w) {
			t.Errorf("binding %d:\n got %q\nwant %q", bind, got, w)
		}
	}
	if got := r.AppendCloudEventData(nil, tx, 0); !bytes.Equal(got, format.AppendChangeJSONOrdinal(nil, &tx.Changes[0], 0, format.JSONEmbedded)) {
		t.Errorf("data %s", got)
	}
	// A message has no subject header.
	for _, h := range r.CloudEventAttributes(tx, 7).Headers(format.Kafka) {
		if h[0] == "ce_subject" {
			t.Errorf("message with subject %q", h[1])
		}
	}
}
