//go:build unix

package server

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/backfill"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/syncbuf"
)

// looseModes walks dir and returns every directory that is not 0700 and
// every file that is not 0600 (with its mode), and how many it saw.
func looseModes(t *testing.T, dir string) (loose []string, seen int) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // a file Pebble or the journal removed meanwhile
			}
			return err
		}
		info, err := d.Info()
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		seen++
		if m := info.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky); m != want {
			loose = append(loose, p+" "+m.String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return loose, seen
}

// TestDataDirOwnerOnly: under umask 022, a pgq started on a fresh data
// dir leaves only 0700 directories and 0600 files in it after ingest (a
// transaction big enough to spill and be journaled in parts) and a
// backfill (whose store holds the watermark secret, the where clause and
// row keys); a data dir an older pgq left loose (0755, 0644) is tightened
// at the next start, which logs it once.
func TestDataDirOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)

	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE secrets (id int PRIMARY KEY, v text)`,
		`INSERT INTO secrets SELECT g, repeat('s', 100) FROM generate_series(1, 50) g`)
	dir := filepath.Join(t.TempDir(), "data")
	startLogged := func(logs *syncbuf.Buffer) (*Server, func() error) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		s, err := Open(ctx, Options{DataDir: dir, Listen: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(logs, nil)),
			Ingest: ingest.Options{PGURL: db.URL, Slot: "perm_" + db.Name, Publication: "perm", CreateSlot: true, CreatePublication: "all",
				MaxRecordBytes: ingest.MinMaxRecordBytes}})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		return s, func() error { cancel(); return <-done }
	}

	logs := &syncbuf.Buffer{}
	s, stop := startLogged(logs)
	deadline := time.Now().Add(20 * time.Second)
	for s.ingester.Status().ProtoVersion == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	db.Exec(t, `INSERT INTO secrets SELECT g, repeat('t', 200) FROM generate_series(51, 150) g`) // ~20 KiB: parts
	db.Exec(t, `INSERT INTO secrets VALUES (151, 'one')`)
	waitRecords(t, s, 2)
	bf, err := s.backfills.Start(context.Background(), backfill.Request{Tables: []string{"public.secrets"}, Where: "id <= 100", ChunkSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := s.backfills.Get(bf.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == backfill.StateDone {
			break
		}
		if st.State != backfill.StateRunning || time.Now().After(deadline) {
			t.Fatalf("backfill %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, sub := range []string{"journal", "index", "backfill", "spill"} {
		if _, err := os.Stat(filepath.Join(dir, sub)); err != nil {
			t.Fatalf("data dir lacks %s: %v", sub, err)
		}
	}
	if loose, seen := looseModes(t, dir); len(loose) > 0 || seen < 15 {
		t.Fatalf("while running (%d entries), not owner-only: %v", seen, loose)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if loose, _ := looseModes(t, dir); len(loose) > 0 {
		t.Fatalf("after stop, not owner-only: %v", loose)
	}
	if strings.Contains(logs.String(), "owner's only") {
		t.Fatalf("a fresh data dir had something to tighten:\n%s", logs)
	}

	// What an older pgq left: 0755 directories, 0644 files.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		t.Fatal(err)
	}
	logs = &syncbuf.Buffer{}
	_, stop = startLogged(logs)
	if loose, _ := looseModes(t, dir); len(loose) > 0 {
		t.Errorf("after a start on an older data dir, not owner-only: %v", loose)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := strings.Count(logs.String(), "its owner's only"); n != 1 || !strings.Contains(logs.String(), "example="+dir) {
		t.Fatalf("want one log line naming the data dir, got %d:\n%s", n, logs)
	}

	// The next start finds nothing to tighten and says nothing.
	logs = &syncbuf.Buffer{}
	_, stop = startLogged(logs)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if strings.Contains(logs.String(), "owner's only") {
		t.Fatalf("a third start tightened again:\n%s", logs)
	}
}
