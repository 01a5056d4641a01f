package backfill

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
	"github.com/pgq-dev/pgq/ingest"
	"github.com/pgq-dev/pgq/internal/pgtest"
)

// whereCase is a predicate and what checkWhereSyntax must say of it: ""
// accepted, else a part of the error.
type whereCase struct {
	where string
	scs   bool // standard_conforming_strings
	want  string
}

var whereCases = []whereCase{
	// Accepted: parentheses, semicolons, $1 and comment starts inside
	// literals, identifiers and comments are not structure.
	{`id > 5`, true, ""},
	{`(id % 2 = 0) AND (v <> 'x')`, true, ""},
	{`v = 'it''s (here; $1 --'`, true, ""},
	{`v = E'a\'b(c'`, true, ""},
	{`v = e'\\'`, true, ""},
	{`v = 'a\'`, true, ""}, // standard: the backslash is a character
	{`v = 'a\''' )'`, false, ""},
	{`v = $$)$$ OR v = $t$($t$ OR v = $a$ $b$ ) $a$`, true, ""},
	{`v = $x$ $$ $x$`, true, ""},
	{`"a'b" IS NULL OR "x""(" = ')'`, true, ""},
	{`U&"d\0061t" IS NULL`, true, ""},
	{`v = U&'\0061' OR v = N'n' OR B'0001' = X'1'`, true, ""},
	{`v$x$ IS NULL AND w$ = 'a'`, true, ""},
	{`id > 7 -- a trailing comment (`, true, ""},
	{"id > 7 -- (\n AND id < 9", true, ""},
	{`/* ( */ id > 7 /* nested /* ) */ ' */`, true, ""},
	{"v = 'a'\n'b'", true, ""},
	{"v = E'a'\n  -- c\n'\\'' ", true, ""},
	{`id BETWEEN 1..2`, true, ""}, // a syntax error, PostgreSQL's to report
	{`t.id = 1.5e3 AND 1e5 > .5`, true, ""},
	{`$ = 1`, true, ""}, // a lone $: PostgreSQL's syntax error
	{"", true, ""},

	// Refused: each would change the query's structure.
	{`false) or (true`, true, "did not open"},
	{`false) OR true --`, true, "did not open"},
	{`(id > 5`, true, "never closed"},
	{`true; DELETE FROM t`, true, "statement separator"},
	{`id > $1`, true, "query parameter"},
	{`v = 'abc`, true, "string literal that is never closed"},
	{`v = E'abc\'`, true, "string literal that is never closed"},
	{`v = E'abc\`, true, "string literal that is never closed"},
	{`"abc`, true, "quoted identifier that is never closed"},
	{`v = $t$abc$t`, true, "dollar-quoted literal ($t$) that is never closed"},
	{`v = $$abc`, true, "dollar-quoted literal ($$) that is never closed"},
	{`true /* a /* b */`, true, "/* comment that is never closed"},
	{"true\x00", true, "NUL"},
	{`v = U&'a'`, false, "standard_conforming_strings is off"},
	// What a lexer that does not know one of PostgreSQL's rules would
	// take for a literal or a comment, PostgreSQL does not.
	{`v = 'a\') OR (true) --'`, true, "did not open"},               // backslash in a standard literal
	{`v = 'a\'' ) OR (true) --'`, false, "did not open"},            // backslash with standard_conforming_strings off
	{`v = E'\'' ) OR (true) --'`, true, "did not open"},             // E'' escapes
	{`v = $$'$$ ) OR (true) --'`, true, "did not open"},             // dollar quotes
	{`v$x$ IS NULL) OR (true) --$x$`, true, "did not open"},         // $ inside an identifier
	{`true /* /* */ ' */ ) OR (true) --'`, true, "did not open"},    // nested comments
	{"true -- '\n ) OR (true) --'", true, "did not open"},           // line comments
	{`"a'b" IS NULL) OR (true) --'`, true, "did not open"},          // quoted identifiers
	{`"a""'" IS NULL) OR (true) --'`, true, "did not open"},         // doubled quotes in identifiers
	{"v = E'x'\n'\\'' ) OR (true) --'", true, "did not open"},       // a continued E'' literal
	{"v = B'0'\n'\\' ) OR (true) --'", false, "did not open"},       // a continued B'' literal
	{"v = 'x' /* */\n'\\'' ) OR (true) --'", false, "did not open"}, // /* */ does not continue a literal
	{`v = 1e5$x$'$x$ ) OR (true) --'`, true, "did not open"},        // a dollar quote right after a number
	{`v = 1$x$'$x$ ) OR (true) --'`, true, "did not open"},          // the same after an integer
	{`v = 1_0$x$ ) OR (true) --$x$`, true, "did not open"},          // PostgreSQL 15: 1, then the identifier _0$x$
	{`v = xe'\' ) OR (true) --'`, true, "did not open"},             // xe is an identifier, not an E prefix
	{`v = n'\'' ) OR (true) --'`, false, "did not open"},            // N'' follows standard_conforming_strings
	{`v = U&'\' ) OR (true) --'`, true, "did not open"},             // U&'' has no backslash escapes
	{`v = B'\' ) OR (true) --'`, false, "did not open"},             // nor have B''
	{"v = $a$ $a $a$ ) OR (true) --$a$", true, "did not open"},      // $a is no delimiter
	{"v = $a$ $ab$ $a$ ) OR (true) -- $ab$", true, "did not open"},  // nor does $ab$ end $a$
	{`v = 'a' -- c ) OR (true) --` + "\n'x'", true, ""},             // all inside: accepted
}

// TestWhereSyntax: checkWhereSyntax accepts predicates whose parentheses,
// semicolons, parameters and comment starts are inside literals, quoted
// identifiers and comments, as PostgreSQL lexes them, and refuses, with
// a message that says what, every predicate that would change the chunk
// query's structure, including those a lexer missing one of
// PostgreSQL's rules would accept.
func TestWhereSyntax(t *testing.T) {
	for _, c := range whereCases {
		err := checkWhereSyntax(c.where, c.scs)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q (scs %v): %v, want accepted", c.where, c.scs, err)
		case c.want != "" && err == nil:
			t.Errorf("%q (scs %v) accepted, want %q", c.where, c.scs, c.want)
		case c.want != "" && (!strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrWhere) || !errors.Is(err, api.ErrBadRequest)):
			t.Errorf("%q (scs %v): %v, want ErrWhere, bad_request and %q", c.where, c.scs, err, c.want)
		}
	}
}

