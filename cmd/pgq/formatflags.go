package main

import (
	"strings"

	"github.com/alecthomas/kong"

	"github.com/pgq-dev/pgq/format"
)

// FormatFlags pick the rendering of changes (package format); the bridges
// and `pgq consume` embed them, each with its own environment prefix
// (envprefix on the embedding field). The names --format accepts and
// their help come from package format's table (kongVars).
type FormatFlags struct {
	Format     string `default:"pgq" enum:"${formats}" env:"FORMAT" help:"Format of the changes: ${format_help}."`
	FormatDB   string `name:"format-db" env:"FORMAT_DB" help:"Database name for Debezium's source.db and the CloudEvents source (default: pgq's own, from its status)."`
	FormatSlot string `name:"format-slot" env:"FORMAT_SLOT" help:"Slot name for the CloudEvents source (/pgq/<db>/<slot>; default: pgq's own, from its status)."`
}

// kongVars are the variables the CLI's tags interpolate: the version and
// the formats of package format's table.
func kongVars(version string) kong.Vars {
	return kong.Vars{
		"version":     version,
		"formats":     strings.Join(format.Names(), ","),
		"format_help": format.HelpList(),
	}
}

// options parses the flags; a bad --format is a usage error.
func (f FormatFlags) options() (format.Format, format.Options, error) {
	fm, err := format.Parse(f.Format)
	if err != nil {
		return 0, format.Options{}, usage(err)
	}
	return fm, format.Options{Database: f.FormatDB, Slot: f.FormatSlot}, nil
}
