#!/usr/bin/env bash
# What a journal append costs in PostgreSQL: the evidence behind the decision (docs/PERFORMANCE.md,
# "Why no Postgres store yet"). pgbench runs the statements a Postgres RunStore would run per
# append (bump the run's next seq, insert one ~600-byte entry, in one transaction) from C
# connections, with synchronous_commit on (an fsync per commit, shared by concurrent commits)
# and off (acknowledged from memory, like SQLite's synchronous=NORMAL and Redis without AOF);
# then one connection committing 32 appends a transaction (group commit, as agentloop's SQLite
# writer does).
#
#   scripts/postgres-append-bench.sh [seconds per case, default 10]
#
# Uses the server at $PGHOST:$PGPORT (127.0.0.1:5432, user postgres) in a schema of its own,
# dropped at the end.
set -euo pipefail
seconds=${1:-10}
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
db=${PGDATABASE:-postgres}
schema="agentloop_bench_$$"
work=$(mktemp -d)
trap 'psql -q -d "$db" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null; rm -rf "$work"' EXIT

psql -q -v ON_ERROR_STOP=1 -d "$db" <<SQL
CREATE SCHEMA $schema;
CREATE TABLE $schema.runs (id integer PRIMARY KEY, next_seq bigint NOT NULL, updated_ms bigint NOT NULL);
CREATE TABLE $schema.entries (run_id integer NOT NULL, seq bigint NOT NULL, body text NOT NULL,
                              PRIMARY KEY (run_id, seq));
INSERT INTO $schema.runs SELECT g, 0, 0 FROM generate_series(1, 10000) g;
SQL

cat > "$work/append.sql" <<SQL
\set r random(1, 10000)
BEGIN;
UPDATE $schema.runs SET next_seq = next_seq + 1, updated_ms = 1 WHERE id = :r;
INSERT INTO $schema.entries SELECT id, next_seq, repeat('x', 600) FROM $schema.runs WHERE id = :r;
COMMIT;
SQL

# Group commit as agentloop's SQLite writer does it: one transaction appends one entry to
# each of 32 runs.
cat > "$work/batch.sql" <<SQL
\set r random(1, 9968)
BEGIN;
UPDATE $schema.runs SET next_seq = next_seq + 1, updated_ms = 1 WHERE id BETWEEN :r AND :r + 31;
INSERT INTO $schema.entries SELECT id, next_seq, repeat('x', 600) FROM $schema.runs
  WHERE id BETWEEN :r AND :r + 31;
COMMIT;
SQL

printf '| synchronous_commit | connections | appends/s | mean latency |\n| --- | ---: | ---: | ---: |\n'
for mode in on off; do
  for clients in 1 8 32 64; do
    out=$(PGOPTIONS="-c synchronous_commit=$mode" \
      pgbench -n -d "$db" -c "$clients" -j 2 -T "$seconds" -f "$work/append.sql" 2>&1)
    tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
    lat=$(sed -n 's/^latency average = \(.*\)$/\1/p' <<<"$out")
    printf '| %s | %s | %.0f | %s |\n' "$mode" "$clients" "$tps" "$lat"
  done
done
for mode in on off; do
  out=$(PGOPTIONS="-c synchronous_commit=$mode" \
    pgbench -n -d "$db" -c 1 -T "$seconds" -f "$work/batch.sql" 2>&1)
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out")
  lat=$(sed -n 's/^latency average = \(.*\)$/\1/p' <<<"$out")
  printf '| %s | 1 (32 appends a transaction) | %.0f | %s a batch |\n' "$mode" "$(bc <<<"$tps * 32")" "$lat"
done
