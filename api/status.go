package api

import (
	"time"

	"github.com/pgq-dev/pgq"
)

// Status is the body of GET /v1/status (httpapi/openapi.json, schema
// Status): ingest's state, the journal's and the index's health, and each
// group's cursor and lag. The schema forbids other fields, so this type
// holds the whole document. The server builds it directly: ingest fills
// the fields up to SpillError (ingest.Ingester.Status), the composition
// root the rest. The server writes the object's keys (and the index's
// and each group's) in alphabetical order; a client must not rely on an
// order.
type Status struct {
	Running bool `json:"running"`
	// Connected is true while a replication connection is streaming.
	Connected bool `json:"connected"`
	// LastErrorAt is when LastError happened; LastMessageAt when
	// PostgreSQL last sent anything (data or keepalive).
	LastErrorAt   *time.Time `json:"last_error_at"`
	LastMessageAt *time.Time `json:"last_message_at"`
	// ChangesWritten counts the changes in fsynced records.
	ChangesWritten uint64  `json:"changes_written"`
	LastError      *string `json:"last_error"`
	Slot           string  `json:"slot"`
	Publication    string  `json:"publication"`
	ProtoVersion   int     `json:"proto_version"`
	Streaming      bool    `json:"streaming"`
	// SlotFailover is true when pgq's slot is a failover slot
	// (PostgreSQL 17+): standbys synchronizing slots keep it, so a
	// promotion does not lose it. False before the first session.
	SlotFailover       bool       `json:"slot_failover"`
	LastReceivedLSN    pgq.LSN    `json:"last_received_lsn"`
	ServerWALEnd       pgq.LSN    `json:"server_wal_end"`
	ConfirmedLSN       pgq.LSN    `json:"confirmed_lsn"`
	JournalFirstOffset pgq.Offset `json:"journal_first_offset"`
	JournalLastOffset  pgq.Offset `json:"journal_last_offset"`
	JournalLastEndLSN  pgq.LSN    `json:"journal_last_end_lsn"`
	// CoveredLSN: every transaction of the slot ending at or below it is
	// in the journal; pgq never confirms past it.
	CoveredLSN     pgq.LSN `json:"covered_lsn"`
	RecordsWritten uint64  `json:"records_written"`
	Reconnects     uint64  `json:"reconnects"`
	// InitialLoad is the initial load of pgq's slot (pgq run
	// --initial-load) this data dir knows of; nil when none.
	InitialLoad *InitialLoadStatus `json:"initial_load"`
	// SpillError is the spill file failure (a full spill disk) that
	// interrupted streaming, until a spill write succeeds or the journal
	// moves past where it happened; nil while healthy.
	SpillError *string `json:"spill_error"`
	// Database is the database pgq reads (the one its connection string
	// names, "" when it names none): with Slot, what the formats name as
	// the source of a change (Debezium's source.db, the CloudEvents
	// source /pgq/<database>/<slot>). A client rendering changes itself
	// (pgq consume, the bridges) takes them from here, so every path
	// names the same source.
	Database string `json:"database"`
	// Groups is each group's cursor and lag, by name.
	Groups map[string]GroupStatus `json:"groups"`
	// JournalError is the journal's first write or sync error.
	JournalError *string     `json:"journal_error"`
	Index        IndexStatus `json:"index"`
	// JournalCorrupt is the first corrupt journal record found (by a
	// read or the scrub); nil while none is known.
	JournalCorrupt *JournalCorrupt `json:"journal_corrupt"`
	// JournalScrub is the scrub's progress.
	JournalScrub ScrubStatus `json:"journal_scrub"`
}

// InitialLoadStatus is the initial load under the slot's exported
// snapshot in Status.
type InitialLoadStatus struct {
	// ID marks the load's records (their "backfill" field).
	ID     string   `json:"id"`
	Tables []string `json:"tables"`
	// LSN is the slot's consistent point: the load's commit and end LSN.
	LSN pgq.LSN `json:"lsn"`
	// State is "loading", "done" or "interrupted" (a load a crash ended:
	// it cannot resume; the slot is to be dropped).
	State string `json:"state"`
	// Rows and Chunks journaled so far (Chunks: of this process's load).
	Rows       int64      `json:"rows"`
	Chunks     int64      `json:"chunks"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// JournalCorrupt is a corrupt journal record in Status.
type JournalCorrupt struct {
	Segment string     `json:"segment"`
	Offset  pgq.Offset `json:"offset"`
	Reason  string     `json:"reason"`
	// FoundBy is "read" or "scrub".
	FoundBy string    `json:"found_by"`
	At      time.Time `json:"at"`
}

// ScrubStatus is the journal scrub's progress in Status.
type ScrubStatus struct {
	Running     bool       `json:"running"`
	Passes      uint64     `json:"passes"`
	Segments    uint64     `json:"segments_verified"`
	Bytes       uint64     `json:"bytes_verified"`
	SumsWritten uint64     `json:"sums_written"`
	LastPassEnd *time.Time `json:"last_pass_end"`
}

// GroupStatus is one group in Status.
type GroupStatus struct {
	CommittedOffset pgq.Offset `json:"committed_offset"`
	// Member is the lease holder; empty when none.
	Member string `json:"member"`
	Lag    Lag    `json:"lag"`
	// StuckAt and JournalError: see GroupInfo.
	StuckAt      pgq.Offset `json:"stuck_at,omitempty"`
	JournalError string     `json:"journal_error,omitempty"`
}

// IndexStatus is the LSN/time index's health in Status.
type IndexStatus struct {
	Stale         bool    `json:"stale"`
	FailedUpdates uint64  `json:"failed_updates"`
	Heals         uint64  `json:"heals"`
	LastError     *string `json:"last_error"`
}
