// Package vfsutil holds the file-system steps that pgq's stores share on
// top of pebble's vfs.FS:
//
//   - SyncDir fsyncs a directory so that a file created, renamed or
//     removed in it survives a crash.
//   - OwnerOnly wraps a vfs.FS so that every directory it creates is 0700
//     and every file it creates or opens for writing is 0600, whatever
//     the process's umask: pgq's data dir holds the watermark secret,
//     backfill where clauses, row keys and every change of the database,
//     which are its owner's only. Files are chmodded through their
//     descriptor before anything is written to them, directories before
//     anything is created in them.
//   - DropCache advises the kernel to drop a file's pages from the page
//     cache once they are on disk (POSIX_FADV_DONTNEED on Linux, a no-op
//     elsewhere): the journal's sealed segments (internal/wal,
//     Options.DropSealed).
//   - TightenTree tightens, once at start, what an older pgq left under
//     its data dir (0755 directories and 0644 files under umask 022).
//
// It has no state and is safe for concurrent use.
package vfsutil
