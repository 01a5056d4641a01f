package main

import (
	"context"
	"fmt"

	"github.com/pgq-dev/pgq/ingest"
)

// DDLCmd is `pgq ddl`.
type DDLCmd struct {
	Install   DDLInstallCmd   `cmd:"" help:"Install the event triggers that journal schema changes as ddl changes (needs a superuser)."`
	Uninstall DDLUninstallCmd `cmd:"" help:"Remove them."`
}

type ddlFlags struct {
	PGURL string `name:"pg-url" required:"" env:"PGQ_PG_URL" help:"PostgreSQL URL of the database to capture."`
}

// DDLInstallCmd is `pgq ddl install`.
type DDLInstallCmd struct{ ddlFlags }

// Run installs the capture.
func (c *DDLInstallCmd) Run(ctx context.Context) error {
	if err := ingest.InstallDDLCapture(ctx, c.PGURL); err != nil {
		return err
	}
	fmt.Println("installed DDL capture: event triggers pgq_ddl_end and pgq_ddl_drop")
	return nil
}

// DDLUninstallCmd is `pgq ddl uninstall`.
type DDLUninstallCmd struct{ ddlFlags }

// Run removes the capture.
func (c *DDLUninstallCmd) Run(ctx context.Context) error {
	if err := ingest.UninstallDDLCapture(ctx, c.PGURL); err != nil {
		return err
	}
	fmt.Println("removed DDL capture")
	return nil
}
