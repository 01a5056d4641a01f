package main

import (
	"fmt"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/pgq-dev/pgq/format"
)

// FormatFlags pick the rendering of changes (package format); the bridges
// and `pgq consume` embed them, each with its own environment prefix
// (envprefix on the embedding field). The names --format accepts and
// their help come from package format's table (kongVars). The value
// modes (--decimal-handling-mode, --time-precision-mode,
// --interval-handling-mode, --hstore-handling-mode) take Debezium's names of its connector
// options and are parsed by package format (ParseDecimalMode, ...); only
// the debezium format reads them, the others ignore them.
type FormatFlags struct {
	Format       string `default:"pgq" enum:"${formats}" env:"FORMAT" help:"Format of the changes: ${format_help}."`
	FormatDB     string `name:"format-db" env:"FORMAT_DB" help:"Database name for Debezium's source.db and the CloudEvents source (default: pgq's own, from its status)."`
	FormatSlot   string `name:"format-slot" env:"FORMAT_SLOT" help:"Slot name for the CloudEvents source (/pgq/<db>/<slot>; default: pgq's own, from its status)."`
	DecimalMode  string `name:"decimal-handling-mode" default:"string" env:"DECIMAL_HANDLING_MODE" help:"With --format debezium, numeric and money values as Debezium's decimal.handling.mode: string (digits as a JSON string), precise (Kafka Connect's Decimal, base64 of the unscaled value; Debezium's default) or double (a JSON number)."`
	TimeMode     string `name:"time-precision-mode" default:"microseconds" env:"TIME_PRECISION_MODE" help:"With --format debezium, time and timestamp values as Debezium's time.precision.mode: microseconds (always) or adaptive (milliseconds for a declared precision of 0 to 3; Debezium's default)."`
	Schemas      bool   `name:"schemas" env:"SCHEMAS" help:"With --format debezium, each event and key as Kafka Connect's JSON converter writes it with schemas.enable=true (its default): {\"schema\":…,\"payload\":…}, Debezium's Connect schemas. Default: the payload alone (schemas.enable=false)."`
	IntervalMode string `name:"interval-handling-mode" default:"numeric" env:"INTERVAL_HANDLING_MODE" help:"With --format debezium, interval values as Debezium's interval.handling.mode: numeric (microseconds) or string (ISO 8601, P1Y2M3DT4H5M6.78S)."`
	HstoreMode   string `name:"hstore-handling-mode" default:"json" env:"HSTORE_HANDLING_MODE" help:"With --format debezium, hstore values as Debezium's hstore.handling.mode: json (a string of a JSON object; Debezium's default) or map (a JSON object, Kafka Connect's map)."`
	TxMetadata   bool   `name:"provide-transaction-metadata" env:"PROVIDE_TRANSACTION_METADATA" help:"With --format debezium, fill each event's transaction block (id, total_order, data_collection_order) as Debezium's provide.transaction.metadata=true; default: transaction is null, Debezium's default."`
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

// options parses the flags; a bad --format or value mode is a usage
// error naming its flag.
func (f FormatFlags) options() (format.Format, format.Options, error) {
	fm, err := format.Parse(f.Format)
	if err != nil {
		return 0, format.Options{}, usage(err)
	}
	o := format.Options{Database: f.FormatDB, Slot: f.FormatSlot, TransactionMetadata: f.TxMetadata, Schemas: f.Schemas}
	if o.Decimal, err = format.ParseDecimalMode(f.DecimalMode); err != nil {
		return 0, format.Options{}, usage(fmt.Errorf("--decimal-handling-mode: %w", err))
	}
	if o.Time, err = format.ParseTimePrecisionMode(f.TimeMode); err != nil {
		return 0, format.Options{}, usage(fmt.Errorf("--time-precision-mode: %w", err))
	}
	if o.Interval, err = format.ParseIntervalMode(f.IntervalMode); err != nil {
		return 0, format.Options{}, usage(fmt.Errorf("--interval-handling-mode: %w", err))
	}
	if o.Hstore, err = format.ParseHstoreMode(f.HstoreMode); err != nil {
		return 0, format.Options{}, usage(fmt.Errorf("--hstore-handling-mode: %w", err))
	}
	return fm, o, nil
}
