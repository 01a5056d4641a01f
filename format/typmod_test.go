package format_test

import (
	"encoding/json"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// renderAfter renders an insert of cols and values (text forms) in the
// Debezium format with o and returns its "after" values.
func renderAfterCols(t *testing.T, o format.Options, cols []pgq.Column, values ...string) map[string]json.RawMessage {
	t.Helper()
	c := pgq.Change{Op: pgq.OpInsert, Schema: "public", Table: "t", Columns: cols}
	for _, v := range values {
		c.New = append(c.New, pgq.Value{Kind: pgq.ValueText, Data: []byte(v)})
	}
	o.Now = fixedNow
	r, err := format.New(format.Debezium, o)
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		After map[string]json.RawMessage `json:"after"`
	}
	if err := json.Unmarshal(r.AppendEvent(nil, testTx(c), 0, 0), &ev); err != nil {
		t.Fatal(err)
	}
	return ev.After
}

// TestTypmodRendering: what the decimal and time precision modes make of
// a column's type modifier, and of its absence (records journaled before
// pgq kept it, typmod -1): a numeric of variable scale, microseconds.
// Expected values follow Debezium's PostgresValueConverter.java
// (isVariableScaleDecimal, the stripTrailingZeros of a variable-scale
// value, withScaleAdjustedIfNeeded) and TemporalPrecisionMode.java
// (ADAPTIVE: precision <= 3 Time/Timestamp, else MicroTime/MicroTimestamp),
// in debezium-connector-postgres and debezium-connector-common; an
// array's elements take its column's precision (TIMESTAMP_ARRAY's schema
// in PostgresValueConverter).
func TestTypmodRendering(t *testing.T) {
	num := pgq.Column{Name: "n", TypeOID: 1700}
	ts := pgq.Column{Name: "ts", TypeOID: 1114}
	ti := pgq.Column{Name: "ti", TypeOID: 1083}
	tz := pgq.Column{Name: "tz", TypeOID: 1184}
	neg := pgq.Column{Name: "neg", TypeOID: 1700}.WithTypmod(2<<16 | (-3 & 0x7ff) + 4) // numeric(2,-3)
	tsa := pgq.Column{Name: "tsa", TypeOID: 1115}                                      // timestamp[]: its elements take the column's precision
	values := []string{"22.2200", "2016-11-04 13:51:30.123", "13:51:30.1", "2016-11-04 11:51:30+00", "12000", `{"2016-11-04 13:51:30.123"}`}
	cases := []struct {
		name string
		cols []pgq.Column
		o    format.Options
		want map[string]string
	}{{
		name: "declared",
		cols: []pgq.Column{num.WithTypmod(6<<16 | 4 + 4), ts.WithTypmod(3), ti.WithTypmod(1), tz.WithTypmod(0), neg, tsa.WithTypmod(3)},
		o:    format.Options{Decimal: format.DecimalPrecise, Time: format.TimeAdaptive},
		// Decimal(4): 222200; Timestamp and Time in milliseconds; the
		// ZonedTimestamp with six digits; a negative scale keeps the
		// struct (its scale stated).
		want: map[string]string{"n": javaBytes(222200), "ts": "1478267490123", "ti": "49890100",
			"tz": `"2016-11-04T11:51:30.000000Z"`, "neg": `{"scale":0,"value":` + javaBytes(12000) + `}`, "tsa": "[1478267490123]"},
	}, {
		name: "journaled before typmods",
		cols: []pgq.Column{num, ts, ti, tz, {Name: "neg", TypeOID: 1700}, tsa},
		o:    format.Options{Decimal: format.DecimalPrecise, Time: format.TimeAdaptive},
		// VariableScaleDecimal with trailing zeros stripped: 2222 at
		// scale 2; MicroTimestamp and MicroTime.
		want: map[string]string{"n": `{"scale":2,"value":` + javaBytes(2222) + `}`, "ts": "1478267490123000", "ti": "49890100000",
			"tz": `"2016-11-04T11:51:30.000000Z"`, "neg": `{"scale":0,"value":` + javaBytes(12000) + `}`, "tsa": "[1478267490123000]"},
	}, {
		name: "default modes",
		cols: []pgq.Column{num.WithTypmod(6<<16 | 4 + 4), ts.WithTypmod(3), ti.WithTypmod(1), tz.WithTypmod(0), neg, tsa.WithTypmod(3)},
		// decimal.handling.mode=string, microseconds: as before typmods.
		want: map[string]string{"n": `"22.2200"`, "ts": "1478267490123000", "ti": "49890100000",
			"tz": `"2016-11-04T11:51:30.000000Z"`, "neg": `"12000"`, "tsa": "[1478267490123000]"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := renderAfterCols(t, tc.o, tc.cols, values...)
			for col, want := range tc.want {
				if !sameJSON(t, got[col], []byte(want)) {
					t.Errorf("%s: got %s, want %s", col, got[col], want)
				}
			}
		})
	}
}

func TestParseTimePrecisionMode(t *testing.T) {
	for s, want := range map[string]format.TimePrecisionMode{"": format.TimeMicroseconds, "microseconds": format.TimeMicroseconds, "adaptive": format.TimeAdaptive} {
		if got, err := format.ParseTimePrecisionMode(s); err != nil || got != want {
			t.Errorf("ParseTimePrecisionMode(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := format.ParseTimePrecisionMode("connect"); err == nil {
		t.Error("connect accepted")
	}
	if _, err := format.New(format.Debezium, format.Options{Time: 9}); err == nil {
		t.Error("time precision mode 9 accepted")
	}
	if s := format.TimeAdaptive.String(); s != "adaptive" {
		t.Errorf("String = %q", s)
	}
}
