package format_test

import (
	"errors"
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
