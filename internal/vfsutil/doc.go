// Package vfsutil holds the file-system steps that pgq's stores share on
// top of pebble's vfs.FS: today, fsyncing a directory so that a file
// created, renamed or removed in it survives a crash. It has no state and
// is safe for concurrent use.
package vfsutil
