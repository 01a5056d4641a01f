package pgtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configures a cluster. The zero value is a plain logical cluster.
type Options struct {
	// Settings are extra postgresql.conf lines, e.g.
	// "logical_decoding_work_mem = '64kB'".
	Settings []string
	// TLS turns on ssl with a fresh CA and a server certificate for
	// 127.0.0.1 and localhost; Cluster.CAFile names the CA.
	TLS bool
}

// Cluster is one running throwaway PostgreSQL.
type Cluster struct {
	Dir    string // data directory parent (removed by Stop)
	Port   int
	BinDir string
	CAFile string // with Options.TLS

	cred *syscall.Credential
	dbs  atomic.Int64

	mu      sync.Mutex // guards running
	running bool
}

// BinDirEnv names the environment variable that points the harness at
// another server's bin directory (make test-matrix sets it to each major
// fetched by scripts/pg-server.sh).
const BinDirEnv = "PGQ_PG_BINDIR"

// BinDir returns the PostgreSQL server binary directory: $PGQ_PG_BINDIR when
// set, else the installed server's.
func BinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		// A set but wrong directory must fail, not fall back: the matrix
		// would otherwise pass on the installed major and prove nothing.
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err != nil {
			return "", fmt.Errorf("pgtest: %s=%s holds no initdb: %w", BinDirEnv, dir, err)
		}
		return dir, nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return "", errors.New("pgtest: PostgreSQL server binaries not found (install Debian's postgresql package)")
	}
	sort.Slice(matches, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[j]))))
		return vi < vj
	})
	return filepath.Dir(matches[len(matches)-1]), nil
}

// FreePort asks the kernel for a free TCP port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start initialises and starts a cluster.
func Start(opts Options) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgq-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	c := &Cluster{Dir: dir, BinDir: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: chown: %w", err)
		}
	}
	if err := c.init(opts); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.start(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) dataDir() string { return filepath.Join(c.Dir, "data") }

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.BinDir, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

func (c *Cluster) writeFile(name string, data []byte, mode os.FileMode) error {
	if err := os.WriteFile(name, data, mode); err != nil {
		return err
	}
	if c.cred != nil {
		return os.Chown(name, int(c.cred.Uid), int(c.cred.Gid))
	}
	return nil
}

func (c *Cluster) init(opts Options) error {
	out, err := c.command("initdb", "-D", c.dataDir(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: initdb: %w: %s", err, out)
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	c.Port = port
	conf := []string{
		"listen_addresses = '127.0.0.1'",
		fmt.Sprintf("port = %d", port),
		fmt.Sprintf("unix_socket_directories = '%s'", c.Dir),
		"wal_level = logical",
		"max_wal_senders = 40",
		"max_replication_slots = 40",
		"max_connections = 100",
		"fsync = off",
		"synchronous_commit = off",
		"full_page_writes = off",
		"shared_buffers = 64MB",
		"wal_sender_timeout = 60s",
		"log_min_messages = warning",
		"TimeZone = 'UTC'",
	}
	if opts.TLS {
		if err := c.makeCerts(); err != nil {
			return err
		}
		conf = append(conf, "ssl = on", "ssl_cert_file = 'server.crt'", "ssl_key_file = 'server.key'")
	}
	conf = append(conf, opts.Settings...)
	f, err := os.OpenFile(filepath.Join(c.dataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString("\n" + strings.Join(conf, "\n") + "\n")
	return err
}

func (c *Cluster) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, err := c.command("pg_ctl", "-D", c.dataDir(), "-l", filepath.Join(c.Dir, "log"), "-w", "-t", "60", "start").CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.Dir, "log"))
		return fmt.Errorf("pgtest: pg_ctl start: %w: %s\n%s", err, out, log)
	}
	c.running = true
	return nil
}

// StopServer stops PostgreSQL (fast mode) but keeps its data.
func (c *Cluster) StopServer() error { return c.stop("fast") }

// stop runs pg_ctl stop in mode, keeping the data.
func (c *Cluster) stop(mode string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return nil
	}
	out, err := c.command("pg_ctl", "-D", c.dataDir(), "-m", mode, "-w", "stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop -m %s: %w: %s", mode, err, out)
	}
	c.running = false
	return nil
}

// StartServer starts a cluster stopped with StopServer.
func (c *Cluster) StartServer() error { return c.start() }

// Restart stops and starts the server.
func (c *Cluster) Restart() error {
	if err := c.StopServer(); err != nil {
		return err
	}
	return c.start()
}

