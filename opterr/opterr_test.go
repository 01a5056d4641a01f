package opterr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pgq-dev/pgq/opterr"
)

var errConfig = errors.New("configuration error")

func TestError(t *testing.T) {
	e := opterr.New(errConfig, "slot %q is missing: pass {}, or {} {} then backfill (a URL: {+env})",
		opterr.Of("ingest.Options.CreateSlot", "ingest.Options.CreateSlot", "ingest.Options.AcceptGap", "ingest.Options.PGURL"), "s{}")
	want := `configuration error: slot "s{}" is missing: pass ingest.Options.CreateSlot, or ingest.Options.CreateSlot ingest.Options.AcceptGap then backfill (a URL: ingest.Options.PGURL)`
	if got := e.Error(); got != want {
		t.Errorf("Error() = %s\nwant %s", got, want)
	}
	wrapped := fmt.Errorf("server: %w", e)
	if !errors.Is(wrapped, errConfig) {
		t.Error("the sentinel is lost")
	}
	found, ok := opterr.Find(wrapped)
	if !ok || found != e {
		t.Fatalf("Find = %v, %v", found, ok)
	}
	var envs []bool
	cli := found.Render(func(o opterr.Option, env bool) string {
		envs = append(envs, env)
		return "<" + string(o)[len("ingest.Options."):] + ">"
	})
	if want := `slot "s{}" is missing: pass <CreateSlot>, or <CreateSlot> <AcceptGap> then backfill (a URL: <PGURL>)`; cli != want {
		t.Errorf("Render = %s\nwant %s", cli, want)
	}
	if fmt.Sprint(envs) != "[false false false true]" {
		t.Errorf("env placeholders seen as %v", envs)
	}
	if _, ok := opterr.Find(errConfig); ok {
		t.Error("Find found an Error in a plain error")
	}
	if got := opterr.New(nil, "no class ({})", opterr.Of("a.B")).Error(); got != "no class (a.B)" {
		t.Errorf("without a sentinel: %s", got)
	}
}
