#!/usr/bin/env bash
# make demo: a throwaway PostgreSQL, `pgq run` against it, a consumer group,
# some rows, the group consuming them (its lag before, its committed cursor
# after), the journal shown with `pgq journal dump`, then everything stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ensure-postgres.sh

work=$(mktemp -d)
pg_pid= pgq_pid=
cleanup() {
  [ -n "$pgq_pid" ] && kill "$pgq_pid" 2>/dev/null && wait "$pgq_pid" 2>/dev/null || true
  [ -n "$pg_pid" ] && kill "$pg_pid" 2>/dev/null && wait "$pg_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "==> starting a throwaway PostgreSQL (wal_level=logical)"
go build -o "$work/pgtestd" ./internal/pgtest/pgtestd
"$work/pgtestd" >"$work/pg.out" &
pg_pid=$!
for _ in $(seq 1 600); do [ "$(wc -l <"$work/pg.out")" -ge 2 ] && break; sleep 0.1; done
url=$(sed -n 1p "$work/pg.out"); port=$(sed -n 2p "$work/pg.out")
[ -n "$url" ] || { echo "PostgreSQL did not start" >&2; exit 1; }
echo "    $url"

psql -q -v ON_ERROR_STOP=1 "$url" <<'SQL'
CREATE TABLE orders (id bigserial PRIMARY KEY, customer text NOT NULL, total numeric(10,2), paid bool DEFAULT false, meta jsonb);
SQL

echo "==> pgq run (slot demo, publication demo, API on 127.0.0.1:$port)"
./bin/pgq run --pg-url "$url" --slot demo --publication demo --data-dir "$work/data" \
  --create-slot --create-publication all --listen "127.0.0.1:$port" --log-level warn &
pgq_pid=$!
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
# The client commands (groups, consume) find the API here.
export PGQ_ADDR="127.0.0.1:$port"

echo "==> pgq groups create orders-app --from earliest --tables public.orders"
./bin/pgq groups create orders-app --from earliest --tables public.orders

echo "==> writing rows (3 transactions)"
psql -q -v ON_ERROR_STOP=1 "$url" <<'SQL'
INSERT INTO orders (customer, total, meta) VALUES ('ada', 12.50, '{"items": 2}'), ('grace', 99.99, NULL);
BEGIN;
UPDATE orders SET paid = true WHERE customer = 'ada';
DELETE FROM orders WHERE customer = 'grace';
SELECT pg_logical_emit_message(true, 'demo', 'hello from a transaction') \gset
COMMIT;
INSERT INTO orders (customer, total) VALUES ('linus', 7.00);
SQL

for _ in $(seq 1 100); do
  n=$(curl -fs "http://127.0.0.1:$port/v1/status" | sed -n 's/.*"records_written":\([0-9]*\).*/\1/p')
  [ "${n:-0}" -ge 3 ] && break; sleep 0.1
done

echo "==> pgq groups info orders-app   (nothing committed yet: it lags by the transactions above)"
./bin/pgq groups info orders-app
echo "==> pgq consume --group orders-app   (NDJSON, committed, exits once caught up)"
./bin/pgq consume --group orders-app
echo "==> pgq groups info orders-app   (committed: no lag)"
./bin/pgq groups info orders-app
echo "==> pgq consume --group orders-app   (again: nothing new, the cursor is durable)"
./bin/pgq consume --group orders-app

echo "==> GET /v1/status"
curl -fs "http://127.0.0.1:$port/v1/status"
echo "==> pgq journal dump"
./bin/pgq journal dump --data-dir "$work/data"
echo "==> pgq journal verify"
./bin/pgq journal verify --data-dir "$work/data"

echo "==> stopping"
kill -TERM "$pgq_pid"; wait "$pgq_pid"; pgq_pid=
echo "done"
