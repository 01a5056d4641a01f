package format

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq"
)

// Format names a rendering of changes.
type Format uint8

// The formats. The zero value is pgq's own.
const (
	// PGQ is pgq's own JSON: a change as `pgq journal dump` writes it,
	// with its ordinal (AppendChangeJSONOrdinal).
	PGQ Format = iota
	// Debezium is the value of a Debezium PostgreSQL connector change
	// event, as Kafka Connect's JSON converter writes it without schemas.
	Debezium
	// CloudEvents is a CloudEvents 1.0 event in the JSON format
	// (structured mode) whose data is the change in pgq's format.
	CloudEvents
)

// ErrUnknown is returned by Parse for a name that is no format; its
// text names the formats of the table ("want pgq, debezium or
// cloudevents").
var ErrUnknown = errors.New("format: unknown format (want " + List() + ")")

// Parse parses a format name of the table (Formats); "" is PGQ.
func Parse(s string) (Format, error) {
	if s == "" {
		return PGQ, nil
	}
	for i := range table {
		if table[i].Name == s {
			return Format(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknown, s)
}

// String returns the format's name.
func (f Format) String() string {
	if int(f) < len(table) {
		return table[f].Name
	}
	return "format(" + strconv.Itoa(int(f)) + ")"
}

// ContentType is the media type of one rendered event (Spec.ContentType).
func (f Format) ContentType() string { return f.Spec().ContentType }

// DecimalMode says how Debezium events render numeric (and money)
// values, as Debezium's decimal.handling.mode does.
type DecimalMode uint8

// The decimal modes. The zero value is DecimalString.
const (
	// DecimalString renders the value's digits as a JSON string ("1.50";
	// NaN as "NAN", as Debezium does). pgq's default: Debezium's own
	// default (precise) writes bytes a reader cannot scale without the
	// schema, which a schemaless event does not carry.
	DecimalString DecimalMode = iota
	// DecimalPrecise renders numeric as Debezium does, Kafka Connect's
	// Decimal: a column declared with a scale (numeric(10,3), numeric(4))
	// as the base64 of the unscaled two's complement big-endian integer at
	// that scale ("1.500" in numeric(10,3): 1500), a column of variable
	// scale (numeric, and every numeric of a record journaled before pgq
	// kept type modifiers) as Debezium's VariableScaleDecimal
	// {"scale":s,"value":"<base64 of the unscaled value>"} with trailing
	// zeros stripped; money as the base64 of its unscaled value (scale
	// 2). NaN and infinities have no decimal form: they render as
	// strings.
	DecimalPrecise
	// DecimalDouble renders numbers as JSON numbers (float64, digits
	// beyond its precision lost); NaN and infinities as strings.
	DecimalDouble
)

var decimalNames = [...]string{DecimalString: "string", DecimalPrecise: "precise", DecimalDouble: "double"}

// ParseDecimalMode parses "string", "precise" or "double"; "" is
// DecimalString.
func ParseDecimalMode(s string) (DecimalMode, error) {
	if i, ok := modeIndex(decimalNames[:], s); ok {
		return DecimalMode(i), nil
	}
	return 0, fmt.Errorf("format: unknown decimal mode %q (want string, precise or double)", s)
}

// String returns the mode's name.
func (d DecimalMode) String() string { return modeName(decimalNames[:], int(d), "decimal") }

// modeIndex is the index of the mode named s in names; "" is the first
// (the zero value).
func modeIndex(names []string, s string) (int, bool) {
	if s == "" {
		return 0, true
	}
	for i, n := range names {
		if n == s {
			return i, true
		}
	}
	return 0, false
}

// modeName is the name of mode i in names, or kind(i) for an unknown one.
func modeName(names []string, i int, kind string) string {
	if i < len(names) {
		return names[i]
	}
	return kind + "(" + strconv.Itoa(i) + ")"
}

// TimePrecisionMode says how Debezium events render time and timestamp
// (without time zone) values, as Debezium's time.precision.mode does.
type TimePrecisionMode uint8

// The time precision modes. The zero value is TimeMicroseconds.
const (
	// TimeMicroseconds renders every time and timestamp in microseconds
	// (io.debezium.time.MicroTime, MicroTimestamp), whatever its declared
	// precision. pgq's default, as before it kept type modifiers.
	TimeMicroseconds TimePrecisionMode = iota
	// TimeAdaptive is Debezium's default, adaptive: a time or timestamp
	// declared with a precision of 0 to 3 (time(3), timestamp(0)) in
	// milliseconds (io.debezium.time.Time, Timestamp), any other (4 to 6,
	// or none declared) in microseconds. Records journaled before pgq
	// kept type modifiers have no declared precision: microseconds. A
	// timestamptz is a ZonedTimestamp string, a timetz a ZonedTime string,
	// in every mode.
	TimeAdaptive
)

var timeNames = [...]string{TimeMicroseconds: "microseconds", TimeAdaptive: "adaptive"}

// ParseTimePrecisionMode parses "microseconds" or "adaptive"; "" is
// TimeMicroseconds.
func ParseTimePrecisionMode(s string) (TimePrecisionMode, error) {
	if i, ok := modeIndex(timeNames[:], s); ok {
		return TimePrecisionMode(i), nil
	}
	return 0, fmt.Errorf("format: unknown time precision mode %q (want microseconds or adaptive)", s)
}

// String returns the mode's name.
func (t TimePrecisionMode) String() string { return modeName(timeNames[:], int(t), "time") }

// IntervalMode says how Debezium events render interval values, as
// Debezium's interval.handling.mode does.
type IntervalMode uint8

// The interval modes. The zero value is IntervalNumeric, Debezium's
// default.
const (
	// IntervalNumeric renders Debezium's MicroDuration: microseconds, a
	// month counted as 365.25/12 days (lossy: months and days are not
	// told apart).
	IntervalNumeric IntervalMode = iota
	// IntervalString renders Debezium's Interval string,
	// "P1Y2M3DT4H5M6.78S" (lossless).
	IntervalString
)

// ParseIntervalMode parses "numeric" or "string"; "" is IntervalNumeric.
func ParseIntervalMode(s string) (IntervalMode, error) {
	switch s {
	case "", "numeric":
		return IntervalNumeric, nil
	case "string":
		return IntervalString, nil
	}
	return 0, fmt.Errorf("format: unknown interval mode %q (want numeric or string)", s)
}

// HstoreMode says how Debezium events render hstore values, as
// Debezium's hstore.handling.mode does.
type HstoreMode uint8

// The hstore modes. The zero value is HstoreJSON, Debezium's default.
const (
	// HstoreJSON renders an hstore as a string of a JSON object
	// (io.debezium.data.Json): "{\"key\":\"val\"}".
	HstoreJSON HstoreMode = iota
	// HstoreMap renders an hstore as Kafka Connect's map of strings to
	// optional strings, which the JSON converter writes as a JSON object:
	// {"key":"val"}.
	HstoreMap
)

var hstoreNames = [...]string{HstoreJSON: "json", HstoreMap: "map"}

// ParseHstoreMode parses "json" or "map"; "" is HstoreJSON.
func ParseHstoreMode(s string) (HstoreMode, error) {
	if i, ok := modeIndex(hstoreNames[:], s); ok {
		return HstoreMode(i), nil
	}
	return 0, fmt.Errorf("format: unknown hstore mode %q (want json or map)", s)
}

// String returns the mode's name.
func (h HstoreMode) String() string { return modeName(hstoreNames[:], int(h), "hstore") }

// Options configure a Renderer.
type Options struct {
	// Database is the name of the database pgq reads (Debezium's
	// source.db, part of the CloudEvents source). pgq's HTTP fetch uses
	// its own (api.Status.Database); a client fills it from there
	// (NamesSource, FillSource).
	Database string
	// Slot is the replication slot pgq reads (part of the CloudEvents
	// source).
	Slot string
	// Name is Debezium's source.name (its topic.prefix, the logical name
	// of the server); "" → "pgq".
	Name string
	// Version is Debezium's source.version; "" → "pgq". pgq is not
	// Debezium: the version names the producer, not a Debezium release.
	Version string
	// Source overrides the CloudEvents source; "" → "/pgq/<database>/<slot>"
	// (each path-escaped).
	Source string
	// Decimal is how Debezium events render numeric and money values.
	Decimal DecimalMode
	// Interval is how Debezium events render interval values.
	Interval IntervalMode
	// Time is how Debezium events render time and timestamp values.
	Time TimePrecisionMode
	// Hstore is how Debezium events render hstore values (columns whose
	// pgq.Column.TypeName is hstore or hstore[]); zero is HstoreJSON,
	// Debezium's default.
	Hstore HstoreMode
	// TransactionMetadata fills Debezium's transaction block (id,
	// total_order, data_collection_order), as Debezium's
	// provide.transaction.metadata=true does; zero → false, Debezium's
	// default: "transaction" is null. pgq writes no BEGIN/END events of
	// Debezium's transaction topic: the block only.
	TransactionMetadata bool
	// JSONValues is how pgq-format changes (the PGQ format and the data of
	// CloudEvents) write json and jsonb values.
	JSONValues JSONValues
	// Schemas writes each Debezium event and key as Kafka Connect's JSON
	// converter does with schemas.enable=true (its default, which a
	// Connect pipeline expects unless told otherwise):
	// {"schema":<the Connect schema>,"payload":<the event or key>}, the
	// schemas Debezium's (see the package doc). false (the default)
	// writes the payload alone, as the converter does with
	// schemas.enable=false. The other formats ignore it.
	Schemas bool
	// Now is the clock of Debezium's top-level ts_ms, ts_us and ts_ns (the
	// time the event was rendered); nil → time.Now.
	Now func() time.Time
}

// NamesSource reports whether o names the source of the changes itself
// (Source, or both Database and Slot). A client rendering changes (pgq
// consume, the bridges) otherwise takes what is missing from pgq's
// status (api.Status: database and slot; FillSource), so that it names
// a change's source as pgq's HTTP fetch does.
func (o *Options) NamesSource() bool {
	return o.Source != "" || (o.Database != "" && o.Slot != "")
}

// FillSource sets Database and Slot where they are empty.
func (o *Options) FillSource(database, slot string) {
	if o.Database == "" {
		o.Database = database
	}
	if o.Slot == "" {
		o.Slot = slot
	}
}

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	if int(o.Decimal) >= len(decimalNames) {
		return fmt.Errorf("format: invalid decimal mode %d", o.Decimal)
	}
	if o.Interval > IntervalString {
		return fmt.Errorf("format: invalid interval mode %d", o.Interval)
	}
	if int(o.Time) >= len(timeNames) {
		return fmt.Errorf("format: invalid time precision mode %d", o.Time)
	}
	if int(o.Hstore) >= len(hstoreNames) {
		return fmt.Errorf("format: invalid hstore mode %d", o.Hstore)
	}
	if o.JSONValues != JSONEmbedded && o.JSONValues != JSONAsText {
		return fmt.Errorf("format: invalid JSONValues %d", o.JSONValues)
	}
	if o.Name == "" {
		o.Name = "pgq"
	}
	if o.Version == "" {
		o.Version = "pgq"
	}
	if o.Source == "" {
		o.Source = defaultSource(o.Database, o.Slot)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Renderer renders changes in one format. It is not safe for concurrent
// use: it keeps the per-table counts of the transaction it renders
// (Debezium's data_collection_order) and scratch space.
type Renderer struct {
	f   Format
	o   Options
	m   *pgtype.Map
	dco dcoState
	// schemas caches the Connect schemas of each table ("schema.table")
	// with Options.Schemas, recomputed when its columns change.
	schemas map[string]*tableSchema
	// msgSchema and msgKeySchema are a message event's schema prefixes.
	msgSchema, msgKeySchema []byte
}

// New returns a Renderer of format f.
func New(f Format, o Options) (*Renderer, error) {
	if int(f) >= len(table) {
		return nil, fmt.Errorf("format: invalid format %d", f)
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Renderer{f: f, o: o, m: pgtype.NewMap()}, nil
}

// Format returns the renderer's format.
func (r *Renderer) Format() Format { return r.f }

// Events returns how many events change i of tx renders to: 1 in the pgq
// and CloudEvents formats; in Debezium's, 0 for pgq's ddl and gap changes
// (Debezium has no such events), 2 for an update that changes the row's
// key (a delete of the old key and a create of the new one) and one per
// table for a truncate.
func (r *Renderer) Events(tx *pgq.Transaction, i int) int {
	if n := table[r.f].events; n != nil {
		return n(&tx.Changes[i])
	}
	return 1
}

// AppendEvent appends event k (0 ≤ k < Events(tx, i)) of change i of tx.
// Changes of one transaction render their Debezium data_collection_order
// right when the renderer sees its records in order (see the package
// doc).
func (r *Renderer) AppendEvent(b []byte, tx *pgq.Transaction, i, k int) []byte {
	return table[r.f].event(r, b, tx, i, k)
}

// AppendChangeEvents appends change i of tx as one JSON value: its event
// when it renders to one, null when to none, and a JSON array of its
// events when to several (a Debezium primary-key update or multi-table
// truncate). This is the form of a shared group's fetched "change"
// field, whose message stays to be acked (an exclusive fetch leaves a
// change without events out: AppendTransaction).
func (r *Renderer) AppendChangeEvents(b []byte, tx *pgq.Transaction, i int) []byte {
	return r.appendEvents(b, tx, i, r.Events(tx, i), table[r.f].event)
}

// ChangeID is the stable id of the change with ordinal ord in the
// transaction committed at commit: "<commit LSN>.<ordinal>", or
// "<commit LSN>.<backfill id>.<index>" for a backfill chunk's rows (whose
// commit LSN is the chunk's high watermark). It is the id the bridges give
// broker messages (bridge.MessageID): derived from PostgreSQL's history,
// never from a journal offset (design invariant 9).
func ChangeID(commit pgq.LSN, ord uint32, backfill string) string {
	s := commit.String() + "."
	if backfill != "" {
		s += backfill + "."
	}
	return s + strconv.FormatUint(uint64(ord), 10)
}

// AppendTransaction appends tx as a line of `pgq journal dump`
// (AppendJSONAs) whose changes are rendered in the renderer's format,
// each as one JSON value (AppendChangeEvents); a change the format has
// no event for (Events 0: a ddl or gap change in Debezium's) is left
// out, never a null a reader of the format would take for an event (a
// tombstone). In the pgq format it is exactly AppendJSONAs.
func (r *Renderer) AppendTransaction(b []byte, tx *pgq.Transaction) []byte {
	if r.f == PGQ {
		return AppendJSONAs(b, tx, r.o.JSONValues)
	}
	b = AppendJSONHead(b, tx)
	first := true
	for i := range tx.Changes {
		n := r.Events(tx, i)
		if n == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = r.appendEvents(b, tx, i, n, table[r.f].event)
	}
	return append(b, "]}"...)
}