// TestWhereAgainstPostgres holds the lexer to PostgreSQL's: each refused
// predicate of whereCases that PostgreSQL can run, pasted into a chunk
// query as it was before checkWhereSyntax, does break out of its
// parentheses on a real server (it returns rows the key range excludes),
// and each accepted one runs in the chunk query as it is now without
// returning such a row.
func TestWhereAgainstPostgres(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE t (id int PRIMARY KEY, v text, "v$x$" text, w$ text, "a'b" text, "a""'" text, "x""(" text, dat text)`,
		`INSERT INTO t (id, v) SELECT g, 'v' || g FROM generate_series(1, 10) g`)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	broke := 0
	for _, c := range whereCases {
		if c.where == "" || strings.Contains(c.where, "\x00") {
			continue
		}
		set := "on"
		if !c.scs {
			set = "off"
		}
		if _, err := conn.Exec(ctx, "SET standard_conforming_strings = "+set); err != nil {
			t.Fatal(err)
		}
		if got := standardStrings(conn); got != c.scs {
			t.Fatalf("standardStrings = %v after SET %s", got, set)
		}
		if c.want != "" {
			// The query as it was: the predicate between bare parentheses
			// on one line.
			ids, err := queryIDs(ctx, conn, "SELECT id FROM t WHERE (id > 5) AND ("+c.where+") ORDER BY id LIMIT 3")
			if err == nil && len(ids) > 0 && ids[0] <= 5 {
				broke++
			}
			if err == nil && len(ids) > 0 && ids[0] > 5 && strings.Contains(c.want, "did not open") {
				t.Errorf("%q: PostgreSQL did not break out (%v): the case tests nothing", c.where, ids)
			}
			continue
		}
		ids, err := queryIDs(ctx, conn, "SELECT id FROM t WHERE (id > 5) AND ("+c.where+"\n) ORDER BY id")
		if err != nil {
			continue // a syntax or type error: checkWhere's EXPLAIN refuses it
		}
		for _, id := range ids {
			if id <= 5 {
				t.Errorf("%q (scs %v) accepted, yet PostgreSQL returned id %d outside the key range", c.where, c.scs, id)
			}
		}
	}
	if broke < 15 {
		t.Fatalf("only %d refused predicates broke out on PostgreSQL", broke)
	}
}

func queryIDs(ctx context.Context, conn *pgx.Conn, sql string) ([]int, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

// FuzzWhere: checkWhereSyntax never panics, and a predicate it accepts
// ends outside every literal and comment at depth 0: followed by a
// newline and a closing parenthesis (as the chunk query follows it) it
// is refused for that parenthesis, and a newline and a semicolon for
// the semicolon, whatever the predicate holds.
func FuzzWhere(f *testing.F) {
	for _, c := range whereCases {
		f.Add(c.where, c.scs)
	}
	f.Fuzz(func(t *testing.T, where string, scs bool) {
		err := checkWhereSyntax(where, scs)
		if err != nil {
			if !errors.Is(err, ErrWhere) || !errors.Is(err, api.ErrBadRequest) {
				t.Fatalf("%q: %v is not ErrWhere", where, err)
			}
			return
		}
		for _, tail := range []string{"\n)", "\n) OR (true", "\n;"} {
			if checkWhereSyntax(where+tail, scs) == nil {
				t.Fatalf("%q accepted, and so was it followed by %q", where, tail)
			}
		}
		if err := checkWhereSyntax("("+where+"\n) AND x = ';'", scs); err != nil {
			t.Fatalf("%q accepted, not in parentheses: %v", where, err)
		}
	})
}

// TestChunkNoProgress: the defence behind checkWhereSyntax. A predicate
// that breaks out of its parentheses anyway (pasted here past the
// check, as a lexer missing one of PostgreSQL's rules would let it
// through) reads rows that do not come after the previous chunk's last
// key, and the chunk fails with ErrNoProgress, an error that fails the
// backfill instead of journaling the same chunk forever; a predicate
// that keeps to its parentheses reads the rows after the key as before.
func TestChunkNoProgress(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE t (a int, b text, v text, PRIMARY KEY (a, b))`,
		`INSERT INTO t SELECT g / 2, 'k' || g % 2, 'v' FROM generate_series(1, 100) g`)
	ctx := t.Context()
	low := &ingest.Watermark{ID: "x", Kind: "low"}
	read := func(where string, after []string) ([]pgq.Change, error) {
		conn, err := pgx.Connect(ctx, db.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		tb, err := describe(ctx, conn, "t")
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := step(ctx, conn, tb, where, nil, low, after, bounds{}, 10, "bf1", &chunkBuf{})
		rows := decodeRead(t, got)
		return rows, err
	}
	for _, where := range []string{"false) OR (true", "a < 5) OR (a > 0", "true) OR (a = 3"} {
		_, err := read(where, []string{"10", "k1"})
		if !errors.Is(err, ErrNoProgress) || !permanent(err) || !strings.Contains(err.Error(), "after key [10 k1]") {
			t.Errorf("%q: %v, want ErrNoProgress", where, err)
		}
	}
	rows, err := read("a % 2 = 0", []string{"10", "k1"})
	if err != nil || len(rows) != 10 {
		t.Fatalf("a %% 2 = 0: %d rows, %v", len(rows), err)
	}
	for _, r := range rows {
		if a, _ := strconv.Atoi(string(r.New[0].Data)); len(r.New) != 3 || a <= 10 || a%2 != 0 {
			t.Fatalf("row %q after key (10, k1)", r.New)
		}
	}
	if rows, err := read("", nil); err != nil || len(rows) != 10 || string(rows[0].New[0].Data) != "0" {
		t.Fatalf("first chunk: %d rows, %v", len(rows), err)
	}
	// Without a where, nothing but the key comparison selects the rows
	// and the query has no check column: the rows after the key, each
	// with the table's values only.
	rows, err = read("", []string{"10", "k1"})
	if err != nil || len(rows) != 10 {
		t.Fatalf("after key (10, k1): %d rows, %v", len(rows), err)
	}
	for i, r := range rows {
		want := []string{strconv.Itoa(11 + i/2), "k" + strconv.Itoa(i%2), "v"}
		if len(r.New) != 3 || string(r.New[0].Data) != want[0] || string(r.New[1].Data) != want[1] || string(r.New[2].Data) != want[2] {
			t.Fatalf("row %d after key (10, k1): %q, want %q", i, r.New, want)
		}
	}
}

