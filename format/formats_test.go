package format_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/pgq-dev/pgq/format"
)

// TestTable: Parse, String, ContentType and the lists read the one table
// of formats, in its order, and the texts built from it say what they
// said when they were typed by hand.
func TestTable(t *testing.T) {
	specs := format.Formats()
	if len(specs) == 0 || specs[0].Format != format.PGQ {
		t.Fatalf("the table does not start with pgq's own format: %+v", specs)
	}
	for i, s := range specs {
		if s.Format != format.Format(i) || s.Format.Spec().Name != s.Name || s.Name == "" || s.Help == "" || s.ContentType == "" || s.BatchContentType == "" {
			t.Errorf("row %d is incomplete or out of place: %+v", i, s)
		}
		if f, err := format.Parse(s.Name); err != nil || f != s.Format || f.String() != s.Name || f.ContentType() != s.ContentType {
			t.Errorf("Parse(%q) = %v, %v", s.Name, f, err)
		}
	}
	if f, err := format.Parse(""); err != nil || f != format.PGQ {
		t.Errorf(`Parse("") = %v, %v`, f, err)
	}
	if _, err := format.Parse("avro"); !errors.Is(err, format.ErrUnknown) || err.Error() != `format: unknown format (want pgq, debezium or cloudevents): "avro"` {
		t.Errorf(`Parse("avro"): %v`, err)
	}
	if got := format.Names(); !slices.Equal(got, []string{"pgq", "debezium", "cloudevents"}) {
		t.Errorf("Names() = %q", got)
	}
	if got := format.List(); got != "pgq, debezium or cloudevents" {
		t.Errorf("List() = %q", got)
	}
	want := "pgq (pgq's own JSON), debezium (Debezium's change-event values; a bridge keys them as Debezium does) or cloudevents (CloudEvents 1.0: the Kafka and JetStream bridges in binary mode with ce-* headers, the webhook and consume as structured JSON)"
	if got := format.HelpList(); got != want {
		t.Errorf("HelpList() = %q", got)
	}
	if got := format.CloudEvents.Spec().BatchContentType; got != "application/cloudevents-batch+json" {
		t.Errorf("cloudevents' batch content type %q", got)
	}
	if s := format.Format(200).Spec(); s.Name != "" {
		t.Errorf("an invalid format has a row: %+v", s)
	}
}

// TestAppendEventMessage: each event of a change is a message of its own
// (the event, keyed by its own Debezium key unless null); for a change of
// one event, and in the formats of one event per change, it is
// AppendMessage.
func TestAppendEventMessage(t *testing.T) {
	tx := eventsTx()
	o := format.Options{Database: "shop", Slot: "s", Now: fixedNow}
	for _, s := range format.Formats() {
		r, _ := format.New(s.Format, o)
		want, _ := format.New(s.Format, o)
		split := 0
		for i := range tx.Changes {
			n := want.Events(tx, i)
			for k := range n {
				_, m := r.AppendEventMessage(nil, tx, i, k, format.Kafka)
				var payload, key []byte
				if n == 1 {
					var w format.Message
					_, w = want.AppendMessage(nil, tx, i, format.Kafka)
					payload, key = w.Payload, w.Key
				} else {
					split++
					payload = want.AppendEvent(nil, tx, i, k)
					if kb := want.AppendDebeziumKey(nil, tx, i, k); string(kb) != "null" {
						key = kb
					}
				}
				if string(m.Payload) != string(payload) || string(m.Key) != string(key) || (m.Key == nil) != (key == nil) {
					t.Errorf("%s, change %d event %d: got %s key %s, want %s key %s", s.Name, i, k, m.Payload, m.Key, payload, key)
				}
			}
		}
		if s.Format == format.Debezium && split < 4 {
			t.Errorf("debezium: %d events of changes of several, want a key change's 2 and a truncate's 2", split)
		}
	}
}

// TestAppendMessage: what a broker binding gets of each change is what
// the bridge built before it asked the format (the events as one JSON
// value and Debezium's key unless null; CloudEvents' data and headers in
// the binary bindings, the whole event in Structured; nothing in pgq's).
func TestAppendMessage(t *testing.T) {
	tx := eventsTx()
	o := format.Options{Database: "shop", Slot: "s", Now: fixedNow}
	for _, s := range format.Formats() {
		for _, bind := range []format.Binding{format.HTTP, format.NATS, format.Kafka, format.Structured} {
			r, err := format.New(s.Format, o)
			if err != nil {
				t.Fatal(err)
			}
			want, err := format.New(s.Format, o) // renders the expected bytes
			if err != nil {
				t.Fatal(err)
			}
			if s.Format == format.PGQ && s.Rewrites() {
				t.Fatal("pgq's format rewrites the bridge's messages")
			}
			var b []byte
			for i := range tx.Changes {
				var m format.Message
				b, m = r.AppendMessage(b, tx, i, bind)
				var payload, key []byte
				var headers [][2]string
				switch s.Format {
				case format.Debezium:
					payload = want.AppendChangeEvents(nil, tx, i)
					if want.Events(tx, i) > 0 {
						if k := want.AppendDebeziumKey(nil, tx, i, 0); string(k) != "null" {
							key = k
						}
					}
				case format.CloudEvents:
					if bind == format.Structured {
						payload = want.AppendCloudEvent(nil, tx, i)
					} else {
						payload = want.AppendCloudEventData(nil, tx, i)
						headers = want.CloudEventAttributes(tx, i).Headers(bind)
					}
				}
				if string(m.Payload) != string(payload) || string(m.Key) != string(key) || (m.Key == nil) != (key == nil) || !reflect.DeepEqual(m.Headers, headers) {
					t.Errorf("%s, binding %d, change %d: got %s key %s headers %q, want %s key %s headers %q",
						s.Name, bind, i, m.Payload, m.Key, m.Headers, payload, key, headers)
				}
				if cap(m.Payload) != len(m.Payload) || cap(m.Key) != len(m.Key) {
					t.Errorf("%s, change %d: payload or key not capped", s.Name, i)
				}
			}
		}
	}
}
