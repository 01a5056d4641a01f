package format_test

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/format"
)

// debeziumMoreRows are rows whose values pgq rendered otherwise than
// Debezium before (issue 33): their expected values are Debezium's,
// byte for byte as Kafka Connect's JSON converter writes them (Java's
// Double.toString for doubles).
func debeziumMoreRows() []debeziumRow {
	return []debeziumRow{{
		// RecordsSnapshotProducerIT.shouldSnapshotTimeArrayTypesAsKnownTypes
		// (DBZ-1969), values from AbstractRecordsProducerTest
		// .schemaAndValuesForTimeArrayTypes: timetz[] as an array of
		// ZonedTime (pgtype does not know timetz[]).
		table: "time_array_table",
		ddl:   "timea time[] NOT NULL, timetza timetz[] NOT NULL, timestampa timestamp[] NOT NULL, timestamptza timestamptz[] NOT NULL",
		insert: "INSERT INTO time_array_table (timea, timetza, timestampa, timestamptza) values ('{00:01:02,01:02:03}', " +
			"'{13:51:02+0200,14:51:03+0200}', '{2020-04-01 00:01:02,2020-04-01 01:02:03}', '{2020-04-01 13:51:02+0200,2020-04-01 14:51:03+0200}')",
		want: map[string]string{
			"timea":        "[62000000,3723000000]",
			"timetza":      `["11:51:02Z","12:51:03Z"]`,
			"timestampa":   "[" + i64(epochMicros(2020, 4, 1, 0, 1, 2, 0)) + "," + i64(epochMicros(2020, 4, 1, 1, 2, 3, 0)) + "]",
			"timestamptza": `["2020-04-01T11:51:02.000000Z","2020-04-01T12:51:03.000000Z"]`},
	}, {
		// AbstractRecordsProducerTest.INSERT_GEOM_TYPES_STMT, expected
		// Point.createValue(schema, 1, 1): io.debezium.data.geometry.Point
		// is {x, y, wkb: OGC WKB of the point, srid: null}.
		table:  "geom_table",
		ddl:    "p POINT",
		insert: "INSERT INTO geom_table(p) VALUES ('(1,1)'::point)",
		want:   map[string]string{"p": `{"x":1.0,"y":1.0,"wkb":"AQEAAAAAAAAAAADwPwAAAAAAAPA/","srid":null}`},
	}, {
		// AbstractRecordsProducerTest.INSERT_NUMERIC_DECIMAL_TYPES_STMT_WITH_INFINITY:
		// in decimal.handling.mode=string SpecialValueDecimal.fromLogical
		// writes the special value's name (SpecialValue.POSITIVE_INFINITY,
		// NEGATIVE_INFINITY).
		table:  "numeric_decimal_inf_table",
		ddl:    "dvs DECIMAL, nvs_nan NUMERIC",
		insert: "INSERT INTO numeric_decimal_inf_table (dvs, nvs_nan) VALUES ('Infinity', '-Infinity')",
		want:   map[string]string{"dvs": `"POSITIVE_INFINITY"`, "nvs_nan": `"NEGATIVE_INFINITY"`},
	}, {
		// MicroDuration.durationMicros computes the interval in double
		// and casts it to long, which saturates (Java Language
		// Specification 5.1.3): 178000000 years is Long.MAX_VALUE, not
		// Go's out-of-range conversion (MinInt64 on amd64).
		table:  "interval_large_table",
		ddl:    "big INTERVAL, neg INTERVAL",
		insert: "INSERT INTO interval_large_table (big, neg) VALUES ('178000000 years', '-178000000 years')",
		want:   map[string]string{"big": "9223372036854775807", "neg": "-9223372036854775808"},
	}}
}

// TestDebeziumValuesAsDebezium renders debeziumMoreRows through a real
// PostgreSQL and checks each value byte for byte.
func TestDebeziumValuesAsDebezium(t *testing.T) {
	for _, row := range debeziumMoreRows() {
		t.Run(row.table, func(t *testing.T) {
			checkDebeziumRow(t, row)
			after := renderAfter(t, pgRow(t, row.table, row.ddl, row.insert), row.opts)
			for col, want := range row.want {
				if got := string(after[col]); got != want {
					t.Errorf("%s: got %s, want exactly %s", col, got, want)
				}
			}
		})
	}
}

