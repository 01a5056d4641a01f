package vfsutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The modes of what pgq keeps on disk: its owner's only, whatever the
// process's umask.
const (
	DirMode  os.FileMode = 0o700
	FileMode os.FileMode = 0o600
)

// OwnerOnly wraps fs (vfs.Default when nil) so that every directory and
// file created through it is its owner's only: MkdirAll makes each
// directory it creates DirMode, and Create, OpenReadWrite, ReuseForWrite
// and Lock leave the file FileMode, whatever the umask (which Pebble's
// 0666 and os.MkdirAll's perm are subject to). A file is chmodded through
// its descriptor right after it is opened, before anything is written to
// it; a directory right after it is made, before anything is created in
// it. A file or directory the wrapped FS gives no descriptor for (a
// vfs.MemFS) is left as it is, unless fs is the operating system's, where
// the path is chmodded. Wrapping an OwnerOnly FS returns it unchanged.
//
// A failed chmod fails the operation (the file is closed; the error names
// it), so a store that treats a failed create as fail-stop does the same
// here.
func OwnerOnly(fs vfs.FS) vfs.FS {
	if fs == nil {
		fs = vfs.Default
	}
	if o, ok := fs.(*ownerFS); ok {
		return o
	}
	return &ownerFS{FS: fs, os: osBacked(fs)}
}

// IsDefault reports whether fs is the operating system's FS, alone or
// under OwnerOnly (whose files are the wrapped FS's own): a caller may
// then rely on what vfs.Default's files promise (a Write that leaves its
// buffer alone).
func IsDefault(fs vfs.FS) bool {
	if o, ok := fs.(*ownerFS); ok {
		fs = o.FS
	}
	return fs == vfs.Default
}

// osBacked reports whether fs ends, through its Unwrap chain, at the
// operating system's FS: its paths are then the machine's.
func osBacked(fs vfs.FS) bool {
	for fs != nil {
		if fs == vfs.Default {
			return true
		}
		fs = fs.Unwrap()
	}
	return false
}

type ownerFS struct {
	vfs.FS
	os bool // the wrapped FS is the operating system's (osBacked)
}

// Unwrap returns the wrapped FS.
func (o *ownerFS) Unwrap() vfs.FS { return o.FS }

func (o *ownerFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := o.FS.Create(name, category)
	return o.own(f, name, err)
}

func (o *ownerFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := o.FS.OpenReadWrite(name, category, opts...)
	return o.own(f, name, err)
}

func (o *ownerFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := o.FS.ReuseForWrite(oldname, newname, category)
	return o.own(f, newname, err)
}

// Lock creates the lock file FileMode first when it is missing. An
// existing one is left alone: opening and closing another descriptor of
// a file this process holds an fcntl lock on would release the lock.
func (o *ownerFS) Lock(name string) (io.Closer, error) {
	if _, err := o.FS.Stat(name); errors.Is(err, os.ErrNotExist) {
		f, err := o.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("create lock file %s: %w", name, err)
		}
	}
	return o.FS.Lock(name)
}

// MkdirAll creates dir and its missing parents DirMode. Directories that
// were there are not changed (TightenTree tightens a data dir's).
func (o *ownerFS) MkdirAll(dir string, _ os.FileMode) error {
	var missing []string
	for d := dir; ; {
		if _, err := o.FS.Stat(d); !errors.Is(err, os.ErrNotExist) {
			break // there (or not statable: MkdirAll reports it)
		}
		missing = append(missing, d)
		parent := o.FS.PathDir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if err := o.FS.MkdirAll(dir, DirMode); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := o.ownDir(missing[i]); err != nil {
			return err
		}
	}
	return nil
}

// own makes the file just opened FileMode.
func (o *ownerFS) own(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	if err := o.chmod(f, name, FileMode); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// ownDir makes the directory dir DirMode.
func (o *ownerFS) ownDir(dir string) error {
	d, err := o.FS.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("make directory %s its owner's only: %w", dir, err)
	}
	err = o.chmod(d, dir, DirMode)
	if cerr := d.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("make directory %s its owner's only: %w", dir, cerr)
	}
	return err
}

// chmod sets f's permission bits to mode unless they are already: through
// its descriptor, or its path when the FS is the operating system's and
// gives none.
func (o *ownerFS) chmod(f vfs.File, name string, mode os.FileMode) error {
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("make %s its owner's only: %w", name, err)
	}
	if info.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky) == mode {
		return nil
	}
	switch fd := f.Fd(); {
	case fd != vfs.InvalidFd:
		err = fchmod(fd, mode)
	case o.os:
		err = os.Chmod(name, mode)
	default:
		return nil // a file system without modes (vfs.MemFS)
	}
	if err != nil {
		return fmt.Errorf("make %s its owner's only: %w", name, err)
	}
	return nil
}

// Tightened is what TightenTree changed.
type Tightened struct {
	// Count of files and directories whose mode was tightened.
	Count int
	// Example is the first of them; "" when Count is 0.
	Example string
}

// TightenTree makes root and every directory under it DirMode and every
// regular file FileMode, where the mode grants anything to the group or
// others (or has a setuid, setgid or sticky bit): what a pgq older than
// OwnerOnly left under its data dir (it made them 0755 and 0644 under
// umask 022). A stricter mode is left alone; so are symbolic links (not
// followed), sockets and the like. It walks the operating system's file
// system, not a vfs.FS. A missing root is no error.
//
// It goes on after a failure (a directory it cannot read or a file it
// cannot chmod, e.g. a mount point owned by another user) and returns the
// first failure, naming the path, with what it did change.
func TightenTree(root string) (Tightened, error) {
	var t Tightened
	if runtime.GOOS == "windows" {
		return t, nil // no Unix modes to tighten
	}
	var first error
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			if first == nil {
				first = fmt.Errorf("make %s its owner's only: %w", path, err)
			}
			return nil // WalkDir skips an unreadable directory
		}
		want := FileMode
		switch {
		case d.IsDir():
			want = DirMode
		case !d.Type().IsRegular():
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile
		}
		if err == nil && info.Mode()&(0o077|os.ModeSetuid|os.ModeSetgid|os.ModeSticky) == 0 {
			return nil
		}
		if err == nil {
			err = os.Chmod(path, want)
		}
		if err != nil {
			if first == nil {
				first = fmt.Errorf("make %s its owner's only: %w", path, err)
			}
			return nil
		}
		t.Count++
		if t.Example == "" {
			t.Example = path
		}
		return nil
	})
	if first == nil {
		first = err
	}
	return t, first
}
