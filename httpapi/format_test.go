package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pgq-dev/pgq/api"
)

// TestFetchFormat: an exclusive fetch with "format" keeps its envelope
// and renders each change in the format (a Debezium event, a
// CloudEvent); the pgq format is the default; msgpack answers carry the
// same; the records media type and unknown formats are refused. Every
// answer is validated against openapi.json by the env.
func TestFetchFormat(t *testing.T) {
	e := start(t, "")
	e.add(1, 2)
	for _, f := range []string{"debezium", "cloudevents", "pgq", ""} {
		name := "g" + f
		if resp, b, _ := e.do("POST", "/v1/groups", `{"name":"`+name+`","from":"earliest"}`); resp.StatusCode != 201 {
			t.Fatalf("create: %d %s", resp.StatusCode, b)
		}
		body := `{"member":"m","max":10,"format":"` + f + `"}`
		if f == "" {
			body = `{"member":"m","max":10}`
		}
		resp, b, _ := e.do("POST", "/v1/groups/"+name+"/fetch", body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", f, resp.StatusCode, b)
		}
		var got struct {
			Transactions []struct {
				Offset    uint64
				Xid       uint32
				CommitLSN string `json:"commit_lsn"`
				Changes   []map[string]json.RawMessage
			}
			NextOffset uint64 `json:"next_offset"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Transactions) != 2 || got.NextOffset != 3 || got.Transactions[1].Xid != 2 || len(got.Transactions[1].Changes) != 1 {
			t.Fatalf("%s: envelope %s", f, b)
		}
		c := got.Transactions[1].Changes[0]
		switch f {
		case "debezium":
			if string(c["op"]) != `"c"` || string(c["after"]) != `{"id":2}` || string(c["before"]) != "null" {
				t.Errorf("debezium change %s", b)
			}
			var src struct {
				Connector string
				TxID      uint32 `json:"txId"`
				LSN       uint64
			}
			if err := json.Unmarshal(c["source"], &src); err != nil || src.Connector != "postgresql" || src.TxID != 2 {
				t.Errorf("debezium source %s", c["source"])
			}
		case "cloudevents":
			want := `"` + got.Transactions[1].CommitLSN + `.0"`
			if string(c["specversion"]) != `"1.0"` || string(c["id"]) != want || string(c["type"]) != `"pgq.insert"` || string(c["subject"]) != `"public.t"` {
				t.Errorf("cloudevent %s (want id %s)", b, want)
			}
		default:
			if string(c["op"]) != `"insert"` || string(c["new"]) != `{"id":2}` {
				t.Errorf("pgq change %s", b)
			}
		}
	}

	// msgpack: the same maps.
	if resp, b, _ := e.do("POST", "/v1/groups", `{"name":"mp","from":"earliest"}`); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	resp, b, _ := e.do("POST", "/v1/groups/mp/fetch", `{"member":"m","format":"cloudevents"}`, "Accept", api.MediaMsgpack)
	if resp.StatusCode != 200 {
		t.Fatalf("msgpack: %d %s", resp.StatusCode, b)
	}
	var mp struct {
		Transactions []struct {
			Changes []map[string]any `msgpack:"changes"`
		} `msgpack:"transactions"`
	}
	if err := msgpack.Unmarshal(b, &mp); err != nil || len(mp.Transactions) != 2 || mp.Transactions[0].Changes[0]["type"] != "pgq.insert" {
		t.Errorf("msgpack answer: %v %+v", err, mp)
	}

	// Refused: an unknown format, a format with the records media type.
	if resp, _, apiErr := e.do("POST", "/v1/groups/mp/fetch", `{"member":"m","format":"avro"}`); resp.StatusCode != 400 || apiErr.Code != api.CodeBadRequest {
		t.Errorf("unknown format: %d %+v", resp.StatusCode, apiErr)
	}
	resp, _, apiErr := e.do("POST", "/v1/groups/mp/fetch", `{"member":"m","format":"debezium"}`, "Accept", api.MediaRecords)
	if resp.StatusCode != 400 || !strings.Contains(apiErr.Message, "records") {
		t.Errorf("format with records: %d %+v", resp.StatusCode, apiErr)
	}
}

// TestFetchSharedFormat: a shared group's messages keep their envelope
// (offset, ack id, delivery) with the change rendered in the format, and
// can be acked as ever.
func TestFetchSharedFormat(t *testing.T) {
	e := start(t, "")
	e.add(1, 2)
	if resp, b, _ := e.do("POST", "/v1/groups", `{"name":"s","mode":"shared","from":"earliest"}`); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	resp, b, _ := e.do("POST", "/v1/groups/s/fetch", `{"member":"m","max":10,"format":"debezium"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("fetch: %d %s", resp.StatusCode, b)
	}
	var got struct {
		Messages []struct {
			Offset uint64
			AckID  string `json:"ack_id"`
			Change struct {
				Op    string
				After map[string]int
			}
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 2 || got.Messages[1].Change.Op != "c" || got.Messages[1].Change.After["id"] != 2 || got.Messages[1].AckID == "" {
		t.Fatalf("messages %s", b)
	}
	if resp, b, _ := e.do("POST", "/v1/groups/s/ack", `{"ack_ids":["`+got.Messages[0].AckID+`","`+got.Messages[1].AckID+`"]}`); resp.StatusCode != 200 {
		t.Errorf("ack: %d %s", resp.StatusCode, b)
	}
	e.add(3)
	resp, b, _ = e.do("POST", "/v1/groups/s/fetch", `{"member":"m","format":"cloudevents"}`, "Accept", api.MediaMsgpack)
	var mp struct {
		Messages []struct {
			Change map[string]any `msgpack:"change"`
		} `msgpack:"messages"`
	}
	if resp.StatusCode != 200 || msgpack.Unmarshal(b, &mp) != nil || len(mp.Messages) != 1 || mp.Messages[0].Change["type"] != "pgq.insert" {
		t.Errorf("msgpack cloudevents: %d %+v", resp.StatusCode, mp)
	}
}
