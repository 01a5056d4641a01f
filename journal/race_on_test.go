//go:build race

package journal

// raceEnabled: the race detector slows the crash simulation ~8x.
const raceEnabled = true
