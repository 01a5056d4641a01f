package httpapi_test

import (
	"encoding/json"
	"testing"
)

// TestFetchSchemas: the fetch body's "schemas" makes a debezium
// rendering Kafka Connect's schema-and-payload form in an exclusive and
// a shared fetch (the payload being the event, numeric(5,2) 1.10 in
// precise mode Connect's Decimal of scale 2), and its absence leaves the
// event alone; the pgq format ignores it.
func TestFetchSchemas(t *testing.T) {
	e := start(t, "")
	e.addNumeric("1.10")
	n := 0
	// change returns the first change of a fetch by a fresh group.
	change := func(mode, body string) json.RawMessage {
		t.Helper()
		n++
		g := mode + string(rune('a'+n))
		if resp, b, _ := e.do("POST", "/v1/groups", `{"name":"`+g+`","mode":"`+mode+`","from":"earliest"}`); resp.StatusCode != 201 {
			t.Fatalf("create: %d %s", resp.StatusCode, b)
		}
		resp, b, _ := e.do("POST", "/v1/groups/"+g+"/fetch", body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, b)
		}
		var got struct {
			Transactions []struct{ Changes []json.RawMessage }
			Messages     []struct{ Change json.RawMessage }
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		switch {
		case len(got.Transactions) == 1 && len(got.Transactions[0].Changes) == 1:
			return got.Transactions[0].Changes[0]
		case len(got.Messages) == 1:
			return got.Messages[0].Change
		}
		t.Fatalf("%s: answer %s", body, b)
		return nil
	}
	type field struct {
		Field      string
		Name       string
		Parameters map[string]string
		Fields     []field
	}
	for _, mode := range []string{"exclusive", "shared"} {
		var ev struct {
			Schema struct {
				Name   string
				Fields []field
			}
			Payload struct {
				After map[string]json.RawMessage
				Op    string
			}
		}
		c := change(mode, `{"member":"m","format":"debezium","decimal_handling_mode":"precise","schemas":true}`)
		if err := json.Unmarshal(c, &ev); err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, c)
		}
		if ev.Schema.Name != "pgq.public.n.Envelope" || ev.Payload.Op != "c" || string(ev.Payload.After["n"]) != `"bg=="` {
			t.Errorf("%s: %s", mode, c)
		}
		if len(ev.Schema.Fields) < 2 || ev.Schema.Fields[1].Field != "after" || len(ev.Schema.Fields[1].Fields) != 1 ||
			ev.Schema.Fields[1].Fields[0].Name != "org.apache.kafka.connect.data.Decimal" || ev.Schema.Fields[1].Fields[0].Parameters["scale"] != "2" {
			t.Errorf("%s: after's schema %+v", mode, ev.Schema.Fields)
		}
		var plain map[string]json.RawMessage
		if c := change(mode, `{"member":"m","format":"debezium"}`); json.Unmarshal(c, &plain) != nil || plain["payload"] != nil || plain["after"] == nil {
			t.Errorf("%s without schemas: %s", mode, c)
		}
		if c := change(mode, `{"member":"m","schemas":true}`); json.Unmarshal(c, &plain) != nil || plain["payload"] != nil || plain["op"] == nil {
			t.Errorf("%s pgq format with schemas: %s", mode, c)
		}
	}
}
