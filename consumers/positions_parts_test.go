package consumers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq"
)

// TestPositionsInsideMultiPartTransaction: in partsJournal (1: xid 1;
// 2..7: xid 2 in six parts; 8: xid 3) no way of giving a position starts
// a group inside xid 2. offset:N on a later part is refused with
// bad_position naming offset:2, on create (exclusive and shared), reset
// and dry-run reset, and changes nothing; lsn: and time: land on part 0;
// a fetch's from on a later part is refused too.
func TestPositionsInsideMultiPartTransaction(t *testing.T) {
	m, _ := partsJournal(t)
	ctx := context.Background()
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrBadPosition) || !strings.Contains(err.Error(), "offset:2") {
			t.Errorf("%s: %v, want bad_position naming offset:2", what, err)
		}
	}
	for off := 3; off <= 7; off++ {
		for _, mode := range []string{"", modeShared} {
			_, err := m.Create(ctx, CreateRequest{Name: fmt.Sprintf("g%d%s", off, mode), From: fmt.Sprintf("offset:%d", off), Mode: mode})
			refused(fmt.Sprintf("create %q at offset:%d", mode, off), err)
		}
	}
	if len(m.List(ctx)) != 0 {
		t.Fatalf("refused creates left groups: %+v", m.List(ctx))
	}
	for _, off := range []int{1, 2, 8, 9} {
		if _, err := m.Create(ctx, CreateRequest{Name: fmt.Sprintf("ok%d", off), From: fmt.Sprintf("offset:%d", off)}); err != nil {
			t.Errorf("create at offset:%d: %v", off, err)
		}
	}
	if _, err := m.Create(ctx, CreateRequest{Name: "sh", From: "offset:8", Mode: modeShared}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ok8", "sh"} {
		for _, dry := range []bool{true, false} {
			_, err := m.Reset(ctx, name, "offset:5", dry)
			refused(fmt.Sprintf("reset %s (dry %v) to offset:5", name, dry), err)
		}
		if gi, _ := m.Info(ctx, name); gi.CommittedOffset != 7 {
			t.Errorf("a refused reset moved %s to %d", name, gi.CommittedOffset)
		}
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, to := range []string{"lsn:0/C8", "lsn:0/96", "time:" + base.Add(time.Second).Format(time.RFC3339Nano), "time:" + base.Add(time.Millisecond).Format(time.RFC3339Nano)} {
		res, err := m.Reset(ctx, "sh", to, true)
		if err != nil || res.NextOffset != 2 {
			t.Errorf("reset to %s: next offset %d, %v; want 2 (part 0)", to, res.NextOffset, err)
		}
	}
	// Whatever lands on a later part (an lsn: or time: answer, earliest)
	// moves back to part 0; offset: does not.
	for off := 2; off <= 7; off++ {
		for _, p := range []Position{{Kind: PosLSN}, {Kind: PosTime}, {Kind: PosEarliest}} {
			if got, err := m.wholeTx(p, pgq.Offset(off)); err != nil || got != 2 {
				t.Errorf("%s landing on offset %d: %d, %v; want 2", p, off, got, err)
			}
		}
	}

	// A fetch's from: the consumer has records up to a later part.
	if _, err := m.Create(ctx, CreateRequest{Name: "ex", From: "earliest"}); err != nil {
		t.Fatal(err)
	}
	res, err := m.Fetch(ctx, "ex", FetchRequest{Member: "a", Max: 10})
	if err != nil || res.NextOffset != 9 {
		t.Fatalf("fetch: %v %+v", err, res)
	}
	for from := 3; from <= 7; from++ {
		_, err := m.Fetch(ctx, "ex", FetchRequest{Member: "a", From: pgq.Offset(from)})
		if !errors.Is(err, ErrBadPosition) || !strings.Contains(err.Error(), "first part, 2") {
			t.Errorf("fetch from %d: %v, want bad_position naming 2", from, err)
		}
	}
	res, err = m.Fetch(ctx, "ex", FetchRequest{Member: "a", From: 2, Max: 1})
	if err != nil || len(res.Transactions) != 6 || res.Transactions[0].Part != 0 {
		t.Fatalf("fetch from 2: %v %+v", err, res)
	}
}
