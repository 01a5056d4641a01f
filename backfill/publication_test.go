package backfill

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// refused checks that err is a 400 (api.ErrBadRequest) wrapping
// sentinel whose message holds every one of want.
func refused(t *testing.T, what string, err, sentinel error, want ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) || !errors.Is(err, api.ErrBadRequest) {
		t.Errorf("%s: %v, want %v (bad_request)", what, err, sentinel)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not name %q", what, err, w)
		}
	}
}

// TestOpenNeedsPublication: a Manager knows pgq's publication, or it is
// not opened at all: with none, nothing would bound what a backfill
// reads.
func TestOpenNeedsPublication(t *testing.T) {
	o := Options{PGURL: "postgres://127.0.0.1:1/none", Dir: filepath.Join(t.TempDir(), "bf"), Registry: ingest.NewBackfills(),
		Durable: func() pgq.LSN { return 0 }, Logger: quiet()}
	if m, err := Open(o); err == nil || !strings.Contains(err.Error(), "Publication") {
		if m != nil {
			_ = m.Close()
		}
		t.Fatalf("Open without a publication: %v, want it refused", err)
	}
	o.Publication = "pgq"
	m, err := Open(o)
	if err != nil {
		t.Fatalf("Open with a publication: %v", err)
	}
	// A system table is refused before PostgreSQL (unreachable here) is
	// asked anything; a user table would need it.
	for _, name := range []string{"pg_catalog.pg_authid", `"pg_catalog"."pg_class"`, "information_schema.tables", "pg_toast.pg_toast_1260", "pg_temp_3.t"} {
		_, err := m.Start(t.Context(), Request{Tables: []string{"public.t", name}, Where: "true"})
		refused(t, name, err, ErrSystemTable, "system schema")
	}
	if _, err := m.Start(t.Context(), Request{Tables: []string{"public.t"}}); !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("Start of a user table without PostgreSQL: %v, want unavailable", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStartOnlyPublished: Start accepts only tables in the Manager's
// publication and never one of a system schema (the requests:
// pg_catalog.pg_authid with a where clause, pg_catalog.pg_class), with a
// bad_request naming the table and the publication; a request naming one
// such table among published ones starts nothing. A published table
// starts.
func TestStartOnlyPublished(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE pub_t (id int PRIMARY KEY, v text)`, `INSERT INTO pub_t SELECT g, 'v' FROM generate_series(1, 20) g`,
		`CREATE TABLE other (id int PRIMARY KEY)`, `CREATE SCHEMA s`, `CREATE TABLE s.pub_s (id int PRIMARY KEY)`,
		`CREATE PUBLICATION p FOR TABLE pub_t, s.pub_s`)
	r := startManager(t, db, t.TempDir(), nil, func(o *Options) {
		o.Publication, o.HighTimeout, o.MaxRedos = "p", time.Hour, 1000
	})
	cases := []struct {
		req      Request
		sentinel error
		want     []string
	}{
		{Request{Tables: []string{"pg_catalog.pg_authid"}, Where: "rolname = 'postgres'"}, ErrSystemTable, []string{"pg_catalog.pg_authid"}},
		{Request{Tables: []string{"pg_catalog.pg_class"}}, ErrSystemTable, []string{"pg_catalog.pg_class"}},
		{Request{Tables: []string{"information_schema.sql_features"}}, ErrSystemTable, []string{"information_schema.sql_features"}},
		{Request{Tables: []string{"other"}}, ErrNotPublished, []string{"public.other", `"p"`}},
		{Request{Tables: []string{"pub_t", "public.other"}}, ErrNotPublished, []string{"public.other", `"p"`}},
		{Request{Tables: []string{"pub_t", "pg_catalog.pg_authid"}}, ErrSystemTable, []string{"pg_catalog.pg_authid"}},
	}
	for _, c := range cases {
		st, err := r.Start(t.Context(), c.req)
		refused(t, strings.Join(c.req.Tables, ","), err, c.sentinel, c.want...)
		if err == nil {
			_, _ = r.Cancel(st.ID)
		}
	}
	if l := r.List(); len(l) != 0 {
		t.Fatalf("refused requests left backfills: %+v", l)
	}
	st, err := r.Start(t.Context(), Request{Tables: []string{"pub_t", "s.pub_s"}, Where: "id > 0"})
	if err != nil {
		t.Fatalf("Start of published tables: %v", err)
	}
	if st.State != StateRunning || !slices.Equal(st.Tables, []string{"public.pub_t", "s.pub_s"}) {
		t.Fatalf("status %+v", st)
	}

	// Another Manager's publication that does not exist refuses every
	// table, naming it.
	r2 := startManager(t, db, t.TempDir(), nil, func(o *Options) { o.Publication = "nope" })
	_, err = r2.Start(t.Context(), Request{Tables: []string{"pub_t"}})
	refused(t, "missing publication", err, ErrNotPublished, "public.pub_t", `publication "nope" does not exist`)
}

// TestResumeRechecksPublication: a publication can change after Start.
// A backfill resumed after its table left the publication fails, with an
// error in its status that names the table and the publication; so does
// one whose next table left it by the time it starts reading it. Nothing
// of the table is read then.
func TestResumeRechecksPublication(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE a (id int PRIMARY KEY)`, `INSERT INTO a SELECT generate_series(1, 30)`,
		`CREATE TABLE b (id int PRIMARY KEY)`, `INSERT INTO b SELECT generate_series(1, 30)`,
		`CREATE PUBLICATION p FOR TABLE a, b`)
	dir1, dir2 := t.TempDir(), t.TempDir()
	// No ingest: a's first chunk never completes, so both backfills stay
	// on table a until they are stopped.
	hold := func(o *Options) { o.Publication, o.HighTimeout, o.MaxRedos = "p", time.Hour, 1000 }
	r1 := startManager(t, db, dir1, nil, hold)
	x, err := r1.Start(t.Context(), Request{Tables: []string{"a", "b"}, ChunkSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	r2 := startManager(t, db, dir2, nil, hold)
	y, err := r2.Start(t.Context(), Request{Tables: []string{"a", "b"}, ChunkSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	r1.stop()
	r2.stop()

	// x resumes on a, which has left the publication.
	db.Exec(t, `ALTER PUBLICATION p DROP TABLE a`)
	r1 = startManager(t, db, dir1, nil, hold)
	waitUntil(t, "x to stop", func() bool { s, _ := r1.Get(x.ID); return s.State != StateRunning })
	s, _ := r1.Get(x.ID)
	if s.State != StateFailed || s.Error == nil || s.Rows != 0 || s.Table != "public.a" {
		t.Fatalf("x resumed on an unpublished table: %+v", s)
	}
	for _, w := range []string{"public.a", `publication "p"`, "not in"} {
		if !strings.Contains(*s.Error, w) {
			t.Errorf("x's error %q lacks %q", *s.Error, w)
		}
	}

	// y resumes on a (published again, and empty now: it is done at
	// once) and then starts b, which has left the publication.
	db.Exec(t, `DELETE FROM a`, `ALTER PUBLICATION p ADD TABLE a`, `ALTER PUBLICATION p DROP TABLE b`)
	r2 = startManager(t, db, dir2, nil, hold)
	waitUntil(t, "y to stop", func() bool { s, _ := r2.Get(y.ID); return s.State != StateRunning })
	s, _ = r2.Get(y.ID)
	if s.State != StateFailed || s.Error == nil || s.Table != "public.a" || s.Rows != 0 {
		t.Fatalf("y started an unpublished table: %+v", s)
	}
	for _, w := range []string{"public.b", `publication "p"`, "not in"} {
		if !strings.Contains(*s.Error, w) {
			t.Errorf("y's error %q lacks %q", *s.Error, w)
		}
	}
}

// TestColumnListRowFilter: with a column list (PostgreSQL 15+) a chunk
// reads only the published columns, and with a row filter only the
// published rows; a publication that leaves out a key column is refused.
// A request's where applies on top of the filter.
func TestColumnListRowFilter(t *testing.T) {
	c := pgtest.Shared(t)
	if m, err := c.Major(); err != nil || m < 15 {
		t.Skipf("column lists and row filters need PostgreSQL 15 (major %d, %v)", m, err)
	}
	db := c.NewDB(t)
	db.Exec(t, `CREATE TABLE cl (id int PRIMARY KEY, v text, secret text, n int)`,
		`INSERT INTO cl SELECT g, 'v' || g, 'secret' || g, g FROM generate_series(1, 30) g`,
		`CREATE PUBLICATION p FOR TABLE cl (id, v, n) WHERE (n > 10)`,
		`CREATE PUBLICATION nokey FOR TABLE cl (v, n) WITH (publish = 'insert')`,
		`CREATE PUBLICATION whole FOR TABLE cl`)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	read := func(pub, where string) *table {
		t.Helper()
		tb, err := describePublished(ctx, conn, pub, "cl")
		if err != nil {
			t.Fatalf("%s: %v", pub, err)
		}
		got, _, err := step(ctx, conn, tb, where, nil, &ingest.Watermark{ID: "test", Kind: "low"}, nil, bounds{}, 100, "bf0", &chunkBuf{})
		rows := decodeRead(t, got)
		if err != nil {
			t.Fatalf("%s: read: %v", pub, err)
		}
		var ids []string
		for _, r := range rows {
			if len(r.New) != len(tb.columns) || len(r.Columns) != len(tb.columns) {
				t.Fatalf("%s: a row of %d values, %d columns", pub, len(r.New), len(tb.columns))
			}
			ids = append(ids, string(r.New[0].Data))
		}
		t.Logf("%s where %q: ids %v", pub, where, ids)
		want := 30
		switch {
		case pub == "p" && where != "":
			want = 10 // 11..20
		case pub == "p":
			want = 20 // 11..30
		}
		if len(rows) != want || (pub == "p" && string(rows[0].New[0].Data) != "11") {
			t.Errorf("%s where %q: %d rows from %v, want %d", pub, where, len(rows), ids[:min(len(ids), 1)], want)
		}
		return tb
	}
	names := func(tb *table) []string {
		var out []string
		for _, c := range tb.columns {
			out = append(out, c.Name)
		}
		return out
	}
	if tb := read("p", ""); !slices.Equal(names(tb), []string{"id", "v", "n"}) || !slices.Equal(tb.keyIdx, []int{0}) {
		t.Errorf("p: columns %v key %v, want id v n, key 0", names(tb), tb.keyIdx)
	}
	read("p", "n <= 20")
	if tb := read("whole", ""); !slices.Equal(names(tb), []string{"id", "v", "secret", "n"}) {
		t.Errorf("whole: columns %v", names(tb))
	}
	_, err = describePublished(ctx, conn, "nokey", "cl")
	refused(t, "a publication without the key column", err, ErrNotPublished, "public.cl", `"nokey"`, "key column id")

	// Start checks the where clause against the published columns: one
	// that names another (an oracle for its values) is refused.
	r := startManager(t, db, t.TempDir(), nil, func(o *Options) { o.Publication, o.HighTimeout, o.MaxRedos = "p", time.Hour, 1000 })
	_, err = r.Start(ctx, Request{Tables: []string{"cl"}, Where: "secret LIKE 'secret1%'"})
	refused(t, "a where on an unpublished column", err, api.ErrBadRequest, "public.cl", `"secret" does not exist`)
	if _, err := r.Start(ctx, Request{Tables: []string{"cl"}, Where: "cl.n <= 20"}); err != nil {
		t.Fatalf("Start: %v", err)
	}
}
