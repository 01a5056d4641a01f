package consumers_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/client"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/internal/serverparts"
	"github.com/pgq-dev/pgq/server"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestAuthAndMalformed(t *testing.T) {
	e := start(t, func(o *server.Options) { o.AuthToken = "s3cret" })
	tok := e.Token
	e.Token = ""
	if code, _ := e.call(t, "GET", "/healthz", ""); code != 200 {
		t.Fatalf("healthz without token: %d", code)
	}
	for _, p := range []string{"/v1/groups", "/v1/status", "/metrics"} {
		code, body := e.call(t, "GET", p, "")
		if code != 401 || errCode(t, body) != consumers.CodeUnauthorized {
			t.Fatalf("%s without token: %d %s", p, code, body)
		}
	}
	if code, _ := e.call(t, "GET", "/v1/groups", "", "Authorization", "Bearer wrong"); code != 401 {
		t.Fatalf("wrong token: %d", code)
	}
	e.Token = tok
	cases := []struct {
		method, path, body, code string
	}{
		{"POST", "/v1/groups", `{"name":`, consumers.CodeBadRequest},
		{"POST", "/v1/groups", `{"name":"g","bogus":1}`, consumers.CodeBadRequest},
		{"POST", "/v1/groups", `{"name":"g"} {}`, consumers.CodeBadRequest},
		{"POST", "/v1/groups", ``, consumers.CodeBadRequest},
		{"POST", "/v1/groups", `{"name":"` + strings.Repeat("a", 2<<20) + `"}`, consumers.CodeTooLarge},
		{"POST", "/v1/groups", `{"name":"bad name/"}`, consumers.CodeInvalidName},
		{"POST", "/v1/groups", `{"name":"g","from":"offset:x"}`, consumers.CodeBadPosition},
		{"POST", "/v1/groups", `{"name":"g","from":"lsn:zz"}`, consumers.CodeBadPosition},
		{"POST", "/v1/groups", `{"name":"g","from":"time:yesterday"}`, consumers.CodeBadPosition},
		{"GET", "/v1/groups/nope", ``, consumers.CodeNotFound},
		{"POST", "/v1/groups/nope/fetch", `{"member":"m"}`, consumers.CodeNotFound},
		{"POST", "/v1/groups/nope/fetch", `{"member":"m","wait":"soon"}`, consumers.CodeBadRequest},
		{"POST", "/v1/groups/nope/commit", `{"member":"m","offset":-1}`, consumers.CodeBadRequest},
		{"POST", "/v1/groups/nope/whatever", `{}`, consumers.CodeNotFound},
	}
	for _, c := range cases {
		code, body := e.call(t, c.method, c.path, c.body)
		if code < 400 || code >= 500 || errCode(t, body) != c.code {
			short := c.body
			if len(short) > 40 {
				short = short[:40]
			}
			t.Errorf("%s %s %q: %d %s, want code %s", c.method, c.path, short, code, body, c.code)
		}
	}
	// msgpack responses on request.
	code, body := e.call(t, "GET", "/v1/groups", "", "Accept", api.MediaMsgpack)
	if code != 200 || len(body) == 0 || body[0] == '{' {
		t.Fatalf("msgpack list: %d %q", code, body)
	}
	// Still serving after all that.
	if _, err := e.C.Groups(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func TestRetentionSlowGroupCapsOutOfRange(t *testing.T) {
	e := start(t, func(o *server.Options) { o.SegmentSize = 4096 })
	ctx := ctxT(t)
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "slow", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "fast", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	last := e.Insert(t, 200)
	r := fetch(t, e, "fast", "f", 1000, 0)
	if _, err := e.C.Commit(ctx, "fast", "f", r.NextOffset-1, 0); err != nil {
		t.Fatal(err)
	}
	// The slow group holds everything.
	time.Sleep(300 * time.Millisecond)
	if f := serverparts.Of(e.S).Journal.FirstOffset(); f != 1 {
		t.Fatalf("journal truncated to %d below the slow group's cursor", f)
	}
	// The slow group commits half: the journal follows at segment granularity.
	r = fetch(t, e, "slow", "s", 100, 0)
	mid := r.NextOffset - 1
	if _, err := e.C.Commit(ctx, "slow", "s", mid, 0); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "truncation to the slow group", func() bool { return serverparts.Of(e.S).Journal.FirstOffset() > 1 })
	f := serverparts.Of(e.S).Journal.FirstOffset()
	segs, _ := serverparts.Of(e.S).Journal.Segments()
	if f > mid+1 || segs[0].FirstOffset != f {
		t.Fatalf("first %d, slow cursor %d, segments start %d", f, mid, segs[0].FirstOffset)
	}
	// Caps: a direct pass with max-bytes drops what the slow group needs
	// (records are stored compact: 2 KiB holds fewer than 100 of them).
	res, err := serverparts.Of(e.S).Consumers.Retain(ctx, consumers.RetentionOptions{MaxBytes: 2048})
	if err != nil || serverparts.Of(e.S).Journal.Size() > 2048+4096 {
		t.Fatalf("max-bytes pass: %+v %v, size %d", res, err, serverparts.Of(e.S).Journal.Size())
	}
	if len(res.Lost) != 1 || res.Lost[0].Group != "slow" || res.Lost[0].From != mid+1 || res.Lost[0].To != res.First-1 {
		t.Fatalf("max-bytes pass lost %+v, want the slow group's %d..%d", res.Lost, mid+1, res.First-1)
	}
	if n := testutil.ToFloat64(serverparts.Of(e.S).Consumers.RetentionLost().WithLabelValues("slow")); n != float64(res.First-mid-1) {
		t.Fatalf("pgq_retention_lost_records_total{group=slow} = %v, want %d", n, res.First-mid-1)
	}
	if _, err := e.C.Fetch(ctx, "slow", client.FetchRequest{Member: "s"}); err == nil || !strings.Contains(err.Error(), "retention") {
		t.Fatalf("slow group fetch: %v, want out_of_range", err)
	}
	gi, _ := e.C.Group(ctx, "slow")
	if !gi.Lag.OutOfRange {
		t.Fatalf("slow lag %+v", gi.Lag)
	}
	if _, err := e.C.ResetGroup(ctx, "slow", "earliest", false); err != nil {
		t.Fatal(err)
	}
	if r := fetch(t, e, "slow", "s", 1000, 0); len(r.Transactions) == 0 || r.NextOffset != last+1 {
		t.Fatalf("after reset: %d txs next %d", len(r.Transactions), r.NextOffset)
	}
	// max-age: everything older than 1ms goes (the last record stays).
	time.Sleep(10 * time.Millisecond)
	if _, err := serverparts.Of(e.S).Consumers.Retain(ctx, consumers.RetentionOptions{MaxAge: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	segs, _ = serverparts.Of(e.S).Journal.Segments()
	if len(segs) != 1 {
		t.Fatalf("max-age left %d segments", len(segs))
	}
}

// TestRetentionMinAgeKeepsYoung: min-age keeps young records whatever the
// groups say, in the background passes and in a direct one. (The
// background retention runs with the same options, so nothing races the
// assertion.)
func TestRetentionMinAgeKeepsYoung(t *testing.T) {
	e := start(t, func(o *server.Options) {
		o.SegmentSize = 4096
		o.Retention.MinAge = time.Hour
	})
	ctx := ctxT(t)
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "all", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	e.Insert(t, 200)
	r := fetch(t, e, "all", "a", 1000, 0)
	if _, err := e.C.Commit(ctx, "all", "a", r.NextOffset-1, 0); err != nil {
		t.Fatal(err)
	}
	if segs, _ := serverparts.Of(e.S).Journal.Segments(); len(segs) < 3 {
		t.Fatalf("only %d segments: the test needs several", len(segs))
	}
	time.Sleep(300 * time.Millisecond) // several background passes
	if f := serverparts.Of(e.S).Journal.FirstOffset(); f != 1 {
		t.Fatalf("background retention truncated young records to %d", f)
	}
	if _, err := serverparts.Of(e.S).Consumers.Retain(ctx, consumers.RetentionOptions{MinAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if f := serverparts.Of(e.S).Journal.FirstOffset(); f != 1 {
		t.Fatalf("min-age pass truncated young records to %d", f)
	}
	// Without the floor the same pass drops what the group committed.
	if _, err := serverparts.Of(e.S).Consumers.Retain(ctx, consumers.RetentionOptions{}); err != nil {
		t.Fatal(err)
	}
	if f := serverparts.Of(e.S).Journal.FirstOffset(); f == 1 {
		t.Fatal("a pass without min-age kept everything the group committed")
	}
}

func TestStalledGroupSlotLag(t *testing.T) {
	e := start(t, nil)
	ctx := ctxT(t)
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "stalled", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	last := e.Insert(t, 3000)
	slot := "s_" + strings.ToLower(e.DB.Name)
	waitCond(t, "slot confirmed_flush_lsn to reach the WAL end", func() bool {
		var lag int64
		e.DB.QueryRow(t, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = '"+slot+"'", &lag)
		return lag < 64<<10
	})
	gi, _ := e.C.Group(ctx, "stalled")
	if gi.Lag.Records < 3000 || gi.CommittedOffset != 0 || last < 3000 {
		t.Fatalf("stalled group %+v", gi)
	}
}

func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTailDeliveryHistogram: pgq_tail_delivery_seconds observes the
// transactions a long poll waited for, one observation each, and nothing
// for a fetch that found its records already in the journal (a replay).
func TestTailDeliveryHistogram(t *testing.T) {
	e := start(t, nil)
	ctx := t.Context()
	count := func() uint64 { // from the /metrics endpoint
		code, body := e.call(t, "GET", "/metrics", "")
		if code != 200 {
			t.Fatalf("/metrics: %d", code)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, "pgq_tail_delivery_seconds_count "); ok {
				n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatal("pgq_tail_delivery_seconds_count not exported")
		return 0
	}
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "tail", From: "latest"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.C.Fetch(ctx, "tail", client.FetchRequest{Member: "m"}); err != nil { // takes the lease
		t.Fatal(err)
	}
	waitedFor := false
	for attempt := 0; attempt < 5 && !waitedFor; attempt++ {
		before := count()
		got := make(chan *client.FetchResult, 1)
		go func() {
			res, err := e.C.Fetch(ctx, "tail", client.FetchRequest{Member: "m", Wait: 30 * time.Second})
			if err != nil {
				t.Error(err)
			}
			got <- res
		}()
		time.Sleep(100 * time.Millisecond) // most likely waiting by now; checked below
		e.DB.Exec(t, "INSERT INTO t (v) VALUES ('tail')")
		res := <-got
		if res == nil {
			t.FailNow()
		}
		if len(res.Transactions) == 0 {
			t.Fatal("the waiting fetch returned nothing")
		}
		switch n := count() - before; {
		case n == uint64(len(res.Transactions)):
			waitedFor = true
		case n != 0: // 0: the fetch started after the insert and did not wait
			t.Fatalf("%d observations for %d transactions delivered", n, len(res.Transactions))
		}
		if _, err := e.C.Commit(ctx, "tail", "m", res.NextOffset-1, res.Generation); err != nil {
			t.Fatal(err)
		}
	}
	if !waitedFor {
		t.Fatal("no fetch waited for its transaction in 5 attempts")
	}

	before := count()
	if _, err := e.C.CreateGroup(ctx, consumers.CreateRequest{Name: "replay", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	res, err := e.C.Fetch(ctx, "replay", client.FetchRequest{Member: "m", Wait: 5 * time.Second})
	if err != nil || len(res.Transactions) == 0 {
		t.Fatalf("replay fetch: %v, %d transactions", err, len(res.Transactions))
	}
	if n := count() - before; n != 0 {
		t.Fatalf("a replay fetch added %d observations", n)
	}
}
