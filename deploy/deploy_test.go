package deploy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The files of deploy/ are read as Docker, Compose and systemd read them
// and held to what running pgq in them needs (issue 25 item 1): the
// image's data dir exists owned by its user (else Docker creates the
// volume root:root and pgq cannot write its journal), the image and the
// compose file probe readiness with pgq healthcheck, compose builds the
// image once and starts consumers only once pgq is ready, and the
// systemd unit neither needs its environment file nor restarts a
// configuration error. deploy_run_test.go runs the binary as the image and
// the unit would.

// dfInstr is one Dockerfile instruction, continuation lines joined.
type dfInstr struct {
	Cmd  string // upper case: FROM, RUN, COPY, ...
	Args string
	Line int
}

// dfStage is one build stage: FROM up to the next FROM.
type dfStage struct {
	Name   string // the AS name, or its index
	From   string
	Instrs []dfInstr
}

// parseDockerfile splits a Dockerfile into stages. Comment lines (also
// inside a continuation, as Docker drops them) and blank lines are skipped.
func parseDockerfile(t *testing.T, file string) []dfStage {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var instrs []dfInstr
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		body, more := strings.CutSuffix(line, "\\")
		cur.WriteString(strings.TrimSpace(body) + " ")
		if more {
			continue
		}
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		instrs = append(instrs, dfInstr{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args), Line: start})
		cur.Reset()
	}
	if cur.Len() != 0 {
		t.Fatalf("%s: a continuation runs past the end", file)
	}
	var stages []dfStage
	for _, in := range instrs {
		if in.Cmd == "FROM" {
			f := strings.Fields(in.Args)
			st := dfStage{Name: strconv.Itoa(len(stages)), From: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.Name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.Cmd == "ARG" {
				continue // an ARG before the first FROM is global
			}
			t.Fatalf("%s:%d: %s before FROM", file, in.Line, in.Cmd)
		}
		stages[len(stages)-1].Instrs = append(stages[len(stages)-1].Instrs, in)
	}
	if len(stages) == 0 {
		t.Fatalf("%s: no FROM", file)
	}
	return stages
}

// flagsAndWords splits an instruction's arguments into its --flags
// (name → value) and the rest.
func flagsAndWords(args string) (map[string]string, []string) {
	flags := map[string]string{}
	var words []string
	for _, f := range strings.Fields(args) {
		if name, ok := strings.CutPrefix(f, "--"); ok && len(words) == 0 {
			k, v, _ := strings.Cut(name, "=")
			flags[k] = v
			continue
		}
		words = append(words, f)
	}
	return flags, words
}

// execForm decodes a JSON-array (exec form) argument list; ok is false for
// the shell form, which needs a shell the image does not have.
func execForm(s string) ([]string, bool) {
	var argv []string
	if err := json.Unmarshal([]byte(s), &argv); err != nil || len(argv) == 0 {
		return nil, false
	}
	return argv, true
}

// envOf is the final value of each ENV key in a stage (both ENV forms).
func envOf(st dfStage) map[string]string {
	env := map[string]string{}
	for _, in := range st.Instrs {
		if in.Cmd != "ENV" {
			continue
		}
		if k, v, ok := strings.Cut(in.Args, " "); ok && !strings.Contains(k, "=") {
			env[k] = strings.TrimSpace(v) // legacy ENV key value
			continue
		}
		for _, kv := range strings.Fields(in.Args) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = strings.Trim(v, `"`)
			}
		}
	}
	return env
}

// lastArgs is the arguments of a stage's last cmd instruction ("" if none)
// and its index.
func lastArgs(st dfStage, cmd string) (string, int) {
	for i := len(st.Instrs) - 1; i >= 0; i-- {
		if st.Instrs[i].Cmd == cmd {
			return st.Instrs[i].Args, i
		}
	}
	return "", -1
}

