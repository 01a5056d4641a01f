package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
)

// oneChangeJobs is a client of a pgq whose journal holds one change and
// whose shared group "jobs" starts before it.
func oneChangeJobs(t *testing.T) *client.Client {
	t.Helper()
	s := startServer(t, t.TempDir(), "127.0.0.1:0", nil)
	t.Cleanup(s.stop)
	s.append(1)
	c, err := client.New(s.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateGroup(context.Background(), api.CreateRequest{Name: "jobs", Mode: "shared", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFetchMessagesFormat: FetchMessages sends FetchRequest's Format and
// Debezium's value modes and ProvideTransactionMetadata: the change comes
// rendered as a Debezium event with its transaction block;
// a name that is no mode is api.ErrBadRequest naming its key.
func TestFetchMessagesFormat(t *testing.T) {
	c := oneChangeJobs(t)
	ctx := context.Background()
	_, err := c.FetchMessages(ctx, "jobs", client.FetchRequest{Member: "m", Format: "debezium", TimePrecisionMode: "nanoseconds"})
	if !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), "time_precision_mode") {
		t.Fatalf("bad mode: %v", err)
	}
	_, err = c.FetchMessages(ctx, "jobs", client.FetchRequest{Member: "m", Format: "debezium", HstoreHandlingMode: "hash"})
	if !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), "hstore_handling_mode") {
		t.Fatalf("bad hstore mode: %v", err)
	}
	msgs, err := c.FetchMessages(ctx, "jobs", client.FetchRequest{Member: "m", Format: "debezium",
		DecimalHandlingMode: "precise", TimePrecisionMode: "adaptive", IntervalHandlingMode: "string", HstoreHandlingMode: "map",
		ProvideTransactionMetadata: true})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("fetch: %+v, %v", msgs, err)
	}
	var ev struct {
		Op          string
		After       map[string]int
		Transaction *struct{ ID string }
	}
	if err := json.Unmarshal(msgs[0].Change, &ev); err != nil || ev.Op != "c" || ev.After["id"] != 1 || ev.Transaction == nil || ev.Transaction.ID == "" {
		t.Errorf("change %s, %v: want a Debezium create with its transaction block", msgs[0].Change, err)
	}
}
