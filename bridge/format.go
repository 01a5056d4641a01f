package bridge

import (
	"fmt"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// formatter re-renders the messages of a transaction in a format other
// than pgq's own (Options.Format). It is used by Run's loop only.
type formatter struct {
	r    *format.Renderer
	bind format.Binding
	// structured: CloudEvents in structured mode (the whole event is the
	// payload, no ce-* headers): the webhook's batches.
	structured bool
}

// newFormatter returns nil for the pgq format (the payloads stay as
// appendMessages builds them). The CloudEvents binding follows the
// publisher: Kafka's ce_* headers for "kafka", NATS's for "jetstream",
// HTTP's otherwise; "webhook" takes the structured mode.
func newFormatter(f format.Format, o format.Options, broker string) (*formatter, error) {
	if f == format.PGQ {
		return nil, nil
	}
	r, err := format.New(f, o)
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	bind := format.HTTP
	switch broker {
	case "kafka":
		bind = format.Kafka
	case "jetstream":
		bind = format.NATS
	}
	return &formatter{r: r, bind: bind, structured: broker == "webhook"}, nil
}

// apply rewrites msgs (the messages appendMessages just built for tx, one
// per change, in order) in the renderer's format, their payloads and keys
// appended to arena (returned, grown).
//
// Debezium: the payload is the change's Debezium event; a change that
// renders to several events (a key-changing update, a multi-table
// truncate) carries them as a JSON array, one that renders to none (ddl,
// gap) the JSON null, so every change keeps exactly one message and its
// stable id (the resume position). The key is the Debezium key ({"id":1});
// where Debezium's is null (a table without a key, a truncate, ddl, gap)
// pgq's key (AppendKey) stays, so the Kafka partition stays
// deterministic (the resume position needs it).
//
// CloudEvents: binary mode, the payload the event's data (the change in
// pgq's JSON) and the attributes in ce-* headers (ce_* on Kafka).
func (f *formatter) apply(msgs []Message, arena []byte, tx *pgq.Transaction) []byte {
	for i := range msgs {
		m := &msgs[i]
		switch f.r.Format() {
		case format.Debezium:
			start := len(arena)
			arena = f.r.AppendChangeEvents(arena, tx, m.Index)
			m.Payload = arena[start:len(arena):len(arena)]
			start = len(arena)
			if f.r.Events(tx, m.Index) > 0 {
				arena = f.r.AppendDebeziumKey(arena, tx, m.Index, 0)
			}
			if k := arena[start:]; len(k) == 0 || string(k) == "null" {
				arena = arena[:start]
			} else {
				m.Key = arena[start:len(arena):len(arena)]
			}
		case format.CloudEvents:
			start := len(arena)
			if f.structured {
				arena = f.r.AppendCloudEvent(arena, tx, m.Index)
				m.Payload = arena[start:len(arena):len(arena)]
				continue
			}
			arena = f.r.AppendCloudEventData(arena, tx, m.Index)
			m.Payload = arena[start:len(arena):len(arena)]
			m.Extra = f.r.CloudEventAttributes(tx, m.Index).Headers(f.bind)
		}
	}
	return arena
}
