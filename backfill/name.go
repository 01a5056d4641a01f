package backfill

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq/api"
)

// MaxTables is the most distinct tables one backfill reads. Its status
// holds them all, and is stored again with every chunk's progress and
// sent whole by every GET; Start also looks each one up in the catalog
// before it answers. A thousand keeps both small (tens of kilobytes,
// about a second); more tables take more backfills.
const MaxTables = 1000

// tableRef is a table as a request names it: its schema and name, or,
// for an unquoted name with several dots, that text, which only the
// catalog can split (resolve).
type tableRef struct {
	schema, name string
	dotted       string
}

// parseTable parses a table name: "table" (schema public) or
// "schema.table", each part unquoted (taken as it is, case included: as
// pgq shows names in changes) or quoted as a PostgreSQL identifier
// ("my.schema"."a""b": a quoted part may hold dots, and "" stands for
// "). An unquoted name with more dots (my.schema.t, as a change shows
// schema my.schema, table t) is split where the catalog has such a table.
func parseTable(s string) (tableRef, error) {
	s = strings.TrimSpace(s)
	var parts []string
	quoted := false
	for i := 0; ; {
		part, next, q, err := namePart(s, i)
		if err != nil {
			return tableRef{}, api.Errorf(api.ErrBadRequest, "table %q: %v (want schema.table; quote a part that holds a dot or a quote: \"my.schema\".t)", s, err)
		}
		parts, quoted, i = append(parts, part), quoted || q, next
		if i == len(s) {
			break
		}
	}
	switch {
	case len(parts) == 1:
		return tableRef{schema: "public", name: parts[0]}, nil
	case len(parts) == 2:
		return tableRef{schema: parts[0], name: parts[1]}, nil
	case !quoted:
		return tableRef{dotted: s}, nil
	}
	return tableRef{}, api.Errorf(api.ErrBadRequest, "table %q: %d parts, want schema.table (quote a part that holds a dot: \"my.schema\".t)", s, len(parts))
}

// namePart parses the part of a table name at i: its text, where the
// next part starts (len(s) at the end), and whether it was quoted.
func namePart(s string, i int) (part string, next int, quoted bool, err error) {
	if at(s, i) != '"' {
		end := strings.IndexByte(s[i:], '.')
		if end < 0 {
			end = len(s) - i
		}
		part, next = s[i:i+end], i+end+1
		switch {
		case part == "":
			return "", 0, false, fmt.Errorf("an empty part at byte %d", i)
		case next == len(s):
			return "", 0, false, fmt.Errorf("an empty part at byte %d", next)
		case strings.Contains(part, `"`):
			return "", 0, false, fmt.Errorf("a quote inside the unquoted part %q", part)
		}
		return part, min(next, len(s)), false, nil
	}
	var b strings.Builder
	for j := i + 1; j < len(s); j++ {
		if s[j] != '"' {
			b.WriteByte(s[j])
			continue
		}
		if at(s, j+1) == '"' {
			b.WriteByte('"')
			j++
			continue
		}
		switch {
		case b.Len() == 0:
			return "", 0, false, fmt.Errorf(`an empty quoted part at byte %d`, i)
		case j+1 == len(s):
			return b.String(), len(s), true, nil
		case s[j+1] == '.' && j+2 < len(s):
			return b.String(), j + 2, true, nil
		}
		return "", 0, false, fmt.Errorf("%q after the quoted part at byte %d", s[j+1:], i)
	}
	return "", 0, false, fmt.Errorf("a quote at byte %d that is never closed", i)
}

// qualifiedName is how pgq shows a table, and stores it in a backfill:
// schema.table, a part quoted as parseTable reads it when it holds a dot
// or a quote, or starts or ends with a space (or is empty); parseTable
// reads it back to the same table.
func qualifiedName(schema, name string) string {
	return quotePart(schema) + "." + quotePart(name)
}

func quotePart(p string) string {
	if p != "" && !strings.ContainsAny(p, `."`) && strings.TrimFunc(p, unicode.IsSpace) == p {
		return p
	}
	return `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
}

// resolve finds ref's schema and name: for a dotted name, the one split
// of it at a dot that names a table (an api.ErrNotFound when none does,
// an api.ErrBadRequest when several do).
func resolve(ctx context.Context, conn *pgx.Conn, ref tableRef) (schema, name string, err error) {
	if ref.dotted == "" {
		return ref.schema, ref.name, nil
	}
	var schemas, names []string
	for i, c := range []byte(ref.dotted) {
		if c == '.' {
			schemas, names = append(schemas, ref.dotted[:i]), append(names, ref.dotted[i+1:])
		}
	}
	rows, err := conn.Query(ctx, `SELECT n.nspname, c.relname FROM unnest($1::text[], $2::text[]) s(schema, name)
		JOIN pg_namespace n ON n.nspname = s.schema JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.name
		WHERE c.relkind IN ('r', 'p')`, schemas, names)
	if err != nil {
		return "", "", fmt.Errorf("backfill: look up table %s: %w", ref.dotted, err)
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (f [2]string, err error) {
		err = r.Scan(&f[0], &f[1])
		return f, err
	})
	if err != nil {
		return "", "", fmt.Errorf("backfill: look up table %s: %w", ref.dotted, err)
	}
	switch len(found) {
	case 0:
		return "", "", api.Errorf(api.ErrNotFound, "table %s does not exist", ref.dotted)
	case 1:
		return found[0][0], found[0][1], nil
	}
	var all []string
	for _, f := range found {
		all = append(all, qualifiedName(f[0], f[1]))
	}
	return "", "", api.Errorf(api.ErrBadRequest, "table %s is ambiguous: %s all exist (quote the parts)", ref.dotted, strings.Join(all, ", "))
}
