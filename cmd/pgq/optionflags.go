package main

import (
	"strings"

	"github.com/pgq-dev/pgq/opterr"
)

// optionFlag is how the CLI sets a library option: its flag, and its
// environment variable ("" when it has none or a message never names it).
type optionFlag struct{ flag, env string }

// optionFlags maps the options the library's errors name (opterr.Option,
// in Go terms) to the CLI's flags: the one table by which pgq's errors
// speak in flag terms. An option missing here is printed by its Go name
// (TestOptionFlagsCoverLibrary lists the library's options).
var optionFlags = map[opterr.Option]optionFlag{
	"server.Options.DataDir":                {"--data-dir", "PGQ_DATA_DIR"},
	"server.Options.HoldSlotFor":            {"--hold-slot-for", ""},
	"server.Options.ProbeListen":            {"--probe-listen", ""},
	"server.Options.AuthToken":              {"--auth-token", "PGQ_AUTH_TOKEN"},
	"server.Options.InsecureNoAuth":         {"--insecure-no-auth", ""},
	"server.TLSOptions.CertFile":            {"--tls-cert", ""},
	"server.TLSOptions.KeyFile":             {"--tls-key", ""},
	"server.TLSOptions.ClientCAFile":        {"--tls-client-ca", ""},
	"server.TLSOptions.ReloadInterval":      {"--tls-reload-interval", ""},
	"ingest.Options.PGURL":                  {"--pg-url", "PGQ_PG_URL"},
	"ingest.Options.Slot":                   {"--slot", "PGQ_SLOT"},
	"ingest.Options.Publication":            {"--publication", "PGQ_PUBLICATION"},
	"ingest.Options.CreateSlot":             {"--create-slot", ""},
	"ingest.Options.CreatePublication":      {"--create-publication", ""},
	"ingest.Options.AcceptGap":              {"--accept-gap", ""},
	"ingest.Options.Start":                  {"--start", ""},
	"ingest.Options.SlotLifecycle":          {"--slot-lifecycle", ""},
	"ingest.Options.SlotFailover":           {"--slot-failover", ""},
	"ingest.Options.SkipTablesWithoutKey":   {"--skip-tables-without-key", ""},
	"ingest.Options.NoReconnect":            {"--no-reconnect", ""},
	"ingest.Options.ReconnectGiveUp":        {"--reconnect-give-up", ""},
	"ingest.Options.ReconnectMin":           {"--reconnect-min", ""},
	"ingest.Options.ReconnectMax":           {"--reconnect-max", ""},
	"ingest.Options.MaxRecordBytes":         {"--max-record-bytes", ""},
	"ingest.Options.ReceiveCoalesce":        {"--receive-coalesce", ""},
	"ingest.DropSlot(force)":                {"--force", ""},
	"ingest.InstallDDLCapture(publication)": {"--publication", ""},
	"consumers.RetentionOptions":            {"--retain-*", ""},
	"consumers.RetentionOptions.MaxAge":     {"--retain-max-age", ""},
	"consumers.RetentionOptions.MinAge":     {"--retain-min-age", ""},
}

// inFlagTerms is err's text with the options its opterr.Error names (in
// the library's Go terms) said as the CLI's flags, "--create-slot",
// "--data-dir or PGQ_DATA_DIR".
func inFlagTerms(err error) string {
	s := err.Error()
	e, ok := opterr.Find(err)
	if !ok {
		return s
	}
	goTerms := e.Render(func(o opterr.Option, _ bool) string { return string(o) })
	cliTerms := e.Render(func(o opterr.Option, env bool) string {
		f, ok := optionFlags[o]
		switch {
		case !ok:
			return string(o)
		case env && f.env != "":
			return f.flag + " or " + f.env
		}
		return f.flag
	})
	return strings.Replace(s, goTerms, cliTerms, 1)
}
