package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/internal/pgqbin"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// distrolessNonroot is the uid and gid of the nonroot user of
// gcr.io/distroless/static (its /etc/passwd), which deploy/Dockerfile's
// USER nonroot:nonroot and --chown=nonroot:nonroot resolve to.
const distrolessNonroot = 65532

// TestDeployAgainstBinary runs the pgq binary as deploy/'s files run it:
// the image's entrypoint, environment and user on a data dir prepared as
// the image prepares its volume, the image's HEALTHCHECK command against
// it, the unit's exit-status rules against pgq's exit statuses, and
// systemd-analyze verify on the unit. Where a Docker daemon answers it
// also builds and runs the image itself.
func TestDeployAgainstBinary(t *testing.T) {
	bin := buildPgq(t)
	facts := dockerfileFacts(t)
	t.Run("exit status", func(t *testing.T) { testUnitExitStatus(t, bin) })
	t.Run("systemd-analyze verify", func(t *testing.T) { testSystemdVerify(t, bin) })
	t.Run("image user writes the data dir", func(t *testing.T) { testImageDataDir(t, bin, facts) })
	t.Run("image needs a token", func(t *testing.T) { testImageNeedsToken(t, bin, facts) })
	t.Run("image healthcheck", func(t *testing.T) { testImageHealthcheck(t, bin, facts) })
	t.Run("docker", func(t *testing.T) { testDockerImage(t, facts) })
}

