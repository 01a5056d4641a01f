package consumers

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
)

// PositionKind is the kind of a start position.
type PositionKind uint8

// Position kinds.
const (
	PosEarliest PositionKind = iota + 1 // the first record still in the journal
	PosLatest                           // only records appended from now on
	PosOffset                           // offset:N, the record at offset N
	PosLSN                              // lsn:X/Y, the first record whose commit LSN >= X/Y
	PosTime                             // time:RFC3339, the first record whose commit time >= T
)

// Position is where a group starts (create) or is moved to (reset): the
// first offset it will deliver. The zero Position is invalid.
type Position struct {
	Kind   PositionKind
	Offset pgq.Offset
	LSN    pgq.LSN
	Time   time.Time
}

// ParsePosition parses "earliest", "latest", "offset:N", "lsn:X/Y" or
// "time:RFC3339" (RFC 3339 with optional fractional seconds).
func ParsePosition(s string) (Position, error) {
	switch s {
	case "earliest":
		return Position{Kind: PosEarliest}, nil
	case "latest":
		return Position{Kind: PosLatest}, nil
	}
	kind, arg, ok := strings.Cut(s, ":")
	if !ok {
		return Position{}, errf(ErrBadPosition, "position %q: want earliest, latest, offset:N, lsn:X/Y or time:RFC3339", s)
	}
	switch kind {
	case "offset":
		n, err := strconv.ParseUint(arg, 10, 64)
		if err != nil || n == 0 {
			return Position{}, errf(ErrBadPosition, "position %q: offset must be an integer >= 1", s)
		}
		return Position{Kind: PosOffset, Offset: pgq.Offset(n)}, nil
	case "lsn":
		l, err := pgq.ParseLSN(arg)
		if err != nil {
			return Position{}, errf(ErrBadPosition, "position %q: %v", s, err)
		}
		return Position{Kind: PosLSN, LSN: l}, nil
	case "time":
		t, err := time.Parse(time.RFC3339Nano, arg)
		if err != nil {
			return Position{}, errf(ErrBadPosition, "position %q: want RFC 3339 time such as 2024-05-01T12:00:00Z", s)
		}
		return Position{Kind: PosTime, Time: t.UTC()}, nil
	}
	return Position{}, errf(ErrBadPosition, "position %q: unknown kind %q (want earliest, latest, offset, lsn or time)", s, kind)
}

// String renders the position in the form ParsePosition reads.
func (p Position) String() string {
	switch p.Kind {
	case PosEarliest:
		return "earliest"
	case PosLatest:
		return "latest"
	case PosOffset:
		return fmt.Sprintf("offset:%d", p.Offset)
	case PosLSN:
		return "lsn:" + p.LSN.String()
	case PosTime:
		return "time:" + p.Time.UTC().Format(time.RFC3339Nano)
	}
	return "invalid"
}

// ValidateName checks a group name (api.ValidateName): 1 to 128 of
// [A-Za-z0-9_.-], not "." or "..".
func ValidateName(name string) error { return api.ValidateName(name) }

// Filter selects changes. The zero Filter selects everything.
type Filter struct {
	// Tables are "schema.table" patterns, each side a glob matched
	// against that name alone ("public.*", public."MyT"; see tables.go).
	// Empty: every table. A row change matches by its schema and table, a
	// DDL by the schema and name of its object, a truncate when one of its
	// tables does; a logical message (no table) matches only when Tables
	// is empty.
	Tables []string `json:"tables,omitempty" msgpack:"tables,omitempty"`
	// Ops are op names (insert, update, delete, truncate, message). Empty:
	// every op.
	Ops []string `json:"ops,omitempty" msgpack:"ops,omitempty"`

	// pats are Tables compiled (compiled); without them each match
	// compiles Tables again.
	pats []tablePattern
}

// compiled returns f with its table patterns compiled, for the many
// matches of a group's fetches.
func (f Filter) compiled() Filter {
	f.pats = compilePatterns(f.Tables)
	return f
}

