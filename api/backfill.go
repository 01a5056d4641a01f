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
	// Parallelism is how many key ranges of a table are read at once,
	// each on its own connection (0: the server's default, twice the
	// number of its CPUs up to 4; at most 16). MaxRate caps their total.
	Parallelism int `json:"parallelism,omitempty"`
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
	// Parallelism is how many key ranges of each table are read at once.
	Parallelism int `json:"parallelism"`
	// Ranges are the key ranges of the current table (one when the table
	// is read as a whole), each with its own progress.
	Ranges     []BackfillRange `json:"ranges,omitempty"`
	Error      *string         `json:"error"`
	CreatedAt  time.Time       `json:"created_at"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
}

// Finished reports whether the backfill is done, failed or canceled.
func (b *Backfill) Finished() bool { return b.State != "running" }

// BackfillRange is one key range of a table a backfill reads on its own
// connection: the rows whose first key column is above After (none: from
// the table's start) and at most UpTo (none: to its end), as text forms.
type BackfillRange struct {
	After   *string           `json:"after"`
	UpTo    *string           `json:"up_to"`
	LastKey map[string]string `json:"last_key"`
	Rows    int64             `json:"rows"`
	Done    bool              `json:"done"`
}
