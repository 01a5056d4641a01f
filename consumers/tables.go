package consumers

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// Table names and table patterns.
//
// A group's filter knows a table by its two names as PostgreSQL stores
// them, unquoted: the schema and the relation (pgq.Change.Schema and
// Table). Every change is brought to that pair before it is matched:
//
//   - a row change carries it as it is;
//   - a DDL change names its object by PostgreSQL's object identity
//     (object_identity: identifiers joined by dots, each quoted the way
//     quote_ident quotes it, public."MyT"), which parseIdentity reads back
//     into names: the first two are the schema and the relation (a
//     column's identity public.t.c names table t; a function's
//     public.f(integer) names f);
//   - a truncate lists its tables as schema + "." + relation, unquoted,
//     which is ambiguous when a name holds a dot: every split is tried,
//     so such a truncate may pass a filter meant for another split, but is
//     never dropped from one that names its table.
//
// A table pattern is schema.table: the first "." outside double quotes
// and not escaped with \ separates a schema pattern from a table pattern,
// each matched against its name alone. In each, text in double quotes is
// literal (SQL's quoting: "" is one "), so "my.schema"."My*T" names a
// schema with a dot and a table with a star; outside quotes * matches any
// run of characters (including "." and "/"), ? one character, [a-z] and
// [^a-z] one character of (not of) a class, and \c the character c. A
// "." in the table pattern is an ordinary character: public.a.b is table
// "a.b" of schema public.

// maxPatternLen bounds a table pattern's length in bytes. PostgreSQL's
// names have at most 63 bytes, so a quoted schema.table with every quote
// doubled stays under 260; 512 leaves room for classes and escapes.
const maxPatternLen = 512

// patTok is one token of a compiled pattern side: a literal rune, any
// rune (?), any run (*) or a class.
type patTok struct {
	kind   byte // 'l' literal, '?' any rune, '*' any run, '[' class
	r      rune
	ranges []rune // class: lo, hi pairs
	neg    bool   // class: [^...]
}

func (t *patTok) matches(r rune) bool {
	switch t.kind {
	case 'l':
		return r == t.r
	case '?':
		return true
	}
	in := false
	for i := 0; i+1 < len(t.ranges); i += 2 {
		if t.ranges[i] <= r && r <= t.ranges[i+1] {
			in = true
			break
		}
	}
	return in != t.neg
}

// tablePattern is a compiled table pattern. legacy is set for a pattern
// stored before this syntax that it cannot read: it keeps matching as it
// did (path.Match on "schema.table").
type tablePattern struct {
	schema, table []patTok
	legacy        string
}

var errSyntax = errors.New("want schema.table")

// compileTablePattern compiles p (see the syntax above).
func compileTablePattern(p string) (tablePattern, error) {
	if len(p) > maxPatternLen {
		return tablePattern{}, fmt.Errorf("longer than %d bytes", maxPatternLen)
	}
	schema, rest, err := compileSide(p, true)
	if err != nil {
		return tablePattern{}, err
	}
	if len(schema) == 0 || !strings.HasPrefix(rest, ".") {
		return tablePattern{}, errSyntax
	}
	table, _, err := compileSide(rest[1:], false)
	if err != nil {
		return tablePattern{}, err
	}
	if len(table) == 0 {
		return tablePattern{}, errSyntax
	}
	return tablePattern{schema: schema, table: table}, nil
}