func renderAfter(t *testing.T, c pgq.Change, o format.Options) map[string]json.RawMessage {
	t.Helper()
	o.Now = fixedNow
	r, err := format.New(format.Debezium, o)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		After map[string]json.RawMessage `json:"after"`
	}
	if ev := r.AppendEvent(nil, testTx(c), 0, 0); json.Unmarshal(ev, &got) != nil {
		t.Fatalf("invalid JSON %s", ev)
	}
	return got.After
}

// placeholderBytes is UnchangedToastedPlaceholder's array of the
// placeholder's bytes ("for (byte b : toastPlaceholderBinary)
// add((int) b)"), each written by elem.
func placeholderBytes(elem func(b byte) string) string {
	var parts []string
	for _, b := range []byte("__debezium_unavailable_value") {
		parts = append(parts, elem(b))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// TestDebeziumUnchangedToastArrays: an unchanged TOASTed value renders as
// Debezium's placeholder in the column's type, as
// UnchangedToastedPlaceholder (debezium-connector-postgres) builds it
// from the element schema (getArrayValue): text-like elements a single
// placeholder string, numbers and booleans one element per placeholder
// byte, bytea elements the placeholder's bytes, uuid elements the
// name-based UUID of the placeholder (UUID.nameUUIDFromBytes).
func TestDebeziumUnchangedToastArrays(t *testing.T) {
	ints := placeholderBytes(func(b byte) string { return strconv.Itoa(int(b)) })
	doubles := placeholderBytes(func(b byte) string { return strconv.Itoa(int(b)) + ".0" })
	bools := placeholderBytes(func(byte) string { return "true" })
	decimals := placeholderBytes(func(b byte) string {
		return `{"scale":0,"value":"` + base64.StdEncoding.EncodeToString([]byte{b}) + `"}`
	})
	cases := []struct {
		name string
		typ  uint32
		opts format.Options
		want string
	}{
		{"text", pgtype.TextOID, format.Options{}, `"__debezium_unavailable_value"`},
		{"bytea", pgtype.ByteaOID, format.Options{}, `"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="`},
		{"text[]", pgtype.TextArrayOID, format.Options{}, `["__debezium_unavailable_value"]`},
		{"varchar[]", pgtype.VarcharArrayOID, format.Options{}, `["__debezium_unavailable_value"]`},
		{"jsonb[]", pgtype.JSONBArrayOID, format.Options{}, `["__debezium_unavailable_value"]`},
		{"timetz[]", 1270, format.Options{}, `["__debezium_unavailable_value"]`},
		{"numeric[] string", pgtype.NumericArrayOID, format.Options{}, `["__debezium_unavailable_value"]`},
		{"int4[]", pgtype.Int4ArrayOID, format.Options{}, ints},
		{"int8[]", pgtype.Int8ArrayOID, format.Options{}, ints},
		{"int2[]", pgtype.Int2ArrayOID, format.Options{}, ints},
		{"date[]", pgtype.DateArrayOID, format.Options{}, ints},
		{"float8[]", pgtype.Float8ArrayOID, format.Options{}, doubles},
		{"numeric[] double", pgtype.NumericArrayOID, format.Options{Decimal: format.DecimalDouble}, doubles},
		{"numeric[] precise", pgtype.NumericArrayOID, format.Options{Decimal: format.DecimalPrecise}, decimals},
		{"bool[]", pgtype.BoolArrayOID, format.Options{}, bools},
		{"bytea[]", pgtype.ByteaArrayOID, format.Options{}, `["X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="]`},
		// UUID.nameUUIDFromBytes("__debezium_unavailable_value".getBytes())
		{"uuid[]", pgtype.UUIDArrayOID, format.Options{}, `["` + nameUUIDOfPlaceholder + `"]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := pgq.Change{Op: pgq.OpUpdate, Schema: "public", Table: "t",
				Columns: []pgq.Column{{Name: "id", TypeOID: pgtype.Int4OID, Key: true}, {Name: "v", TypeOID: tc.typ}},
				New:     []pgq.Value{{Kind: pgq.ValueText, Data: []byte("1")}, {Kind: pgq.ValueUnchangedTOAST}}}
			if got := string(renderAfter(t, c, tc.opts)["v"]); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// nameUUIDOfPlaceholder is Java's UUID.nameUUIDFromBytes of the
// placeholder's bytes (MD5, version 3), computed outside pgq.
const nameUUIDOfPlaceholder = "b68a35a7-17ad-35b3-af2a-ae46edb4545a"
