package vfsutil

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// failSync fails every fsync.
type failSync struct{}

func (failSync) MaybeError(op errorfs.Op) error {
	if op.Kind == errorfs.OpFileSync {
		return errBoom
	}
	return nil
}

func (failSync) String() string { return "fail-sync" }

var errBoom = errors.New("boom")

func TestSyncDir(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	var synced []string
	if err := SyncDir(fs, "d", func(p string, _ time.Duration) { synced = append(synced, p) }); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if len(synced) != 1 || synced[0] != "d" {
		t.Fatalf("onSync saw %v, want [d]", synced)
	}

	err := SyncDir(errorfs.Wrap(fs, failSync{}), "d", nil)
	if !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "fsync directory d") {
		t.Fatalf("failed sync: %v", err)
	}
	if err := SyncDir(fs, "missing", nil); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing directory: %v", err)
	}
}
