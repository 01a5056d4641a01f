package main

import (
	"encoding/json"
	"testing"

	"github.com/pgq-dev/pgq"
)

// TestJournalJSONOutputKeepsItsBytes: `pgq journal verify -o json` and
// `pgq journal repair -o json` print typed documents whose bytes are
// those of the maps they were printed from before (keys sorted).
func TestJournalJSONOutputKeepsItsBytes(t *testing.T) {
	for _, c := range []struct {
		typed  any
		former map[string]any
	}{
		{verifyOutput{FirstOffset: 1, LastEndLSN: 0x1A2B3F0, LastOffset: 130, OK: true, Records: 130},
			map[string]any{"ok": true, "records": uint64(130), "first_offset": pgq.Offset(1), "last_offset": pgq.Offset(130), "last_end_lsn": pgq.LSN(0x1A2B3F0)}},
		{repairOutput{CutBytes: 4096, CutEntries: 3, KeptLastOffset: 9, OK: true, RemovedSegments: 1, Segment: "00000000000000000001"},
			map[string]any{"ok": true, "segment": "00000000000000000001", "kept_last_offset": pgq.Offset(9),
				"cut_entries": uint64(3), "cut_bytes": int64(4096), "removed_segments": 1}},
	} {
		got, err := json.Marshal(c.typed)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(c.former)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}
