//go:build race

package wal

// raceEnabled: the race detector makes copying megabyte entries slow.
const raceEnabled = true
