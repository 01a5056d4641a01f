package client

import (
	"errors"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/record"
)

// wireMessages and wireMessage are the server's records form of a shared
// fetch (httpapi/shared.go).
type wireMessages struct {
	Messages []wireMessage `msgpack:"messages"`
	Extra    []any         `msgpack:"extra"` // a field the client does not know
}

type wireMessage struct {
	_msgpack struct{} `msgpack:",as_array"`
	Offset   uint64
	Index    int
	Delivery int
	AckID    string
	Body     msgpack.RawMessage
}

// oneChange is what the server sends for change i of tx: the change alone
// under tx's header, with its ordinal (consumers.oneChangeBody).
func oneChange(tx *pgq.Transaction, i int, ordinal uint32) []byte {
	one := *tx
	one.Changes = tx.Changes[i : i+1]
	one.FirstOrdinal, one.Ordinals = ordinal, nil
	return record.Append(nil, &one)[record.HeaderSize:]
}

func TestDecodeMessages(t *testing.T) {
	txs := wireSample()
	wm := wireMessages{Extra: []any{"x", map[string]any{"k": 1}}}
	var want []Message
	for i, tx := range txs {
		ord := uint32(5 * i)
		wm.Messages = append(wm.Messages, wireMessage{Offset: uint64(tx.Offset), Index: 0, Delivery: i + 1, AckID: "a.b.c", Body: oneChange(tx, 0, ord)})
		c := tx.Changes[0]
		want = append(want, Message{Offset: tx.Offset, Xid: tx.Xid, CommitLSN: tx.CommitLSN, EndLSN: tx.EndLSN, CommitTime: tx.CommitTime, Ordinal: ord,
			Change: &c, Delivery: i + 1, AckID: "a.b.c"})
	}
	b, err := msgpack.Marshal(&wm)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeMessages(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("\n got %+v\nwant %+v", got, want)
	}
	for n := range len(b) {
		if _, err := decodeMessages(b[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(b))
		}
	}
	if _, err := decodeMessages(append(b, 0xc0)); !errors.Is(err, errWire) {
		t.Fatalf("trailing byte: %v", err)
	}
	// Nothing delivered.
	for _, v := range []any{map[string]any{"messages": nil}, map[string]any{"messages": []any{}}, map[string]any{}} {
		b, _ := msgpack.Marshal(v)
		if got, err := decodeMessages(b); err != nil || len(got) != 0 {
			t.Errorf("%v: %+v, %v", v, got, err)
		}
	}
	// An older pgq answers the msgpack maps of its JSON: said so.
	old, _ := msgpack.Marshal(map[string]any{"messages": []any{map[string]any{"offset": 1, "change": map[string]any{"op": "insert"}}}})
	if _, err := decodeMessages(old); !errors.Is(err, errOldServer) {
		t.Fatalf("maps form: %v, want errOldServer", err)
	}
	two := *txs[0]
	two.Changes = append(two.Changes, two.Changes[0])
	for name, v := range map[string]any{
		"two changes":   map[string]any{"messages": []any{[]any{1, 0, 1, "a", msgpack.RawMessage(record.Append(nil, &two)[record.HeaderSize:])}}},
		"four elements": map[string]any{"messages": []any{[]any{1, 0, 1, "a"}}},
		"nil record":    map[string]any{"messages": []any{[]any{1, 0, 1, "a", nil}}},
		"bad index":     map[string]any{"messages": []any{[]any{1, -1, 1, "a", msgpack.RawMessage(oneChange(txs[0], 0, 0))}}},
		"not a map":     []any{1},
	} {
		b, _ := msgpack.Marshal(v)
		if _, err := decodeMessages(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzDecodeMessages(f *testing.F) {
	txs := wireSample()
	var wm wireMessages
	for _, tx := range txs {
		wm.Messages = append(wm.Messages, wireMessage{Offset: uint64(tx.Offset), Delivery: 1, AckID: "x", Body: oneChange(tx, 0, 3)})
	}
	b, _ := msgpack.Marshal(&wm)
	f.Add(b)
	f.Add([]byte{0x81, 0xa8, 'm', 'e', 's', 's', 'a', 'g', 'e', 's', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeMessages(b) // must not panic
	})
}
