package consumers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pgq-dev/pgq"
)

// TestTablePatterns: each side of schema.table is matched against its
// name alone; * crosses "." and "/"; double quotes make text literal;
// escapes and classes work; bad patterns are refused with the reason.
func TestTablePatterns(t *testing.T) {
	cases := []struct {
		pat, schema, table string
		want               bool
	}{
		{"public.*", "public", "a/b", true},
		{"public.*", "public", "a.b", true},
		{"public.*", "public", "MyT", true},
		{"public.*", "other", "t", false},
		{"public.*", "public.x", "t", false},
		{"*.*", "s/p.q", "x/y.z", true},
		{`public."MyT"`, "public", "MyT", true},
		{`public."MyT"`, "public", "myt", false},
		{"public.MyT", "public", "MyT", true},
		{"public.MyT", "public", "myt", false},
		{`"my.schema".t`, "my.schema", "t", true},
		{`"my.schema".t`, "my", "schema.t", false},
		{"public.a.b", "public", "a.b", true},
		{"public.a/*", "public", "a/b/c", true},
		{`public."a*b"`, "public", "a*b", true},
		{`public."a*b"`, "public", "axb", false},
		{`public.a\*b`, "public", "a*b", true},
		{`public.a\*b`, "public", "axb", false},
		{`public."My"*`, "public", "MyTable", true},
		{`public."say ""hi"""`, "public", `say "hi"`, true},
		{"pub?ic.t[0-9]", "public", "t5", true},
		{"pub?ic.t[0-9]", "public", "tx", false},
		{"public.[^a]*", "public", "b1", true},
		{"public.[^a]*", "public", "a1", false},
		{"public.*_log", "public", "x_log_y_log", true},
		{"public.*_log", "public", "x_log_y", false},
		{"public.ü*", "public", "über", true},
		{"public.?ber", "public", "über", true},
	}
	for _, c := range cases {
		p, err := compileTablePattern(c.pat)
		if err != nil {
			t.Errorf("compile %q: %v", c.pat, err)
			continue
		}
		if got := p.match(c.schema, c.table); got != c.want {
			t.Errorf("%q on schema %q table %q: %v, want %v", c.pat, c.schema, c.table, got, c.want)
		}
	}
	for _, bad := range []string{"", "public", ".t", "public.", `public."x`, `"public.x`, "public.[a", "public.[]", `public.x\`, "public.[z-a]", "[bad", "public." + strings.Repeat("t", maxPatternLen)} {
		if _, err := compileTablePattern(bad); err == nil {
			t.Errorf("compile %q: accepted", bad)
		}
		if err := (Filter{Tables: []string{bad}}).Validate(); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("Validate %q: %v, want a one-line bad_request", bad, err)
		}
	}
}

// TestFilterOneTableName: a row change, a DDL (object identity, quoted by
// PostgreSQL) and a truncate (schema.table unquoted) of one table pass the
// same patterns; a stored pattern the syntax cannot read keeps its old
// meaning.
func TestFilterOneTableName(t *testing.T) {
	ddl := func(object string) pgq.Change {
		b, _ := json.Marshal(map[string]string{"command": "ALTER TABLE", "object": object, "schema": "public", "object_type": "table"})
		return pgq.Change{Op: pgq.OpDDL, Content: b}
	}
	row := func(schema, table string) pgq.Change {
		return pgq.Change{Op: pgq.OpInsert, Schema: schema, Table: table}
	}
	trunc := func(tables ...string) pgq.Change { return pgq.Change{Op: pgq.OpTruncate, Tables: tables} }
	cases := []struct {
		pats []string
		c    pgq.Change
		want bool
	}{
		{[]string{"public.MyT"}, row("public", "MyT"), true},
		{[]string{"public.MyT"}, ddl(`public."MyT"`), true},
		{[]string{"public.MyT"}, trunc("public.MyT"), true},
		{[]string{`public."MyT"`}, row("public", "MyT"), true},
		{[]string{`public."MyT"`}, ddl(`public."MyT"`), true},
		{[]string{"public.*"}, row("public", "a/b"), true},
		{[]string{"public.*"}, ddl(`public."a/b"`), true},
		{[]string{"public.*"}, trunc("public.a/b"), true},
		{[]string{"public.*"}, ddl(`other."a/b"`), false},
		{[]string{"public.t"}, ddl("public.t.note"), true},     // a column of t
		{[]string{"public.f"}, ddl("public.f(integer)"), true}, // a function
		{[]string{`public."a.b"`}, ddl(`public."a.b"`), true},  // a dot in the name
		{[]string{`public."a.b"`}, trunc("public.a.b"), true},  // every split is tried
		{[]string{`"public.a".b`}, trunc("public.a.b"), true},  // ... so this one passes too
		{[]string{`"s.p".t`}, row("s.p", "t"), true},           // a dot in the schema
		{[]string{`"s.p".t`}, ddl(`"s.p".t`), true},            //
		{[]string{"public.u"}, trunc("public.t", "public.u"), true},
		{[]string{"public.u"}, trunc("public.t"), false},
		{[]string{"public.t"}, ddl("public"), false},         // a schema's DDL names no table
		{[]string{`public.a"b`}, row("public", `a"b`), true}, // legacy: unclosed quote, path.Match
	}
	for _, c := range cases {
		f := Filter{Tables: c.pats}
		for _, f := range []Filter{f, f.compiled()} {
			if got := f.Match(&c.c); got != c.want {
				t.Errorf("%q on %+v: %v, want %v", c.pats, c.c, got, c.want)
			}
		}
	}
}
