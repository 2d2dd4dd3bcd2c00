#!/usr/bin/env bash
# Start a throwaway PostgreSQL (the distribution's package) for the hub's tests and
# print the URL they read from VICAL_TEST_POSTGRES. As root the server runs as the
# `postgres` user. Usage: eval "$(bash .ci/postgres.sh [PORT])"; stop it with
# eval "$VICAL_TEST_PGSTOP". fsync is off: a test server holds nothing worth keeping.
set -euo pipefail
# a free port unless one is given
port=${1:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] || { echo "echo 'PostgreSQL is not installed (apt-get install postgresql)' >&2; exit 1"; exit 1; }
data=$(mktemp -d /tmp/vical-pg.XXXXXX)
run=()
if [ "$(id -u)" = 0 ]; then
  chown postgres "$data"
  run=(runuser -u postgres --)
fi
"${run[@]}" "$bin/initdb" -D "$data" -U postgres -A trust >/dev/null
"${run[@]}" "$bin/pg_ctl" -D "$data" -l "$data/server.log" \
  -o "-p $port -k $data -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off" \
  -w start >/dev/null
echo "export VICAL_TEST_POSTGRES=postgresql+psycopg://postgres@127.0.0.1:$port/postgres"
echo "export VICAL_TEST_PGDATA=$data"
echo "export VICAL_TEST_PGSTOP='${run[*]} $bin/pg_ctl -D $data -m fast stop'"
