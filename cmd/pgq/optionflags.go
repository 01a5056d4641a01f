package main

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"

	"github.com/pgq-dev/pgq/opterr"
)

// optionFlag is how the CLI sets a library option: its flag, and its
// environment variable ("" when it has none or a message never names it).
type optionFlag struct{ flag, env string }

// optionFlags maps the options the library's errors and log messages name (opterr.Option,
// in Go terms) to the CLI's flags: the one table by which pgq's errors
// speak in flag terms. An option missing here is printed by its Go name
// (TestOptionFlagsCoverLibrary lists the library's options).
var optionFlags = map[opterr.Option]optionFlag{
	"server.Options.DataDir":                  {"--data-dir", "PGQ_DATA_DIR"},
	"server.Options.HoldSlotFor":              {"--hold-slot-for", ""},
	"server.Options.Listen":                   {"--listen", "PGQ_LISTEN"},
	"server.Options.ProbeListen":              {"--probe-listen", "PGQ_PROBE_LISTEN"},
	"server.Options.AuthToken":                {"--auth-token", "PGQ_AUTH_TOKEN"},
	"server.Options.InsecureNoAuth":           {"--insecure-no-auth", ""},
	"server.TLSOptions.CertFile":              {"--tls-cert", ""},
	"server.TLSOptions.KeyFile":               {"--tls-key", ""},
	"server.TLSOptions.ClientCAFile":          {"--tls-client-ca", ""},
	"server.TLSOptions.ReloadInterval":        {"--tls-reload-interval", ""},
	"ingest.Options.PGURL":                    {"--pg-url", "PGQ_PG_URL"},
	"ingest.Options.Slot":                     {"--slot", "PGQ_SLOT"},
	"ingest.Options.Publication":              {"--publication", "PGQ_PUBLICATION"},
	"ingest.Options.CreateSlot":               {"--create-slot", ""},
	"ingest.Options.CreatePublication":        {"--create-publication", ""},
	"ingest.Options.AcceptGap":                {"--accept-gap", ""},
	"ingest.Options.Start":                    {"--start", ""},
	"ingest.Options.SlotLifecycle":            {"--slot-lifecycle", ""},
	"ingest.Options.SlotFailover":             {"--slot-failover", ""},
	"ingest.Options.SkipTablesWithoutKey":     {"--skip-tables-without-key", ""},
	"ingest.Options.NoReconnect":              {"--no-reconnect", ""},
	"ingest.Options.ReconnectGiveUp":          {"--reconnect-give-up", ""},
	"ingest.Options.ReconnectMin":             {"--reconnect-min", ""},
	"ingest.Options.ReconnectMax":             {"--reconnect-max", ""},
	"ingest.Options.MaxRecordBytes":           {"--max-record-bytes", ""},
	"ingest.Options.ReceiveCoalesce":          {"--receive-coalesce", ""},
	"ingest.Options.InitialLoad":              {"--initial-load", ""},
	"ingest.InitialLoad.Parallelism":          {"--initial-load-parallelism", ""},
	"ingest.DropSlot(force)":                  {"--force", ""},
	"ingest.InstallDDLCapture(publication)":   {"--publication", ""},
	"consumers.RetentionOptions":              {"--retain-*", ""},
	"consumers.RetentionOptions.MaxAge":       {"--retain-max-age", ""},
	"consumers.RetentionOptions.MinAge":       {"--retain-min-age", ""},
	"consumers.RetentionOptions.MaxBytes":     {"--retain-max-bytes", ""},
	"consumers.ManagerOptions.HoldSlotMaxLag": {"--hold-slot-max-lag", ""},
	"jetstream.Options.CreateStream":          {"--create-stream", ""},
	"kafka.Options.CreateTopics":              {"--create-topics", ""},
	"kafka.Options.SchemaChangeTopic":         {"--schema-change-topic", "PGQ_BRIDGE_SCHEMA_CHANGE_TOPIC"},
	"jetstream.Options.SchemaChangeSubject":   {"--schema-change-subject", "PGQ_BRIDGE_SCHEMA_CHANGE_SUBJECT"},
	"httpapi.Limits.MaxConns":                 {"--http-max-conns", ""},
	"client.TLSOptions.CAFile":                {"--ca-cert", "PGQ_CA_CERT"},
	"client.TLSOptions.CertFile":              {"--client-cert", "PGQ_CLIENT_CERT"},
	"client.TLSOptions.KeyFile":               {"--client-key", "PGQ_CLIENT_KEY"},
	// Log messages name the function that installs DDL capture.
	"ingest.InstallDDLCapture on publication": {"pgq ddl install --publication", ""},
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
	cliTerms := e.Render(flagTerm)
	return strings.Replace(s, goTerms, cliTerms, 1)
}

// flagTerm is how the CLI names option o: its flag ("--create-slot"),
// with its environment variable where env asks and it has one
// ("--data-dir or PGQ_DATA_DIR"), its Go name when optionFlags lacks it.
func flagTerm(o opterr.Option, env bool) string {
	f, ok := optionFlags[o]
	switch {
	case !ok:
		return string(o)
	case env && f.env != "":
		return f.flag + " or " + f.env
	}
	return f.flag
}

// logTerms says the library's log messages in flag terms: each option of
// optionFlags by its flag, the longest names first so that a field is
// not taken for its type ("consumers.RetentionOptions.MaxAge").
var logTerms = func() *strings.Replacer {
	names := make([]opterr.Option, 0, len(optionFlags))
	for o := range optionFlags {
		names = append(names, o)
	}
	slices.SortFunc(names, func(a, b opterr.Option) int { return cmp.Or(len(b)-len(a), strings.Compare(string(a), string(b))) })
	var pairs []string
	for _, o := range names {
		pairs = append(pairs, string(o), optionFlags[o].flag)
	}
	return strings.NewReplacer(pairs...)
}()

// flagTermsHandler writes the library's log records in flag terms: the
// message through logTerms, an error attribute through inFlagTerms.
type flagTermsHandler struct{ slog.Handler }

func (h flagTermsHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, logTerms.Replace(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Value.Kind() == slog.KindAny {
			a.Value = slog.StringValue(inFlagTerms(err))
		}
		out.AddAttrs(a)
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h flagTermsHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return flagTermsHandler{h.Handler.WithAttrs(as)}
}

func (h flagTermsHandler) WithGroup(name string) slog.Handler {
	return flagTermsHandler{h.Handler.WithGroup(name)}
}
