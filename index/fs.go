package index

import (
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// watchFS wraps the FS that Pebble is given (Options.FS). It times every
// fsync of a file or directory (Options.OnSync, the slow-fsync warning)
// and reports every failed write-side file operation (create, write,
// preallocate, sync) to onFail, which makes the index fail-stop until Heal
// reopens Pebble: after such an error Pebble's WAL stays broken (its
// flusher keeps the first error), and a write that entered Pebble after it
// could fail while others wait on it forever, so no write must.
//
// Every method not overridden here is the wrapped FS's.
type watchFS struct {
	vfs.FS
	onSync func(path string, d time.Duration, err error)
	onFail func(op, path string, err error)
}

func (fs *watchFS) wrap(f vfs.File, path string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &watchFile{File: f, fs: fs, path: path}, nil
}

func (fs *watchFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil {
		fs.onFail("create", name, err)
	}
	return fs.wrap(f, name, err)
}

func (fs *watchFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	return fs.wrap(f, name, err)
}

func (fs *watchFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	if err != nil {
		fs.onFail("open for writing", name, err)
	}
	return fs.wrap(f, name, err)
}

func (fs *watchFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	return fs.wrap(f, name, err)
}

func (fs *watchFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		fs.onFail("reuse for writing", newname, err)
	}
	return fs.wrap(f, newname, err)
}

// Unwrap returns the wrapped FS (see vfs.Root).
func (fs *watchFS) Unwrap() vfs.FS { return fs.FS }

// watchFile is a file of a watchFS.
type watchFile struct {
	vfs.File
	fs   *watchFS
	path string
}

func (f *watchFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	if err != nil {
		f.fs.onFail("write", f.path, err)
	}
	return n, err
}

func (f *watchFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if err != nil {
		f.fs.onFail("write", f.path, err)
	}
	return n, err
}

func (f *watchFile) Preallocate(offset, length int64) error {
	err := f.File.Preallocate(offset, length)
	if err != nil {
		f.fs.onFail("preallocate", f.path, err)
	}
	return err
}

func (f *watchFile) synced(start time.Time, err error) {
	f.fs.onSync(f.path, time.Since(start), err)
	if err != nil {
		f.fs.onFail("fsync", f.path, err)
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
