package ingest_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/pgq-dev/pgq/internal/pgtest"
	"github.com/pgq-dev/pgq/internal/sidecar"
)

// TestDiskFull: under write load the journal's disk fills up (every write
// to a journal file fails with ENOSPC from some point on). pgq stops with
// "no space left on device", has confirmed nothing past its last durable
// record, and, once space is back and pgq is started again, the journal
// holds every row exactly once, in order.
func TestDiskFull(t *testing.T) {
	c := pgtest.Shared(t)
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE df (id int PRIMARY KEY, pad text)`)
	dir := t.TempDir()
	slot := slotName("pgq", db)
	journalDir := filepath.Join(dir, "journal")
	var full atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt || op.Kind == errorfs.OpCreate) &&
			strings.HasPrefix(op.Path, journalDir) {
			return syscall.ENOSPC
		}
		return nil
	}))
	r := startSidecar(t, db, dir, func(o *sidecar.Options) { o.FS = fs; o.SegmentSize = 64 << 10 })
	r.waitStreaming(t)

	// Write load: one row per transaction until told to stop.
	var next atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			id := next.Add(1)
			if err := c.Exec(t.Context(), db.Name, fmt.Sprintf(`INSERT INTO df VALUES (%d, repeat('x', 300))`, id)); err != nil {
				t.Errorf("insert %d: %v", id, err)
				return
			}
		}
	}()
	waitJournaled(t, dir, 50)
	full.Store(true)
	err := r.runErr(t)
	if err == nil || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("pgq on a full disk: %v, want a no space left on device error", err)
	}
	// Nothing past the durable journal was confirmed.
	full.Store(false) // reading back needs no space; the records are what fsync kept
	txs := records(t, dir)
	if len(txs) == 0 {
		t.Fatal("empty journal")
	}
	if conf := slotConfirmed(t, db, slot); conf > txs[len(txs)-1].EndLSN {
		t.Fatalf("slot confirmed %s past the journal's end %s", conf, txs[len(txs)-1].EndLSN)
	}

	// Space is back: start again while the load goes on, then stop it.
	r = startSidecar(t, db, dir, func(o *sidecar.Options) { o.SegmentSize = 64 << 10 })
	r.waitStreaming(t)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	var total int
	db.QueryRow(t, `SELECT count(*) FROM df`, &total)
	waitJournaled(t, dir, total)
	ids := idValues(t, records(t, dir))
	if len(ids) != total {
		t.Fatalf("journal has %d rows, the table %d", len(ids), total)
	}
	for i, id := range ids {
		if id != float64(i+1) {
			t.Fatalf("row %d of the journal is id %v: lost, duplicated or out of order", i+1, id)
		}
	}
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
}
