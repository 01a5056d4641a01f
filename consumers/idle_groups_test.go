package consumers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// TestManyIdleGroups measures what 10,000 idle groups (half of them
// filtered) cost the calls that visit every group: opening the Manager
// (start-up reads every group), List (GET /v1/groups), Lags (the status
// and metrics) and a retention pass. The figures are logged (go test -v);
// the bound, 5 s each, only catches a pass that grows faster than the
// groups (a quadratic one takes minutes here), not the goal
// (100 ms for the list), which start-up and List do not meet yet.
func TestManyIdleGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 10,000 groups")
	}
	const groups = 10_000
	m, j := managerOver(t, journal.Options{}, index.Options{}, ManagerOptions{}, func(j *journal.Journal) error {
		for range 100 {
			if err := j.Append(wakeTx("a")); err != nil {
				return err
			}
		}
		return nil
	})
	ix := m.ix
	ctx := context.Background()
	for i := range groups {
		req := CreateRequest{Name: fmt.Sprintf("g%05d", i), From: "earliest"}
		if i%2 == 1 {
			req.Tables = []string{fmt.Sprintf("public.t%d", i)}
		}
		if _, err := m.Create(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	m.Close()
	var err error

	timed := func(what string, fn func()) time.Duration {
		start := time.Now()
		fn()
		d := time.Since(start)
		t.Logf("%d idle groups: %s took %s", groups, what, d)
		if d > 5*time.Second {
			t.Errorf("%s took %s with %d idle groups, want under 5s", what, d, groups)
		}
		return d
	}
	timed("start-up (NewManager)", func() {
		m, err = NewManager(ManagerOptions{Journal: j, Index: ix})
		if err != nil {
			t.Fatal(err)
		}
	})
	defer m.Close()
	timed("List (GET /v1/groups)", func() {
		if n := len(m.List(ctx)); n != groups {
			t.Fatalf("List: %d groups, want %d", n, groups)
		}
	})
	timed("List again (memoized lags)", func() { m.List(ctx) })
	timed("Lags (status, metrics)", func() {
		if n := len(m.Lags()); n != groups {
			t.Fatalf("Lags: %d groups, want %d", n, groups)
		}
	})
	timed("retention pass", func() {
		if _, err := m.Retain(ctx, RetentionOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}
