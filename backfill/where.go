package backfill

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pgq-dev/pgq/api"
)

// ErrWhere is wrapped by the error of a where predicate that could change
// the structure of the chunk query it is pasted into.
var ErrWhere = errors.New("backfill: where must be one predicate")

// checkWhereSyntax refuses a where predicate that could change the
// structure of the chunk query it is pasted into, "(key) > (last key)
// AND (where)": one that closes a parenthesis it did not open (its rows
// would no longer be bounded by the key, and the same chunk would be
// journaled forever), leaves one open, ends a statement (;), ends inside
// a literal or a comment (which would swallow the rest of the query), or
// names a query parameter ($1 is the chunk's last key). It scans the
// predicate the way PostgreSQL's lexer (scan.l) does, so that what is
// inside string literals (with standard_conforming_strings as the
// session has it: scs), quoted identifiers, dollar quotes and comments
// is not taken for structure, and nothing outside them is taken for a
// literal. Where PostgreSQL 15 and later versions lex differently (an
// identifier right after a number), it follows 15: later versions reject
// such input outright.
func checkWhereSyntax(where string, scs bool) error {
	if strings.IndexByte(where, 0) >= 0 {
		return whereError(strings.IndexByte(where, 0), "a NUL byte")
	}
	w := whereScan{s: where, scs: scs}
	for i := 0; i < len(where); {
		next, err := w.token(i)
		if err != nil {
			return err
		}
		i = next
	}
	if w.depth > 0 {
		return whereError(w.open[len(w.open)-1], "a parenthesis that is never closed")
	}
	return nil
}

// whereError is the error for what the predicate has at byte at.
func whereError(at int, what string) error {
	return api.Errorf(api.ErrBadRequest, "%w: it has %s (at byte %d)", ErrWhere, what, at)
}

// whereScan is the state of checkWhereSyntax's scan.
type whereScan struct {
	s     string
	scs   bool
	depth int
	open  []int // where the open parentheses are
}

// token scans the token (or the one character) at i and returns where
// the next one starts.
func (w *whereScan) token(i int) (int, error) {
	s := w.s
	switch c := s[i]; {
	case c == '-' && at(s, i+1) == '-':
		return lineEnd(s, i), nil
	case c == '/' && at(s, i+1) == '*':
		return w.blockComment(i)
	case c == '\'':
		return w.literal(i, i+1, w.plain())
	case c == '"':
		return w.quotedIdent(i, i+1)
	case c == '$':
		return w.dollar(i)
	case c == '(':
		w.depth++
		w.open = append(w.open, i)
	case c == ')':
		if w.depth == 0 {
			return 0, whereError(i, "a parenthesis it did not open")
		}
		w.depth--
		w.open = w.open[:len(w.open)-1]
	case c == ';':
		return 0, whereError(i, "a statement separator (;)")
	case isDigit(c) || c == '.' && isDigit(at(s, i+1)):
		return number(s, i), nil
	case isIdentStart(c):
		return w.word(i)
	}
	return i + 1, nil
}

// The kinds of string literal, as scan.l's states: what ends them and
// what a backslash does.
const (
	litStandard = iota // '...' with standard_conforming_strings on, N'...'
	litEscape          // E'...', and '...' with standard_conforming_strings off
	litBits            // B'...', X'...': no doubled quotes
	litUnicode         // U&'...'
)

// plain is the kind of a literal without prefix.
func (w *whereScan) plain() int {
	if w.scs {
		return litStandard
	}
	return litEscape
}

// word scans an identifier or keyword at i, or the literal it prefixes
// (E'…', B'…', X'…', N'…', U&'…' and U&"…").
func (w *whereScan) word(i int) (int, error) {
	s := w.s
	c, n := s[i]|0x20, at(s, i+1)
	switch {
	case c == 'u' && n == '&' && at(s, i+2) == '\'':
		if !w.scs {
			return 0, whereError(i, "a U&'…' literal while standard_conforming_strings is off")
		}
		return w.literal(i, i+3, litUnicode)
	case c == 'u' && n == '&' && at(s, i+2) == '"':
		return w.quotedIdent(i, i+3)
	case n != '\'':
	case c == 'e':
		return w.literal(i, i+2, litEscape)
	case c == 'b' || c == 'x':
		return w.literal(i, i+2, litBits)
	case c == 'n':
		return w.literal(i, i+2, w.plain())
	}
	j := i + 1
	for j < len(s) && isIdentCont(s[j]) {
		j++
	}
	return j, nil
}

