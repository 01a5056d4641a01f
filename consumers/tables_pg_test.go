package consumers_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/serverparts"
)

// TestTableFilterNamesEndToEnd: against PostgreSQL with DDL capture,
// tables whose names need quoting ("MyT"), hold "/" ("a/b") or "." (in
// the table "x.y" or the schema "s.p") reach the groups whose patterns
// name them, by insert, DDL and truncate alike, and no other.
func TestTableFilterNamesEndToEnd(t *testing.T) {
	e := start(t, nil)
	e.DB.Exec(t, `CREATE TABLE "MyT" (id int PRIMARY KEY)`, `CREATE TABLE "a/b" (id int PRIMARY KEY)`,
		`CREATE TABLE "x.y" (id int PRIMARY KEY)`, `CREATE SCHEMA "s.p"`, `CREATE TABLE "s.p".t (id int PRIMARY KEY)`)
	if err := ingest.InstallDDLCapture(ctxT(t), e.DB.URL, ""); err != nil {
		t.Fatal(err)
	}
	groups := map[string][]string{
		"bare":    {"public.MyT"},
		"quoted":  {`public."MyT"`},
		"public":  {"public.*"},
		"slash":   {"public.a/*"},
		"dotted":  {`public."x.y"`},
		"dotschm": {`"s.p".*`},
	}
	for name, pats := range groups {
		if _, err := e.C.CreateGroup(ctxT(t), api.CreateRequest{Name: name, From: "latest", Tables: pats}); err != nil {
			t.Fatalf("create %s %q: %v", name, pats, err)
		}
	}
	before := serverparts.Of(e.S).Journal.LastOffset()
	e.DB.Exec(t, `INSERT INTO "MyT" VALUES (1)`, `INSERT INTO "a/b" VALUES (1)`, `INSERT INTO "x.y" VALUES (1)`, `INSERT INTO "s.p".t VALUES (1)`,
		`ALTER TABLE "MyT" ADD COLUMN note text`, `ALTER TABLE "a/b" ADD COLUMN note text`, `ALTER TABLE "x.y" ADD COLUMN note text`,
		`ALTER TABLE "s.p".t ADD COLUMN note text`,
		`TRUNCATE "MyT"`, `TRUNCATE "a/b"`, `TRUNCATE "x.y"`, `TRUNCATE "s.p".t`)
	e.WaitLast(t, before+12)
	in := func(tb string) []string {
		return []string{"insert " + tb, "ddl " + tb, "truncate " + tb}
	}
	want := map[string][]string{
		"bare":    in("public.MyT"),
		"quoted":  in("public.MyT"),
		"public":  slices.Concat(in("public.MyT"), in("public.a/b"), in("public.x.y")),
		"slash":   in("public.a/b"),
		"dotted":  in("public.x.y"),
		"dotschm": in("s.p.t"),
	}
	for name, w := range want {
		res := fetch(t, e, name, "m", 1000, 0)
		var got []string
		for _, tx := range res.Transactions {
			for i := range tx.Changes {
				got = append(got, describe(t, &tx.Changes[i]))
			}
		}
		sort.Strings(got)
		sort.Strings(w)
		if !slices.Equal(got, w) {
			t.Errorf("group %s %q got %q, want %q", name, groups[name], got, w)
		}
	}
}

// describe names a change's op and table: schema.table for a row change,
// the object's names for a DDL, the first table of a truncate.
func describe(t *testing.T, c *pgq.Change) string {
	t.Helper()
	switch c.Op {
	case pgq.OpDDL:
		var d struct{ Object string }
		if err := json.Unmarshal(c.Content, &d); err != nil {
			t.Fatal(err)
		}
		obj := map[string]string{`public."MyT"`: "public.MyT", `public."a/b"`: "public.a/b", `public."x.y"`: "public.x.y", `"s.p".t`: "s.p.t"}[d.Object]
		if obj == "" {
			obj = "?" + d.Object
		}
		return "ddl " + obj
	case pgq.OpTruncate:
		return fmt.Sprintf("truncate %s", c.Tables[0])
	}
	return fmt.Sprintf("%s %s.%s", c.Op, c.Schema, c.Table)
}
