package bridge

import (
	"fmt"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// Binder is implemented by a Publisher that says how its broker carries
// a message of a format (package format's bindings): the jetstream
// publisher format.NATS, the kafka one format.Kafka, the webhook
// format.Structured. A Publisher that is no Binder gets format.HTTP.
type Binder interface {
	Binding() format.Binding
}

// formatter re-renders the messages of a transaction in a format other
// than pgq's own (Options.Format). It is used by Run's loop only.
type formatter struct {
	r    *format.Renderer
	bind format.Binding
}

// newFormatter returns nil for a format whose messages are the bridge's
// own (pgq's: format.Spec.Rewrites is false), the payloads staying as
// appendMessages builds them. The binding is the publisher's (Binder).
func newFormatter(f format.Format, o format.Options, p Publisher) (*formatter, error) {
	if s := f.Spec(); s.Name != "" && !s.Rewrites() {
		return nil, nil
	}
	r, err := format.New(f, o)
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	bind := format.HTTP
	if b, ok := p.(Binder); ok {
		bind = b.Binding()
	}
	return &formatter{r: r, bind: bind}, nil
}

// apply rewrites msgs (the messages appendMessages just built for tx, one
// per change, in order) in the renderer's format for the publisher's
// binding (format.Renderer.AppendMessage), their payloads and keys
// appended to arena (returned, grown). What the format leaves out (a nil
// key, a nil payload) stays as appendMessages built it. A change the
// format has no event for (format.Renderer.Events 0: a ddl or gap change
// in Debezium's) has no message: apply returns msgs without them (in
// msgs' array, in order). Its null would be a tombstone to a Kafka
// Connect sink and a corrupt record to Flink; the resume positions need
// no message of every change.
func (f *formatter) apply(msgs []Message, arena []byte, tx *pgq.Transaction) ([]Message, []byte) {
	kept := msgs[:0]
	for i := range msgs {
		if f.r.Events(tx, msgs[i].Index) == 0 {
			continue
		}
		kept = append(kept, msgs[i])
		m := &kept[len(kept)-1]
		var fm format.Message
		arena, fm = f.r.AppendMessage(arena, tx, m.Index, f.bind)
		if fm.Payload != nil {
			m.Payload = fm.Payload
		}
		if fm.Key != nil {
			m.Key = fm.Key
		}
		if fm.Headers != nil {
			m.Extra = fm.Headers
		}
	}
	clear(msgs[len(kept):]) // no reference to the left-out messages' strings
	return kept, arena
}
