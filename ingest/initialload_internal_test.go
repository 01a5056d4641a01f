package ingest

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestInitialLoadValidate checks the initial load's options: table
// names, parallelism bounds, the temporary lifecycle, a reader.
func TestInitialLoadValidate(t *testing.T) {
	read := func(context.Context, LoadRequest, func(LoadChunk) error) error { return nil }
	for _, tc := range []struct {
		l         InitialLoad
		lifecycle string
		start     string
		want      string // "" → valid
	}{
		{InitialLoad{}, LifecycleTemporary, "", ""},
		{InitialLoad{Tables: []string{"public.a", "b"}, Read: read}, LifecycleKeep, "", ""},
		{InitialLoad{Tables: []string{"public.a"}, Parallelism: 16, Read: read}, LifecycleKeep, "", ""},
		{InitialLoad{Tables: []string{"a.b.c"}, Read: read}, LifecycleKeep, "", "invalid table"},
		{InitialLoad{Tables: []string{".a"}, Read: read}, LifecycleKeep, "", "invalid table"},
		{InitialLoad{Tables: []string{"a"}, Parallelism: 17, Read: read}, LifecycleKeep, "", "want 0 (the default) to 16"},
		{InitialLoad{Tables: []string{"a"}, Parallelism: -1, Read: read}, LifecycleKeep, "", "want 0 (the default) to 16"},
		{InitialLoad{Tables: []string{"a"}, Read: read}, LifecycleTemporary, "", "does not go with"},
		{InitialLoad{Tables: []string{"a"}}, LifecycleKeep, "", "needs a reader"},
		{InitialLoad{Tables: []string{"a"}, Read: read}, LifecycleKeep, "slot", ""},
		{InitialLoad{Tables: []string{"a"}, Read: read}, LifecycleKeep, "latest", "goes only with"},
		{InitialLoad{Tables: []string{"a"}, Read: read}, LifecycleKeep, "lsn:0/10", "goes only with"},
	} {
		err := tc.l.validate(tc.lifecycle, tc.start)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.l.Tables, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrConfig)):
			t.Errorf("%+v, %s: got %v, want an ErrConfig saying %q", tc.l.Tables, tc.lifecycle, err, tc.want)
		}
	}
}

// TestExportSnapshotAction checks the CREATE_REPLICATION_SLOT ending per
// server version: the keyword before 15, the option list after, with
// FAILOVER from 17 unless it is off.
func TestExportSnapshotAction(t *testing.T) {
	for _, tc := range []struct {
		version  int
		failover string
		want     string
	}{
		{140010, FailoverAuto, "EXPORT_SNAPSHOT"},
		{150004, FailoverAuto, "(SNAPSHOT 'export')"},
		{170000, FailoverAuto, "(SNAPSHOT 'export', FAILOVER true)"},
		{180001, FailoverOff, "(SNAPSHOT 'export')"},
	} {
		if got := exportSnapshotAction(tc.version, tc.failover); got != tc.want {
			t.Errorf("%d %s: %q, want %q", tc.version, tc.failover, got, tc.want)
		}
	}
}
