package ingest

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgq-dev/pgq/pgoutput"
)

// primaryKeyColumns names the columns of a relation's primary key.
const primaryKeyColumns = `SELECT a.attname FROM pg_index i
	JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
	WHERE i.indrelid = $1::oid AND i.indisprimary`

// resolveRowKey makes rel's Column.Key flags the row's key: its primary
// key, or its replica identity index under REPLICA IDENTITY USING INDEX
// (design invariant 13). pgoutput flags the replica identity's columns:
// under DEFAULT and USING INDEX those are that key already (the
// walsender reads them from the catalog as of the change, so they are
// kept as sent); under FULL it flags every column and under NOTHING
// none, so for those two the primary key is read from pg_index over the
// normal connection of baseTypes. A FULL or NOTHING table without a
// primary key has no key column (its changes then share the table as
// their key). The catalog is read when the Relation message arrives:
// PostgreSQL re-sends one after the table's definition changed (an added
// or dropped primary key too), so the key follows the next Relation
// message. The catalog read is today's, not the one of the change's
// time: when the key changed between a change and ingest reading the
// table's Relation message before it (pgq behind, or restarted), the new
// key holds from that message on, a few changes early. A failed lookup fails the session (it reconnects and the
// relation comes again): journaling the whole row as key would split a
// row's changes across lanes and partitions.
func (s *session) resolveRowKey(ctx context.Context, rel *pgoutput.Relation) error {
	if rel.ReplicaIdentity != 'f' && rel.ReplicaIdentity != 'n' {
		return nil
	}
	key, err := s.bases.primaryKey(ctx, s.in.o.PGURL, rel.ID)
	if err != nil {
		return fmt.Errorf("ingest: primary key of %s.%s: %w", rel.Namespace, rel.Name, err)
	}
	for i := range rel.Columns {
		_, rel.Columns[i].Key = key[rel.Columns[i].Name]
	}
	return nil
}

// primaryKey returns the names of the primary key columns of relation
// oid (none for a table without one, or one dropped since).
func (bt *baseTypes) primaryKey(ctx context.Context, url string, oid uint32) (map[string]struct{}, error) {
	ctx, cancel := context.WithTimeout(ctx, baseTypesTimeout)
	defer cancel()
	if err := bt.connect(ctx, url); err != nil {
		return nil, err
	}
	rows, err := bt.conn.Query(ctx, primaryKeyColumns, oid)
	if err != nil {
		return nil, err
	}
	key := map[string]struct{}{}
	var name string
	if _, err := pgx.ForEachRow(rows, []any{&name}, func() error {
		key[name] = struct{}{}
		return nil
	}); err != nil {
		return nil, err
	}
	return key, nil
}
