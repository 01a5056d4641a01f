package main

import (
	"context"
	"fmt"

	"github.com/pgq-dev/pgq/ingest"
)

// DDLCmd is `pgq ddl`.
type DDLCmd struct {
	Install   DDLInstallCmd   `cmd:"" help:"Install or upgrade the event triggers that journal schema changes as ddl changes (needs a superuser)."`
	Uninstall DDLUninstallCmd `cmd:"" help:"Remove them."`
}

type ddlFlags struct {
	PGURL string `name:"pg-url" required:"" env:"PGQ_PG_URL" help:"PostgreSQL URL of the database to capture."`
}

// DDLInstallCmd is `pgq ddl install`.
type DDLInstallCmd struct {
	ddlFlags
	Publication string `env:"PGQ_PUBLICATION" help:"Publication pgq streams: the proof table pgq_ddl.proof is added to it unless it publishes it already (FOR ALL TABLES). Without it, publish pgq_ddl.proof yourself: captured DDL without its proof row is journaled as a message change."`
}

// Run installs (or upgrades) the capture.
func (c *DDLInstallCmd) Run(ctx context.Context) error {
	if err := ingest.InstallDDLCapture(ctx, c.PGURL, c.Publication); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "installed DDL capture: event triggers pgq_ddl_end and pgq_ddl_drop, proof table pgq_ddl.proof")
	if c.Publication == "" {
		fmt.Fprintln(stdout, "note: no --publication given: make sure the publication pgq streams publishes pgq_ddl.proof (FOR ALL TABLES does)")
	}
	return nil
}

// DDLUninstallCmd is `pgq ddl uninstall`.
type DDLUninstallCmd struct{ ddlFlags }

// Run removes the capture.
func (c *DDLUninstallCmd) Run(ctx context.Context) error {
	if err := ingest.UninstallDDLCapture(ctx, c.PGURL); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "removed DDL capture")
	return nil
}
