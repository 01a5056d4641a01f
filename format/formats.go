package format

import (
	"strings"

	"github.com/pgq-dev/pgq"
)

// Spec is a format's row in the table of formats: everything the CLI,
// the HTTP API and the bridges know of a format. They read it (Formats,
// Format.Spec, Parse, Names, List) and name no format themselves, so a
// new format is a constant, a row here and its renderer in this package.
type Spec struct {
	// Format is the format the row describes.
	Format Format
	// Name is the format's name, as Parse, the CLI's --format and the
	// HTTP fetch's "format" read it.
	Name string
	// Help says what the format is, for the CLI's help (a phrase: "pgq's
	// own JSON").
	Help string
	// ContentType is the media type of one event.
	ContentType string
	// BatchContentType is the media type of a JSON array of events (a
	// webhook request's body).
	BatchContentType string

	// events is how many events a change renders to; nil → 1.
	events func(c *pgq.Change) int
	// event appends event k of change i of tx.
	event eventFunc
	// message appends what binding bind needs of change i of tx as a
	// broker message (Renderer.AppendMessage); nil → the bridge's own
	// message (pgq's format: the bridge's wire format) stays.
	message func(r *Renderer, b []byte, tx *pgq.Transaction, i int, bind Binding) ([]byte, Message)
	// eventMessage appends event k of change i of tx as a message of its
	// own (Renderer.AppendEventMessage); nil → message (one event per
	// change).
	eventMessage func(r *Renderer, b []byte, tx *pgq.Transaction, i, k int, bind Binding) ([]byte, Message)
	// deletes reports whether event k of c is a delete a broker that
	// compacts by key follows with a tombstone (Renderer.Tombstone); nil
	// → none is.
	deletes func(c *pgq.Change, k int) bool
	// schemaChange appends change i of tx, one the format has no event
	// for (a ddl or gap change), as a message of a schema-change topic
	// (Renderer.AppendSchemaChange); nil → the format has none.
	schemaChange func(r *Renderer, b []byte, tx *pgq.Transaction, i int) ([]byte, Message)
}

// eventFunc appends event k of change i of tx.
type eventFunc func(r *Renderer, b []byte, tx *pgq.Transaction, i, k int) []byte

// table is the one list of formats, indexed by Format.
var table = [...]Spec{
	PGQ: {
		Format: PGQ, Name: "pgq", Help: "pgq's own JSON",
		ContentType: "application/json", BatchContentType: "application/json",
		event: func(r *Renderer, b []byte, tx *pgq.Transaction, i, _ int) []byte {
			return AppendChangeJSONOrdinal(b, &tx.Changes[i], tx.Ordinal(i), r.o.JSONValues)
		},
	},
	Debezium: {
		Format: Debezium, Name: "debezium",
		Help:        "Debezium's change-event values; a bridge keys them as Debezium does",
		ContentType: "application/json", BatchContentType: "application/json",
		events:       debeziumEvents,
		event:        (*Renderer).appendDebeziumEvent,
		message:      (*Renderer).appendDebeziumBrokerMessage,
		eventMessage: (*Renderer).appendDebeziumEventMessage,
		deletes:      debeziumDelete,
		schemaChange: (*Renderer).appendDebeziumSchemaChange,
	},
	CloudEvents: {
		Format: CloudEvents, Name: "cloudevents",
		Help:        "CloudEvents 1.0: the Kafka and JetStream bridges in binary mode with ce-* headers, the webhook and consume as structured JSON",
		ContentType: "application/cloudevents+json", BatchContentType: "application/cloudevents-batch+json",
		event: func(r *Renderer, b []byte, tx *pgq.Transaction, i, _ int) []byte {
			return r.AppendCloudEvent(b, tx, i)
		},
		message: (*Renderer).appendCloudEventBrokerMessage,
	},
}

// Formats returns the table of formats, in the order of their constants
// (PGQ, the default, first).
func Formats() []Spec { return append([]Spec(nil), table[:]...) }

// Names returns the formats' names, in the table's order.
func Names() []string {
	n := make([]string, len(table))
	for i := range table {
		n[i] = table[i].Name
	}
	return n
}