// MaxTablePatterns bounds the table patterns of a group: every change a
// group reads is matched against each of them, so their number is work
// per change; a thousand covers listing tables one by one, and globs
// cover more. Groups stored with more keep them.
const MaxTablePatterns = 1000

// Validate checks the patterns and op names.
func (f Filter) Validate() error {
	if len(f.Tables) > MaxTablePatterns {
		return errf(ErrBadRequest, "%d table patterns: at most %d (use globs such as \"public.*\")", len(f.Tables), MaxTablePatterns)
	}
	for _, t := range f.Tables {
		if _, err := compileTablePattern(t); err != nil {
			return errf(ErrBadRequest, "table pattern %q: %v (schema.table, each a glob; quote names with \" . or glob characters)", t, err)
		}
	}
	for _, o := range f.Ops {
		if _, err := pgq.ParseOp(o); err != nil {
			return errf(ErrBadRequest, "%v", err)
		}
	}
	return nil
}

// IsZero reports whether f selects everything.
func (f Filter) IsZero() bool { return len(f.Tables) == 0 && len(f.Ops) == 0 }

func (f Filter) tableMatch(schema, table string) bool {
	pats := f.pats
	if len(pats) != len(f.Tables) {
		pats = compilePatterns(f.Tables)
	}
	for i := range pats {
		if pats[i].match(schema, table) {
			return true
		}
	}
	return false
}

// truncateMatch matches a truncate's table, journaled as schema.table
// unquoted: with a dot in a name the split is unknown, so every one is
// tried.
func (f Filter) truncateMatch(qualified string) bool {
	for i := range len(qualified) {
		if qualified[i] == '.' && f.tableMatch(qualified[:i], qualified[i+1:]) {
			return true
		}
	}
	return false
}

// ddlMatch matches a DDL change by the schema and name of its object.
func (f Filter) ddlMatch(c *pgq.Change) bool {
	var d struct {
		Object string `json:"object"`
	}
	_ = json.Unmarshal(c.Content, &d)
	names := parseIdentity(d.Object)
	return len(names) >= 2 && f.tableMatch(names[0], names[1])
}

// Match reports whether the change passes the filter. A gap passes every
// filter: whatever a group selects, the hole may hold some of it.
func (f Filter) Match(c *pgq.Change) bool {
	if c.Op == pgq.OpGap {
		return true
	}
	if len(f.Ops) > 0 {
		ok := false
		for _, o := range f.Ops {
			if o == c.Op.String() {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if len(f.Tables) == 0 {
		return true
	}
	switch c.Op {
	case pgq.OpMessage:
		return false
	case pgq.OpDDL:
		return f.ddlMatch(c)
	case pgq.OpTruncate:
		for _, t := range c.Tables {
			if f.truncateMatch(t) {
				return true
			}
		}
		return false
	}
	return f.tableMatch(c.Schema, c.Table)
}

// Apply returns tx with only the changes that pass the filter (tx itself
// when all pass), or nil when none does.
func (f Filter) Apply(tx *pgq.Transaction) *pgq.Transaction {
	if f.IsZero() {
		return tx
	}
	n := 0
	for i := range tx.Changes {
		if f.Match(&tx.Changes[i]) {
			n++
		}
	}
	switch n {
	case 0:
		return nil
	case len(tx.Changes):
		return tx
	}
	out := *tx
	out.Changes = make([]pgq.Change, 0, n)
	// The kept changes keep their ordinals in the whole transaction: a
	// bridge names its messages by them.
	out.Ordinals = make([]uint32, 0, n)
	for i := range tx.Changes {
		if f.Match(&tx.Changes[i]) {
			out.Changes = append(out.Changes, tx.Changes[i])
			out.Ordinals = append(out.Ordinals, tx.Ordinal(i))
		}
	}
	out.FirstOrdinal = out.Ordinals[0]
	return &out
}
