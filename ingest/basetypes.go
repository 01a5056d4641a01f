package ingest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq/pgoutput"
)

// baseTypes resolves the value types of columns (ValueTypeOf): pgoutput's
// Relation message names a column's own type, a domain's OID for a domain
// column, and consumers render and decode its values by the base type (a
// domain over int4 is a number); an array of an enum or an extension
// type by text[]. It asks pg_type over a normal connection
// of its own, opened at the first relation with a type pgx does not know
// and kept for the session, and caches every answer by type OID (a type's
// base type and name never change). The same connection reads the primary keys
// of REPLICA IDENTITY FULL and NOTHING tables (rowkey.go). Only the
// session's goroutine uses it.
type baseTypes struct {
	conn  *pgx.Conn
	bases map[uint32]typeInfo // by type OID
}

// typeInfo is what the lookup learns of one type: pgq.Column's
// BaseTypeOID and TypeName.
type typeInfo struct {
	base uint32 // value type OID, 0: the type itself
	name string // an extension's type name (TypeNameOf), "" for none
}

// baseTypesTimeout bounds one lookup: it runs in the receive loop.
const baseTypesTimeout = 5 * time.Second

// builtin knows PostgreSQL's built-in types, none of which is a domain
// (information_schema's domains are not in it: they are looked up).
var builtin = pgtype.NewMap()

// ValueTypeOf is a SQL expression of the type OID expression oid: the
// type pgq renders and decodes the values of a column of that type by
// (pgq.Column.BaseTypeOID), 0 for the type itself. A domain reads as its
// base type (through domains over domains). An array of a type pgq does
// not know (its OID is not fixed: an enum's, an extension's such as
// citext, ltree or hstore, a range's), which pgoutput names by its own
// dynamic OID only, reads as text[]: PostgreSQL's array literal of the
// elements' text, which the Debezium format renders as a JSON array of
// strings, as Debezium does for arrays of enums, citext and ltree. An
// array of a domain reads as the array of the domain's base type. Arrays
// of composite types stay unknown (their text).
func ValueTypeOf(oid string) string {
	return strings.ReplaceAll(`COALESCE((WITH RECURSIVE
	b(t) AS (SELECT OID UNION ALL SELECT y.typbasetype FROM b JOIN pg_type y ON y.oid = b.t AND y.typtype = 'd'),
	base AS (SELECT y.oid, y.typelem, y.typlen FROM b JOIN pg_type y ON y.oid = b.t WHERE y.typtype <> 'd'),
	e(t) AS (SELECT typelem FROM base WHERE oid >= 16384 AND typelem <> 0 AND typlen = -1
		UNION ALL SELECT y.typbasetype FROM e JOIN pg_type y ON y.oid = e.t AND y.typtype = 'd'),
	elem AS (SELECT y.oid, y.typtype, y.typarray FROM e JOIN pg_type y ON y.oid = e.t WHERE y.typtype <> 'd')
	SELECT CASE
		WHEN elem.oid IS NULL THEN NULLIF(base.oid, OID)
		WHEN elem.oid < 16384 THEN NULLIF(elem.typarray, 0)
		WHEN elem.typtype IN ('e', 'b', 'r', 'm') THEN 'text[]'::regtype::oid
	END FROM base LEFT JOIN elem ON true), 0)`, "OID", oid)
}