// Stop stops the server and removes its directory.
func (c *Cluster) Stop() {
	if c == nil {
		return
	}
	_ = c.StopServer()
	_ = os.RemoveAll(c.Dir)
}

// Major returns the server's major version (from the data directory's
// PG_VERSION, so it works while the server is stopped).
func (c *Cluster) Major() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.dataDir(), "PG_VERSION"))
	if err != nil {
		return 0, fmt.Errorf("pgtest: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Log returns the server log so far.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "log"))
	return string(b)
}

// URL is a connection URL for database db as the superuser.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// TLSURL is a verify-full URL (Options.TLS).
func (c *Cluster) TLSURL(db string) string {
	return fmt.Sprintf("postgres://postgres@localhost:%d/%s?sslmode=verify-full&sslrootcert=%s", c.Port, db, c.CAFile)
}

// Connect opens a pgx connection to db.
func (c *Cluster) Connect(ctx context.Context, db string) (*pgx.Conn, error) {
	return pgx.Connect(ctx, c.URL(db))
}

// CreateDB creates a fresh database and returns its name.
func (c *Cluster) CreateDB(ctx context.Context) (string, error) {
	name := fmt.Sprintf("db_%d_%d", os.Getpid(), c.dbs.Add(1))
	conn, err := c.Connect(ctx, "postgres")
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: create database: %w", err)
	}
	return name, nil
}

// Exec runs statements in db (each in its own implicit transaction).
func (c *Cluster) Exec(ctx context.Context, db string, sqls ...string) error {
	conn, err := c.Connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, s := range sqls {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("pgtest: %q: %w", s, err)
		}
	}
	return nil
}

// DB is a test's own database on a cluster.
type DB struct {
	C    *Cluster
	Name string
	URL  string
}

// NewDB creates a fresh database for t.
func (c *Cluster) NewDB(t testing.TB) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name, err := c.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A package's tests share the cluster's max_replication_slots: the
	// slots a test left behind go when it ends (after its own cleanups
	// stopped its pgq; a slot still active, or a cluster a test stopped,
	// is left as it is).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Exec(ctx, "postgres", fmt.Sprintf(
			"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '%s' AND NOT active", name))
	})
	return &DB{C: c, Name: name, URL: c.URL(name)}
}

// DropSlot drops a replication slot of this database once its walsender
// has gone: a client that just closed its replication connection leaves
// the slot active for a moment while the server ends that walsender, and
// dropping it then fails with "is active for PID". It waits up to 10s.
func (d *DB) DropSlot(t testing.TB, slot string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var active bool
		d.QueryRow(t, fmt.Sprintf("SELECT coalesce(bool_or(active), false) FROM pg_replication_slots WHERE slot_name = '%s'", slot), &active)
		if !active || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.Exec(t, fmt.Sprintf("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '%s'", slot))
}

// Exec runs statements or fails the test.
func (d *DB) Exec(t testing.TB, sqls ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := d.C.Exec(ctx, d.Name, sqls...); err != nil {
		t.Fatal(err)
	}
}

// QueryRow runs a single-row query and scans into dst, failing the test.
func (d *DB) QueryRow(t testing.TB, sql string, dst ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := d.C.Connect(ctx, d.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, sql).Scan(dst...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

var (
	sharedMu sync.Mutex
	shared   *Cluster
)

// Main runs a package's tests with one shared cluster (see Shared) and
// removes it afterwards. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, pgtest.Options{})) }
func Main(m *testing.M, opts Options) int {
	c, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sharedMu.Lock()
	shared = c
	sharedMu.Unlock()
	code := m.Run()
	c.Stop()
	return code
}

// Shared returns the package's cluster started by Main.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		t.Fatal("pgtest: no shared cluster: call pgtest.Main from TestMain")
	}
	return shared
}