// List returns the formats' names as prose: "pgq, debezium or
// cloudevents".
func List() string { return listOf(func(s Spec) string { return s.Name }) }

// HelpList returns each format's name and Help as prose, for the CLI's
// help: "pgq (pgq's own JSON), debezium (…) or cloudevents (…)".
func HelpList() string {
	return listOf(func(s Spec) string { return s.Name + " (" + s.Help + ")" })
}

// listOf joins item of each row: "a, b or c".
func listOf(item func(Spec) string) string {
	var sb strings.Builder
	for i := range table {
		switch {
		case i == len(table)-1 && i > 0:
			sb.WriteString(" or ")
		case i > 0:
			sb.WriteString(", ")
		}
		sb.WriteString(item(table[i]))
	}
	return sb.String()
}

// Spec returns the format's row in the table; an invalid Format has the
// zero Spec.
func (f Format) Spec() Spec {
	if int(f) < len(table) {
		return table[f]
	}
	return Spec{}
}

// Binding is how a broker carries a change as a message: the CloudEvents
// protocol bindings of the binary content mode (which decide the header
// names) and the structured mode of a batch of events. A bridge's
// publisher names its binding; the format decides what the message is.
type Binding uint8

// The bindings.
const (
	// HTTP: "ce-" headers, the data's type in Content-Type, values
	// percent-encoded.
	HTTP Binding = iota
	// NATS: "ce-" headers for every attribute, datacontenttype included,
	// values percent-encoded.
	NATS
	// Kafka: "ce_" headers, the data's type in content-type.
	Kafka
	// Structured: each message is a whole event, no headers of the
	// format: the webhook's JSON batches (Spec.BatchContentType).
	Structured
)

// Message is what a binding needs of one change, as AppendMessage
// renders it. Payload and Key are capped slices of the buffer
// AppendMessage returned (appending to one never overwrites another).
type Message struct {
	// Payload is the message's body; nil → the bridge's own payload
	// stays (pgq's format).
	Payload []byte
	// Key is the message's key; nil → the bridge's key stays (the
	// format has none for the change, or it is pgq's format).
	Key []byte
	// Headers are the format's headers (CloudEvents' ce-* in binary
	// mode), sent after the bridge's own; nil → none.
	Headers [][2]string
	// NullKey: the format's key of the message is null (Debezium's for a
	// truncate, a table without a key): the message has no key, and Key
	// is nil.
	NullKey bool
}

// Tombstone reports whether event k of change i of tx is one the format
// follows with a tombstone on a broker that compacts by key (Kafka): a
// Debezium delete, also the delete of a key-changing update, as
// Debezium's tombstones.on.delete=true does (a message of the same key
// and a null value). The bridge publishes the tombstone as an event of
// its own, right after the delete; pgq's format and CloudEvents have
// none.
func (r *Renderer) Tombstone(tx *pgq.Transaction, i, k int) bool {
	d := table[r.f].deletes
	return d != nil && d(&tx.Changes[i], k)
}

// Rewrites reports whether the format replaces a bridge's messages
// (Renderer.AppendMessage): false for pgq's own format, whose messages
// are the bridge's wire format.
func (s Spec) Rewrites() bool { return s.message != nil }

// AppendMessage appends change i of tx as a broker message of binding
// bind to b and returns b grown and the message, whose Payload and Key
// point into it: the message of the whole change (a bridge publishes a
// change of several events as one message per event instead,
// AppendEventMessage, and none for a change of no event):
//
//   - debezium: the payload is the change's event; a change that renders
//     to several (a key-changing update, a multi-table truncate) carries
//     them as a JSON array, one that renders to none (ddl, gap) the JSON
//     null, which a bridge does not publish (Events is 0: a null is a
//     tombstone to a Kafka Connect sink). The key is Debezium's key
//     ({"id":1}); where it is null (a table without a key, a truncate,
//     ddl, gap) Key is nil and NullKey set: the message has no key, and
//     a bridge picks its partition by pgq's row key, so it stays
//     deterministic. Every binding alike.
//   - cloudevents: in the binary bindings (HTTP, NATS, Kafka) the payload
//     is the event's data (the change in pgq's JSON) and the attributes
//     are ce-* (Kafka: ce_*) headers; in Structured the payload is the
//     whole event. The key stays the bridge's.
//   - pgq: nothing (Rewrites is false): the bridge's message stays.
func (r *Renderer) AppendMessage(b []byte, tx *pgq.Transaction, i int, bind Binding) ([]byte, Message) {
	if m := table[r.f].message; m != nil {
		return m(r, b, tx, i, bind)
	}
	return b, Message{}
}

