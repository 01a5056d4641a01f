package client_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/pgq-dev/pgq/client"
)

// TestFetchMessagesSchemas: FetchMessages sends FetchRequest.Schemas: the
// change comes as Debezium's event with its Connect schema.
func TestFetchMessagesSchemas(t *testing.T) {
	c := oneChangeJobs(t)
	ctx := context.Background()
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