// imageFacts is what the tests need of deploy/Dockerfile's final stage.
type imageFacts struct {
	User        string   // USER, e.g. nonroot:nonroot
	DataDir     string   // ENV PGQ_DATA_DIR, also a VOLUME
	Entrypoint  []string // ENTRYPOINT, exec form
	Cmd         []string // CMD, exec form
	Healthcheck []string // HEALTHCHECK CMD, exec form
	Env         map[string]string
	dirMode     string // the -m of the build stage's install -d of the data dir, if any
}

// TestDockerfileDataDir fails when the image's data dir would not be
// writable by the image's user, or would be readable by anyone else: it
// must be a VOLUME whose directory the final stage gets, before the
// VOLUME, from a build stage that created it 0700 (install -d -m 0700: a
// new named volume takes the image directory's mode, and the data dir
// holds the watermark secret and every change), copied with --chown to
// the image's (non-root) user.
func TestDockerfileDataDir(t *testing.T) {
	facts := dockerfileFacts(t)
	if facts.User == "" || facts.User == "root" || strings.HasPrefix(facts.User, "root:") || strings.HasPrefix(facts.User, "0") {
		t.Errorf("the final stage runs as %q: want a non-root USER", facts.User)
	}
	if facts.dirMode == "" {
		t.Error("the data dir is created without -m: mkdir and install -d make it 0755, readable by every user; want -m 0700")
	} else if m, err := strconv.ParseUint(facts.dirMode, 8, 32); err != nil || m != 0o700 {
		t.Errorf("the data dir is created with mode %s: want 0700 (its owner's only)", facts.dirMode)
	}
}

// dockerfileFacts parses deploy/Dockerfile and checks its final stage's
// structure, failing the test where it is wrong.
func dockerfileFacts(t *testing.T) imageFacts {
	t.Helper()
	stages := parseDockerfile(t, "Dockerfile")
	final := stages[len(stages)-1]
	f := imageFacts{Env: envOf(final)}
	f.User, _ = lastArgs(final, "USER")
	f.DataDir = f.Env["PGQ_DATA_DIR"]
	if f.DataDir == "" {
		t.Fatal("the final stage sets no PGQ_DATA_DIR")
	}
	vol, volAt := lastArgs(final, "VOLUME")
	vols, ok := execForm(vol)
	if !ok {
		vols = strings.Fields(vol)
	}
	if !slices.Contains(vols, f.DataDir) {
		t.Fatalf("VOLUME %q does not hold PGQ_DATA_DIR %s", vol, f.DataDir)
	}
	if strings.Contains(final.From, "distroless") {
		for _, in := range final.Instrs {
			if in.Cmd == "RUN" {
				t.Errorf("line %d: RUN in a distroless stage, which has no shell", in.Line)
			}
		}
	}
	f.dirMode = checkDataDirCopy(t, stages, volAt, f.DataDir, f.User)
	ep, _ := lastArgs(final, "ENTRYPOINT")
	if f.Entrypoint, ok = execForm(ep); !ok {
		t.Fatalf("ENTRYPOINT %q is not in exec form", ep)
	}
	if !copiedTo(final, f.Entrypoint[0]) {
		t.Errorf("ENTRYPOINT %s: no COPY puts the binary there", f.Entrypoint[0])
	}
	cmd, _ := lastArgs(final, "CMD")
	if f.Cmd, ok = execForm(cmd); !ok {
		t.Fatalf("CMD %q is not in exec form", cmd)
	}
	f.Healthcheck = healthcheckArgv(t, final)
	return f
}

