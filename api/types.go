package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/pgq-dev/pgq"
)

// MediaMsgpack is the media type of msgpack responses: the same maps, with
// the same field names, as the JSON responses.
const MediaMsgpack = "application/msgpack"

// MediaRecords is the media type of the Go client's fetch responses: a
// msgpack map whose transactions are [offset, journal record body] pairs,
// the bodies exactly as journaled (decoded with record.BodyDecoder). An
// exclusive fetch writes the map's other five fields before the
// transactions, so that the answer can be decoded as it arrives.
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

// MinDuration is the least duration a request may carry: 0 (or the key
// left out) means the field's default, and any other duration below
// MinDuration, a negative one included, is refused as bad_request rather
// than rounded into the default ("1ns" once became the 30s default).
const MinDuration = time.Millisecond

// CheckDuration refuses d unless it is 0 or at least MinDuration; key
// names the field in the error (api.ErrBadRequest).
func CheckDuration(key string, d time.Duration) error {
	if d != 0 && d < MinDuration {
		return Errorf(ErrBadRequest, "%s %s: want 0 (the default) or at least %s", key, d, MinDuration)
	}
	return nil
}

// CheckDurations applies CheckDuration to every Duration and []Duration
// field of the request body v (a struct or a pointer to one), named by its
// JSON key ("backoff[1]" for a list's element). Server and client both
// call it, so that neither sends nor accepts a duration the API document
// refuses.
func CheckDurations(v any) error {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return nil
	}
	rt := rv.Type()
	for i := range rt.NumField() {
		f := rt.Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if key == "" {
			key = f.Name
		}
		switch fv := rv.Field(i).Interface().(type) {
		case Duration:
			if err := CheckDuration(key, time.Duration(fv)); err != nil {
				return err
			}
		case []Duration:
			for j, d := range fv {
				if err := CheckDuration(fmt.Sprintf("%s[%d]", key, j), time.Duration(d)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// ValidateName checks a group name: 1 to 128 of [A-Za-z0-9_.-], and not
// "." or "..": those are dot segments of a URL path, which HTTP clients
// and servers resolve away (/v1/groups/.. is /v1), so such a group could
// never be named in a request.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return Errorf(ErrInvalidName, "invalid group name %q: want 1 to 128 of A-Z a-z 0-9 _ . -", name)
	}
	if name == "." || name == ".." {
		return Errorf(ErrInvalidName, "invalid group name %q: \".\" and \"..\" are path segments a URL cannot carry", name)
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
		// Mode is "exclusive" (the default: one leased member, cumulative
		// commits) or "shared" (many members, per-message acks). The
		// fields below apply to shared groups only.
		Mode string `json:"mode,omitempty"`
		// AckWait is how long a delivered message may stay unacked before
		// it is redelivered; zero → 30s.
		AckWait Duration `json:"ack_wait,omitempty"`
		// MaxDeliver is how many deliveries a message gets before it is
		// parked; zero → 5.
		MaxDeliver int `json:"max_deliver,omitempty"`
		// Backoff is the redelivery delay after the 1st, 2nd, … nak
		// without a delay (the last step repeats); empty: at once.
		Backoff []Duration `json:"backoff,omitempty"`
		// MaxAckPending caps the messages in flight in the group; zero →
		// 1000.
		MaxAckPending int `json:"max_ack_pending,omitempty"`
		// Key is the ordering key: "pk" (default: table and replica
		// identity key), "table" or "none".
		Key string `json:"key,omitempty"`
		// HoldSlot: the replication slot is not confirmed past what the
		// group has not committed, so losing pgq's disk loses none of it.
		HoldSlot bool `json:"hold_slot,omitempty"`
	}
	// AckBody is the body of /ack, /nak, /term and /parked/requeue and
	// /parked/drop of a shared group.
	AckBody struct {
		AckIDs []string `json:"ack_ids,omitempty"`
		// Delay (nak only) redelivers after it; zero: the group's next
		// backoff step.
		Delay Duration `json:"delay,omitempty"`
		// All (requeue and drop only) acts on every parked message.
		All bool `json:"all,omitempty"`
		// Unhandled (nak only) gives back messages no handler saw (fetched
		// ahead by a member that stops): visible again at once, never
		// parked by this nak, Delay not allowed.
		Unhandled bool `json:"unhandled,omitempty"`
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
		// Format renders each change of the answer: a format's name
		// from package format's table (format.Names); empty is "pgq",
		// pgq's own JSON. The answer keeps its envelope. Not with the records
		// media type: the Go client reads pgq's own.
		Format string `json:"format,omitempty"`
		// DecimalHandlingMode, TimePrecisionMode and IntervalHandlingMode
		// are Debezium's value modes of the debezium format, by
		// Debezium's names (format.ParseDecimalMode: string, precise,
		// double; format.ParseTimePrecisionMode: microseconds, adaptive;
		// format.ParseIntervalMode: numeric, string); empty is pgq's
		// default (string, microseconds, numeric). The other formats
		// ignore them; a name that is no mode is refused.
		DecimalHandlingMode  string `json:"decimal_handling_mode,omitempty"`
		TimePrecisionMode    string `json:"time_precision_mode,omitempty"`
		IntervalHandlingMode string `json:"interval_handling_mode,omitempty"`
		// HstoreHandlingMode is Debezium's hstore.handling.mode
		// (format.ParseHstoreMode: json, map); empty is json, Debezium's
		// default. The other formats ignore it.
		HstoreHandlingMode string `json:"hstore_handling_mode,omitempty"`
		// ProvideTransactionMetadata fills the debezium format's
		// transaction block, as Debezium's provide.transaction.metadata;
		// false (the default, Debezium's) renders transaction as null.
		// The other formats ignore it.
		ProvideTransactionMetadata bool `json:"provide_transaction_metadata,omitempty"`

		// Schemas writes each debezium event as Kafka Connect's JSON
		// converter does with schemas.enable=true: {"schema":…,
		// "payload":…} (format.Options.Schemas); false is the event
		// alone. The other formats ignore it.
		Schemas bool `json:"schemas,omitempty"`
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
		// Records is the number of journal records after the cursor that
		// the group would receive: for a group with a filter, those with a
		// change it passes (records indexed without their tables, by an
		// older pgq, count for every filter: docs/http-api.md, Lag).
		Records uint64 `json:"records" msgpack:"records"`
		// Bytes is the encoded size of those records (whole records, also
		// where the filter keeps only some of their changes).
		Bytes int64 `json:"bytes" msgpack:"bytes"`
		// Seconds is now minus the commit time of the first of those
		// records; 0 when caught up.
		Seconds float64 `json:"seconds" msgpack:"seconds"`
		// OutOfRange is true when the cursor is below the journal's start
		// (retention removed records the group never committed). An
		// exclusive group with a filter is moved over dropped records it
		// would receive none of instead.
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
		// CommittedOffset is the cursor: every offset up to it is done.
		CommittedOffset pgq.Offset `json:"committed_offset" msgpack:"committed_offset"`
		// Committed is CommittedOffset, kept for one release so that
		// programs reading it go on working: the server and the Go client
		// fill both. It is not on the wire.
		//
		// Deprecated: use CommittedOffset (the JSON name is
		// committed_offset).
		Committed pgq.Offset `json:"-" msgpack:"-"`
		// Delivered is the highest offset handed to the current member.
		Delivered    pgq.Offset `json:"delivered_offset" msgpack:"delivered_offset"`
		Created      time.Time  `json:"created" msgpack:"created"`
		Updated      time.Time  `json:"updated" msgpack:"updated"`
		Member       string     `json:"member,omitempty" msgpack:"member,omitempty"`
		LeaseExpires *time.Time `json:"lease_expires,omitempty" msgpack:"lease_expires,omitempty"`
		Lag          Lag        `json:"lag" msgpack:"lag"`
		// Mode is "exclusive" or "shared".
		Mode string `json:"mode" msgpack:"mode"`
		// Shared is set for shared groups.
		Shared *SharedInfo `json:"shared,omitempty" msgpack:"shared,omitempty"`
		// HoldSlot is set for a group that holds the slot; HoldReleased
		// while it is past --hold-slot-max-lag and the slot is confirmed
		// past it.
		HoldSlot     bool `json:"hold_slot,omitempty" msgpack:"hold_slot,omitempty"`
		HoldReleased bool `json:"hold_released,omitempty" msgpack:"hold_released,omitempty"`
		// StuckAt is set when the group's reads met a corrupt journal
		// record at that offset (its fetches answer journal_corrupt) and
		// its cursor has not passed it; JournalError says why.
		StuckAt      pgq.Offset `json:"stuck_at,omitempty" msgpack:"stuck_at,omitempty"`
		JournalError string     `json:"journal_error,omitempty" msgpack:"journal_error,omitempty"`
	}
	// SharedInfo is the state of a shared group. CommittedOffset (the
	// group's committed_offset) is the acked low-water mark: every message
	// at or below it is acked, dropped or parked.
	SharedInfo struct {
		AckWait       Duration   `json:"ack_wait" msgpack:"ack_wait"`
		MaxDeliver    int        `json:"max_deliver" msgpack:"max_deliver"`
		Backoff       []Duration `json:"backoff" msgpack:"backoff"`
		MaxAckPending int        `json:"max_ack_pending" msgpack:"max_ack_pending"`
		Key           string     `json:"key" msgpack:"key"`
		// InFlight messages are delivered and not acked yet; Pending ones
		// are read from the journal and wait for delivery (or for a nak's
		// delay); Parked ones wait for requeue or drop.
		InFlight int `json:"in_flight" msgpack:"in_flight"`
		Pending  int `json:"pending" msgpack:"pending"`
		Parked   int `json:"parked" msgpack:"parked"`
		// Redeliveries counts deliveries after the first since pgq started.
		Redeliveries uint64 `json:"redeliveries" msgpack:"redeliveries"`
	}
	// Message is one change delivered by a shared group.
	Message struct {
		Offset     pgq.Offset `json:"offset" msgpack:"offset"`
		Xid        uint32     `json:"xid" msgpack:"xid"`
		CommitLSN  string     `json:"commit_lsn" msgpack:"commit_lsn"`
		CommitTime time.Time  `json:"commit_time" msgpack:"commit_time"`
		// Index is the change's position in its record (after the
		// group's filter).
		Index int `json:"index" msgpack:"index"`
		// Change is the change as in `pgq journal dump`.
		Change json.RawMessage `json:"change" msgpack:"change"`
		// Delivery counts from 1.
		Delivery int    `json:"delivery" msgpack:"delivery"`
		AckID    string `json:"ack_id" msgpack:"ack_id"`
	}
	// MessagesResponse is the body of a shared group's fetch.
	MessagesResponse struct {
		Messages []Message `json:"messages" msgpack:"messages"`
	}
	// AckResult is the body of the answer to /ack, /nak, /term and the
	// parked actions: how many messages changed state.
	AckResult struct {
		Count int `json:"count" msgpack:"count"`
	}
	// ParkedMessage is a parked message of a shared group.
	ParkedMessage struct {
		Message
		Parked time.Time `json:"parked" msgpack:"parked"`
		Reason string    `json:"reason" msgpack:"reason"`
	}
	// ParkedResponse is the body of GET /v1/groups/{name}/parked.
	ParkedResponse struct {
		Parked []ParkedMessage `json:"parked" msgpack:"parked"`
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
		// PreviousCommittedOffset and CommittedOffset are the cursor
		// before and after.
		PreviousCommittedOffset pgq.Offset `json:"previous_committed_offset" msgpack:"previous_committed_offset"`
		CommittedOffset         pgq.Offset `json:"committed_offset" msgpack:"committed_offset"`
		// PreviousCommitted and Committed are PreviousCommittedOffset and
		// CommittedOffset, kept for one release like GroupInfo.Committed:
		// the server and the Go client fill them. They are not on the wire.
		//
		// Deprecated: use PreviousCommittedOffset (the JSON name is
		// previous_committed_offset).
		PreviousCommitted pgq.Offset `json:"-" msgpack:"-"`
		// Deprecated: use CommittedOffset (the JSON name is
		// committed_offset).
		Committed pgq.Offset `json:"-" msgpack:"-"`
		// NextOffset is the first offset the group will deliver.
		NextOffset pgq.Offset `json:"next_offset" msgpack:"next_offset"`
		Lag        Lag        `json:"lag" msgpack:"lag"`
	}
	// CommitResult is the body of a commit's response.
	CommitResult struct {
		// CommittedOffset is the group's cursor after the commit.
		CommittedOffset pgq.Offset `json:"committed_offset" msgpack:"committed_offset"`
		// Committed is CommittedOffset, kept for one release like
		// GroupInfo.Committed: the server and the Go client fill it. It
		// is not on the wire.
		//
		// Deprecated: use CommittedOffset (the JSON name is
		// committed_offset).
		Committed    pgq.Offset `json:"-" msgpack:"-"`
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