func (c *Cluster) makeCerts() error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "pgq test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	c.CAFile = filepath.Join(c.Dir, "ca.crt")
	if err := c.writeFile(c.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		return err
	}
	if err := c.writeFile(filepath.Join(c.dataDir(), "server.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return c.writeFile(filepath.Join(c.dataDir(), "server.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// StopImmediate stops PostgreSQL the way a crash would (pg_ctl -m
// immediate: no shutdown checkpoint, walsenders cut), keeping its data.
func (c *Cluster) StopImmediate() error { return c.stop("immediate") }

// Promote ends a standby's recovery and waits until it accepts writes.
func (c *Cluster) Promote() error {
	out, err := c.command("pg_ctl", "-D", c.dataDir(), "-w", "-t", "60", "promote").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: pg_ctl promote: %w: %s", err, out)
	}
	return nil
}

// StartStandby builds a streaming standby of c (PostgreSQL 17+) and starts
// it. The bundles make test-matrix uses have no pg_basebackup, so it takes
// a low-level backup: a physical slot reserving WAL, pg_backup_start, a
// file copy, pg_backup_stop's label. The standby streams through that slot
// (primary_slot_name) with hot_standby_feedback and synchronizes failover
// slots (sync_replication_slots, dbname in primary_conninfo). Setting the
// primary's synchronized_standby_slots to the slot is the caller's choice.
func (c *Cluster) StartStandby(ctx context.Context, slot string) (*Cluster, error) {
	if major, err := c.Major(); err != nil || major < 17 {
		return nil, fmt.Errorf("pgtest: a slot-synchronizing standby needs PostgreSQL 17+ (have %d, %v)", major, err)
	}
	conn, err := c.Connect(ctx, "postgres")
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true)", slot); err != nil {
		return nil, fmt.Errorf("pgtest: standby slot: %w", err)
	}
	// A non-exclusive backup lives as long as the session that began it.
	if _, err := conn.Exec(ctx, "SELECT pg_backup_start('pgtest standby', true)"); err != nil {
		return nil, fmt.Errorf("pgtest: pg_backup_start: %w", err)
	}
	s := &Cluster{BinDir: c.BinDir, cred: c.cred}
	if s.Dir, err = os.MkdirTemp("", "pgq-pg-standby-"); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := s.chownDir(s.Dir); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.copyDataDir(c.dataDir()); err != nil {
		s.Stop()
		return nil, err
	}
	var label string
	if err := conn.QueryRow(ctx, "SELECT labelfile FROM pg_backup_stop(false)").Scan(&label); err != nil {
		s.Stop()
		return nil, fmt.Errorf("pgtest: pg_backup_stop: %w", err)
	}
	if err := s.configureStandby(c, slot, label); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.start(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (c *Cluster) chownDir(dir string) error {
	if c.cred == nil {
		return nil
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid))
}

// copyDataDir copies a running primary's data directory as a base backup
// may: without the postmaster's files, the WAL (the standby streams it
// from its slot) and the replication slots.
func (c *Cluster) copyDataDir(src string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) { // a file removed while copying
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(src, path)
		dst := filepath.Join(c.dataDir(), rel)
		if d.IsDir() && strings.HasPrefix(rel, "pg_replslot"+string(filepath.Separator)) {
			return filepath.SkipDir // a slot's directory without its state is fatal
		}
		if d.IsDir() {
			if err := os.MkdirAll(dst, 0o700); err != nil {
				return err
			}
			return c.ownPath(dst)
		}
		parent := filepath.Base(filepath.Dir(rel))
		switch {
		case rel == "postmaster.pid", rel == "postmaster.opts",
			strings.HasPrefix(rel, "pg_wal"+string(filepath.Separator)), strings.HasPrefix(rel, "pg_replslot"+string(filepath.Separator)),
			parent == "pg_stat_tmp":
			return nil
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return c.writeFile(dst, b, 0o600)
	})
}

func (c *Cluster) ownPath(p string) error {
	if c.cred == nil {
		return nil
	}
	return os.Chown(p, int(c.cred.Uid), int(c.cred.Gid))
}

func (c *Cluster) configureStandby(primary *Cluster, slot, label string) error {
	if err := c.writeFile(filepath.Join(c.dataDir(), "backup_label"), []byte(label), 0o600); err != nil {
		return err
	}
	if err := c.writeFile(filepath.Join(c.dataDir(), "standby.signal"), nil, 0o600); err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	c.Port = port
	conf := []string{
		fmt.Sprintf("port = %d", port),
		fmt.Sprintf("unix_socket_directories = '%s'", c.Dir),
		fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres dbname=postgres application_name=pgtest_standby'", primary.Port),
		fmt.Sprintf("primary_slot_name = '%s'", slot),
		"hot_standby = on",
		"hot_standby_feedback = on",
		"sync_replication_slots = on",
	}
	f, err := os.OpenFile(filepath.Join(c.dataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString("\n" + strings.Join(conf, "\n") + "\n")
	return err
}
