package benchmarks

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// Status of a row.
const (
	Pass        = "PASS"
	Fail        = "FAIL"
	Info        = "INFO"         // a figure without a target
	NotMeasured = "NOT MEASURED" // Note says why
)

// Row is one line of the results table. PGQ, Reference and Ratio are nil
// when not applicable or not measured; Status is never derived from a value
// that was not measured.
type Row struct {
	Metric    string   `json:"metric"`
	Unit      string   `json:"unit,omitempty"`
	PGQ       *float64 `json:"pgq"`
	Reference *float64 `json:"reference"`
	RefName   string   `json:"reference_name,omitempty"`
	Ratio     *float64 `json:"ratio"`
	Target    string   `json:"target"`
	Status    string   `json:"status"`
	Note      string   `json:"note,omitempty"`
}

// Report is everything one run produced (the JSON file).
type Report struct {
	Started  time.Time `json:"started"`
	Duration string    `json:"duration"`
	Mode     string    `json:"mode"` // "short" or "full"
	Host     HostInfo  `json:"host"`
	Rows     []Row     `json:"rows"`
}

// HostInfo describes where the figures come from.
type HostInfo struct {
	CPUs          int    `json:"cpus"`
	GoVersion     string `json:"go_version"`
	ServerVersion string `json:"server_version"`
}

func f64(v float64) *float64 { return &v }

// notMeasured is a row whose figure could not be taken.
func notMeasured(metric, target, why string) Row {
	return Row{Metric: metric, Target: target, Status: NotMeasured, Note: why}
}

// check sets Status from ok.
func (r *Row) check(ok bool) {
	if ok {
		r.Status = Pass
	} else {
		r.Status = Fail
	}
}

// WriteTable prints the rows as an aligned table.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tPGQ\tREFERENCE\tRATIO\tTARGET\tRESULT\tNOTE")
	for _, r := range rows {
		ref := fmtVal(r.Reference, r.Unit)
		if r.RefName != "" && r.Reference != nil {
			ref += " (" + r.RefName + ")"
		}
		ratio := "-"
		if r.Ratio != nil {
			ratio = fmt.Sprintf("%.3f", *r.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Metric, fmtVal(r.PGQ, r.Unit), ref, ratio, r.Target, r.Status, r.Note)
	}
	return tw.Flush()
}

func fmtVal(v *float64, unit string) string {
	if v == nil {
		return "-"
	}
	x := *v
	var s string
	switch {
	case x == float64(int64(x)) && x < 1e15:
		s = fmt.Sprintf("%d", int64(x))
	case x >= 100:
		s = fmt.Sprintf("%.0f", x)
	default:
		s = fmt.Sprintf("%.3g", x)
	}
	if unit != "" {
		s += " " + unit
	}
	return s
}

// WriteJSON writes the report to path, creating its directory.
func WriteJSON(path string, rep *Report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("results dir: %w", err)
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// Failed reports whether any row failed.
func Failed(rows []Row) []string {
	var out []string
	for _, r := range rows {
		if r.Status == Fail {
			out = append(out, r.Metric)
		}
	}
	return out
}

// joinNotes joins non-empty notes.
func joinNotes(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}