// literal scans a string literal of kind k whose text starts at j (its
// token at start), with its continuations: a literal followed by
// whitespace holding a newline and a quote goes on, in the same kind.
func (w *whereScan) literal(start, j, k int) (int, error) {
	s := w.s
	for j < len(s) {
		switch s[j] {
		case '\\':
			if k == litEscape {
				j++ // the escaped character, whatever it is
			}
		case '\'':
			if k != litBits && at(s, j+1) == '\'' {
				j++
				break
			}
			next, ok := continuation(s, j+1)
			if !ok {
				return j + 1, nil
			}
			j = next
		}
		j++
	}
	return 0, whereError(start, "a string literal that is never closed")
}

// continuation reports whether the literal that ended before j goes on:
// whitespace and -- comments holding a newline, then a quote (its index).
func continuation(s string, j int) (int, bool) {
	newline := false
	for j < len(s) {
		switch c := s[j]; {
		case c == '\n' || c == '\r':
			newline = true
		case c == ' ' || c == '\t' || c == '\f' || c == '\v':
		case c == '-' && at(s, j+1) == '-':
			j = lineEnd(s, j)
			continue
		case c == '\'' && newline:
			return j, true
		default:
			return 0, false
		}
		j++
	}
	return 0, false
}

// quotedIdent scans a quoted identifier whose text starts at j.
func (w *whereScan) quotedIdent(start, j int) (int, error) {
	s := w.s
	for ; j < len(s); j++ {
		if s[j] != '"' {
			continue
		}
		if at(s, j+1) != '"' {
			return j + 1, nil
		}
		j++
	}
	return 0, whereError(start, "a quoted identifier that is never closed")
}

// dollar scans what starts with the $ at i: a dollar-quoted literal
// ($$...$$, $tag$...$tag$), a parameter ($1, refused) or a lone $.
func (w *whereScan) dollar(i int) (int, error) {
	s := w.s
	if isDigit(at(s, i+1)) {
		return 0, whereError(i, "a query parameter")
	}
	k := i + 1
	if isIdentStart(at(s, k)) {
		for k++; isIdentStart(at(s, k)) || isDigit(at(s, k)); k++ {
		}
	}
	if at(s, k) != '$' {
		return i + 1, nil // not a delimiter: PostgreSQL takes the $ alone
	}
	tag := s[i : k+1]
	end := strings.Index(s[k+1:], tag)
	if end < 0 {
		return 0, whereError(i, fmt.Sprintf("a dollar-quoted literal (%s) that is never closed", tag))
	}
	return k + 1 + end + len(tag), nil
}

// blockComment scans a /* comment */ at i; they nest.
func (w *whereScan) blockComment(i int) (int, error) {
	s := w.s
	depth := 0
	for j := i + 2; j < len(s); j++ {
		switch {
		case s[j] == '/' && at(s, j+1) == '*':
			depth++
			j++
		case s[j] == '*' && at(s, j+1) == '/':
			if depth == 0 {
				return j + 2, nil
			}
			depth--
			j++
		}
	}
	return 0, whereError(i, "a /* comment that is never closed")
}

// number scans a numeric constant at i (PostgreSQL 15's: digits, a
// decimal point, an exponent); an identifier right after it is the next
// token.
func number(s string, i int) int {
	j := digits(s, i)
	if at(s, j) == '.' && at(s, j+1) != '.' { // 1..2 is 1, "..", 2
		j = digits(s, j+1)
	}
	if c := at(s, j); c == 'e' || c == 'E' {
		k := j + 1
		if c := at(s, k); c == '+' || c == '-' {
			k++
		}
		if isDigit(at(s, k)) {
			j = digits(s, k)
		}
	}
	return j
}

func digits(s string, j int) int {
	for isDigit(at(s, j)) {
		j++
	}
	return j
}

// lineEnd is the end of the -- comment at i: the next newline, or the
// end of s.
func lineEnd(s string, i int) int {
	if n := strings.IndexAny(s[i:], "\n\r"); n >= 0 {
		return i + n
	}
	return len(s)
}

// at is s[i], or 0 past its end.
func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isIdentStart is scan.l's ident_start (and dolq_start): every byte of a
// multibyte character counts as a letter.
func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

// isIdentCont is scan.l's ident_cont: an unquoted identifier may hold $.
func isIdentCont(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '$' }
