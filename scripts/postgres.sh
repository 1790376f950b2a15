#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback for the service tests.
#   eval "$(bash scripts/postgres.sh start)"   # exports RUNPLANE_TEST_POSTGRES_URL
#   bash scripts/postgres.sh stop
# Installs Debian's postgresql package when the server binaries are missing. The suite starts
# hundreds of services, each with a connection pool, so the server takes more clients than the
# default 100.
set -euo pipefail

data=${RUNPLANE_PG_DATA:-/tmp/runplane-pg}
port=${RUNPLANE_PG_PORT:-55432}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)

as_postgres() {
  if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi
}

case "${1:-}" in
  start)
    if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >&2
      bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
    fi
    if [ -f "$data/postmaster.pid" ]; then
      as_postgres "$bin/pg_ctl -D $data -m immediate stop" >&2 || true
    fi
    rm -rf "$data"
    mkdir -p "$data"
    [ "$(id -u)" = 0 ] && chown postgres "$data"
    as_postgres "$bin/initdb -D $data -A trust -U runplane" >/dev/null
    as_postgres "$bin/pg_ctl -D $data -l $data/server.log -w \
      -o '-p $port -k $data -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=400' start" >&2
    echo "export RUNPLANE_TEST_POSTGRES_URL=postgresql+psycopg://runplane@127.0.0.1:$port/postgres"
    ;;
  stop)
    [ -f "$data/postmaster.pid" ] && as_postgres "$bin/pg_ctl -D $data -m fast stop" >&2
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