// checkDataDirCopy finds the COPY that gives the final stage its data dir
// before the VOLUME at volAt and checks its owner and source; it returns
// the mode the build stage gives the directory ("" if not set).
func checkDataDirCopy(t *testing.T, stages []dfStage, volAt int, dataDir, user string) string {
	t.Helper()
	final := stages[len(stages)-1]
	for i, in := range final.Instrs {
		if in.Cmd != "COPY" && in.Cmd != "ADD" {
			continue
		}
		flags, words := flagsAndWords(in.Args)
		if len(words) != 2 || path.Clean(words[1]) != path.Clean(dataDir) {
			continue
		}
		if i > volAt {
			t.Errorf("line %d: the data dir is copied after its VOLUME (line %d): declare the VOLUME after it", in.Line, final.Instrs[volAt].Line)
		}
		if owner, ok := flags["chown"]; !ok || !sameOwner(owner, user) {
			t.Errorf("line %d: the data dir is copied with --chown=%q, the image runs as USER %q", in.Line, flags["chown"], user)
		}
		from := flags["from"]
		idx := slices.IndexFunc(stages[:len(stages)-1], func(s dfStage) bool { return s.Name == from })
		if idx < 0 {
			t.Fatalf("line %d: the data dir comes from %q, not an earlier stage", in.Line, from)
		}
		mode, made := createdIn(stages[idx], words[0])
		if !made {
			t.Errorf("stage %s does not create %s (RUN mkdir or install -d)", from, words[0])
		}
		return mode
	}
	t.Fatalf("the final stage gets no %s: Docker would create the volume root:root, where USER %s cannot write", dataDir, user)
	return ""
}

// sameOwner compares a --chown value with a USER value (user[:group]).
func sameOwner(chown, user string) bool {
	cu, cg, _ := strings.Cut(chown, ":")
	uu, ug, _ := strings.Cut(user, ":")
	return cu == uu && (ug == "" || cg == ug)
}

// createdIn reports whether a stage's RUN creates dir (mkdir or
// install -d) and the mode given with -m, if any.
func createdIn(st dfStage, dir string) (string, bool) {
	for _, in := range st.Instrs {
		if in.Cmd != "RUN" {
			continue
		}
		f := strings.Fields(in.Args)
		if !slices.Contains(f, dir) || !(slices.Contains(f, "mkdir") || slices.Contains(f, "install") && slices.Contains(f, "-d")) {
			continue
		}
		mode := ""
		if i := slices.Index(f, "-m"); i >= 0 && i+1 < len(f) {
			mode = f[i+1]
		}
		return mode, true
	}
	return "", false
}

// copiedTo reports whether a COPY of the stage writes dst.
func copiedTo(st dfStage, dst string) bool {
	for _, in := range st.Instrs {
		if _, words := flagsAndWords(in.Args); in.Cmd == "COPY" && len(words) == 2 && words[1] == dst {
			return true
		}
	}
	return false
}

// healthcheckArgv is the final stage's HEALTHCHECK command, which must be
// in exec form (no shell in the image) and run the entrypoint's binary.
func healthcheckArgv(t *testing.T, final dfStage) []string {
	t.Helper()
	hc, _ := lastArgs(final, "HEALTHCHECK")
	if hc == "" {
		t.Fatal("the image has no HEALTHCHECK")
	}
	_, cmd, ok := strings.Cut(hc, "CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %q: no CMD", hc)
	}
	argv, ok := execForm(strings.TrimSpace(cmd))
	if !ok {
		t.Fatalf("HEALTHCHECK CMD %q is not in exec form: the image has no shell", cmd)
	}
	ep, _ := lastArgs(final, "ENTRYPOINT")
	if epArgv, _ := execForm(ep); len(epArgv) == 0 || argv[0] != epArgv[0] {
		t.Errorf("HEALTHCHECK runs %s, the entrypoint is %s", argv[0], ep)
	}
	if len(argv) < 2 || argv[1] != "healthcheck" {
		t.Errorf("HEALTHCHECK runs %q: want pgq healthcheck", argv)
	}
	return argv
}

