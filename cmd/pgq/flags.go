package main

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
)

// ByteSize is a flag in bytes that also takes units: 16MiB, 1GB, 512KiB,
// 4096 (decimal kB/MB/GB/TB and binary KiB/MiB/GiB/TiB).
type ByteSize int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// ParseByteSize parses a size such as "16MiB", "1.5GB" or "4096".
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || v*float64(mult) > math.MaxInt64 {
		return 0, fmt.Errorf("invalid size %q: want bytes or a number with KiB, MiB, GiB, TiB, kB, MB, GB or TB", s)
	}
	return ByteSize(v * float64(mult)), nil
}

// Decode implements kong.MapperValue.
func (b *ByteSize) Decode(ctx *kong.DecodeContext) error {
	var s string
	if err := ctx.Scan.PopValueInto("size", &s); err != nil {
		return err
	}
	v, err := ParseByteSize(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// Duration is a flag that takes Go durations plus days: 7d, 1d12h, 90s.
type Duration time.Duration

// ParseDuration parses a Go duration, allowing a leading number of days
// ("7d", "1.5d", "1d12h").
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("invalid duration %q: want e.g. 7d, 36h, 90s", s)
	}
	var days float64
	if i := strings.IndexByte(t, 'd'); i > 0 {
		v, err := strconv.ParseFloat(t[:i], 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("invalid duration %q: want e.g. 7d, 36h, 90s", s)
		}
		days, t = v, t[i+1:]
	}
	var rest time.Duration
	if t != "" {
		d, err := time.ParseDuration(t)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: want e.g. 7d, 36h, 90s", s)
		}
		rest = d
	}
	return time.Duration(days*float64(24*time.Hour)) + rest, nil
}

// Decode implements kong.MapperValue.
func (d *Duration) Decode(ctx *kong.DecodeContext) error {
	var s string
	if err := ctx.Scan.PopValueInto("duration", &s); err != nil {
		return err
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// D is the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// versionString is what `pgq version` and `--version` print: the module
// version and the commit it was built from (Go's build information).
func versionString() string {
	v, commit, modified := version, "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "dev" && bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	out := "pgq " + v
	if commit != "" {
		if len(commit) > 12 {
			commit = commit[:12]
		}
		out += " commit " + commit
		if modified {
			out += " (modified)"
		}
	}
	return out + " " + runtime.Version()
}

// VersionCmd is `pgq version`.
type VersionCmd struct{}

// Run prints the version.
func (VersionCmd) Run() error {
	_, err := fmt.Fprintln(stdout, versionString())
	return err
}
