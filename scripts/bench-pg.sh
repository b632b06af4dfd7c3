#!/bin/bash
# scripts/bench-pg.sh - run a benchmark against a throwaway PostgreSQL 15: initdb a cluster in a
# temporary directory, start it on a free 127.0.0.1 port (fsync and synchronous_commit on, as
# a production server would run, so the figures include WAL flushes), run the command given
# with the server's URL appended as `--pg-url URL`, then stop the server and remove the
# directory whatever the command's result. `make bench-ingest-pg` runs it for ingest_bench.
#
# Usage: scripts/bench-pg.sh COMMAND [ARGS...]   exit status: the command's (1 when PostgreSQL
#                                               is missing or does not start)
# Environment: PG_BINDIR (default /usr/lib/postgresql/15/bin); TMPDIR (default /tmp): where
#   the cluster's directory (weft-bench-pg.XXXXXX) goes; it must be reachable by the postgres
#   user when run as root (PostgreSQL refuses to run as root: runuser -u postgres).
# The URL names the maintenance database `postgres` as the superuser `postgres` (trust
# authentication on loopback): ingest_bench creates and drops a database of its own per case.
# Mirrors scripts/distributed.sh and tests/support/pg_server.c.
set -eu

PG_BINDIR=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
PG_TIMEOUT_S=30
PROG="bench-pg"

say() {
    printf '%s: %s\n' "$PROG" "$*" >&2
}

die() {
    say "error: $*"
    exit 1
}

port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Run a PostgreSQL program as the user that owns the cluster (root may not).
pg_tool() {
    local tool=$1
    shift
    if [ "$(id -u)" -eq 0 ]; then
        env -u PGHOST -u PGPORT -u PGDATA -u PGUSER -u PGDATABASE -u PGPASSWORD -u PGSERVICE \
            LC_ALL=C runuser -u postgres -- "$PG_BINDIR/$tool" "$@"
    else
        env -u PGHOST -u PGPORT -u PGDATA -u PGUSER -u PGDATABASE -u PGPASSWORD -u PGSERVICE \
            LC_ALL=C "$PG_BINDIR/$tool" "$@"
    fi
}

[ $# -ge 1 ] || die "usage: scripts/bench-pg.sh COMMAND [ARGS...]"
if [ ! -x "$PG_BINDIR/initdb" ] || [ ! -x "$PG_BINDIR/pg_ctl" ]; then
    die "PostgreSQL 15 is not installed ($PG_BINDIR/initdb not found): run \`make deps-servers\`" \
        "or \`apt-get install postgresql-15\` (or set PG_BINDIR)"
fi
if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 ||
        die "running as root and there is no 'postgres' user to run PostgreSQL as (postgresql-15 creates it)"
    command -v runuser >/dev/null 2>&1 || die "runuser not found (util-linux)"
fi

umask 077
DIR=$(mktemp -d "${TMPDIR:-/tmp}/weft-bench-pg.XXXXXX")
STARTED=0
# shellcheck disable=SC2317 # the EXIT trap
on_exit() {
    local st=$?
    if [ "$STARTED" -eq 1 ]; then
        pg_tool pg_ctl stop -D "$DIR/data" -m fast -w -t 30 >>"$DIR/ctl.log" 2>&1 ||
            say "PostgreSQL did not stop cleanly; see $DIR/ctl.log"
    fi
    if [ "$st" -eq 0 ] || [ "$STARTED" -eq 1 ]; then
        rm -rf "$DIR"
    else
        say "logs kept in $DIR"
    fi
    exit "$st"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

mkdir "$DIR/sock"
if [ "$(id -u)" -eq 0 ]; then
    chmod 711 "$DIR"
    chown -R postgres:postgres "$DIR"
    runuser -u postgres -- test -w "$DIR" ||
        die "the postgres user cannot reach $DIR: set TMPDIR to a directory it can reach, such as /tmp"
fi
pg_tool initdb -D "$DIR/data" -U postgres -A trust -E UTF8 --no-locale --no-sync \
    --no-instructions >"$DIR/initdb.log" 2>&1 || die "initdb failed; see $DIR/initdb.log"
cat >>"$DIR/data/postgresql.conf" <<EOF

# weft bench-pg.sh: loopback only, durable commits (the defaults, stated)
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DIR/sock'
fsync = on
synchronous_commit = on
logging_collector = off
EOF
for attempt in 1 2 3; do
    PORT=""
    for _ in $(seq 1 200); do
        p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
        if ! port_in_use "$p"; then
            PORT=$p
            break
        fi
    done
    [ -n "$PORT" ] || die "no free port on 127.0.0.1"
    printf 'port = %s\n' "$PORT" >>"$DIR/data/postgresql.conf"
    rm -f "$DIR/postgres.log"
    STARTED=1
    st=0
    pg_tool pg_ctl start -D "$DIR/data" -l "$DIR/postgres.log" -w -t "$PG_TIMEOUT_S" \
        >>"$DIR/ctl.log" 2>&1 </dev/null || st=$?
    [ "$st" -ne 0 ] || break
    if [ "$attempt" -lt 3 ] && grep -qs "could not bind" "$DIR/postgres.log"; then
        continue
    fi
    tail -n 15 "$DIR/postgres.log" >&2 2>/dev/null || true
    die "PostgreSQL did not start"
done
URL=postgresql://postgres@127.0.0.1:$PORT/postgres
say "PostgreSQL $("$PG_BINDIR/postgres" --version | awk '{print $3}') on $URL (fsync on)"
st=0
"$@" --pg-url "$URL" || st=$?
exit "$st"
