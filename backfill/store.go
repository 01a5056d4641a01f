package backfill

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/internal/pebblefs"
	"github.com/pgq-dev/pgq/internal/vfsutil"
)

// ErrStoreFailed wraps every error of a write refused or lost because the
// backfill store's disk failed (see store). It wraps api.ErrUnavailable:
// the HTTP API answers 503.
var ErrStoreFailed = api.Errorf(api.ErrUnavailable, "backfill store failed")

// store is the Pebble store of backfills, fail-stop on a failing disk as
// the index is (package pebblefs): a failed write-side file operation
// (WatchFS) or Pebble's Fatalf (a failed commit or MANIFEST write, which
// Pebble reports only there, then returns nil from the commit) marks it
// failed; from then on no write enters Pebble, and the next write first
// heals it: it closes the failed Pebble, probes the disk and opens Pebble
// again (replaying its WAL). Reads of the store happen only in Open.
//
// db is used under the Manager's mutex (every write and the heal run
// under it); the failure mark is lock-free, and fail may be called from
// Pebble's goroutines.
type store struct {
	dir  string
	fs   vfs.FS // Options.FS (or vfs.Default) wrapped by vfsutil.OwnerOnly and pebblefs.WatchFS
	lock *pebble.Lock
	log  *slog.Logger
	db   *pebble.DB // nil after a failed reopen

	broken atomic.Bool   // set by fail, cleared by a reopen
	gen    atomic.Uint64 // counts fail calls: a commit across which it changed failed
	mu     sync.Mutex    // guards cause; a leaf lock
	cause  error         // first failure since Pebble was (re)opened
}

func openStore(dir string, base vfs.FS, log *slog.Logger) (*store, error) {
	base = vfsutil.OwnerOnly(base) // nil: vfs.Default
	s := &store{dir: dir, log: log}
	s.fs = &pebblefs.WatchFS{FS: base, OnFail: func(op, path string, err error) {
		s.fail(fmt.Errorf("%s %s: %w", op, path, err))
	}}
	if err := s.fs.MkdirAll(dir, vfsutil.DirMode); err != nil {
		return nil, fmt.Errorf("backfill: create store %s: %w", dir, err)
	}
	lock, err := pebble.LockDirectory(dir, s.fs)
	if err != nil {
		return nil, fmt.Errorf("backfill: lock store %s: %w", dir, err)
	}
	s.lock = lock
	if err := s.open(); err != nil {
		_ = lock.Close()
		return nil, err
	}
	return s, nil
}

func (s *store) open() error {
	db, err := pebble.Open(s.dir, &pebble.Options{FS: s.fs, Lock: s.lock, Logger: storeLogger{s}})
	if err == nil && s.broken.Load() {
		err = s.err() // Pebble reported a fatal error while opening but went on
	}
	if err != nil {
		if db != nil {
			_ = pebblefs.CloseDB(db)
		}
		return fmt.Errorf("backfill: open store %s: %w", s.dir, err)
	}
	s.db = db
	return nil
}

// fail marks the store failed on cause. Any goroutine, any lock held.
func (s *store) fail(cause error) {
	s.mu.Lock()
	first := s.cause == nil
	if first {
		s.cause = cause
	}
	s.gen.Add(1)
	s.broken.Store(true)
	s.mu.Unlock()
	if first {
		s.log.Error("backfill store: storage failed; backfill progress is not stored until it is reopened",
			"dir", s.dir, "error", cause.Error())
	}
}

// err is nil unless the store failed: then ErrStoreFailed with the cause.
func (s *store) err() error {
	if !s.broken.Load() {
		return nil
	}
	s.mu.Lock()
	cause := s.cause
	s.mu.Unlock()
	if cause == nil {
		return ErrStoreFailed
	}
	return fmt.Errorf("%w: %w", ErrStoreFailed, cause)
}

// heal reopens a failed (or not reopened) Pebble; it reports whether it
// did. It fails while the disk still fails a probe write.
func (s *store) heal() (bool, error) {
	if !s.broken.Load() && s.db != nil {
		return false, nil
	}
	if s.db != nil {
		if err := pebblefs.CloseDB(s.db); err != nil {
			s.log.Warn("backfill store: closing the failed pebble", "error", err.Error())
		}
		s.db = nil
	}
	if err := pebblefs.Probe(s.fs, s.dir); err != nil {
		return false, fmt.Errorf("%w: the disk still fails: %w", ErrStoreFailed, err)
	}
	s.mu.Lock()
	cause := s.cause
	s.cause = nil
	s.broken.Store(false)
	s.mu.Unlock()
	if err := s.open(); err != nil {
		s.mu.Lock()
		if s.cause == nil {
			s.cause = cause
		}
		s.broken.Store(true)
		s.mu.Unlock()
		return false, fmt.Errorf("%w: reopen: %w", ErrStoreFailed, err)
	}
	s.log.Info("backfill store: reopened after a storage failure", "dir", s.dir)
	return true, nil
}

// commit writes the sets of fill in one synced batch, unless the store
// failed; a failure Pebble only reported through Fatalf during the commit
// makes it return an error too.
func (s *store) commit(fill func(b *pebble.Batch) error) error {
	if err := s.err(); err != nil {
		return err
	}
	if s.db == nil {
		return ErrStoreFailed
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := fill(b); err != nil {
		return err
	}
	gen := s.gen.Load()
	if err := b.Commit(pebble.Sync); err != nil {
		return err
	}
	if s.gen.Load() != gen {
		if err := s.err(); err != nil {
			return err
		}
		return ErrStoreFailed
	}
	return nil
}

func (s *store) close() error {
	var err error
	if s.db != nil {
		err = pebblefs.CloseDB(s.db)
		s.db = nil
	}
	if lerr := s.lock.Close(); err == nil {
		err = lerr
	}
	return err
}

// storeLogger routes Pebble's log lines to slog (Infof at Debug). Its
// Fatalf marks the store failed and returns: Pebble expects Fatalf not to
// return and its default exits the process, but a failing backfill store
// must not take pgq down.
type storeLogger struct{ s *store }

func (l storeLogger) Infof(format string, args ...any) {
	l.s.log.Debug(fmt.Sprintf(format, args...), "source", "pebble", "component", "backfill")
}

func (l storeLogger) Errorf(format string, args ...any) {
	l.s.log.Error(fmt.Sprintf(format, args...), "source", "pebble", "component", "backfill")
}

func (l storeLogger) Fatalf(format string, args ...any) {
	l.s.fail(errors.New(fmt.Sprintf(format, args...)))
}
