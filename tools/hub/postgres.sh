#!/usr/bin/env bash
# A throw-away PostgreSQL 15 cluster for the hub's tests and `make demo-hub`.
#
#   tools/hub/postgres.sh install          # apt-get install postgresql if initdb is missing (root)
#   tools/hub/postgres.sh start DIR PORT   # initdb DIR (trust, loopback only) and start it on PORT
#   tools/hub/postgres.sh stop DIR         # stop the cluster (fast shutdown)
#
# initdb and pg_ctl refuse to run as root: as root the cluster belongs to the `postgres` user
# (DIR is created and chowned); as anyone else it belongs to that user. The server listens on
# 127.0.0.1:PORT and on a socket inside DIR; the URL is postgresql://USER@127.0.0.1:PORT/postgres.
set -euo pipefail

find_bin() {
  for dir in /usr/lib/postgresql/*/bin; do
    if [ -x "$dir/initdb" ]; then echo "$dir"; return 0; fi
  done
  command -v initdb >/dev/null 2>&1 && dirname "$(command -v initdb)" && return 0
  return 1
}

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-}" in
  install)
    if find_bin >/dev/null; then exit 0; fi
    if [ "$(id -u)" -ne 0 ]; then
      echo "postgres.sh: PostgreSQL is missing; run as root: apt-get install -y postgresql" >&2; exit 1
    fi
    echo "postgres.sh: installing Debian's postgresql (apt-get)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    find_bin >/dev/null
    ;;
  start)
    dir="$2"; port="$3"
    bin="$(find_bin)" || { echo "postgres.sh: initdb not found; run: $0 install" >&2; exit 1; }
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
    chmod 700 "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-k $dir -p $port -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    dir="$2"
    bin="$(find_bin)"
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    ;;
  *)
    echo "usage: $0 install | start DIR PORT | stop DIR" >&2; exit 2 ;;
esac
