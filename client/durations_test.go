package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
)

// TestShortDurationsRefusedLocally: a duration the server would refuse
// (neither 0 nor at least api.MinDuration) is refused by the client
// itself, naming the field, before any request is sent: in the options of
// a consumer and in the bodies of single calls.
func TestShortDurationsRefusedLocally(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "no", http.StatusTeapot)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	short := []time.Duration{time.Nanosecond, 999 * time.Microsecond}

	for _, d := range short {
		for name, o := range map[string]client.ConsumerOptions{"Wait": {Wait: d}, "LeaseTTL": {LeaseTTL: d}} {
			if _, err := c.Consumer("g", o); err == nil || !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), name) {
				t.Errorf("Consumer with %s %s: %v, want bad_request naming it", name, d, err)
			}
		}
		if _, err := c.SharedConsumer("g", client.SharedConsumerOptions{Wait: d}); err == nil || !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), "Wait") {
			t.Errorf("SharedConsumer with Wait %s: %v", d, err)
		}
		calls := map[string]func() error{
			"wait": func() error {
				_, err := c.FetchStream(ctx, "g", client.FetchRequest{Member: "m", Wait: d})
				return err
			},
			"lease_ttl": func() error {
				_, err := c.FetchStream(ctx, "g", client.FetchRequest{Member: "m", LeaseTTL: d})
				return err
			},
			"delay": func() error {
				_, err := c.Nak(ctx, "g", d, "1.0.1")
				return err
			},
			"ack_wait": func() error {
				_, err := c.CreateGroup(ctx, api.CreateRequest{Name: "g", Mode: "shared", AckWait: api.Duration(d)})
				return err
			},
			"backoff[1]": func() error {
				_, err := c.CreateGroup(ctx, api.CreateRequest{Name: "g", Mode: "shared", Backoff: []api.Duration{api.Duration(time.Second), api.Duration(d)}})
				return err
			},
			"lease_ttl (heartbeat)": func() error { return c.Heartbeat(ctx, "g", "m", d) },
		}
		for key, call := range calls {
			err := call()
			field, _, _ := strings.Cut(key, " ")
			if !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), field+" "+d.String()) {
				t.Errorf("%s %s: %v, want bad_request naming it", key, d, err)
			}
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}

	// 0 (the default) and the minimum itself are sent.
	if _, err := c.FetchStream(ctx, "g", client.FetchRequest{Member: "m", Wait: api.MinDuration}); err == nil || errors.Is(err, api.ErrBadRequest) {
		t.Errorf("fetch with Wait %s: %v, want the server's answer", api.MinDuration, err)
	}
	if requests.Load() == 0 {
		t.Error("a fetch with the minimum wait was not sent")
	}
}
