package pgtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// TestServerMajor proves the shared cluster runs the server BinDir chose:
// under make test-matrix PGQ_PG_MAJOR names the major PGQ_PG_BINDIR must
// give, so a matrix leg cannot silently run on the installed server.
func TestServerMajor(t *testing.T) {
	c := Shared(t)
	want := 0
	if s := os.Getenv("PGQ_PG_MAJOR"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("PGQ_PG_MAJOR=%q: %v", s, err)
		}
		want = n
	} else {
		out, err := exec.Command(filepath.Join(c.BinDir, "postgres"), "--version").Output()
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(out))
		want, _ = strconv.Atoi(strings.SplitN(f[len(f)-1], ".", 2)[0])
	}
	got, err := c.Major()
	if err != nil {
		t.Fatal(err)
	}
	db := c.NewDB(t)
	var num int
	db.QueryRow(t, "SELECT current_setting('server_version_num')::int", &num)
	if got != want || num/10000 != want {
		t.Fatalf("server major: PG_VERSION %d, server_version_num %d, want %d", got, num, want)
	}
}

// TestBinDirEnvMustHoldServer: a PGQ_PG_BINDIR without initdb is an error,
// never a silent fall back to the installed server.
func TestBinDirEnvMustHoldServer(t *testing.T) {
	empty := t.TempDir()
	t.Setenv(BinDirEnv, empty)
	if dir, err := BinDir(); err == nil || !strings.Contains(err.Error(), BinDirEnv) {
		t.Fatalf("BinDir() = %q, %v; want an error naming %s", dir, err, BinDirEnv)
	}
	if c, err := Start(Options{}); err == nil {
		c.Stop()
		t.Fatal("Start succeeded with an empty PGQ_PG_BINDIR")
	}
}
