package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/pgq-dev/pgq/api"
)

// Status returns GET /v1/status: ingest, slot, journal, index and groups.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var st api.Status
	err := c.doJSON(ctx, http.MethodGet, "/v1/status", nil, &st)
	return st, err
}

// Ready asks GET /readyz: nil when pgq streams and its journal accepts
// writes, else an error carrying the reason pgq gives. It is not retried:
// a probe wants the answer of now.
func (c *Client) Ready(ctx context.Context) error {
	return c.probe(ctx, "/readyz")
}

// probe GETs a plain-text probe path once (the token is sent when set):
// nil on 200, else an error with the status and the text pgq answered.
func (c *Client) probe(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if c.o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.Token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		why := strings.TrimSpace(string(body))
		var eb api.ErrorBody
		if json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
			eb.Error.Status = resp.StatusCode
			return fmt.Errorf("GET %s: %w", path, &eb.Error)
		}
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, why)
	}
	return nil
}
