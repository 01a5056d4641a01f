package main

import (
	"github.com/pgq-dev/pgq/format"
)

// FormatFlags pick the rendering of changes (package format); the bridges
// and `pgq consume` embed them, each with its own environment prefix
// (envprefix on the embedding field).
type FormatFlags struct {
	Format     string `default:"pgq" enum:"pgq,debezium,cloudevents" env:"FORMAT" help:"Format of the changes: pgq (pgq's own JSON), debezium (Debezium's change-event values; a bridge keys them as Debezium does) or cloudevents (CloudEvents 1.0: the Kafka and JetStream bridges in binary mode with ce-* headers, the webhook and consume as structured JSON)."`
	FormatDB   string `name:"format-db" env:"FORMAT_DB" help:"Database name for Debezium's source.db and the CloudEvents source."`
	FormatSlot string `name:"format-slot" env:"FORMAT_SLOT" help:"Slot name for the CloudEvents source (/pgq/<db>/<slot>)."`
}

// options parses the flags; a bad --format is a usage error.
func (f FormatFlags) options() (format.Format, format.Options, error) {
	fm, err := format.Parse(f.Format)
	if err != nil {
		return 0, format.Options{}, usage(err)
	}
	return fm, format.Options{Database: f.FormatDB, Slot: f.FormatSlot}, nil
}
