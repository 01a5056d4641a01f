package format_test

import (
	"testing"
)

// TestDebeziumFloatsAsJava: real and double precision values render as
// Kafka Connect's JSON converter writes Debezium's FLOAT32 and FLOAT64,
// Java's Float.toString and Double.toString (the expected texts are
// Java's): a fraction digit always, scientific notation outside
// [1e-3, 1e7), the shortest digits of the float's own width (0.1 as a
// real is 0.1, not float64's 0.10000000149011612).
func TestDebeziumFloatsAsJava(t *testing.T) {
	row := debeziumRow{
		table: "float_java_table",
		ddl:   "r_big REAL, r_tenth REAL, d_big DOUBLE PRECISION, d_small DOUBLE PRECISION, d_milli DOUBLE PRECISION, d_negzero DOUBLE PRECISION, d_under DOUBLE PRECISION, d_arr DOUBLE PRECISION[]",
		insert: "INSERT INTO float_java_table (r_big, r_tenth, d_big, d_small, d_milli, d_negzero, d_under, d_arr) " +
			"VALUES (1e10, 0.1, 1e7, 1e-4, 0.001, '-0', 1234567.5, '{1,2.5}')",
		want: map[string]string{"r_big": "1.0E10", "r_tenth": "0.1", "d_big": "1.0E7", "d_small": "1.0E-4", "d_milli": "0.001",
			"d_negzero": "-0.0", "d_under": "1234567.5", "d_arr": "[1.0,2.5]"},
	}
	after := renderAfter(t, pgRow(t, row.table, row.ddl, row.insert), debeziumDefaults())
	for col, want := range row.want {
		if got := string(after[col]); got != want {
			t.Errorf("%s: got %s, want exactly %s", col, got, want)
		}
	}
}
