package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/alecthomas/kong"
	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// ConfigFile is `pgq run --config FILE`: a YAML or JSON map of run flags
// by name ("pg-url", or pg_url). Precedence: a flag on the command line
// beats its environment variable, which beats the file, which beats the
// default.
type ConfigFile string

// BeforeResolve loads the file and adds two resolvers: the file's, then
// the environment's, so that (the last resolver winning in kong) the
// environment beats the file.
func (c ConfigFile) BeforeResolve(k *kong.Kong, ctx *kong.Context, trace *kong.Path) error {
	path := string(ctx.FlagValue(trace.Flag).(ConfigFile))
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	r, err := configResolver(data)
	if err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	ctx.AddResolver(r)
	ctx.AddResolver(envResolver)
	return nil
}

// configResolver reads YAML (or JSON, which is YAML).
func configResolver(data []byte) (*fileResolver, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	lines, err := checkKeys(data)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		js = []byte("{}")
	}
	var values map[string]any
	if err := json.Unmarshal(js, &values); err != nil {
		return nil, fmt.Errorf("want a map of flag names to values: %w", err)
	}
	return &fileResolver{values: values, lines: lines}, nil
}

// checkKeys refuses the keys a map would hide: one given twice (also as
// pg-url and pg_url, which name one flag), of which the map keeps only the
// last, and config, which cannot take effect (the file is already being
// read). It walks the YAML nodes for their line numbers, and returns the
// line of each key.
func checkKeys(data []byte) (map[string]int, error) {
	var doc yaml3.Node
	if err := yaml3.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml3.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml3.MappingNode {
		return nil, nil // empty, or not a map: configResolver says so
	}
	lines := map[string]int{}
	m := doc.Content[0]
	seen := map[string]*yaml3.Node{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		name := strings.ReplaceAll(k.Value, "_", "-")
		if name == "config" {
			return nil, fmt.Errorf("line %d: key %s: a config file cannot name another (give --config or PGQ_CONFIG once)", k.Line, k.Value)
		}
		if first, dup := seen[name]; dup {
			return nil, fmt.Errorf("line %d: key %s repeats %s of line %d (give each flag once)", k.Line, k.Value, first.Value, first.Line)
		}
		seen[name] = k
		lines[k.Value] = k.Line
	}
	return lines, nil
}

// fileResolver resolves a flag from the file's key of the same name, with
// dashes or underscores.
type fileResolver struct {
	// values is open-ended: any flag's name to a value of that flag's
	// type, as the file gives it (kong converts it), so no struct fits.
	values map[string]any
	lines  map[string]int // each key's line
}

// Resolve implements kong.Resolver.
func (r *fileResolver) Resolve(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
	for _, k := range []string{flag.Name, strings.ReplaceAll(flag.Name, "-", "_")} {
		v, ok := r.values[k]
		if !ok {
			continue
		}
		switch x := v.(type) {
		case string:
			return x, nil
		case bool:
			return strconv.FormatBool(x), nil
		case float64:
			return strconv.FormatFloat(x, 'f', -1, 64), nil
		default:
			return nil, fmt.Errorf("--config: %s: want a string, number or boolean", k)
		}
	}
	return nil, nil
}

// Validate refuses keys that are not flags of `pgq run`.
func (r *fileResolver) Validate(app *kong.Application) error {
	known := map[string]bool{}
	for _, n := range app.Children {
		if n.Name != "run" {
			continue
		}
		for _, f := range n.Flags {
			known[f.Name] = true
		}
	}
	var unknown []string
	for k := range r.values {
		if !known[strings.ReplaceAll(k, "_", "-")] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Slice(unknown, func(i, j int) bool { return r.lines[unknown[i]] < r.lines[unknown[j]] })
	if len(unknown) == 1 {
		return fmt.Errorf("--config: line %d: unknown key %s (keys are pgq run's flag names, e.g. pg-url)", r.lines[unknown[0]], unknown[0])
	}
	named := make([]string, len(unknown))
	for i, k := range unknown {
		named[i] = fmt.Sprintf("%s (line %d)", k, r.lines[k])
	}
	return fmt.Errorf("--config: unknown keys %s; keys are pgq run's flag names, e.g. pg-url", strings.Join(named, ", "))
}

// envResolver resolves a flag from its environment variables.
var envResolver kong.ResolverFunc = func(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
	for _, e := range flag.Envs {
		if v, ok := os.LookupEnv(e); ok {
			return v, nil
		}
	}
	return nil, nil
}
