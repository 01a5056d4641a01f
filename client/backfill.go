package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"
)

// BackfillRequest starts a backfill (POST /v1/backfills).
type BackfillRequest struct {
	Tables    []string `json:"tables"`
	ChunkSize int      `json:"chunk_size,omitempty"`
	Where     string   `json:"where,omitempty"`
}

// Backfill is a backfill's status (see docs/http-api.md, Backfills).
type Backfill struct {
	ID           string            `json:"id"`
	State        string            `json:"state"`
	Tables       []string          `json:"tables"`
	Where        string            `json:"where,omitempty"`
	ChunkSize    int               `json:"chunk_size"`
	Table        string            `json:"table"`
	TableIndex   int               `json:"table_index"`
	Rows         int64             `json:"rows"`
	RowsEstimate int64             `json:"rows_estimate"`
	Dropped      int64             `json:"dropped"`
	Chunks       int64             `json:"chunks"`
	Redone       int64             `json:"redone"`
	Rate         float64           `json:"rate"`
	ETA          *float64          `json:"eta_seconds"`
	KeyColumns   []string          `json:"key_columns,omitempty"`
	LastKey      map[string]string `json:"last_key"`
	Error        *string           `json:"error"`
	CreatedAt    time.Time         `json:"created_at"`
	FinishedAt   *time.Time        `json:"finished_at,omitempty"`
}

// Finished reports whether the backfill is done, failed or canceled.
func (b *Backfill) Finished() bool { return b.State != "running" }

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

// Backfills lists every backfill, oldest first.
func (c *Client) Backfills(ctx context.Context) ([]Backfill, error) {
	var out []Backfill
	err := c.do(ctx, "GET", "/v1/backfills", nil, &out)
	return out, err
}

// Backfill returns one backfill.
func (c *Client) Backfill(ctx context.Context, id string) (Backfill, error) {
	var b Backfill
	err := c.do(ctx, "GET", backfillPath(id), nil, &b)
	return b, err
}

// CancelBackfill cancels a running backfill and returns it.
func (c *Client) CancelBackfill(ctx context.Context, id string) (Backfill, error) {
	var b Backfill
	err := c.do(ctx, "DELETE", backfillPath(id), nil, &b)
	return b, err
}
