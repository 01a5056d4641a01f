package api

import "time"

// BackfillRequest starts a backfill (POST /v1/backfills).
type BackfillRequest struct {
	Tables    []string `json:"tables"`
	ChunkSize int      `json:"chunk_size,omitempty"`
	Where     string   `json:"where,omitempty"`
	// MaxRate caps the rows read per second (0: as fast as the server
	// reads them).
	MaxRate float64 `json:"max_rate,omitempty"`
}

// BackfillUpdate changes a running backfill (PATCH /v1/backfills/{id}).
type BackfillUpdate struct {
	// MaxRate is the new cap on rows read per second (0 lifts it).
	MaxRate *float64 `json:"max_rate"`
}

// Backfill is a backfill's status (GET /v1/backfills/{id}; see docs/http-api.md, Backfills).
type Backfill struct {
	ID           string            `json:"id"`
	State        string            `json:"state"`
	Tables       []string          `json:"tables"`
	Where        string            `json:"where,omitempty"`
	ChunkSize    int               `json:"chunk_size"`
	MaxRate      float64           `json:"max_rate"`
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
