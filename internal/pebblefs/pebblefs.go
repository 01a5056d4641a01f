// Package pebblefs is what the Pebble stores of pgq (the index and the
// backfill store) share to survive a failing disk: Pebble reports a failed
// commit or MANIFEST write only through Logger.Fatalf, whose default exits
// the process, and its WAL keeps the first write error for good. A store
// wraps its FS in WatchFS, whose OnFail and the store's own Fatalf mark it
// failed (fail-stop: no write enters Pebble until it is reopened); to heal
// it closes the failed Pebble with CloseDB, checks the disk with Probe
// (Pebble's Open can block for good on a disk that still fails its
// writes) and opens Pebble again, which replays its WAL.
//
// The package does no I/O of its own beyond Probe's small file; it holds
// no state and takes no locks.
package pebblefs

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// WatchFS wraps the FS that Pebble is given (pebble.Options.FS). It times
// every fsync of a file or directory (OnSync, when set) and reports every
// failed write-side file operation (create, open for writing, write,
// preallocate, sync) to OnFail, which must make its store fail-stop until
// it reopens Pebble: after such an error Pebble's WAL stays broken (its
// flusher keeps the first error), and a write that entered Pebble after it
// could fail while others wait on it forever, so no write must.
//
// Every method not overridden here is the wrapped FS's.
type WatchFS struct {
	vfs.FS
	// OnSync, when set, is called after every fsync with its duration.
	OnSync func(path string, d time.Duration, err error)
	// OnFail is called on every failed write-side file operation; it may
	// be called from any goroutine (Pebble's flusher, compactions).
	OnFail func(op, path string, err error)
}

func (fs *WatchFS) wrap(f vfs.File, path string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &watchFile{File: f, fs: fs, path: path}, nil
}

func (fs *WatchFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil {
		fs.OnFail("create", name, err)
	}
	return fs.wrap(f, name, err)
}

func (fs *WatchFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	return fs.wrap(f, name, err)
}

func (fs *WatchFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	if err != nil {
		fs.OnFail("open for writing", name, err)
	}
	return fs.wrap(f, name, err)
}

func (fs *WatchFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	return fs.wrap(f, name, err)
}

func (fs *WatchFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		fs.OnFail("reuse for writing", newname, err)
	}
	return fs.wrap(f, newname, err)
}

// Unwrap returns the wrapped FS (see vfs.Root).
func (fs *WatchFS) Unwrap() vfs.FS { return fs.FS }

// watchFile is a file of a WatchFS.
type watchFile struct {
	vfs.File
	fs   *WatchFS
	path string
}

func (f *watchFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	if err != nil {
		f.fs.OnFail("write", f.path, err)
	}
	return n, err
}

func (f *watchFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if err != nil {
		f.fs.OnFail("write", f.path, err)
	}
	return n, err
}

func (f *watchFile) Preallocate(offset, length int64) error {
	err := f.File.Preallocate(offset, length)
	if err != nil {
		f.fs.OnFail("preallocate", f.path, err)
	}
	return err
}

func (f *watchFile) synced(start time.Time, err error) {
	if f.fs.OnSync != nil {
		f.fs.OnSync(f.path, time.Since(start), err)
	}
	if err != nil {
		f.fs.OnFail("fsync", f.path, err)
	}
}

func (f *watchFile) Sync() error {
	start := time.Now()
	err := f.File.Sync()
	f.synced(start, err)
	return err
}

func (f *watchFile) SyncData() error {
	start := time.Now()
	err := f.File.SyncData()
	f.synced(start, err)
	return err
}

func (f *watchFile) SyncTo(length int64) (bool, error) {
	start := time.Now()
	full, err := f.File.SyncTo(length)
	f.synced(start, err)
	return full, err
}

// Probe writes, fsyncs and removes a small file named PROBE in dir
// through fs: a disk that still fails it must not be given to Pebble's
// Open.
func Probe(fs vfs.FS, dir string) error {
	name := fs.PathJoin(dir, "PROBE")
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte("pgq disk probe\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := fs.Remove(name); err == nil {
		err = rerr
	}
	return err
}

// CloseDB closes db, which may be a Pebble that failed: an error or a
// panic of its Close is returned as an error, never passed on.
func CloseDB(db *pebble.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pebble close panicked: %v", r)
		}
	}()
	return db.Close()
}
