package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestConsumeValueModes: `pgq consume --format debezium` and `pgq
// bridge webhook --format debezium` render a numeric(5,2) column as
// --decimal-handling-mode says, the default staying pgq's string.
//
// Expected values: Debezium's AbstractRecordsProducerTest
// (debezium-connector-postgres) inserts 1.1 into d DECIMAL(3,2) and
// expects new BigDecimal("1.10") in a Decimal schema of scale 2 in
// precise mode (schemasAndValuesForBigDecimalEncodedNumericTypes), "1.10"
// in string mode and 1.1 in double mode; Kafka Connect's
// Decimal.fromLogical writes the unscaled value's BigInteger.toByteArray
// (110: 0x6e), JsonConverter as base64 ("bg==").
func TestConsumeValueModes(t *testing.T) {
	r := startFormatRun(t, "cm")
	r.db.Exec(t, `ALTER TABLE cm ADD COLUMN n numeric(5,2)`, `INSERT INTO cm VALUES (1, 'a', 1.1)`)
	for _, g := range []string{"g", "hook", "hook-default"} {
		r.Out(t, "groups", "create", g, "--from", "earliest")
	}
	after := func(args ...string) string {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			out := strings.TrimSpace(string(r.Out(t, append([]string{"consume", "--group", "g", "--no-commit", "--format", "debezium"}, args...)...)))
			if out != "" {
				var ev struct{ After map[string]json.RawMessage }
				if err := json.Unmarshal([]byte(out), &ev); err != nil {
					t.Fatalf("%v: %v\n%s", args, err, out)
				}
				return string(ev.After["n"])
			}
			if time.Now().After(deadline) {
				t.Fatalf("%v: nothing consumed", args)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--decimal-handling-mode", "precise"}, `"bg=="`},
		{nil, `"1.10"`},
		{[]string{"--decimal-handling-mode", "double", "--time-precision-mode", "adaptive", "--interval-handling-mode", "string", "--hstore-handling-mode", "map"}, `1.1`},
	} {
		if got := after(tc.args...); got != tc.want {
			t.Errorf("%v: n %s, want %s", tc.args, got, tc.want)
		}
	}

	// The bridges embed the same flags (FormatFlags): the webhook's.
	for g, tc := range map[string]struct {
		args []string
		want string
	}{"hook": {[]string{"--decimal-handling-mode", "precise"}, `"bg=="`}, "hook-default": {nil, `"1.10"`}} {
		evs := r.WebhookEvents(t, 1, append([]string{"--group", g, "--format", "debezium"}, tc.args...)...)
		var ev struct{ After map[string]json.RawMessage }
		if len(evs) != 1 || json.Unmarshal(evs[0], &ev) != nil || string(ev.After["n"]) != tc.want {
			t.Errorf("webhook %v: events %s, want after.n %s", tc.args, evs, tc.want)
		}
	}
}
