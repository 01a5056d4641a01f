package consumers

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/internal/syncbuf"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// lostWarned sums the records of the retention loss warnings for group.
func lostWarned(t *testing.T, logs *syncbuf.Buffer, group string) uint64 {
	t.Helper()
	var sum uint64
	for _, line := range bytes.Split(logs.Bytes(), []byte("\n")) {
		var rec struct {
			Msg     string `json:"msg"`
			Group   string `json:"group"`
			Records uint64 `json:"records"`
		}
		if len(line) == 0 || json.Unmarshal(line, &rec) != nil || rec.Group != group || rec.Records == 0 {
			continue
		}
		sum += rec.Records
	}
	return sum
}

// TestRetentionLostAcrossPasses: a size cap that drops a group's records
// over several passes counts every record it dropped, in
// pgq_retention_lost_records_total, in the warnings and in
// RetainResult.Lost; the records of a group that committed part of them
// count from its cursor, and a group that committed everything loses
// nothing.
func TestRetentionLostAcrossPasses(t *testing.T) {
	e := newSharedEnv(t, 200)
	logs := &syncbuf.Buffer{}
	_ = e.m.Close()
	var err error
	e.m, err = NewManager(ManagerOptions{Journal: e.j, Index: e.ix, Now: e.clock.Now, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 30 {
		e.add([]pgq.Change{row("t", i)})
	}
	for _, name := range []string{"stuck", "partial", "done"} {
		if _, err := e.m.Create(ctx, CreateRequest{Name: name, From: "earliest"}); err != nil {
			t.Fatal(err)
		}
	}
	capBytes := e.j.Size() / 2
	pass := func() RetainResult {
		t.Helper()
		res, err := e.m.Retain(ctx, RetentionOptions{MaxBytes: capBytes})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	commit := func(name string, off pgq.Offset) {
		t.Helper()
		res, err := e.m.Fetch(ctx, name, FetchRequest{Member: "m", Max: 1000})
		if err != nil || res.NextOffset <= off {
			t.Fatalf("fetch %s: %v %+v", name, err, res)
		}
		if _, err := e.m.Commit(ctx, name, "m", off, 0); err != nil {
			t.Fatalf("commit %s at %d: %v", name, off, err)
		}
	}
	commit("done", e.j.LastOffset())
	const partialAt = 25
	commit("partial", partialAt)

	r1 := pass()
	first1 := e.j.FirstOffset()
	if first1 <= 1 || first1 > partialAt+1 {
		t.Fatalf("test setup: the first pass should drop some records below %d: first %d (%+v)", partialAt+1, first1, r1)
	}
	for i := range 30 {
		e.add([]pgq.Change{row("t", 100+i)})
	}
	commit("done", e.j.LastOffset())
	r2 := pass()
	first2 := e.j.FirstOffset()
	if first2 <= partialAt+1 {
		t.Fatalf("test setup: the second pass should drop past %d: first %d", partialAt, first2)
	}
	want := map[string]uint64{"stuck": uint64(first2 - 1), "partial": uint64(first2 - partialAt - 1), "done": 0}
	for name, n := range want {
		if got := testutil.ToFloat64(e.m.RetentionLost().WithLabelValues(name)); got != float64(n) {
			t.Errorf("pgq_retention_lost_records_total{group=%q} = %v, want %d (first %d after pass 1, %d after pass 2)", name, got, n, first1, first2)
		}
		if got := lostWarned(t, logs, name); got != n {
			t.Errorf("warnings for group %q count %d lost records, want %d", name, got, n)
		}
	}
	var lost []GroupLoss
	for _, r := range []RetainResult{r1, r2} {
		lost = append(lost, r.Lost...)
	}
	wantLost := []GroupLoss{{"stuck", 1, first1 - 1}, {"partial", partialAt + 1, first2 - 1}, {"stuck", first1, first2 - 1}}
	if len(lost) != len(wantLost) {
		t.Fatalf("Lost over both passes: %+v, want %+v", lost, wantLost)
	}
	for i := range lost {
		if lost[i] != wantLost[i] {
			t.Errorf("Lost[%d] = %+v, want %+v", i, lost[i], wantLost[i])
		}
	}
}