func (r *Renderer) appendDebeziumBrokerMessage(b []byte, tx *pgq.Transaction, i int, bind Binding) ([]byte, Message) {
	n := debeziumEvents(&tx.Changes[i])
	if n == 1 {
		return r.appendDebeziumEventMessage(b, tx, i, 0, bind)
	}
	var m Message
	start := len(b)
	b = r.appendEvents(b, tx, i, n, (*Renderer).appendDebeziumEvent)
	m.Payload = b[start:len(b):len(b)]
	if n == 0 {
		return b, m
	}
	return r.appendDebeziumMessageKey(b, tx, i, 0, m)
}

// appendDebeziumEventMessage is event k of change i of tx as a message
// of its own: the event, keyed by its Debezium key.
func (r *Renderer) appendDebeziumEventMessage(b []byte, tx *pgq.Transaction, i, k int, _ Binding) ([]byte, Message) {
	var m Message
	start := len(b)
	b = r.appendDebeziumEvent(b, tx, i, k)
	m.Payload = b[start:len(b):len(b)]
	return r.appendDebeziumMessageKey(b, tx, i, k, m)
}

// appendDebeziumMessageKey sets m's key to event k's Debezium key,
// appended to b; a null key leaves m's Key nil (the bridge's stays).
func (r *Renderer) appendDebeziumMessageKey(b []byte, tx *pgq.Transaction, i, k int, m Message) ([]byte, Message) {
	start := len(b)
	b = r.appendDebeziumKeyEvent(b, tx, i, k)
	if key := b[start:]; len(key) == 0 || string(key) == "null" {
		m.NullKey = true
		return b[:start], m
	}
	m.Key = b[start:len(b):len(b)]
	return b, m
}

// AppendEventMessage appends event k (0 ≤ k < Events(tx, i)) of change i
// of tx as a broker message of its own: a bridge publishes each event of
// a change that renders to several (a Debezium key-changing update, a
// multi-table truncate) as its own message, as Debezium does, keyed by
// its own key (the delete's the old key, the create's the new one). For
// a format with one event per change it is AppendMessage.
func (r *Renderer) AppendEventMessage(b []byte, tx *pgq.Transaction, i, k int, bind Binding) ([]byte, Message) {
	if m := table[r.f].eventMessage; m != nil {
		return m(r, b, tx, i, k, bind)
	}
	return r.AppendMessage(b, tx, i, bind)
}

func (r *Renderer) appendCloudEventBrokerMessage(b []byte, tx *pgq.Transaction, i int, bind Binding) ([]byte, Message) {
	var m Message
	start := len(b)
	if bind == Structured {
		b = r.AppendCloudEvent(b, tx, i)
		m.Payload = b[start:len(b):len(b)]
		return b, m
	}
	b = r.AppendCloudEventData(b, tx, i)
	m.Payload = b[start:len(b):len(b)]
	m.Headers = r.CloudEventAttributes(tx, i).Headers(bind)
	return b, m
}

// appendEvents appends the n events of change i of tx (event appends
// one) as one JSON value: null for none, the event for one, an array for
// several.
func (r *Renderer) appendEvents(b []byte, tx *pgq.Transaction, i, n int, event eventFunc) []byte {
	switch n {
	case 0:
		return append(b, "null"...)
	case 1:
		return event(r, b, tx, i, 0)
	}
	b = append(b, '[')
	for k := 0; k < n; k++ {
		if k > 0 {
			b = append(b, ',')
		}
		b = event(r, b, tx, i, k)
	}
	return append(b, ']')
}
