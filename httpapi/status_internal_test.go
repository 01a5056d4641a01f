package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/api"
)

// TestStatusJSONIsTheFormerDocument: statusJSON writes, byte for byte,
// the document GET /v1/status answered when the server built it as a
// map (ingest's fields through a JSON round trip, the groups and the
// index as maps, journal_corrupt and journal_scrub as their types), for
// a status with every field set and for one with none.
func TestStatusJSONIsTheFormerDocument(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	msg := `connection refused <"&">`
	full := api.Status{Running: true, Connected: true, LastErrorAt: &at, LastMessageAt: &at, ChangesWritten: 1 << 40, LastError: &msg,
		Slot: "pgq", Publication: "pub", ProtoVersion: 4, Streaming: true, SlotFailover: true, LastReceivedLSN: 0x1A2B3F0,
		ServerWALEnd: 0x1A2B3F8, ConfirmedLSN: 0x1A2B300, JournalFirstOffset: 3, JournalLastOffset: 130, JournalLastEndLSN: 0x1A2B3F0,
		CoveredLSN: 0x1A2B3F0, RecordsWritten: 130, Reconnects: 2, SpillError: &msg,
		Groups: map[string]api.GroupStatus{
			"orders": {CommittedOffset: 120, Member: "worker-1", Lag: api.Lag{Records: 10, Bytes: 800, Seconds: 1.5}},
			"jobs":   {CommittedOffset: 7, Lag: api.Lag{OutOfRange: true}, StuckAt: 9, JournalError: "journal record corrupt at offset 9"},
		},
		JournalError:   &msg,
		Index:          api.IndexStatus{Stale: true, FailedUpdates: 2, Heals: 3, LastError: &msg},
		JournalCorrupt: &api.JournalCorrupt{Segment: "00000000000000000001", Offset: 9, Reason: "crc", FoundBy: "scrub", At: at},
		JournalScrub:   api.ScrubStatus{Running: true, Passes: 1, Segments: 4, Bytes: 1 << 30, SumsWritten: 2, LastPassEnd: &at},
	}
	for name, st := range map[string]api.Status{"full": full, "empty": {Groups: map[string]api.GroupStatus{}}, "no groups": {}} {
		got, err := statusJSON(st)
		if err != nil {
			t.Fatal(err)
		}
		if want := formerStatusJSON(t, st); string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := statusJSON(api.Status{LastErrorAt: &far}); err == nil || !strings.Contains(err.Error(), "last_error_at") {
		t.Errorf("a time out of JSON's range: %v", err)
	}
}

// formerStatusJSON builds st's document as package server did before
// the status was typed end to end.
func formerStatusJSON(t *testing.T, st api.Status) []byte {
	t.Helper()
	ingestPart := st
	ingestPart.Groups, ingestPart.JournalError, ingestPart.Index, ingestPart.JournalCorrupt, ingestPart.JournalScrub = nil, nil, api.IndexStatus{}, nil, api.ScrubStatus{}
	raw, err := json.Marshal(ingestPart)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"groups", "journal_error", "index", "journal_corrupt", "journal_scrub"} {
		delete(m, k) // the server's parts, added below
	}
	var groups map[string]any
	if st.Groups != nil {
		groups = map[string]any{}
	}
	for name, g := range st.Groups {
		gs := map[string]any{"committed_offset": g.CommittedOffset, "member": g.Member, "lag": g.Lag}
		if g.StuckAt != 0 {
			gs["stuck_at"], gs["journal_error"] = g.StuckAt, g.JournalError
		}
		groups[name] = gs
	}
	m["groups"] = groups
	m["journal_error"] = st.JournalError
	m["index"] = map[string]any{"stale": st.Index.Stale, "failed_updates": st.Index.FailedUpdates, "heals": st.Index.Heals, "last_error": st.Index.LastError}
	m["journal_corrupt"] = st.JournalCorrupt
	m["journal_scrub"] = st.JournalScrub
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
