package vfsutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrNoDescriptor is DropCache's answer for a file without an operating
// system descriptor (vfs.MemFS): it has no page cache to drop.
var ErrNoDescriptor = errors.New("vfsutil: file has no descriptor")

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

// ReplaceFile replaces the file at path with data atomically and
// durably: it writes path.tmp, fsyncs it, renames it over path and
// fsyncs the directory, so a crash leaves the old file or the new one.
func ReplaceFile(fs vfs.FS, path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err == nil {
		err = SyncDir(fs, filepath.Dir(path), nil)
	}
	return err
}

// ReadSmallFile reads at most limit+1 bytes of the file at path (the
// caller refuses a longer one); ok is false when there is no file.
func ReadSmallFile(fs vfs.FS, path string, limit int64) (b []byte, ok bool, err error) {
	f, err := fs.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	b, err = io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}