// TestResumeRechecksWhere: a running backfill stored with a predicate
// that breaks out of its parentheses (by a pgq before checkWhereSyntax)
// fails when it is resumed, saying why, instead of reading on.
func TestResumeRechecksWhere(t *testing.T) {
	db := pgtest.Shared(t).NewDB(t)
	db.Exec(t, `CREATE TABLE t (id int PRIMARY KEY)`, `INSERT INTO t SELECT generate_series(1, 50)`)
	dir := t.TempDir()
	m, err := Open(Options{PGURL: db.URL, Dir: dir, Registry: ingest.NewBackfills(), Durable: func() pgq.LSN { return 0 },
		Publication: allTables, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.seq = 1
	st := Status{Backfill: api.Backfill{ID: "bf1", State: StateRunning, Tables: []string{"public.t"}, Table: "public.t",
		Where: "false) OR (true", ChunkSize: 10}}
	err = m.put(&st)
	m.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	r := startManager(t, db, dir, nil, func(o *Options) { o.HighTimeout, o.MaxRedos = 50*time.Millisecond, 1000 })
	waitUntil(t, "the resumed backfill to stop", func() bool { s, _ := r.Get("bf1"); return s.State != StateRunning })
	s, _ := r.Get("bf1")
	if s.State != StateFailed || s.Error == nil || !strings.Contains(*s.Error, "where must be one predicate") || s.Chunks != 0 {
		t.Fatalf("resumed: %+v (error %v)", s, s.Error)
	}
}