// compileSide compiles the pattern at the start of s up to its end or,
// with atDot, up to the first unquoted, unescaped "."; it returns the
// tokens and the rest of s (starting at that ".").
func compileSide(s string, atDot bool) ([]patTok, string, error) {
	var toks []patTok
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '.' && atDot:
			return toks, s[i:], nil
		case r == '"':
			lit, m, err := quoted(s[i:])
			if err != nil {
				return nil, "", err
			}
			for _, q := range lit {
				toks = append(toks, patTok{kind: 'l', r: q})
			}
			n = m
		case r == '\\':
			q, m := utf8.DecodeRuneInString(s[i+1:])
			if m == 0 {
				return nil, "", errors.New(`trailing \`)
			}
			toks = append(toks, patTok{kind: 'l', r: q})
			n += m
		case r == '*':
			if len(toks) == 0 || toks[len(toks)-1].kind != '*' {
				toks = append(toks, patTok{kind: '*'})
			}
		case r == '?':
			toks = append(toks, patTok{kind: '?'})
		case r == '[':
			tok, m, err := class(s[i:])
			if err != nil {
				return nil, "", err
			}
			toks = append(toks, tok)
			n = m
		default:
			toks = append(toks, patTok{kind: 'l', r: r})
		}
		i += n
	}
	return toks, "", nil
}

// quoted reads the double-quoted text at the start of s ("" is one ") and
// returns it unquoted with the bytes it took.
func quoted(s string) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '"' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '"' {
			b.WriteByte('"')
			i++
			continue
		}
		return b.String(), i + 1, nil
	}
	return "", 0, errors.New(`unclosed "`)
}

// class reads the character class at the start of s ([a-z], [^a-z], \
// escapes inside) and returns it with the bytes it took.
func class(s string) (patTok, int, error) {
	tok := patTok{kind: '['}
	i := 1
	if strings.HasPrefix(s[i:], "^") {
		tok.neg = true
		i++
	}
	next := func() (rune, bool) {
		if i < len(s) && s[i] == '\\' {
			i++
		}
		if i >= len(s) {
			return 0, false
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		return r, true
	}
	for i < len(s) && s[i] != ']' {
		lo, ok := next()
		if !ok {
			break
		}
		hi := lo
		if i+1 < len(s) && s[i] == '-' && s[i+1] != ']' {
			i++
			if hi, ok = next(); !ok || hi < lo {
				return patTok{}, 0, errors.New("bad range in [...]")
			}
		}
		tok.ranges = append(tok.ranges, lo, hi)
	}
	if i >= len(s) || len(tok.ranges) == 0 {
		return patTok{}, 0, errors.New("unclosed or empty [...]")
	}
	return tok, i + 1, nil
}

// matchToks reports whether toks match all of s. Every token but * takes
// one rune, so one backtracking point (the last *) is enough.
func matchToks(toks []patTok, s string) bool {
	ti, si := 0, 0
	star, starS := -1, 0
	for si < len(s) {
		if ti < len(toks) && toks[ti].kind == '*' {
			star, starS = ti, si
			ti++
			continue
		}
		if ti < len(toks) {
			r, n := utf8.DecodeRuneInString(s[si:])
			if toks[ti].matches(r) {
				ti++
				si += n
				continue
			}
		}
		if star < 0 {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		ti, si = star+1, starS
	}
	for ti < len(toks) && toks[ti].kind == '*' {
		ti++
	}
	return ti == len(toks)
}

// match reports whether the table schema.table matches.
func (p *tablePattern) match(schema, table string) bool {
	if p.legacy != "" {
		ok, _ := path.Match(p.legacy, schema+"."+table)
		return ok
	}
	return matchToks(p.schema, schema) && matchToks(p.table, table)
}

// compilePatterns compiles a filter's table patterns; one that does not
// compile (stored before this syntax) keeps its old path.Match meaning.
func compilePatterns(tables []string) []tablePattern {
	out := make([]tablePattern, len(tables))
	for i, t := range tables {
		p, err := compileTablePattern(t)
		if err != nil {
			p = tablePattern{legacy: t}
		}
		out[i] = p
	}
	return out
}

// parseIdentity reads a PostgreSQL object identity (public."MyT",
// public.t.c, public.f(integer)) into its leading names, unquoted; it
// stops at the first character that does not continue a name or a dot.
func parseIdentity(s string) []string {
	var names []string
	for i := 0; i < len(s); {
		var name string
		if s[i] == '"' {
			q, n, err := quoted(s[i:])
			if err != nil {
				return names
			}
			name, i = q, i+n
		} else {
			j := i
			for j < len(s) && !strings.ContainsRune(`."( ,`, rune(s[j])) {
				j++
			}
			if j == i {
				return names
			}
			name, i = s[i:j], j
		}
		names = append(names, name)
		if i >= len(s) || s[i] != '.' {
			return names
		}
		i++
	}
	return names
}

// literal returns the schema and table p matches when it matches only
// those (no glob tokens).
func (p *tablePattern) literal() (schema, table string, ok bool) {
	if p.legacy != "" {
		return "", "", false
	}
	s, ok1 := literalToks(p.schema)
	t, ok2 := literalToks(p.table)
	return s, t, ok1 && ok2
}

func literalToks(toks []patTok) (string, bool) {
	var b strings.Builder
	for i := range toks {
		if toks[i].kind != 'l' {
			return "", false
		}
		b.WriteRune(toks[i].r)
	}
	return b.String(), true
}
