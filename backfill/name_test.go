package backfill

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// TestParseTable: table names parse as PostgreSQL identifiers (a quoted
// part may hold dots and doubled quotes; unquoted parts are taken as
// they are), an unquoted name with several dots is left to the catalog,
// malformed names are refused with one line that says why, and the form
// pgq shows a table in parses back to the same table.
func TestParseTable(t *testing.T) {
	for _, c := range []struct {
		in           string
		schema, name string
		dotted       string
	}{
		{"t", "public", "t", ""},
		{" s.t ", "s", "t", ""},
		{"public.MyT", "public", "MyT", ""}, // as changes show it: no case folding
		{`"my.schema".t`, "my.schema", "t", ""},
		{`"my.schema"."t"`, "my.schema", "t", ""},
		{`s."a.b"`, "s", "a.b", ""},
		{`"a""b"."c""d.e"`, `a"b`, `c"d.e`, ""},
		{`"t.u"`, "public", "t.u", ""},
		{`" s"." t "`, " s", " t ", ""},
		{"my.schema.t", "", "", "my.schema.t"},
		{"a.b.c.d", "", "", "a.b.c.d"},
	} {
		got, err := parseTable(c.in)
		if err != nil || got != (tableRef{schema: c.schema, name: c.name, dotted: c.dotted}) {
			t.Errorf("parseTable(%q) = %+v, %v", c.in, got, err)
			continue
		}
		if c.dotted != "" {
			continue
		}
		q := qualifiedName(got.schema, got.name)
		back, err := parseTable(q)
		if err != nil || back != got {
			t.Errorf("%q shows as %q, which parses to %+v, %v", c.in, q, back, err)
		}
	}
	for _, in := range []string{"", ".", "s.", ".t", "s..t", `"my.schema`, `"".t`, `s.""`, `"a"x.t`, `a"b.t`, `"a" .t`, `"a".`, `a."b".c`, `"a"."b"."c"`} {
		_, err := parseTable(in)
		if !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), "want schema.table") || strings.Contains(err.Error(), "\n") {
			t.Errorf("parseTable(%q): %v, want a one-line bad request", in, err)
		}
	}
}

// TestStartTableNames: Start takes quoted and unquoted names of tables
// whose schema or name holds a dot or a quote, shows each in the form
// that parses back (and the backfill's run, which parses it again, reads
// the table), refuses an unquoted name that two tables could have, and
// reads a table named several ways once.
func TestStartTableNames(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE SCHEMA "my.schema"`, `CREATE TABLE "my.schema".t (id int PRIMARY KEY)`,
		`INSERT INTO "my.schema".t SELECT generate_series(1, 30)`,
		`CREATE TABLE "my.schema"."a""b.c" (id int PRIMARY KEY)`,
		`CREATE SCHEMA amb`, `CREATE TABLE amb."b.c" (id int PRIMARY KEY)`,
		`CREATE SCHEMA "amb.b"`, `CREATE TABLE "amb.b".c (id int PRIMARY KEY)`,
		`CREATE TABLE "MyT" (id int PRIMARY KEY)`, `CREATE TABLE t (id int PRIMARY KEY)`,
		`ANALYZE`)
	r := startManager(t, db, t.TempDir(), nil, func(o *Options) { o.HighTimeout, o.MaxRedos = time.Hour, 1000 })
	for _, c := range []struct {
		tables []string
		want   []string // Status.Tables; nil: refused with err
		err    string
	}{
		{[]string{`"my.schema".t`}, []string{`"my.schema".t`}, ""},
		{[]string{`my.schema.t`}, []string{`"my.schema".t`}, ""},
		{[]string{`"my.schema"."a""b.c"`}, []string{`"my.schema"."a""b.c"`}, ""},
		{[]string{`amb."b.c"`, `"amb.b".c`}, []string{`amb."b.c"`, `"amb.b".c`}, ""},
		{[]string{`public.MyT`}, []string{`public.MyT`}, ""},
		{[]string{`amb.b.c`}, nil, `ambiguous: amb."b.c", "amb.b".c all exist`},
		{[]string{`no.such.table`}, nil, "does not exist"},
		{[]string{`public.myt`}, nil, "does not exist"},
		{[]string{`"my.schema`}, nil, "want schema.table"},
		// One table, named seven ways, is read once.
		{[]string{"t", "public.t", `"public"."t"`, " t ", "my.schema.t", `"my.schema".t`, `"my.schema"."t"`},
			[]string{"public.t", `"my.schema".t`}, ""},
	} {
		st, err := r.Start(t.Context(), Request{Tables: c.tables})
		if c.want == nil {
			if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Start(%q) = %v, want %q", c.tables, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(st.Tables, c.want) || st.Table != c.want[0] {
			t.Errorf("Start(%q): tables %q (%q), %v; want %q", c.tables, st.Tables, st.Table, err, c.want)
			continue
		}
		if c.tables[0] == "t" && st.RowsEstimate != 30 {
			t.Errorf("Start(%q): rows_estimate %d, want 30 (each table once)", c.tables, st.RowsEstimate)
		}
	}
	// The runs parse the stored names again: each finds its tables (an
	// empty one is done at once; no ingest takes the chunks of the others)
	// instead of failing.
	waitUntil(t, "every backfill to find its tables", func() bool {
		for _, st := range r.List() {
			if st.State == StateRunning && len(st.KeyColumns) == 0 {
				return false
			}
		}
		return true
	})
	list := r.List()
	for _, st := range list {
		if st.State == StateFailed || st.State == StateCanceled {
			t.Errorf("backfill %s of %q: %s (error %v)", st.ID, st.Tables, st.State, st.Error)
		}
	}
	if len(list) != 6 {
		t.Errorf("%d backfills, want 6", len(list))
	}
}

// TestStartTablesCap: the tables of a request are deduplicated before
// anything is looked up, so 100,000 copies of one name answer at once
// with that one table, and more than MaxTables distinct names are
// refused with one line before any is looked up (nothing exists here:
// a lookup would answer not_found).
func TestStartTablesCap(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE t (id int PRIMARY KEY)`)
	r := startManager(t, db, t.TempDir(), nil, func(o *Options) { o.HighTimeout, o.MaxRedos = time.Hour, 1000 })
	copies := make([]string, 100_000)
	for i := range copies {
		copies[i] = []string{"t", "public.t", `"t"`}[i%3]
	}
	start := time.Now()
	st, err := r.Start(t.Context(), Request{Tables: copies})
	if took := time.Since(start); err != nil || !slices.Equal(st.Tables, []string{"public.t"}) || took > 5*time.Second {
		t.Fatalf("100,000 copies: %q, %v in %v", st.Tables, err, took)
	}
	for _, n := range []int{MaxTables + 1, 100_000} {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("missing_%d", i)
		}
		_, err := r.Start(t.Context(), Request{Tables: names})
		if !errors.Is(err, api.ErrBadRequest) || !strings.Contains(err.Error(), "more than 1000 distinct tables") {
			t.Fatalf("%d distinct tables: %v", n, err)
		}
	}
	// MaxTables distinct names pass the cap (then the first is missing).
	names := make([]string, MaxTables)
	for i := range names {
		names[i] = fmt.Sprintf("missing_%d", i)
	}
	if _, err := r.Start(t.Context(), Request{Tables: append(names, names...)}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("%d distinct tables, each twice: %v, want not_found for missing_0", MaxTables, err)
	}
}
