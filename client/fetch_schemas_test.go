package client_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
)

// TestFetchMessagesSchemas: FetchMessages sends FetchRequest.Schemas: the
// change comes as Debezium's event with its Connect schema.
func TestFetchMessagesSchemas(t *testing.T) {
	s := startServer(t, t.TempDir(), "127.0.0.1:0", nil)
	defer s.stop()
	s.append(1)
	c, err := client.New(s.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.CreateGroup(ctx, api.CreateRequest{Name: "jobs", Mode: "shared", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.FetchMessages(ctx, "jobs", client.FetchRequest{Member: "m", Format: "debezium", Schemas: true})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("fetch: %+v, %v", msgs, err)
	}
	var ev struct {
		Schema struct {
			Type   string
			Fields []struct{ Field string }
		}
		Payload struct {
			Op    string
			After map[string]int
		}
	}
	if err := json.Unmarshal(msgs[0].Change, &ev); err != nil || ev.Schema.Type != "struct" || len(ev.Schema.Fields) == 0 ||
		ev.Payload.Op != "c" || ev.Payload.After["id"] != 1 {
		t.Errorf("change %s, %v: want a Debezium create with its schema", msgs[0].Change, err)
	}
}
