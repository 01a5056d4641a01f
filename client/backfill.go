package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/pgq-dev/pgq/api"
)

// BackfillRequest starts a backfill (api.BackfillRequest).
type BackfillRequest = api.BackfillRequest

// Backfill is a backfill's status (api.Backfill).
type Backfill = api.Backfill

func backfillPath(id string) string { return "/v1/backfills/" + url.PathEscape(id) }

// StartBackfill starts a backfill. It is not retried: a retry could start
// a second one.
func (c *Client) StartBackfill(ctx context.Context, req BackfillRequest) (Backfill, error) {
	var b Backfill
	data, _, err := c.roundTrip(ctx, "POST", "/v1/backfills", "application/json", req)
	if err != nil {
		return b, err
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return b, fmt.Errorf("client: POST /v1/backfills: decode response: %w", err)
	}
	return b, nil
}

// The backfill calls ask for JSON (doJSON): a backfill's msgpack form is
// the maps of its JSON (times as strings), which api.Backfill does not
// decode.

// Backfills lists every backfill, oldest first.
func (c *Client) Backfills(ctx context.Context) ([]Backfill, error) {
	var out []Backfill
	err := c.doJSON(ctx, "GET", "/v1/backfills", nil, &out)
	return out, err
}

// Backfill returns one backfill.
func (c *Client) Backfill(ctx context.Context, id string) (Backfill, error) {
	var b Backfill
	err := c.doJSON(ctx, "GET", backfillPath(id), nil, &b)
	return b, err
}

// CancelBackfill cancels a running backfill and returns it.
func (c *Client) CancelBackfill(ctx context.Context, id string) (Backfill, error) {
	var b Backfill
	err := c.doJSON(ctx, "DELETE", backfillPath(id), nil, &b)
	return b, err
}

// ThrottleBackfill sets a running backfill's cap on rows read per second
// (0 lifts it) and returns the backfill.
func (c *Client) ThrottleBackfill(ctx context.Context, id string, maxRate float64) (Backfill, error) {
	var b Backfill
	err := c.doJSON(ctx, "PATCH", backfillPath(id), api.BackfillUpdate{MaxRate: &maxRate}, &b)
	return b, err
}
