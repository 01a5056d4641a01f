package server

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// freshDir is what Open found at Options.DataDir before creating anything
// there: fresh when it was missing or empty (made: missing), so that a
// start that fails before anything was journaled can remove what it made
// (removeUnused). With Options.FS set the stores live behind it and
// nothing is removed.
type freshDir struct{ fresh, made bool }

func inspectDataDir(dir string, ownFS bool) freshDir {
	if ownFS {
		return freshDir{}
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return freshDir{fresh: true, made: true}
	case err != nil:
		return freshDir{}
	}
	return freshDir{fresh: len(entries) == 0}
}

// unused reports whether this start made the data dir's contents and put
// nothing in them worth keeping: Open held the journal (its lock: no
// other pgq's files), which is empty, and no group or backfill exists.
// Called before the stores close.
func (s *Server) unused() bool {
	if !s.dataDir.fresh || s.journal == nil || s.journal.LastOffset() != 0 {
		return false
	}
	if s.consumers != nil && len(s.consumers.List(context.Background())) > 0 {
		return false
	}
	return s.backfills == nil || len(s.backfills.List()) == 0
}

// removeUnused removes, after a failed start that unused allowed, what
// this start created under the data dir (all of it: the dir was missing
// or empty), and the dir itself when it was missing. Called after the
// stores closed.
func (s *Server) removeUnused() {
	dir := s.o.DataDir
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			s.o.Logger.Warn("cannot remove what the failed start created in the data dir", "path", filepath.Join(dir, e.Name()), "error", err)
			return
		}
	}
	if s.dataDir.made {
		_ = os.Remove(dir)
	}
	s.o.Logger.Debug("the start failed before anything was journaled: removed what it created in the data dir", "data_dir", dir)
}
