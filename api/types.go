package api

import (
	"fmt"
	"regexp"
	"time"

	"github.com/pgq-dev/pgq"
)

// MediaMsgpack is the media type of msgpack responses: the same maps, with
// the same field names, as the JSON responses.
const MediaMsgpack = "application/msgpack"

// MediaRecords is the media type of the Go client's fetch responses: a
// msgpack map whose transactions are [offset, journal record body] pairs,
// the bodies exactly as journaled (decoded with record.BodyDecoder).
const MediaRecords = "application/vnd.pgq.records+msgpack"

// MaxMemberLen is the longest member id, in bytes.
const MaxMemberLen = 256

// Duration is a time.Duration written as a Go duration string ("2s",
// "1m30s") in JSON and msgpack.
type Duration time.Duration

// MarshalText renders the duration as "2s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"2s\")", b)
	}
	*d = Duration(v)
	return nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// ValidateName checks a group name: 1 to 128 of [A-Za-z0-9_.-].
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: %q: want 1 to 128 of A-Z a-z 0-9 _ . -", ErrInvalidName, name)
	}
	return nil
}

// Request bodies.
type (
	// CreateRequest is the body of POST /v1/groups.
	CreateRequest struct {
		Name string `json:"name"`
		// From is the start position; empty → "latest".
		From   string   `json:"from,omitempty"`
		Tables []string `json:"tables,omitempty"`
		Ops    []string `json:"ops,omitempty"`
	}
	// ResetBody is the body of POST /v1/groups/{name}/reset.
	ResetBody struct {
		To     string `json:"to"`
		DryRun bool   `json:"dry_run,omitempty"`
	}
	// FetchBody is the body of POST /v1/groups/{name}/fetch.
	FetchBody struct {
		Member   string   `json:"member"`
		Max      int      `json:"max,omitempty"`
		MaxBytes int64    `json:"max_bytes,omitempty"`
		Wait     Duration `json:"wait,omitempty"`
		FailFast bool     `json:"fail_fast,omitempty"`
		LeaseTTL Duration `json:"lease_ttl,omitempty"`
		// Session is a random id per consumer incarnation: a new session of
		// the lease holder restarts delivery at the cursor (a restarted
		// consumer is redelivered what it had not committed).
		Session string `json:"session,omitempty"`
		// From is the first offset the consumer has not received (the
		// next_offset of its last fetch): delivery resumes there when an
		// answer was lost.
		From pgq.Offset `json:"from,omitempty"`
	}
	// CommitBody is the body of POST /v1/groups/{name}/commit.
	CommitBody struct {
		Member   string     `json:"member"`
		Offset   pgq.Offset `json:"offset"`
		LeaseTTL Duration   `json:"lease_ttl,omitempty"`
		// Generation is the lease generation of the fetch that delivered
		// the committed records (0: not checked). A member whose lease was
		// reset or taken over since is fenced.
		Generation uint64 `json:"generation,omitempty"`
	}
	// MemberBody is the body of heartbeat and release.
	MemberBody struct {
		Member   string   `json:"member"`
		LeaseTTL Duration `json:"lease_ttl,omitempty"`
	}
)

// Response bodies.
type (
	// Lag is how far a group is behind the journal's end.
	Lag struct {
		// Records is the number of journal records after the cursor.
		Records uint64 `json:"records" msgpack:"records"`
		// Bytes is the encoded size of those records.
		Bytes int64 `json:"bytes" msgpack:"bytes"`
		// Seconds is now minus the commit time of the first record after
		// the cursor; 0 when caught up.
		Seconds float64 `json:"seconds" msgpack:"seconds"`
		// OutOfRange is true when the cursor is below the journal's start
		// (retention removed records the group never committed).
		OutOfRange bool `json:"out_of_range" msgpack:"out_of_range"`
		// IndexStale is true when the index is behind the journal (a failed
		// index write, being healed): Bytes then counts only the records
		// the index covers, a lower bound.
		IndexStale bool `json:"index_stale,omitempty" msgpack:"index_stale,omitempty"`
	}
	// GroupInfo describes a group.
	GroupInfo struct {
		Name   string   `json:"name" msgpack:"name"`
		From   string   `json:"from" msgpack:"from"`
		Tables []string `json:"tables" msgpack:"tables"`
		Ops    []string `json:"ops" msgpack:"ops"`
		// Committed is the cursor: every offset up to it is done.
		Committed pgq.Offset `json:"committed_offset" msgpack:"committed_offset"`
		// Delivered is the highest offset handed to the current member.
		Delivered    pgq.Offset `json:"delivered_offset" msgpack:"delivered_offset"`
		Created      time.Time  `json:"created" msgpack:"created"`
		Updated      time.Time  `json:"updated" msgpack:"updated"`
		Member       string     `json:"member,omitempty" msgpack:"member,omitempty"`
		LeaseExpires *time.Time `json:"lease_expires,omitempty" msgpack:"lease_expires,omitempty"`
		Lag          Lag        `json:"lag" msgpack:"lag"`
	}
	// ListResponse is the body of GET /v1/groups.
	ListResponse struct {
		Groups []GroupInfo `json:"groups" msgpack:"groups"`
	}
	// ResetResult is the body of a reset's response.
	ResetResult struct {
		Group  string `json:"group" msgpack:"group"`
		To     string `json:"to" msgpack:"to"`
		DryRun bool   `json:"dry_run" msgpack:"dry_run"`
		// PreviousCommitted and Committed are the cursor before and after.
		PreviousCommitted pgq.Offset `json:"previous_committed_offset" msgpack:"previous_committed_offset"`
		Committed         pgq.Offset `json:"committed_offset" msgpack:"committed_offset"`
		// NextOffset is the first offset the group will deliver.
		NextOffset pgq.Offset `json:"next_offset" msgpack:"next_offset"`
		Lag        Lag        `json:"lag" msgpack:"lag"`
	}
	// CommitResult is the body of a commit's response.
	CommitResult struct {
		Committed    pgq.Offset `json:"committed_offset" msgpack:"committed_offset"`
		LeaseExpires time.Time  `json:"lease_expires" msgpack:"lease_expires"`
	}
	// LeaseResponse is the body of a heartbeat's response.
	LeaseResponse struct {
		LeaseExpires time.Time `json:"lease_expires" msgpack:"lease_expires"`
	}
	// OKResponse is the body of responses with nothing else to say.
	OKResponse struct {
		OK bool `json:"ok" msgpack:"ok"`
	}
)