// TypeNameOf is a SQL expression of the type OID expression oid: the
// name pgq journals for a column of that type (pgq.Column.TypeName),
// "" for none. A type whose values read as an extension's base type
// (typtype 'b' with an OID that is not fixed: hstore, citext, ltree,
// PostGIS's geometry; through domains) is named by its pg_type.typname,
// an array of one by the element's name and "[]" ("hstore[]"). Only
// extensions create such base types, so the name says which type it is
// as Debezium's type registry tells hstore, ltree or geometry apart by
// name; an enum's, a range's or a composite's name, chosen by the
// database's users, says nothing more than the OID and is not
// journaled.
func TypeNameOf(oid string) string {
	return strings.ReplaceAll(`COALESCE((WITH RECURSIVE
	b(t) AS (SELECT OID UNION ALL SELECT y.typbasetype FROM b JOIN pg_type y ON y.oid = b.t AND y.typtype = 'd'),
	base AS (SELECT y.oid, y.typname, y.typtype, y.typelem, y.typlen FROM b JOIN pg_type y ON y.oid = b.t WHERE y.typtype <> 'd'),
	e(t) AS (SELECT typelem FROM base WHERE typelem <> 0 AND typlen = -1
		UNION ALL SELECT y.typbasetype FROM e JOIN pg_type y ON y.oid = e.t AND y.typtype = 'd'),
	elem AS (SELECT y.oid, y.typname, y.typtype FROM e JOIN pg_type y ON y.oid = e.t WHERE y.typtype <> 'd')
	SELECT CASE
		WHEN elem.oid IS NULL THEN CASE WHEN base.oid >= 16384 AND base.typtype = 'b' THEN base.typname::text END
		WHEN elem.oid >= 16384 AND elem.typtype = 'b' THEN elem.typname || '[]'
	END FROM base LEFT JOIN elem ON true), '')`, "OID", oid)
}

// resolve sets Column.BaseTypeOID on rel's domain columns (the decoder's
// cached relation, which the following rows share). A failed lookup is
// logged and leaves them 0: their values are then journaled without a
// base type and render as text, as before pgq recorded base types,
// rather than stop ingest (and make PostgreSQL retain WAL) over how a
// value is rendered. The next relation tries again.
func (s *session) resolveBaseTypes(ctx context.Context, rel *pgoutput.Relation) {
	bt := &s.bases
	var unknown []uint32
	for _, c := range rel.Columns {
		if _, ok := builtin.TypeForOID(c.TypeOID); ok {
			continue
		}
		if _, ok := bt.bases[c.TypeOID]; !ok {
			unknown = append(unknown, c.TypeOID)
		}
	}
	if len(unknown) > 0 {
		if err := bt.lookup(ctx, s.in.o.PGURL, unknown); err != nil {
			s.in.o.Logger.Warn("cannot read the base types of domain columns; their values render as text",
				"table", rel.Namespace+"."+rel.Name, "error", err)
			return
		}
	}
	for i := range rel.Columns {
		ti := bt.bases[rel.Columns[i].TypeOID]
		rel.Columns[i].BaseTypeOID, rel.Columns[i].TypeName = ti.base, ti.name
	}
}

// lookup asks for the base types of oids and caches every answer.
func (bt *baseTypes) lookup(ctx context.Context, url string, oids []uint32) error {
	ctx, cancel := context.WithTimeout(ctx, baseTypesTimeout)
	defer cancel()
	if err := bt.connect(ctx, url); err != nil {
		return fmt.Errorf("ingest: base types: %w", err)
	}
	rows, err := bt.conn.Query(ctx, `SELECT t, `+ValueTypeOf("t")+`, `+TypeNameOf("t")+` FROM unnest($1::oid[]) t`, oids)
	if err != nil {
		return fmt.Errorf("ingest: base types: %w", err)
	}
	found := map[uint32]typeInfo{}
	var oid uint32
	var ti typeInfo
	_, err = pgx.ForEachRow(rows, []any{&oid, &ti.base, &ti.name}, func() error {
		found[oid] = ti
		return nil
	})
	if err != nil {
		return fmt.Errorf("ingest: base types: %w", err)
	}
	if bt.bases == nil {
		bt.bases = map[uint32]typeInfo{}
	}
	for _, o := range oids {
		bt.bases[o] = found[o]
	}
	return nil
}

// connect opens the lookup connection unless it is open.
func (bt *baseTypes) connect(ctx context.Context, url string) error {
	if bt.conn != nil && !bt.conn.IsClosed() {
		return nil
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	if bt.conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	return nil
}

// close closes the lookup connection, if any.
func (bt *baseTypes) close(ctx context.Context) {
	if bt.conn != nil {
		bt.conn.Close(ctx)
		bt.conn = nil
	}
}
