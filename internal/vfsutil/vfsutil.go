package vfsutil

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// SyncDir fsyncs the directory dir through fs. onSync, when not nil,
// receives the fsync's latency (also when it failed), so a store's slow-sync
// histogram counts directory fsyncs like file fsyncs. The error names the
// directory.
func SyncDir(fs vfs.FS, dir string, onSync func(path string, d time.Duration)) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	start := time.Now()
	err = d.Sync()
	if onSync != nil {
		onSync(dir, time.Since(start))
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