// TestDockerignore fails when the build context would carry the
// repository's history or local builds.
func TestDockerignore(t *testing.T) {
	data, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var pats []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			pats = append(pats, strings.Trim(l, "/"))
		}
	}
	for _, want := range []string{".git", "bin"} {
		if !slices.Contains(pats, want) {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
	for _, p := range pats {
		for _, need := range []string{"go.mod", "go.sum", "cmd", "cmd/pgq", "internal"} {
			if ok, _ := path.Match(p, need); ok {
				t.Errorf(".dockerignore pattern %q excludes %s, which the build needs", p, need)
			}
		}
	}
}

// composeService is the part of a compose service the test reads.
type composeService struct {
	Image       string         `yaml:"image"`
	Build       any            `yaml:"build"`
	PullPolicy  string         `yaml:"pull_policy"`
	Command     []string       `yaml:"command"`
	DependsOn   yaml.Node      `yaml:"depends_on"`
	Volumes     []string       `yaml:"volumes"`
	Environment map[string]any `yaml:"environment"`
	Healthcheck *struct {
		Test    []string `yaml:"test"`
		Disable bool     `yaml:"disable"`
	} `yaml:"healthcheck"`
}

// TestComposeFile fails when deploy/docker-compose.yml builds pgq's image
// more than once, lets another service pull an image of that name, starts
// a consumer before pgq is ready, or probes pgq otherwise than the image.
func TestComposeFile(t *testing.T) {
	facts := dockerfileFacts(t)
	data, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var builders []string
	for name, s := range doc.Services {
		if s.Build != nil {
			builders = append(builders, name)
		}
	}
	slices.Sort(builders)
	if len(builders) != 1 {
		t.Fatalf("services %q build an image: want one that builds pgq's, the others reusing it", builders)
	}
	builder := builders[0]
	b := doc.Services[builder]
	if b.Image == "" || b.PullPolicy != "build" {
		t.Errorf("service %s: image %q, pull_policy %q: want the built image named, never pulled (pull_policy: build)", builder, b.Image, b.PullPolicy)
	}
	if b.Healthcheck == nil || len(b.Healthcheck.Test) < 2 || b.Healthcheck.Test[0] != "CMD" || !slices.Equal(b.Healthcheck.Test[1:], facts.Healthcheck) {
		t.Errorf("service %s: healthcheck %+v: want [CMD %s] as the image's", builder, b.Healthcheck, strings.Join(facts.Healthcheck, " "))
	}
	if !slices.Contains(b.Volumes, "pgq-data:"+facts.DataDir) {
		t.Errorf("service %s: volumes %q do not mount a named volume on %s", builder, b.Volumes, facts.DataDir)
	}
	token := checkComposeAuth(t, builder, b, facts)
	users := 0
	for name, s := range doc.Services {
		if name == builder || s.Image != b.Image {
			continue
		}
		users++
		checkImageUser(t, name, s, builder)
		if s.Environment["PGQ_ADDR"] != nil && fmt.Sprint(s.Environment["PGQ_AUTH_TOKEN"]) != token {
			t.Errorf("service %s calls pgq's API with token %v, pgq requires %q", name, s.Environment["PGQ_AUTH_TOKEN"], token)
		}
	}
	if users == 0 {
		t.Errorf("no service but %s runs pgq's image: the consumer is missing", builder)
	}
}

// checkComposeAuth: pgq run refuses to listen beyond loopback without a
// token, client certificates or --insecure-no-auth, and the image
// listens on every address; the service running it must set the token.
// It returns the token.
func checkComposeAuth(t *testing.T, name string, s composeService, facts imageFacts) string {
	t.Helper()
	listen := facts.Env["PGQ_LISTEN"]
	if v, ok := s.Environment["PGQ_LISTEN"]; ok {
		listen = fmt.Sprint(v)
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatalf("service %s listens on %q: %v", name, listen, err)
	}
	token, _ := s.Environment["PGQ_AUTH_TOKEN"].(string)
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && token == "" {
		t.Errorf("service %s listens on %s without PGQ_AUTH_TOKEN: pgq run refuses to start", name, listen)
	}
	return token
}

// checkImageUser checks a service that runs the built image without
// building it: it never pulls, does not run the image's healthcheck
// (which probes pgq run), and, when it depends on pgq, waits until pgq is
// healthy.
func checkImageUser(t *testing.T, name string, s composeService, builder string) {
	t.Helper()
	if s.PullPolicy != "never" {
		t.Errorf("service %s: pull_policy %q: want never (the image is %s's build)", name, s.PullPolicy, builder)
	}
	if s.Healthcheck == nil || !s.Healthcheck.Disable {
		t.Errorf("service %s runs %v under the image's healthcheck, which probes pgq run: disable it", name, s.Command)
	}
	if s.DependsOn.Kind != yaml.MappingNode {
		t.Errorf("service %s: depends_on is not a map of conditions (a list only waits for the start)", name)
		return
	}
	var deps map[string]struct {
		Condition string `yaml:"condition"`
	}
	if err := s.DependsOn.Decode(&deps); err != nil {
		t.Fatal(err)
	}
	d, ok := deps[builder]
	if !ok || d.Condition != "service_healthy" {
		t.Errorf("service %s: depends on %s with %+v: want condition service_healthy", name, builder, d)
	}
	for dep, c := range deps {
		if c.Condition == "" || c.Condition == "service_started" {
			t.Errorf("service %s: depends on %s only being started", name, dep)
		}
	}
}

// unitFile is a systemd unit: section → key → values in order.
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, file string) unitFile {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{}
	section := ""
	for n, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = l[1 : len(l)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value in a section: %q", file, n+1, l)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

// TestSystemdUnit fails when deploy/pgq.service needs its environment
// file, restarts pgq's configuration errors, or restarts without a limit.
// TestSystemdUnitAgainstBinary checks its exit status against the
// binary's and runs systemd-analyze verify.
func TestSystemdUnit(t *testing.T) {
	u := parseUnit(t, "pgq.service")
	svc := u["Service"]
	for _, f := range svc["EnvironmentFile"] {
		if !strings.HasPrefix(f, "-") {
			t.Errorf("EnvironmentFile=%s is required: prefix it with - (the settings may come from a config file)", f)
		}
	}
	data, _ := os.ReadFile("pgq.service")
	if !strings.Contains(string(data), "0600") {
		t.Error("the unit does not say the environment file (it holds secrets) is mode 0600")
	}
	if got := svc["Restart"]; !slices.Equal(got, []string{"on-failure"}) {
		t.Errorf("Restart=%q: want on-failure", got)
	}
	if len(svc["RestartPreventExitStatus"]) == 0 {
		t.Error("no RestartPreventExitStatus: a configuration error restarts forever")
	}
	for _, k := range []string{"StartLimitIntervalSec", "StartLimitBurst"} {
		if len(u["Unit"][k]) == 0 {
			t.Errorf("no %s in [Unit]: failures restart without a limit", k)
		}
	}
	dataDir := ""
	for _, e := range svc["Environment"] {
		if v, ok := strings.CutPrefix(e, "PGQ_DATA_DIR="); ok {
			dataDir = v
		}
	}
	if dataDir == "" || !slices.Contains(svc["ReadWritePaths"], dataDir) || !slices.Contains(svc["StateDirectory"], strings.TrimPrefix(dataDir, "/var/lib/")) {
		t.Errorf("data dir %q: want it the StateDirectory (created for User=) and in ReadWritePaths %q", dataDir, svc["ReadWritePaths"])
	}
	// systemd creates the StateDirectory with StateDirectoryMode, 0755
	// when unset; pgq tightens the data dir to 0700 at start, which an
	// older unit's 0750 then disagrees with. The data dir holds the
	// watermark secret and every change: the pgq user's only.
	if got := svc["StateDirectoryMode"]; len(got) != 1 || got[0] != "0700" {
		t.Errorf("StateDirectoryMode=%q: want 0700 (systemd's default is 0755)", got)
	}
}
