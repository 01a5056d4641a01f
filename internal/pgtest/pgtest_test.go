package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m, Options{TLS: true})) }

func TestClusterIsLogicalAndServesTLS(t *testing.T) {
	c := Shared(t)
	db := c.NewDB(t)
	var level string
	db.QueryRow(t, "SHOW wal_level", &level)
	if level != "logical" {
		t.Fatalf("wal_level = %q, want logical", level)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgxConnect(ctx, c.TLSURL(db.Name))
	if err != nil {
		t.Fatalf("verify-full connection: %v", err)
	}
	defer conn.Close(ctx)
	var ssl bool
	if err := conn.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil || !ssl {
		t.Fatalf("ssl = %v, err %v", ssl, err)
	}
}

var pgxConnect = pgx.Connect
