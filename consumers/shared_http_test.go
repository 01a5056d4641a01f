package consumers

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
)

// The hand-written fetch answer is byte for byte json.Marshal's.
func TestAppendMessagesJSON(t *testing.T) {
	c := row("t", 7)
	c.New[1].Data = []byte("quote \" and \\ and \n and ü")
	change := pgq.AppendChangeJSON(nil, &c)
	for _, msgs := range [][]api.Message{{}, {
		{Offset: 12, Xid: 4000000000, CommitLSN: "0/1A2B3C8", CommitTime: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC), Index: 3, Change: change, Delivery: 2, AckID: "12.3.2.k3x9q2a"},
		{Offset: 13, CommitLSN: "16/0", CommitTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Change: []byte("null"), Delivery: 1, AckID: "13.0.1.z"},
	}} {
		want, err := json.Marshal(api.MessagesResponse{Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendMessagesJSON(nil, msgs); string(got) != string(want)+"\n" {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	}
}

// Ack ids: the forms accepted and refused.
func TestParseAckID(t *testing.T) {
	for s, ok := range map[string]bool{"1.0.1": true, "1.0.1.ab": true, "12.3.4.z9": true,
		"": false, "1": false, "1.0": false, "0.0.1": false, "1.0.0": false, "1.-1.1": false, "1.0.1.": false, "1.0.1.a.b": false, "x.0.1": false} {
		id, d, epoch, err := parseAckID(s)
		if (err == nil) != ok {
			t.Fatalf("parseAckID(%q) = %v, %d, %q, %v", s, id, d, epoch, err)
		}
		if ok && formatAckID(id, d, epoch) != s {
			t.Fatalf("parseAckID(%q) does not format back: %v %d %q", s, id, d, epoch)
		}
	}
}