// buildPgq builds cmd/pgq into a directory every user can read and run
// (the image's user runs it too).
func buildPgq(t *testing.T) string {
	t.Helper()
	bin, err := pgqbin.Build(sharedTempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// sharedTempDir is a t.TempDir that every user can reach (the test's own
// temporary directories are 0700 to root).
func sharedTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// exitStatus runs cmd and returns its exit status and stderr (-1 when it
// did not run to an exit).
func exitStatus(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	default:
		t.Fatalf("%v: %v", cmd.Args, err)
		return -1, ""
	}
}

// testUnitExitStatus: the unit's RestartPreventExitStatus holds the
// status of a usage error and not that of a runtime failure (an
// unreachable server), which must be restarted.
func testUnitExitStatus(t *testing.T, bin string) {
	prevent := parseUnit(t, "pgq.service")["Service"]["RestartPreventExitStatus"]
	var codes []string
	for _, v := range prevent {
		codes = append(codes, strings.Fields(v)...)
	}
	usage, _ := exitStatus(t, exec.Command(bin, "run", "--no-such-flag"))
	if !slices.Contains(codes, strconv.Itoa(usage)) {
		t.Errorf("a usage error exits %d, RestartPreventExitStatus=%q: systemd restarts it", usage, codes)
	}
	runtime, stderr := exitStatus(t, exec.Command(bin, "run", "--pg-url", "postgres://pgq@127.0.0.1:"+strconv.Itoa(closedPort(t))+"/x",
		"--slot", "s", "--publication", "p", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"))
	if runtime == 0 || slices.Contains(codes, strconv.Itoa(runtime)) {
		t.Errorf("an unreachable server exits %d (%s), RestartPreventExitStatus=%q: want it restarted", runtime, strings.TrimSpace(stderr), codes)
	}
}

// closedPort is a TCP port on 127.0.0.1 nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	p, err := pgtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testSystemdVerify runs systemd-analyze verify on the unit with its
// ExecStart pointing at the built binary (verify wants it executable):
// any warning (an unknown or misplaced directive) fails.
func testSystemdVerify(t *testing.T, bin string) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze on this machine: the unit's directives are checked by TestSystemdUnit only")
	}
	data, err := os.ReadFile("pgq.service")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^ExecStart=(\S+)`)
	if !re.Match(data) {
		t.Fatal("the unit has no ExecStart")
	}
	unit := filepath.Join(t.TempDir(), "pgq.service")
	if err := os.WriteFile(unit, re.ReplaceAll(data, []byte("ExecStart="+bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", "--man=no", unit).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// containerUser is the uid and gid the image's USER resolves to.
func containerUser(t *testing.T, user string) (uint32, uint32) {
	t.Helper()
	ids := map[string]uint32{"nonroot": distrolessNonroot, "root": 0}
	u, g, _ := strings.Cut(user, ":")
	if g == "" {
		g = u
	}
	uid, ok1 := ids[u]
	gid, ok2 := ids[g]
	if n, err := strconv.ParseUint(u, 10, 32); err == nil {
		uid, ok1 = uint32(n), true
	}
	if n, err := strconv.ParseUint(g, 10, 32); err == nil {
		gid, ok2 = uint32(n), true
	}
	if !ok1 || !ok2 {
		t.Fatalf("USER %q: unknown to the test (distroless knows root and nonroot)", user)
	}
	return uid, gid
}

// asImageUser prepares cmd to run as the image would: as its USER, with
// only the image's environment and the given overrides (PGQ_DATA_DIR and
// PGQ_LISTEN point into the test). It needs root to change the user.
func asImageUser(t *testing.T, facts imageFacts, cmd *exec.Cmd, env map[string]string) {
	t.Helper()
	uid, gid := containerUser(t, facts.User)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	cmd.Env = nil
	for k, v := range facts.Env {
		if _, over := env[k]; !over {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
}

// volumeDir makes the data dir as a new named volume starts: with the
// owner and mode of the image's directory (owner, mode).
func volumeDir(t *testing.T, uid, gid uint32, mode os.FileMode) string {
	t.Helper()
	dir := filepath.Join(sharedTempDir(t), "data")
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot run pgq as the image's user (the Dockerfile's data dir is checked by TestDockerfileDataDir only)")
	}
}

// dirMode is the mode the build stage gives the data dir (install -d and
// mkdir default to 0755).
func dirMode(t *testing.T, facts imageFacts) os.FileMode {
	t.Helper()
	if facts.dirMode == "" {
		return 0o755
	}
	m, err := strconv.ParseUint(facts.dirMode, 8, 32)
	if err != nil {
		t.Fatal(err)
	}
	return os.FileMode(m)
}

// testImageDataDir runs the image's entrypoint and command as its user
// against an unreachable server: on the volume as the image makes it, pgq
// gets past opening its journal (it exits on the server); on a volume
// Docker made root:root 0755 (the image without the data dir) it cannot
// write, which is the failure the test must see.
func testImageDataDir(t *testing.T, bin string, facts imageFacts) {
	needRoot(t)
	uid, gid := containerUser(t, facts.User)
	run := func(dir string) (int, string) {
		cmd := exec.Command(bin, facts.Cmd...)
		asImageUser(t, facts, cmd, map[string]string{
			"PGQ_DATA_DIR": dir, "PGQ_LISTEN": "127.0.0.1:0",
			"PGQ_PG_URL": "postgres://pgq@127.0.0.1:" + strconv.Itoa(closedPort(t)) + "/x",
			"PGQ_SLOT":   "pgq", "PGQ_PUBLICATION": "pgq",
		})
		return exitStatus(t, cmd)
	}
	good := volumeDir(t, uid, gid, dirMode(t, facts))
	// A start that fails on a missing or empty data dir removes what it
	// made there, so the volume holds a file of the image user's (0644, as
	// a backup restored under umask 022 leaves it): pgq keeps its journal
	// beside it and makes that file its owner's only too.
	seed := filepath.Join(good, "restored")
	if err := os.WriteFile(seed, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(seed, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(seed, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	code, stderr := run(good)
	if strings.Contains(stderr, "permission denied") || code == 0 {
		t.Errorf("on the image's volume pgq exited %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(good, "journal")); err != nil {
		t.Errorf("pgq wrote no journal into the image's volume (exit %d: %s): %v", code, stderr, err)
	}
	// The volume and what pgq wrote into it are the image user's only,
	// whatever the umask pgq ran under (the test's, usually 022).
	err := filepath.WalkDir(good, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if want := os.FileMode(0o600); info.Mode().Perm()&0o077 != 0 || d.IsDir() && info.Mode().Perm() != 0o700 {
			if d.IsDir() {
				want = 0o700
			}
			t.Errorf("%s is %v in the image's volume: want %v", strings.TrimPrefix(p, good), info.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	bad := volumeDir(t, 0, 0, 0o755)
	if code, stderr := run(bad); code == 0 || !strings.Contains(stderr, "permission denied") {
		t.Errorf("on a root:root 0755 volume pgq exited %d without permission denied: %s (the test cannot see the failure)", code, stderr)
	}
}

// testImageNeedsToken: the image listens on every address, so a plain
// `docker run` without PGQ_AUTH_TOKEN is refused at start (exit 2, the
// line naming --insecure-no-auth), as Redis's protected mode; with a
// token, or said insecure (warned), pgq goes on (to an unreachable
// server here: exit 1).
func testImageNeedsToken(t *testing.T, bin string, facts imageFacts) {
	host, _, err := net.SplitHostPort(facts.Env["PGQ_LISTEN"])
	if err != nil {
		t.Fatalf("the image's PGQ_LISTEN %q: %v", facts.Env["PGQ_LISTEN"], err)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		t.Skipf("the image listens on loopback (%s): nothing to refuse", host)
	}
	run := func(extra ...string) (int, string) {
		cmd := exec.Command(bin, facts.Cmd...)
		for k, v := range facts.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		// The image's host, on a free port; a data dir of the test's.
		cmd.Env = append(cmd.Env, "PGQ_LISTEN="+net.JoinHostPort(host, "0"), "PGQ_DATA_DIR="+t.TempDir(),
			"PGQ_PG_URL=postgres://pgq@127.0.0.1:"+strconv.Itoa(closedPort(t))+"/x", "PGQ_SLOT=pgq", "PGQ_PUBLICATION=pgq", "PGQ_NO_RECONNECT=true")
		cmd.Env = append(cmd.Env, extra...)
		return exitStatus(t, cmd)
	}
	if code, stderr := run(); code != 2 || !strings.Contains(stderr, "--insecure-no-auth") {
		t.Errorf("the image without a token: exit %d, %q; want 2 and the line naming --insecure-no-auth", code, stderr)
	}
	if code, stderr := run("PGQ_AUTH_TOKEN=change-me"); code != 1 || !strings.Contains(stderr, "unreachable") {
		t.Errorf("the image with a token: exit %d, %q; want it past the check (1: server unreachable)", code, stderr)
	}
	if code, stderr := run("PGQ_INSECURE_NO_AUTH=true"); code != 1 || !strings.Contains(stderr, "--insecure-no-auth") {
		t.Errorf("the image said insecure: exit %d, %q; want the warning and past the check (1: server unreachable)", code, stderr)
	}
}

// testImageHealthcheck runs pgq as the image does against a real
// PostgreSQL (with a token, as deploy/docker-compose.yml) and the image's
// HEALTHCHECK command in the same environment: it fails (1) until pgq is
// ready and after it stopped, and passes (0) while it streams. The
// command's default address must be the image's listen port.
func testImageHealthcheck(t *testing.T, bin string, facts imageFacts) {
	needRoot(t)
	checkHealthcheckAddr(t, bin, facts)
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	uid, gid := containerUser(t, facts.User)
	port := strconv.Itoa(closedPort(t))
	env := map[string]string{
		"PGQ_DATA_DIR": volumeDir(t, uid, gid, dirMode(t, facts)), "PGQ_LISTEN": "127.0.0.1:" + port,
		"PGQ_ADDR":   "127.0.0.1:" + port,
		"PGQ_PG_URL": c.URL("postgres"), "PGQ_SLOT": "deploy", "PGQ_PUBLICATION": "deploy",
		"PGQ_CREATE_SLOT": "true", "PGQ_CREATE_PUBLICATION": "all", "PGQ_AUTH_TOKEN": "change-me",
	}
	probe := func() (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, facts.Healthcheck[1:]...)
		asImageUser(t, facts, cmd, env)
		return exitStatus(t, cmd)
	}
	if code, stderr := probe(); code != 1 {
		t.Errorf("healthcheck with no pgq running exited %d (%s): want 1", code, stderr)
	}
	run := exec.Command(bin, facts.Cmd...)
	asImageUser(t, facts, run, env)
	var runErr bytes.Buffer
	run.Stderr = &runErr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	code, stderr := 1, ""
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if code, stderr = probe(); code == 0 {
			break
		}
	}
	if code != 0 {
		t.Fatalf("healthcheck against a streaming pgq exited %d (%s); pgq run: %s", code, stderr, runErr.String())
	}
	if err := run.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := run.Wait(); err != nil {
		t.Errorf("pgq run after SIGTERM: %v: %s", err, runErr.String())
	}
	if code, stderr := probe(); code != 1 {
		t.Errorf("healthcheck after pgq stopped exited %d (%s): want 1", code, stderr)
	}
}

// checkHealthcheckAddr: without PGQ_ADDR pgq healthcheck asks the address
// its --help shows as default; the image's PGQ_LISTEN must serve that
// port, or the container is never healthy.
func checkHealthcheckAddr(t *testing.T, bin string, facts imageFacts) {
	t.Helper()
	out, err := exec.Command(bin, append(slices.Clone(facts.Healthcheck[1:]), "--help")...).Output()
	if err != nil {
		t.Fatalf("pgq %s --help: %v (is it a command?)", strings.Join(facts.Healthcheck[1:], " "), err)
	}
	m := regexp.MustCompile(`--addr="([^"]+)"`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("pgq healthcheck --help shows no --addr default:\n%s", out)
	}
	_, want, err1 := net.SplitHostPort(string(m[1]))
	_, got, err2 := net.SplitHostPort(facts.Env["PGQ_LISTEN"])
	if err1 != nil || err2 != nil || got != want {
		t.Errorf("the image listens on %s, pgq healthcheck asks %s by default", facts.Env["PGQ_LISTEN"], m[1])
	}
}

