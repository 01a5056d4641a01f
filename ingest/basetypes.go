package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgq-dev/pgq/pgoutput"
)

// baseTypes resolves the base types of domain columns: pgoutput's
// Relation message names a column's own type, a domain's OID for a domain
// column, and consumers render and decode its values by the base type (a
// domain over int4 is a number). It asks pg_type over a normal connection
// of its own, opened at the first relation with a type pgx does not know
// and kept for the session, and caches every answer by type OID (a type's
// base type never changes). The same connection reads the primary keys
// of REPLICA IDENTITY FULL and NOTHING tables (rowkey.go). Only the
// session's goroutine uses it.
type baseTypes struct {
	conn  *pgx.Conn
	bases map[uint32]uint32 // type OID → base type OID, 0: no domain
}

// baseTypesTimeout bounds one lookup: it runs in the receive loop.
const baseTypesTimeout = 5 * time.Second

// builtin knows PostgreSQL's built-in types, none of which is a domain
// (information_schema's domains are not in it: they are looked up).
var builtin = pgtype.NewMap()

// domainBases finds the base type of each domain among oids, through
// domains over domains; types that are no domain are not in the answer.
const domainBases = `WITH RECURSIVE d(oid, base) AS (
	SELECT oid, typbasetype FROM pg_type WHERE oid = ANY($1::oid[]) AND typtype = 'd'
	UNION ALL
	SELECT d.oid, t.typbasetype FROM d JOIN pg_type t ON t.oid = d.base AND t.typtype = 'd')
SELECT d.oid, d.base FROM d JOIN pg_type t ON t.oid = d.base WHERE t.typtype <> 'd'`

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
		rel.Columns[i].BaseTypeOID = bt.bases[rel.Columns[i].TypeOID]
	}
}

// lookup asks for the base types of oids and caches every answer.
func (bt *baseTypes) lookup(ctx context.Context, url string, oids []uint32) error {
	ctx, cancel := context.WithTimeout(ctx, baseTypesTimeout)
	defer cancel()
	if err := bt.connect(ctx, url); err != nil {
		return fmt.Errorf("ingest: base types: %w", err)
	}
	rows, err := bt.conn.Query(ctx, domainBases, oids)
	if err != nil {
		return fmt.Errorf("ingest: base types: %w", err)
	}
	found := map[uint32]uint32{}
	var oid, base uint32
	_, err = pgx.ForEachRow(rows, []any{&oid, &base}, func() error {
		found[oid] = base
		return nil
	})
	if err != nil {
		return fmt.Errorf("ingest: base types: %w", err)
	}
	if bt.bases == nil {
		bt.bases = map[uint32]uint32{}
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
