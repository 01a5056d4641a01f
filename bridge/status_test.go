package bridge

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestStatusLastErrorAt: /status keeps last_error after the bridge
// recovered, with last_error_at saying when it happened.
func TestStatusLastErrorAt(t *testing.T) {
	b := &Bridge{}
	if st := b.Status(); st.LastErrorAt != nil {
		t.Fatalf("no error yet, last_error_at %v", st.LastErrorAt)
	}
	before := time.Now()
	b.fail("publish", errors.New("broker down"))
	st := b.Status()
	if st.LastError != "publish: broker down" || st.LastErrorAt == nil || st.LastErrorAt.Before(before.Add(-time.Second)) || st.LastErrorAt.After(time.Now()) {
		t.Fatalf("after a failure: last_error %q at %v", st.LastError, st.LastErrorAt)
	}
	js, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"last_error_at":"`) {
		t.Fatalf("/status has no last_error_at: %s", js)
	}
	first := *st.LastErrorAt
	time.Sleep(2 * time.Millisecond)
	b.fail("commit", errors.New("pgq restarting"))
	if st := b.Status(); !st.LastErrorAt.After(first) || st.LastError != "commit: pgq restarting" {
		t.Fatalf("a later failure: %q at %v (first at %v)", st.LastError, st.LastErrorAt, first)
	}
}
