package pgoutput

import (
	"testing"

	"github.com/pgq-dev/pgq/internal/pgtest"
)

// schemaSQL creates the tables the workload touches.
var schemaSQL = []string{
	`CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')`,
	`CREATE TABLE t_all (
		id bigint PRIMARY KEY, i2 smallint, i4 int, n numeric(20,5), txt text,
		b bool, by bytea, j json, jb jsonb, ts timestamptz, u uuid,
		arr int[], tarr text[], m mood, nul text)`,
	`CREATE TABLE t_full (id int PRIMARY KEY, v text)`,
	`ALTER TABLE t_full REPLICA IDENTITY FULL`,
	`CREATE TABLE t_toast (id int PRIMARY KEY, big text, small int)`,
	`ALTER TABLE t_toast ALTER COLUMN big SET STORAGE EXTERNAL`,
	`CREATE TABLE t_keyidx (id int PRIMARY KEY, k int NOT NULL UNIQUE, v text)`,
	`ALTER TABLE t_keyidx REPLICA IDENTITY USING INDEX t_keyidx_k_key`,
	`CREATE TABLE parent (id serial PRIMARY KEY, v text)`,
	`CREATE TABLE child (id serial PRIMARY KEY, pid int REFERENCES parent(id))`,
	`CREATE TABLE t_big (id int PRIMARY KEY, pad text)`,
	`SELECT pg_replication_origin_create('pgq_test_origin') WHERE pg_replication_origin_oid('pgq_test_origin') IS NULL`,
}

// bigText is a ~6 kB incompressible-ish value that is stored out of line.
const bigText = `(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 200) i)`

// runWorkload performs the captured workload; each db.Exec call runs its
// statements on one connection, so BEGIN ... COMMIT spans them.
func runWorkload(t testing.TB, db *pgtest.DB) {
	t.Helper()
	// Every type, NULLs, insert/update/delete with REPLICA IDENTITY DEFAULT.
	db.Exec(t,
		`INSERT INTO t_all VALUES (1, -32768, 2147483647, 12345.6789, 'hello "world"'||chr(10)||'ünï',
			true, '\xdeadbeef', '{"a": [1, 2.5, null]}', '{"b": {"c": true}}',
			'2024-02-29 12:34:56.789012+00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
			'{1,2,NULL,4}', '{"x y","z,\"q\""}', 'happy', NULL)`,
		`INSERT INTO t_all (id) VALUES (2)`,
		`UPDATE t_all SET txt = 'changed', n = -0.00001, b = false WHERE id = 1`,
		`UPDATE t_all SET id = 100 WHERE id = 2`,
		`DELETE FROM t_all WHERE id = 100`,
	)
	// REPLICA IDENTITY FULL old images.
	db.Exec(t,
		`INSERT INTO t_full VALUES (1, 'one'), (2, NULL)`,
		`UPDATE t_full SET v = 'uno' WHERE id = 1`,
		`DELETE FROM t_full WHERE id = 2`,
	)
	// Unchanged TOAST.
	db.Exec(t,
		`INSERT INTO t_toast VALUES (1, `+bigText+`, 1)`,
		`UPDATE t_toast SET small = 2 WHERE id = 1`,
		`DELETE FROM t_toast WHERE id = 1`,
	)
	// REPLICA IDENTITY USING INDEX: key change sends the old key.
	db.Exec(t,
		`INSERT INTO t_keyidx VALUES (1, 10, 'a')`,
		`UPDATE t_keyidx SET k = 11 WHERE id = 1`,
		`UPDATE t_keyidx SET v = 'b' WHERE id = 1`,
		`DELETE FROM t_keyidx WHERE id = 1`,
	)
	// Truncates.
	db.Exec(t,
		`INSERT INTO parent (v) VALUES ('p')`,
		`INSERT INTO child (pid) VALUES (1)`,
		`TRUNCATE parent CASCADE`,
		`INSERT INTO parent (v) VALUES ('p2')`,
		`TRUNCATE parent, child RESTART IDENTITY`,
		`TRUNCATE t_keyidx`,
	)
	// Messages: transactional inside a transaction, non-transactional
	// (binary content) outside.
	db.Exec(t,
		`BEGIN`,
		`INSERT INTO t_big VALUES (1, 'a')`,
		`SELECT pg_logical_emit_message(true, 'pgq', 'hello')`,
		`COMMIT`,
		`SELECT pg_logical_emit_message(false, 'pgq-bin', '\x00ff10'::bytea)`,
		`SELECT pg_logical_emit_message(true, 'pgq-empty', '')`,
	)
	// Rollback to savepoint in a small transaction.
	db.Exec(t,
		`BEGIN`,
		`INSERT INTO t_big VALUES (2, 'kept')`,
		`SAVEPOINT s1`,
		`INSERT INTO t_big VALUES (3, 'rolled back')`,
		`ROLLBACK TO SAVEPOINT s1`,
		`INSERT INTO t_big VALUES (4, 'kept too')`,
		`COMMIT`,
	)
	// A transaction with a replication origin.
	db.Exec(t,
		`SELECT pg_replication_origin_session_setup('pgq_test_origin')`,
		`INSERT INTO t_big VALUES (5, 'from origin')`,
		`SELECT pg_replication_origin_session_reset()`,
	)
	// A large transaction (streamed with protocol 2) with a rolled back
	// subtransaction, a transactional message and an update.
	db.Exec(t,
		`BEGIN`,
		`INSERT INTO t_big SELECT i, repeat(md5(i::text), 4) FROM generate_series(1000, 1399) i`,
		`SAVEPOINT s1`,
		`INSERT INTO t_big SELECT i, repeat(md5(i::text), 4) FROM generate_series(2000, 2399) i`,
		`ROLLBACK TO SAVEPOINT s1`,
		`SELECT pg_logical_emit_message(true, 'pgq', 'in a big one')`,
		`UPDATE t_big SET pad = 'x' WHERE id BETWEEN 1000 AND 1004`,
		`COMMIT`,
	)
	// A large transaction that aborts (streamed, then Stream Abort).
	db.Exec(t,
		`BEGIN`,
		`INSERT INTO t_big SELECT i, repeat(md5(i::text), 4) FROM generate_series(3000, 3399) i`,
		`ROLLBACK`,
	)
	endWorkload(t, db)
}
