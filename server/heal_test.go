package server

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/consumers"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// TestIndexHealsItself: the index's disk fails under load. Ingest goes on
// (the journal is the truth), the index reports itself stale and answers
// LSN lookups with an error instead of stale offsets; once the disk works
// again the healer catches it up from the journal without a restart.
func TestIndexHealsItself(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE ih (id int PRIMARY KEY)`)
	dir := t.TempDir()
	indexDir := filepath.Join(dir, "index")
	var broken atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if broken.Load() && strings.HasPrefix(op.Path, indexDir) &&
			(op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt || op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpCreate) {
			return syscall.EIO
		}
		return nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Open(ctx, Options{DataDir: dir, Listen: "127.0.0.1:0", FS: fs, Ingest: ingest.Options{
		PGURL: db.URL, Slot: "ih_" + db.Name, Publication: "ih", CreateSlot: true, CreatePublication: "all",
	}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("streaming", func() bool { return s.ingester.Status().Connected })
	db.Exec(t, `INSERT INTO ih VALUES (1)`)
	waitRecords(t, s, 1)
	waitFor("index at 1", func() bool { return s.index.LastOffset() == 1 })

	broken.Store(true)
	// Derived index writes are not synced, so Pebble meets the broken disk
	// at the next synced write: a group's state.
	if _, err := s.consumers.Create(ctx, consumers.CreateRequest{Name: "g", From: "earliest"}); err == nil {
		t.Fatal("creating a group on a broken index disk succeeded")
	}
	db.Exec(t, `INSERT INTO ih VALUES (2)`, `INSERT INTO ih VALUES (3)`)
	waitRecords(t, s, 3)
	waitFor("index stale or failed", func() bool { st := s.index.Stats(); return st.Stale || st.Failed })
	db.Exec(t, `INSERT INTO ih VALUES (4)`, `INSERT INTO ih VALUES (5)`)
	waitRecords(t, s, 5)
	last, err := s.journal.Read(5)
	if err != nil {
		t.Fatal(err)
	}
	if s.index.LastOffset() >= 5 {
		t.Fatalf("the broken index indexed offset %d", s.index.LastOffset())
	}
	if _, err := s.index.SeekLSN(last.CommitLSN); err == nil {
		t.Fatal("SeekLSN past the indexed end answered while the index is broken")
	}
	resp, err := http.Get("http://" + s.Addr() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Index struct {
			Stale bool `json:"stale"`
		} `json:"index"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()

	broken.Store(false)
	waitFor("index healed", func() bool {
		st := s.index.Stats()
		return !st.Stale && st.Heals >= 1 && s.index.LastOffset() == s.journal.LastOffset()
	})
	off, err := s.index.SeekLSN(last.CommitLSN)
	if err != nil || off != pgq.Offset(5) {
		t.Fatalf("SeekLSN after the heal: %d %v, want 5", off, err)
	}
	db.Exec(t, `INSERT INTO ih VALUES (6)`)
	waitRecords(t, s, 6)
	waitFor("index follows again", func() bool { return s.index.LastOffset() == 6 })
}
