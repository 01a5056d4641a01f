package backfill

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq"
	"github.com/pgq-dev/pgq/api"
)

// ErrNotPublished is wrapped by the error of a table that pgq's
// publication does not publish (or publishes without its key columns),
// or when that publication does not exist: a backfill reads only what
// the slot itself would carry, so that no table, column or row outside
// the publication reaches the journal (and every consumer) through it.
var ErrNotPublished = api.Errorf(api.ErrBadRequest, "backfill: table is not published")

// ErrSystemTable is wrapped by the error of a table in a system schema
// (pg_catalog, information_schema, pg_toast, any other pg_*): never
// read, whatever the publication says.
var ErrSystemTable = api.Errorf(api.ErrBadRequest, "backfill: system tables are never read")

// systemSchema reports a schema of PostgreSQL's own: information_schema
// and every name PostgreSQL reserves for itself (pg_catalog, pg_toast,
// pg_temp_N, pg_toast_temp_N: CREATE SCHEMA refuses the pg_ prefix, with
// PostgreSQL's own case-sensitive test).
func systemSchema(schema string) bool {
	return schema == "information_schema" || strings.HasPrefix(schema, "pg_")
}

// checkSystem refuses a table of a system schema.
func checkSystem(schema, name string) error {
	if systemSchema(schema) {
		return fmt.Errorf("%w: %s is in system schema %s", ErrSystemTable, qualifiedName(schema, name), quotePart(schema))
	}
	return nil
}

// publishedAs is how a publication publishes a table: the columns it
// carries (nil: all of them) and its row filter ("": every row).
type publishedAs struct {
	columns   []string
	rowFilter string
}

// published looks t up in publication pub (pg_publication_tables, which
// resolves FOR ALL TABLES, FOR TABLES IN SCHEMA and partitions as the
// walsender does). PostgreSQL 15 and later also give the column list and
// the row filter; 14 has neither (nor does it have either feature). A
// table the publication does not list, or a publication that does not
// exist, is an ErrNotPublished naming both.
func published(ctx context.Context, conn *pgx.Conn, pub, schema, name string) (publishedAs, error) {
	q := `SELECT NULL::text[], NULL::text FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3`
	if serverMajor(conn) >= 15 {
		q = `SELECT attnames::text[], rowfilter FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3`
	}
	rows, err := conn.Query(ctx, q, pub, schema, name)
	if err != nil {
		return publishedAs{}, fmt.Errorf("backfill: look up %s in publication %q: %w", qualifiedName(schema, name), pub, err)
	}
	type row struct {
		cols   []string
		filter *string
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (f row, err error) {
		err = r.Scan(&f.cols, &f.filter)
		return f, err
	})
	if err != nil {
		return publishedAs{}, fmt.Errorf("backfill: look up %s in publication %q: %w", qualifiedName(schema, name), pub, err)
	}
	if len(found) == 0 {
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, pub).Scan(&exists); err != nil {
			return publishedAs{}, fmt.Errorf("backfill: look up publication %q: %w", pub, err)
		}
		if !exists {
			return publishedAs{}, fmt.Errorf("%w: %s: publication %q does not exist", ErrNotPublished, qualifiedName(schema, name), pub)
		}
		return publishedAs{}, fmt.Errorf("%w: %s is not in publication %q (a backfill reads only the tables the slot publishes: ALTER PUBLICATION %s ADD TABLE ...)",
			ErrNotPublished, qualifiedName(schema, name), pub, pgx.Identifier{pub}.Sanitize())
	}
	// The view lists a table once; should it list it more than once, a
	// row is published when any entry publishes it, with the columns of
	// all of them.
	var p publishedAs
	var filters []string
	everyRow, everyColumn := false, false
	for _, f := range found {
		if f.filter == nil {
			everyRow = true
		} else {
			filters = append(filters, "("+*f.filter+")")
		}
		if f.cols == nil {
			everyColumn = true
		}
		for _, c := range f.cols {
			if !slices.Contains(p.columns, c) {
				p.columns = append(p.columns, c)
			}
		}
	}
	if everyColumn {
		p.columns = nil
	}
	if !everyRow {
		p.rowFilter = strings.Join(filters, " OR ")
	}
	return p, nil
}

// serverMajor is the server's major version, from the server_version
// it reports at connect ("15.8 (Debian ...)", "18beta1"); 0 when
// unknown.
func serverMajor(conn *pgx.Conn) int {
	v := conn.PgConn().ParameterStatus("server_version")
	end := 0
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, _ := strconv.Atoi(v[:end])
	return n
}

// restrict keeps only t's columns that p publishes (in t's order) and
// sets t's row filter: what the slot would carry of the table. A key
// column the publication leaves out is an ErrNotPublished: the chunks
// are read and told apart from the stream's changes by the key, and the
// slot would not carry it.
func (t *table) restrict(pub string, p publishedAs) error {
	t.rowFilter = p.rowFilter
	if p.columns == nil {
		return nil
	}
	for _, k := range t.keyCols {
		if !slices.Contains(p.columns, k) {
			return fmt.Errorf("%w: %s: publication %q does not publish key column %s (publish it, or give the table another key)",
				ErrNotPublished, t.qualified(), pub, quotePart(k))
		}
	}
	var cols []pgq.Column
	var types []string
	t.keyIdx = t.keyIdx[:0]
	for i, c := range t.columns {
		if !slices.Contains(p.columns, c.Name) {
			continue
		}
		cols, types = append(cols, c), append(types, t.types[i])
	}
	t.narrowed = len(cols) < len(t.columns)
	t.columns, t.types = cols, types
	for _, k := range t.keyCols {
		for i := range t.columns {
			if t.columns[i].Name == k {
				t.keyIdx = append(t.keyIdx, i)
			}
		}
	}
	return nil
}

// describePublished is describe for a table publication pub publishes,
// restricted to what it publishes of it (restrict); a table of a system
// schema is refused before anything is read of it.
func describePublished(ctx context.Context, conn *pgx.Conn, pub, qualified string) (*table, error) {
	return describePublishedTable(ctx, conn, pub, qualified, true)
}

// describePublishedTable is describePublished; without needKey a table
// without a key is described with none (see describeTable).
func describePublishedTable(ctx context.Context, conn *pgx.Conn, pub, qualified string, needKey bool) (*table, error) {
	t, err := describeTable(ctx, conn, qualified, needKey)
	if err != nil {
		return nil, err
	}
	p, err := published(ctx, conn, pub, t.schema, t.name)
	if err != nil {
		return nil, err
	}
	if err := t.restrict(pub, p); err != nil {
		return nil, err
	}
	return t, nil
}
