package bridgetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/bridge"
	"github.com/pgq-dev/pgq/format"
)

// Bridged is one broker message as the format tests read it.
type Bridged struct {
	Key  string // "" for a record without a key
	Body []byte
	Hdr  map[string]string
	// Partition is a Kafka record's partition.
	Partition int32
	// Subject is a JetStream message's subject, a Kafka record's topic.
	Subject string
}

// BridgeFormat journals 3 transactions, bridges them in format f into
// publisher p until the group caught up.
func BridgeFormat(t *testing.T, p bridge.Publisher, src *Source, f format.Format) {
	t.Helper()
	BridgeFormatOptions(t, p, src, f, format.Options{Database: "db", Slot: "s"})
}

// BridgeFormatOptions is BridgeFormat with format options fo.
func BridgeFormatOptions(t *testing.T, p bridge.Publisher, src *Source, f format.Format, fo format.Options) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	src.Append(3)
	_, done := StartBridgeWith(t, ctx, p, src.Addr, func(o *bridge.Options) {
		o.Format = f
		o.FormatOptions = fo
	})
	src.WaitCaughtUp(t, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// CheckFormat checks the first message m of the source's journal in
// format f: pgq's payload, a Debezium update event keyed {"id":k}, or a
// binary-mode CloudEvent (prefix "ce-" or "ce_") whose data is the change.
func CheckFormat(t *testing.T, src *Source, f format.Format, prefix string, m Bridged) {
	t.Helper()
	src.Mu.Lock()
	defer src.Mu.Unlock()
	id := m.Hdr["pgq-id"]
	k, ok := src.IDs[id]
	if !ok {
		t.Fatalf("message id %q (headers %v) not a change of the journal", id, m.Hdr)
	}
	switch f {
	case format.PGQ:
		var p Payload
		if err := json.Unmarshal(m.Body, &p); err != nil || p.Change.New.ID != k || p.Change.Op != "update" {
			t.Fatalf("pgq payload %s: %v", m.Body, err)
		}
	case format.Debezium:
		var ev struct {
			Before json.RawMessage `json:"before"`
			After  struct {
				ID int `json:"id"`
			} `json:"after"`
			Source struct {
				Connector string `json:"connector"`
				DB        string `json:"db"`
				Table     string `json:"table"`
			} `json:"source"`
			Op string `json:"op"`
		}
		if err := json.Unmarshal(m.Body, &ev); err != nil || ev.Op != "u" || ev.After.ID != k || ev.Source.Connector != "postgresql" || ev.Source.DB != "db" || ev.Source.Table != "t" {
			t.Fatalf("debezium value %s: %v", m.Body, err)
		}
		if want := `{"id":` + itoa(k) + `}`; m.Key != want {
			t.Fatalf("debezium key %q, want %q", m.Key, want)
		}
	case format.CloudEvents:
		var p struct {
			Op  string `json:"op"`
			New struct {
				ID int `json:"id"`
			} `json:"new"`
		}
		if err := json.Unmarshal(m.Body, &p); err != nil || p.Op != "update" || p.New.ID != k {
			t.Fatalf("cloudevents data %s: %v", m.Body, err)
		}
		want := map[string]string{prefix + "specversion": "1.0", prefix + "id": id, prefix + "type": "pgq.update",
			prefix + "subject": "public.t", prefix + "source": "/pgq/db/s"}
		for h, v := range want {
			if m.Hdr[h] != v {
				t.Fatalf("header %s = %q, want %q (headers %v)", h, m.Hdr[h], v, m.Hdr)
			}
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
