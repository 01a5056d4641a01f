package consumers_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/internal/servertest"
	"github.com/pgq-dev/pgq/server"
)

// TestFetchAcrossCorruptRecord: a byte flipped in an older sealed segment
// makes a fetch across it answer journal_corrupt naming the offset (not
// internal); the group's info shows it stuck there, and /v1/status,
// /readyz and pgq_journal_corrupt report the corruption.
func TestFetchAcrossCorruptRecord(t *testing.T) {
	e := start(t, func(o *server.Options) { o.SegmentSize = 4096; o.ScrubRate = 1 << 20 })
	ctx := ctxT(t)
	e.Insert(t, 200)
	segs, err := serverparts.Of(e.S).Journal.Segments()
	if err != nil || len(segs) < 3 {
		t.Fatalf("segments %v %v", segs, err)
	}
	seg := segs[0]
	data, err := os.ReadFile(seg.Path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(seg.Path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "g", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	var code int
	var body []byte
	for range 100 {
		code, body = e.call(t, "POST", "/v1/groups/g/fetch", `{"member":"m","max":10}`)
		if code != 200 {
			break
		}
		var r struct {
			NextOffset int64 `json:"next_offset"`
		}
		_ = json.Unmarshal(body, &r)
		if c, _ := e.call(t, "POST", "/v1/groups/g/commit", `{"member":"m","offset":`+itoa(r.NextOffset-1)+`}`); c != 200 {
			t.Fatalf("commit: %d", c)
		}
	}
	if code != 500 || errCode(t, body) != api.CodeJournalCorrupt || !strings.Contains(string(body), "offset ") {
		t.Fatalf("fetch across the corrupt record: %d %s, want 500 journal_corrupt naming the offset", code, body)
	}
	c := serverparts.Of(e.S).Journal.Corruption()
	if c == nil || c.Segment != seg.Path[len(seg.Path)-20:] {
		t.Fatalf("journal corruption %+v, want one in %s", c, seg.Path)
	}
	if !strings.Contains(string(body), "offset "+itoa(int64(c.Offset))) {
		t.Fatalf("fetch answer %s does not name offset %d", body, c.Offset)
	}
	gi, err := e.C.Group(ctx, "g")
	if err != nil || gi.StuckAt != c.Offset || gi.JournalError == "" {
		t.Fatalf("group info %+v %v, want stuck_at %d", gi, err, c.Offset)
	}
	_, sb := e.call(t, "GET", "/v1/status", "")
	var st api.Status
	if err := json.Unmarshal(sb, &st); err != nil || st.JournalCorrupt == nil || st.JournalCorrupt.Offset != c.Offset || st.Groups["g"].StuckAt != c.Offset {
		t.Fatalf("status %s %v", sb, err)
	}
	if rc, rb := e.call(t, "GET", "/readyz", ""); rc != 503 || !strings.Contains(string(rb), "corrupt") {
		t.Fatalf("readyz %d %s, want 503 naming the corruption", rc, rb)
	}
	_, mb := e.call(t, "GET", "/metrics", "")
	if !strings.Contains(string(mb), "pgq_journal_corrupt 1") {
		t.Fatal("pgq_journal_corrupt is not 1")
	}
	_ = time.Second
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestScrubReportsCorruptSegment: pgq stopped, a byte flipped in an older
// sealed segment, pgq started again over the same data dir: the scrub's
// first pass reports it in /v1/status and /readyz before any read.
func TestScrubReportsCorruptSegment(t *testing.T) {
	var opts server.Options
	e := start(t, func(o *server.Options) { o.SegmentSize = 4096; o.ScrubRate = 1 << 20; opts = *o })
	e.Insert(t, 200)
	segs, err := serverparts.Of(e.S).Journal.Segments()
	if err != nil || len(segs) < 3 {
		t.Fatalf("segments %v %v", segs, err)
	}
	e.Cancel()
	if err := <-e.Done; err != nil {
		t.Fatal(err)
	}
	e.Done <- nil // for start's cleanup
	data, err := os.ReadFile(segs[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(segs[0].Path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := server.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	e2 := &env{&servertest.Env{S: s, Base: "http://" + s.Addr(), Token: opts.AuthToken}}
	deadline := time.Now().Add(30 * time.Second)
	var st api.Status
	for time.Now().Before(deadline) {
		_, sb := e2.call(t, "GET", "/v1/status", "")
		if err := json.Unmarshal(sb, &st); err != nil {
			t.Fatalf("status %s: %v", sb, err)
		}
		if st.JournalCorrupt != nil || st.JournalScrub.Passes > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.JournalCorrupt == nil || st.JournalCorrupt.FoundBy != "scrub" || st.JournalCorrupt.Segment != segs[0].Path[len(segs[0].Path)-20:] ||
		st.JournalCorrupt.Offset < segs[0].FirstOffset || st.JournalCorrupt.Offset >= segs[1].FirstOffset {
		t.Fatalf("status after the first scrub pass: corrupt %+v scrub %+v", st.JournalCorrupt, st.JournalScrub)
	}
	if rc, rb := e2.call(t, "GET", "/readyz", ""); rc != 503 || !strings.Contains(string(rb), "corrupt") {
		t.Fatalf("readyz %d %s, want 503 naming the corruption", rc, rb)
	}
}