// testDockerImage builds deploy/Dockerfile and runs the image on a fresh
// named volume against an unreachable server: pgq must get past writing
// its journal. The image's user and healthcheck must be the Dockerfile's.
func testDockerImage(t *testing.T, facts imageFacts) {
	if testing.Short() {
		t.Skip("-short: the image build takes minutes")
	}
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skipf("no Docker daemon answers (docker info: %v): the Dockerfile is checked statically and its binary run as the image would", err)
	}
	tag := "pgq-deploytest:" + strconv.Itoa(os.Getpid())
	vol := "pgq-deploytest-" + strconv.Itoa(os.Getpid())
	docker := func(args ...string) (string, error) {
		out, err := exec.Command("docker", args...).CombinedOutput()
		return string(out), err
	}
	if out, err := docker("build", "-f", "Dockerfile", "-t", tag, ".."); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	defer docker("image", "rm", "-f", tag)
	out, err := docker("image", "inspect", "--format", "{{json .Config}}", tag)
	if err != nil {
		t.Fatalf("docker image inspect: %v\n%s", err, out)
	}
	var cfg struct {
		User        string
		Healthcheck struct{ Test []string }
	}
	if err := json.Unmarshal([]byte(out), &cfg); err != nil {
		t.Fatalf("docker image inspect: %v\n%s", err, out)
	}
	if cfg.User != facts.User || !slices.Equal(cfg.Healthcheck.Test, append([]string{"CMD"}, facts.Healthcheck...)) {
		t.Errorf("image config %+v: want user %s, healthcheck %q", cfg, facts.User, facts.Healthcheck)
	}
	if out, err := docker("volume", "create", vol); err != nil {
		t.Fatalf("docker volume create: %v\n%s", err, out)
	}
	defer docker("volume", "rm", "-f", vol)
	out, err = docker("run", "--rm", "--network", "none", "-v", vol+":"+facts.DataDir,
		"-e", "PGQ_PG_URL=postgres://pgq@127.0.0.1:1/x", "-e", "PGQ_SLOT=pgq", "-e", "PGQ_PUBLICATION=pgq", tag)
	if err == nil || strings.Contains(out, "permission denied") {
		t.Errorf("pgq in the image on a fresh volume: %v: %s", err, out)
	}
	out, err = docker("run", "--rm", "-v", vol+":"+facts.DataDir, tag, "journal", "verify", "--data-dir", facts.DataDir)
	if err != nil {
		t.Errorf("the image's pgq wrote no journal on its volume: %v: %s", err, out)
	}
}
