//go:build unix

package vfsutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// noErrors injects no error: errorfs as a plain wrapper.
type noErrors struct{}

func (noErrors) MaybeError(errorfs.Op) error { return nil }
func (noErrors) String() string              { return "none" }

// umask sets the process's umask for the test and restores it after.
func umask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// modeOf is path's permission bits (with setuid, setgid, sticky).
func modeOf(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
}

// treeModes walks root and returns every directory's and regular file's
// mode by path.
func treeModes(t *testing.T, root string) map[string]os.FileMode {
	t.Helper()
	modes := map[string]os.FileMode{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Type().IsRegular() {
			modes[p] = modeOf(t, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return modes
}

// TestOwnerOnlyUnderUmask022 creates directories and files through every
// creating method of OwnerOnly (and through a Pebble store on it) under
// umask 022: each is 0700 or 0600, where vfs.Default alone leaves 0755 and
// 0644.
func TestOwnerOnlyUnderUmask022(t *testing.T) {
	umask(t, 0o022)
	top := t.TempDir()
	if err := os.Chmod(top, 0o751); err != nil {
		t.Fatal(err)
	}

	// The baseline the wrapper changes: plain vfs.Default follows the umask.
	plain := filepath.Join(top, "plain")
	if err := vfs.Default.MkdirAll(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := vfs.Default.Create(filepath.Join(plain, "f"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if m := modeOf(t, plain); m != 0o755 {
		t.Fatalf("plain directory %o, want 0755 (is the umask 022?)", m)
	}
	if m := modeOf(t, filepath.Join(plain, "f")); m != 0o644 {
		t.Fatalf("plain file %o, want 0644", m)
	}

	for _, tc := range []struct {
		name string
		fs   vfs.FS
	}{
		{"default", OwnerOnly(nil)},
		{"errorfs", OwnerOnly(errorfs.Wrap(vfs.Default, noErrors{}))}, // a wrapper in between
		{"twice", OwnerOnly(OwnerOnly(vfs.Default))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ofs := tc.fs
			root := filepath.Join(top, tc.name)
			dir := filepath.Join(root, "a", "b")
			if err := ofs.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			create := func(f vfs.File, err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.Write([]byte("secret")); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			create(ofs.Create(filepath.Join(dir, "created"), vfs.WriteCategoryUnspecified))
			create(ofs.OpenReadWrite(filepath.Join(dir, "opened"), vfs.WriteCategoryUnspecified))
			// A file left 0644 by someone else, reused and opened for writing.
			if err := os.WriteFile(filepath.Join(dir, "old"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			create(ofs.ReuseForWrite(filepath.Join(dir, "old"), filepath.Join(dir, "reused"), vfs.WriteCategoryUnspecified))
			if err := os.WriteFile(filepath.Join(dir, "loose"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			create(ofs.OpenReadWrite(filepath.Join(dir, "loose"), vfs.WriteCategoryUnspecified))
			lk, err := ofs.Lock(filepath.Join(dir, "LOCK"))
			if err != nil {
				t.Fatal(err)
			}
			defer lk.Close()
			// A Pebble store on it: its MANIFEST, WAL, OPTIONS, LOCK and
			// tables.
			db, err := pebble.Open(filepath.Join(root, "pebble"), &pebble.Options{FS: ofs})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Set([]byte("k"), []byte("v"), pebble.Sync); err != nil {
				t.Fatal(err)
			}
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			modes := treeModes(t, root)
			if len(modes) < 12 {
				t.Fatalf("only %d entries: %v", len(modes), modes)
			}
			for p, m := range modes {
				info, _ := os.Stat(p)
				want := FileMode
				if info.IsDir() {
					want = DirMode
				}
				if m != want {
					t.Errorf("%s: mode %o, want %o", p, m, want)
				}
			}
			if m := modeOf(t, top); m != 0o751 {
				t.Errorf("a parent that was there changed: %o", m)
			}
		})
	}
}

// TestOwnerOnlyLockKeepsLock: taking the lock of an existing lock file
// does not open another descriptor of it, so the fcntl lock this process
// holds is not released (a second process would then get it).
func TestOwnerOnlyLockKeepsLock(t *testing.T) {
	umask(t, 0o022)
	ofs := OwnerOnly(nil)
	name := filepath.Join(t.TempDir(), "LOCK")
	lk, err := ofs.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	if _, err := ofs.Lock(name); err == nil {
		t.Fatal("a second lock in the process succeeded")
	}
	if m := modeOf(t, name); m != FileMode {
		t.Fatalf("lock file %o, want 0600", m)
	}
	if err := lk.Close(); err != nil {
		t.Fatal(err)
	}
	lk, err = ofs.Lock(name)
	if err != nil {
		t.Fatalf("lock again after release: %v", err)
	}
}

// TestTightenTree tightens a data dir an older pgq left under umask 022
// (0755 directories, 0644 files), leaves what is stricter and what a
// symbolic link points to, and finds nothing the second time.
func TestTightenTree(t *testing.T) {
	umask(t, 0o022)
	top := t.TempDir()
	root := filepath.Join(top, "data")
	for _, d := range []string{"journal", "index", "backfill", "spill"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "journal"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "spill"), 0o2770); err != nil { // setgid
		t.Fatal(err)
	}
	files := map[string]os.FileMode{
		"journal/00000000000000000001": 0o644,
		"journal/LOCK":                 0o644,
		"backfill/000002.log":          0o644,
		"index/MANIFEST-000001":        0o640,
		"index/OPTIONS-000003":         0o400, // stricter: left alone
		"index/CURRENT":                0o600, // already right
	}
	for name, mode := range files {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(top, "outside")
	if err := os.WriteFile(outside, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}

	got, err := TightenTree(root)
	if err != nil {
		t.Fatal(err)
	}
	// root, index, backfill, spill, journal; four files.
	if got.Count != 9 || got.Example != root {
		t.Fatalf("tightened %+v, want 9 starting at %s", got, root)
	}
	want := map[string]os.FileMode{
		"": 0o700, "journal": 0o700, "index": 0o700, "backfill": 0o700, "spill": 0o700,
		"journal/00000000000000000001": 0o600, "journal/LOCK": 0o600, "backfill/000002.log": 0o600,
		"index/MANIFEST-000001": 0o600, "index/OPTIONS-000003": 0o400, "index/CURRENT": 0o600,
	}
	for name, w := range want {
		if m := modeOf(t, filepath.Join(root, name)); m != w {
			t.Errorf("%q: mode %o, want %o", name, m, w)
		}
	}
	if m := modeOf(t, outside); m != 0o644 {
		t.Errorf("the link's target outside the tree changed: %o", m)
	}
	if again, err := TightenTree(root); err != nil || again.Count != 0 {
		t.Fatalf("second walk: %+v, %v", again, err)
	}
	if none, err := TightenTree(filepath.Join(top, "missing")); err != nil || none.Count != 0 {
		t.Fatalf("missing root: %+v, %v", none, err)
	}
}
