package consumers

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/pgq-dev/pgq/index"
	"github.com/pgq-dev/pgq/journal"
)

// managerOver opens a Manager over a fresh journal and index in a
// temporary directory: jo and io are the journal's and the index's
// options (Dir set here), mo the Manager's (Journal and Index set here).
// fill, when not nil, appends to the journal before the index catches up
// with it and the Manager opens. All three close at the test's end.
func managerOver(t *testing.T, jo journal.Options, io index.Options, mo ManagerOptions, fill func(j *journal.Journal) error) (*Manager, *journal.Journal) {
	t.Helper()
	dir := t.TempDir()
	jo.Dir = filepath.Join(dir, "journal")
	j, err := journal.Open(jo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	io.Dir = filepath.Join(dir, "index")
	ix, err := index.Open(io)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	if fill != nil {
		if err := fill(j); err != nil {
			t.Fatal(err)
		}
		if err := ix.CatchUp(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
	mo.Journal, mo.Index = j, ix
	m, err := NewManager(mo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, j
}
