package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/pgq-dev/pgq/internal/pgqbin"
)

// TestUsageErrorsHint: a usage error prints one line, the error and a
// hint naming the command's help, never the help itself, and exits 2.
func TestUsageErrorsHint(t *testing.T) {
	dir := t.TempDir()
	base := "pg-url: postgres://127.0.0.1:1/x\npublication: p\nslot: s\n"
	run := func(extra ...string) []string {
		return append([]string{"run", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0"}, extra...)
	}
	const runHint = " (see pgq run --help)"
	cases := []exitCase{
		{"unknown config key", run("--config", writeFile(t, dir, "typo.yaml", base+"slott: a\n")), nil, exitUsage, "line 4: unknown key slott"},
		{"bad duration", run("--config", writeFile(t, dir, "ok.yaml", base), "--reconnect-min", "soon"), nil, exitUsage, `invalid duration "soon"`},
		{"YAML syntax error", run("--config", writeFile(t, dir, "bad.yaml", base+"listen: [a\n")), nil, exitUsage, "yaml:"},
		{"missing config file", run("--config", filepath.Join(dir, "nope.yaml")), nil, exitUsage, "nope.yaml"},
		{"--mode shard", run("--config", writeFile(t, dir, "ok2.yaml", base), "--mode", "shard"), nil, exitUsage, "unknown flag --mode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, line := runPgq(t, tc.env, tc.args...)
			if code != exitUsage || !strings.Contains(line, tc.want) || !strings.HasSuffix(line, runHint) {
				t.Fatalf("exit %d, %q; want exit 2, %q and the hint %q", code, line, tc.want, runHint)
			}
		})
	}
	other := []struct {
		name string
		args []string
		line string
	}{
		{"journal dump of a missing dir", []string{"journal", "dump", "--data-dir", filepath.Join(dir, "nonexistent")},
			"pgq: --data-dir: " + filepath.Join(dir, "nonexistent") + ": no such file or directory (see pgq journal dump --help)"},
		{"unknown command", []string{"statsu"}, `pgq: unknown command statsu, did you mean "status"? (see pgq --help)`},
		{"missing argument", []string{"groups", "info"}, `pgq: expected "<name>" (see pgq groups info --help)`},
		{"usage error found while running", []string{"groups", "parked", "drop", "g"}, "pgq: give ack ids or --all (see pgq groups parked drop --help)"},
		{"negative linger", []string{"bridge", "webhook", "--group", "g", "--url", "http://127.0.0.1:1/", "--linger=-1s"}, "pgq: --linger -1s: negative (see pgq bridge webhook --help)"},
		{"short webhook secret", []string{"bridge", "webhook", "--group", "g", "--url", "http://127.0.0.1:1/", "--secret", "whsec_c2hvcnQ="},
			"pgq: --secret: webhook: bad secret: the key of the whsec_ secret is 5 bytes, want at least 24 (e.g. whsec_$(head -c 32 /dev/urandom | base64)) (see pgq bridge webhook --help)"},
		{"webhook secret not base64", []string{"bridge", "webhook", "--group", "g", "--url", "http://127.0.0.1:1/", "--secret", "whsec_!!"},
			"pgq: --secret: webhook: bad secret: what follows whsec_ is not standard base64: illegal base64 data at input byte 0 (see pgq bridge webhook --help)"},
	}
	for _, tc := range other {
		t.Run(tc.name, func(t *testing.T) {
			code, line := runPgq(t, nil, tc.args...)
			if code != exitUsage || line != tc.line {
				t.Fatalf("exit %d, %q; want exit 2, %q", code, line, tc.line)
			}
		})
	}
}

// TestErrorLine: the error line drops internal package names and says a
// failed request once.
func TestErrorLine(t *testing.T) {
	cases := []struct{ err, want string }{
		{"consumers: bad request: pgq: unknown op \"x\"", `bad request: unknown op "x"`},
		{`client: gave up after 5s: client: GET /v1/groups: Get "http://127.0.0.1:5480/v1/groups": dial tcp 127.0.0.1:5480: connect: connection refused`,
			"gave up after 5s: GET http://127.0.0.1:5480/v1/groups: dial tcp 127.0.0.1:5480: connect: connection refused"},
		{"ingest: replication connect: server unreachable", "replication connect: server unreachable"},
		{"--config: stat /x.yaml: no such file or directory", "--config: /x.yaml: no such file or directory"},
	}
	for _, tc := range cases {
		if got := errorLine(errors.New(tc.err)); got != tc.want {
			t.Errorf("errorLine(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestHelpAgreesWithTheProgram: groups create's help lists every op and
// shows --key's default; pgq --help names every bridge; the table of run
// flags in docs/configuration.md names each flag's environment variables
// as the program reads them.
func TestHelpAgreesWithTheProgram(t *testing.T) {
	out, err := exec.Command(pgqbin.Path(t), "groups", "create", "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	help := strings.Join(strings.Fields(string(out)), " ")
	for _, want := range []string{"insert,update,delete,truncate,message,ddl,read,gap", `--key="pk"`} {
		if !strings.Contains(help, want) {
			t.Errorf("pgq groups create --help lacks %q:\n%s", want, out)
		}
	}

	var cli CLI
	k, err := kong.New(&cli, kong.Name("pgq"), kongVars("test"))
	if err != nil {
		t.Fatal(err)
	}
	envs := map[string][]string{}
	for _, n := range k.Model.Children {
		if n.Name == "bridge" { // pgq --help names every bridge
			for _, b := range n.Children {
				if !strings.Contains(strings.ToLower(n.Help), b.Name) {
					t.Errorf("pgq --help: bridge's line %q does not name pgq bridge %s", n.Help, b.Name)
				}
			}
		}
		for _, f := range n.Flags {
			switch {
			case n.Name == "run":
				envs[f.Name] = f.Envs
			case n.Name == "healthcheck" && f.Name == "addr" && f.Default != defaultAddr:
				t.Errorf("healthcheck --addr defaults to %s, defaultAddr is %s", f.Default, defaultAddr)
			}
		}
	}
	readme, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| (`--[^|]*(?:\\\\\\|[^|]*)*) \\| ((?:`[A-Z_]+`(?:, )?)+) \\|")
	code := regexp.MustCompile("`([^`]*)`")
	rows := row.FindAllStringSubmatch(string(readme), -1)
	if len(rows) < 20 {
		t.Fatalf("found %d flag rows in docs/configuration.md", len(rows))
	}
	for _, r := range rows {
		var flags, vars []string
		for _, m := range code.FindAllStringSubmatch(r[1], -1) {
			flags = append(flags, strings.TrimPrefix(strings.Fields(m[1])[0], "--"))
		}
		for _, m := range code.FindAllStringSubmatch(r[2], -1) {
			vars = append(vars, m[1])
		}
		if len(flags) != len(vars) {
			t.Errorf("docs/configuration.md row %q: %d flags, %d variables", r[0], len(flags), len(vars))
			continue
		}
		for i, f := range flags {
			got, ok := envs[f]
			if !ok {
				t.Errorf("docs/configuration.md names --%s, which pgq run does not have", f)
				continue
			}
			if fmt.Sprint(got) != fmt.Sprint([]string{vars[i]}) {
				t.Errorf("docs/configuration.md: --%s reads %s; the program reads %v", f, vars[i], got)
			}
		}
	}
}
