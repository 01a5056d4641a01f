package prometheus

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"

	"github.com/prometheus/common/model"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// promQL is Prometheus's PromQL parser with its default options.
var promQL = parser.NewParser(parser.Options{})

// grafanaRange matches Grafana's range variables, which PromQL cannot
// parse: each is replaced by a duration before parsing.
var grafanaRange = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)(_ms|_s)?\}?`)

// metricNames returns the metric names an expression selects (the
// __name__ of each vector selector).
func metricNames(expr string) ([]string, error) {
	e, err := promQL.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				names = append(names, m.Value)
			}
		}
		return nil
	})
	if len(names) == 0 {
		return nil, fmt.Errorf("%q selects no metric by name", expr)
	}
	return names, nil
}

// ruleFile parses a rules file with Prometheus's own parser (which also
// parses every expression and template).
func ruleFile(path string) (*rulefmt.RuleGroups, error) {
	groups, errs := rulefmt.ParseFile(path, false, model.UTF8Validation, promQL, nil)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %v", path, errs)
	}
	return groups, nil
}

// rulesNames returns the metric names the rules' expressions select.
func rulesNames(groups *rulefmt.RuleGroups) ([]string, error) {
	var out []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			n, err := metricNames(r.Expr)
			if err != nil {
				return nil, fmt.Errorf("rule %s: %w", r.Alert, err)
			}
			out = append(out, n...)
		}
	}
	return out, nil
}

// dashboard is the part of a Grafana dashboard the checks read.
type dashboard struct {
	Inputs []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		PluginID string `json:"pluginId"`
	} `json:"__inputs"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Title      string          `json:"title"`
	Type       string          `json:"type"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr       string          `json:"expr"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

func readDashboard(path string) (*dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}

// allPanels flattens rows.
func (d *dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// dashboardNames returns the metric names the dashboard's targets select.
func dashboardNames(d *dashboard) ([]string, error) {
	var out []string
	for _, p := range d.allPanels() {
		for _, t := range p.Targets {
			n, err := metricNames(grafanaRange.ReplaceAllString(t.Expr, "5m"))
			if err != nil {
				return nil, fmt.Errorf("panel %q: %w", p.Title, err)
			}
			out = append(out, n...)
		}
	}
	return out, nil
}

// uniq sorts and deduplicates.
func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
