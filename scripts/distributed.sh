#!/bin/bash
# scripts/distributed.sh - a distributed weft run on this machine, from nothing and back to
# nothing: a throwaway RabbitMQ broker and PostgreSQL 15 cluster on free 127.0.0.1 ports, WORKERS
# `weft worker` processes, one `weft run --executor amqp` with WEFT_STATE_URL, its summary and
# its trace tree (the workers' spans included), then everything stopped and removed.
# `make distributed` runs it after installing what is missing and building.
#
# Usage: scripts/distributed.sh           start, run, stop (exit status: the run's; 1 when a
#                                         server or worker does not start, or a worker does
#                                         not exit 0 after a run that completed)
#        scripts/distributed.sh stop DIR  stop what a KEEP=1 run left running in DIR, remove DIR
# Environment:
#   WORKFLOW=PATH   the workflow to run (default examples/code_review/workflow.json)
#   INPUT=TEXT      its --input (default: the code-review request `make run` uses, for the
#                   default workflow only)
#   WORKERS=N       how many `weft worker` processes (default 2, at most 16)
#   KEEP=1          leave broker, database and workers running after the run; print the URLs
#                   and the command that stops them
#   WEFT_BIN=PATH   the weft binary (default build/weft)
#   TMPDIR          where the run's directory (weft-distributed.XXXXXX) is made (default /tmp)
#   PG_BINDIR, RABBITMQ_BINDIR  other installations (default /usr/lib/postgresql/15/bin,
#                   /usr/lib/rabbitmq/bin)
#
# Everything lives in one directory: the broker's node (data, logs, cookie, config: nothing is
# read from /etc/rabbitmq or $HOME), its own epmd (never the system one on 4369), the cluster
# (as the postgres user when run as root: PostgreSQL refuses root), WEFT_HOME (span store,
# workspaces) and the workers' logs. Every server and worker runs in a session of its own, so a
# Ctrl-C reaches only the run; the trap then stops the workers (SIGTERM: they finish their
# tasks and exit 0), the broker, epmd and PostgreSQL in that order and removes the directory.
# When something does not start, the data is removed but the logs stay where the error message
# says; once the run has started, the directory goes whatever its result (summary and trace
# were shown). Only a SIGKILL of this script leaves things behind (`scripts/distributed.sh stop
# DIR` cleans up).
# Mirrors tests/support/amqp_server.c and pg_server.c, which start the test servers the same way.
set -eu

START_TIMEOUT_S=60 # the broker takes 5 to 10 s on a 2-core machine
PG_TIMEOUT_S=30
WORKER_TIMEOUT_S=30
STOP_TIMEOUT_S=45 # a worker's --grace (30 s) plus its span flush

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROG="weft distributed"

say() {
    printf '%s: %s\n' "$PROG" "$*" >&2
}

die() {
    say "error: $*"
    exit 1
}

# The last lines of a log, indented, for an error message.
tail_log() {
    if [ -s "$1" ]; then
        tail -n 15 "$1" | sed 's/^/    | /' >&2
    fi
}

now_s() {
    date +%s
}

# Is something listening on 127.0.0.1:$1? (bash's /dev/tcp: no ss, nc or python needed)
port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

USED_PORTS=" "
# Set variable $1 to a port nothing listens on, below Linux's ephemeral range (32768-60999) so
# that no outgoing connection takes it meanwhile. A race with another program remains: the
# starts retry with other ports.
pick_port() {
    local p i
    for i in $(seq 1 200); do
        p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
        case "$USED_PORTS" in *" $p "*) continue ;; esac
        if ! port_in_use "$p"; then
            USED_PORTS="$USED_PORTS$p "
            printf -v "$1" '%s' "$p"
            return 0
        fi
    done
    die "no free port on 127.0.0.1 after $i tries"
}

# Does the broker on port $1 answer the AMQP 0-9-1 protocol header with a frame (its
# connection.start)? It opens the AMQP listener as the last step of its boot.
amqp_ready() {
    local b=""
    { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
    printf 'AMQP\000\000\011\001' >&3 2>/dev/null || { exec 3<&-; return 1; }
    IFS= read -r -t 3 -N 1 b <&3 || b=""
    exec 3<&-
    [ "$b" = $'\001' ]
}

alive() {
    [ -n "$1" ] && kill -0 "$1" 2>/dev/null
}

# Wait at most $2 seconds for process $1 to go; 0 when it went.
wait_gone() {
    local deadline=$(($(now_s) + $2))
    while alive "$1"; do
        [ "$(now_s)" -lt "$deadline" ] || return 1
        sleep 0.2
    done
    return 0
}

readpid() {
    if [ -s "$1" ]; then cat "$1"; fi
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

# --- stopping ---------------------------------------------------------------------------------

# Stop what was started in $1, each only if its pid file says it was started. Works from the
# process that started them (exit statuses known) and from `stop DIR` (they are not our
# children: liveness only). Returns 1 when something had to be killed or a worker did not exit 0.
stop_workers() {
    local dir=$1 rc=0 f pid st name last
    for f in "$dir"/run/worker-*.pid; do
        [ -e "$f" ] || continue
        pid=$(readpid "$f")
        if alive "$pid"; then
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
    for f in "$dir"/run/worker-*.pid; do
        [ -e "$f" ] || continue
        pid=$(readpid "$f")
        name=$(basename "$f" .pid)
        if ! wait_gone "$pid" "$STOP_TIMEOUT_S"; then
            say "$name did not stop within ${STOP_TIMEOUT_S} s of SIGTERM: killed"
            kill -KILL "$pid" 2>/dev/null || true
            rc=1
        fi
        last=$(grep -h 'stopped:' "$dir/$name.log" 2>/dev/null | tail -n 1 |
            sed 's/^weft worker [^ ]* //')
        st=0
        if [ "$FOREIGN" -eq 1 ]; then
            # `stop DIR`: not our child, its exit status is unknown.
            say "$name ${last:-stopped}"
        else
            wait "$pid" 2>/dev/null || st=$?
            say "$name exited with status $st${last:+: $last}"
            [ "$st" -eq 0 ] || rc=1
        fi
        rm -f "$f"
    done
    return $rc
}

stop_servers() {
    local dir=$1 rc=0 pid
    # The broker: SIGTERM to the rabbitmq-server script stops the node gracefully; its process
    # group (the Erlang VM and helpers) must not outlive it either way.
    pid=$(readpid "$dir/run/rabbitmq.pid")
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        if ! wait_gone "$pid" 30; then
            say "the broker did not stop within 30 s: killed"
            rc=1
        fi
        kill -KILL -- "-$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        rm -f "$dir/run/rabbitmq.pid"
    fi
    pid=$(readpid "$dir/run/epmd.pid")
    if [ -n "$pid" ]; then
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        rm -f "$dir/run/epmd.pid"
    fi
    if [ -e "$dir/run/postgres.started" ]; then
        pid=$(head -n 1 "$dir/postgres/data/postmaster.pid" 2>/dev/null || true)
        if ! pg_tool pg_ctl stop -D "$dir/postgres/data" -m fast -w -t 30 \
            >>"$dir/postgres/ctl.log" 2>&1; then
            if alive "$pid"; then
                say "PostgreSQL did not stop (see $dir/postgres/ctl.log): killed"
                kill -KILL "$pid" 2>/dev/null || true
                rc=1
            fi
        fi
        rm -f "$dir/run/postgres.started"
    fi
    return $rc
}

# Workers first, while the broker can still take their results.
stop_all() {
    local rc=0
    stop_workers "$1" || rc=1
    stop_servers "$1" || rc=1
    return $rc
}

# Remove $1 entirely, or (after a failure) only its data, keeping the logs the errors name.
# shellcheck disable=SC2317 # called from the EXIT trap
remove_dir() {
    if [ "$2" = all ]; then
        rm -rf "$1"
    else
        rm -rf "${1:?}/rabbitmq/mnesia" "${1:?}/postgres/data" "${1:?}/home" "${1:?}/run"
        say "logs kept in $1 (remove it with: rm -rf $1)"
    fi
}

FOREIGN=0 # 1: stopping what another invocation started (`stop DIR`)
if [ "${1:-}" = stop ]; then
    FOREIGN=1
    if [ $# -ne 2 ] || [ ! -d "$2/run" ]; then
        echo "usage: scripts/distributed.sh stop DIR   (DIR: what KEEP=1 printed)" >&2
        exit 2
    fi
    PG_BINDIR=$(cat "$2/run/pg_bindir" 2>/dev/null || echo /usr/lib/postgresql/15/bin)
    rc=0
    stop_all "$2" || rc=1
    rm -rf "$2"
    say "stopped; $2 removed"
    exit $rc
elif [ $# -gt 0 ]; then
    sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'
    case "$1" in -h | --help) exit 0 ;; *) exit 2 ;; esac
fi

# --- configuration ----------------------------------------------------------------------------

WEFT_BIN=${WEFT_BIN:-$ROOT/build/weft}
WORKFLOW=${WORKFLOW:-$ROOT/examples/code_review/workflow.json}
WORKERS=${WORKERS:-2}
KEEP=${KEEP:-0}
PG_BINDIR=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
# Not RABBITMQ_*: the broker's environment drops those.
RMQ_BINDIR=${RABBITMQ_BINDIR:-/usr/lib/rabbitmq/bin}
if [ -z "${INPUT+x}" ] && [ "$WORKFLOW" -ef "$ROOT/examples/code_review/workflow.json" ]; then
    INPUT="Add a login endpoint to the user service"
fi

case "$WORKERS" in
'' | *[!0-9]*) die "WORKERS=$WORKERS: expected a number from 1 to 16" ;;
esac
if [ "$WORKERS" -lt 1 ] || [ "$WORKERS" -gt 16 ]; then
    die "WORKERS=$WORKERS: expected 1 to 16"
fi
case "$KEEP" in 0 | '') KEEP=0 ;; *) KEEP=1 ;; esac
[ -x "$WEFT_BIN" ] || die "$WEFT_BIN not found: build first (make distributed does)"
# Absolute: the workers run in WEFT_HOME.
WEFT_BIN=$(cd "$(dirname "$WEFT_BIN")" && pwd)/$(basename "$WEFT_BIN")
[ -r "$WORKFLOW" ] || die "WORKFLOW=$WORKFLOW: no such file"
WORKFLOW=$(cd "$(dirname "$WORKFLOW")" && pwd)/$(basename "$WORKFLOW")
[ -x "$RMQ_BINDIR/rabbitmq-server" ] ||
    die "$RMQ_BINDIR/rabbitmq-server not found (scripts/deps.sh servers installs rabbitmq-server)"
[ -x "$PG_BINDIR/initdb" ] ||
    die "$PG_BINDIR/initdb not found (scripts/deps.sh servers installs postgresql-15)"
EPMD=$(command -v epmd || true)
[ -n "$EPMD" ] || EPMD=/usr/lib/erlang/bin/epmd
[ -x "$EPMD" ] || die "epmd not found (erlang-base, a dependency of rabbitmq-server)"
if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 ||
        die "running as root and there is no 'postgres' user to run PostgreSQL as (postgresql-15 creates it)"
    command -v runuser >/dev/null 2>&1 || die "runuser not found (util-linux)"
fi

# --- the directory and the trap ---------------------------------------------------------------

umask 077
DIR=$(mktemp -d "${TMPDIR:-/tmp}/weft-distributed.XXXXXX")
mkdir "$DIR/run" "$DIR/home"
echo "$PG_BINDIR" >"$DIR/run/pg_bindir"
KEPT=0
STARTED=0 # set once the run has started: from then on a failure is the run's, logs go too

# shellcheck disable=SC2317 # the EXIT trap
on_exit() {
    local rc=$? how=data
    # A cleanup cut short would leave servers running: every step below is bounded.
    trap '' INT TERM HUP
    trap - EXIT
    if [ "$KEPT" -eq 1 ]; then
        exit "$rc"
    fi
    stop_all "$DIR" || true
    if [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ] || [ "$STARTED" -eq 1 ]; then
        how=all
    fi
    remove_dir "$DIR" "$how"
    if [ "$how" = all ]; then
        say "everything stopped, $DIR removed; exit status $rc"
    fi
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

say "working directory $DIR"

# --- RabbitMQ ---------------------------------------------------------------------------------

R=$DIR/rabbitmq
mkdir "$R" "$R/home" "$R/mnesia" "$R/log" "$R/conf.d"
od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$R/home/.erlang.cookie"
chmod 400 "$R/home/.erlang.cookie"
printf '[].\n' >"$R/enabled_plugins"
: >"$R/rabbitmq-env.conf"
cat >"$R/rabbitmq.conf" <<'EOF'
# weft distributed.sh broker: ports and addresses come from the environment
loopback_users.guest = true
disk_free_limit.absolute = 10MB
log.file.level = info
EOF
NODE=weft-distributed-$$@localhost
RABBITMQ_LOG=$R/log/$NODE.log

# The broker's and epmd's environment: none of the caller's RABBITMQ_* and ERL_* variables.
broker_env() {
    local v
    for v in $(compgen -e); do
        case "$v" in RABBITMQ_* | ERL_*) unset "$v" ;; esac
    done
    export HOME="$R/home" LC_ALL=C.UTF-8
    export RABBITMQ_NODENAME="$NODE" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    export RABBITMQ_NODE_PORT="$AMQP_PORT" RABBITMQ_DIST_PORT="$DIST_PORT"
    export ERL_EPMD_PORT="$EPMD_PORT" ERL_EPMD_ADDRESS=127.0.0.1
    # Erlang distribution listens on every interface unless told otherwise.
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    export RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    export RABBITMQ_MNESIA_BASE="$R/mnesia" RABBITMQ_LOG_BASE="$R/log"
    export RABBITMQ_CONFIG_FILE="$R/rabbitmq.conf" RABBITMQ_CONFIG_FILES="$R/conf.d"
    export RABBITMQ_ADVANCED_CONFIG_FILE="$R/advanced.config"
    export RABBITMQ_CONF_ENV_FILE="$R/rabbitmq-env.conf"
    export RABBITMQ_ENABLED_PLUGINS_FILE="$R/enabled_plugins" RABBITMQ_MOTD_FILE="$R/motd"
}

# Say why the broker did not start: the node's log, or its output when there is no log yet.
broker_failed() {
    if [ -s "$RABBITMQ_LOG" ]; then
        say "RabbitMQ $1; see $RABBITMQ_LOG (output: $R/server.out), which ends:"
        tail_log "$RABBITMQ_LOG"
    else
        say "RabbitMQ $1; see $R/server.out, which ends:"
        tail_log "$R/server.out"
    fi
}

# Start epmd and the broker on the ports chosen. 0 ready, 1 a port was taken, 2 failed.
start_broker() {
    local deadline pid
    (
        broker_env
        cd "$R"
        exec setsid "$EPMD" -port "$EPMD_PORT" -address 127.0.0.1
    ) >"$R/epmd.log" 2>&1 </dev/null &
    echo $! >"$DIR/run/epmd.pid"
    deadline=$(($(now_s) + 5))
    until port_in_use "$EPMD_PORT"; do
        if ! alive "$(readpid "$DIR/run/epmd.pid")"; then
            rm -f "$DIR/run/epmd.pid"
            return 1
        fi
        if [ "$(now_s)" -ge "$deadline" ]; then
            say "epmd did not listen on 127.0.0.1:$EPMD_PORT within 5 s; see $R/epmd.log, which ends:"
            tail_log "$R/epmd.log"
            return 2
        fi
        sleep 0.05
    done
    (
        broker_env
        cd "$R"
        exec setsid "$RMQ_BINDIR/rabbitmq-server"
    ) >"$R/server.out" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$DIR/run/rabbitmq.pid"
    deadline=$(($(now_s) + START_TIMEOUT_S))
    until amqp_ready "$AMQP_PORT"; do
        if ! alive "$pid"; then
            wait "$pid" 2>/dev/null || true
            kill -KILL -- "-$pid" 2>/dev/null || true
            rm -f "$DIR/run/rabbitmq.pid"
            if grep -qs eaddrinuse "$R/server.out" "$RABBITMQ_LOG"; then
                return 1
            fi
            broker_failed "exited during its start"
            return 2
        fi
        if [ "$(now_s)" -ge "$deadline" ]; then
            broker_failed "did not accept AMQP connections on 127.0.0.1:$AMQP_PORT within ${START_TIMEOUT_S} s"
            return 2
        fi
        sleep 0.2
    done
    return 0
}

say "starting RabbitMQ ($NODE)"
started=0
for attempt in 1 2 3; do
    pick_port AMQP_PORT
    pick_port DIST_PORT
    pick_port EPMD_PORT
    st=0
    start_broker || st=$?
    if [ "$st" -eq 0 ]; then
        started=1
        break
    fi
    # A port someone took since we chose it: stop what started, try others.
    stop_all "$DIR" >/dev/null 2>&1 || true
    [ "$st" -eq 1 ] || exit 1
    say "a port was taken (attempt $attempt), choosing others"
done
[ "$started" -eq 1 ] || die "RabbitMQ: no free ports after 3 attempts; see $R/server.out"
BROKER_URL=amqp://guest:guest@127.0.0.1:$AMQP_PORT/
say "RabbitMQ accepts connections: $BROKER_URL"

# --- PostgreSQL -------------------------------------------------------------------------------

P=$DIR/postgres
mkdir "$P" "$P/sock"
if [ "$(id -u)" -eq 0 ]; then
    # The server's user owns its directory and must be able to reach it.
    chmod 711 "$DIR"
    chown -R postgres:postgres "$P"
    if ! runuser -u postgres -- test -w "$P"; then
        die "PostgreSQL runs as the user postgres, which cannot reach $P (a parent directory" \
            "is private): set TMPDIR to a directory it can reach, such as /tmp"
    fi
fi
say "starting PostgreSQL 15"
if ! pg_tool initdb -D "$P/data" -U postgres -A trust -E UTF8 --no-locale --no-sync \
    --no-instructions >"$P/initdb.log" 2>&1; then
    say "initdb failed; see $P/initdb.log, which ends:"
    tail_log "$P/initdb.log"
    exit 1
fi
# Loopback TCP only, the socket in our directory (never /var/run/postgresql).
cat >>"$P/data/postgresql.conf" <<EOF

# weft distributed.sh
listen_addresses = '127.0.0.1'
unix_socket_directories = '$P/sock'
fsync = off
logging_collector = off
EOF
touch "$DIR/run/postgres.started"
for attempt in 1 2 3; do
    pick_port PG_PORT
    # A later port line wins over an earlier one.
    printf 'port = %s\n' "$PG_PORT" >>"$P/data/postgresql.conf"
    rm -f "$P/postgres.log"
    st=0
    # pg_ctl puts the postmaster in a session of its own.
    pg_tool pg_ctl start -D "$P/data" -l "$P/postgres.log" -w -t "$PG_TIMEOUT_S" \
        >>"$P/ctl.log" 2>&1 </dev/null || st=$?
    [ "$st" -ne 0 ] || break
    if [ "$attempt" -lt 3 ] && grep -qs "could not bind" "$P/postgres.log"; then
        say "port $PG_PORT was taken (attempt $attempt), choosing another"
        continue
    fi
    say "PostgreSQL did not start within ${PG_TIMEOUT_S} s; see $P/postgres.log (pg_ctl: $P/ctl.log), which ends:"
    tail_log "$P/postgres.log"
    exit 1
done
deadline=$(($(now_s) + PG_TIMEOUT_S))
until "$PG_BINDIR/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -t 2; do
    if [ "$(now_s)" -ge "$deadline" ]; then
        say "PostgreSQL does not accept connections on 127.0.0.1:$PG_PORT; see $P/postgres.log, which ends:"
        tail_log "$P/postgres.log"
        exit 1
    fi
    sleep 0.2
done
if ! "$PG_BINDIR/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres weft >>"$P/ctl.log" 2>&1; then
    say "createdb weft failed; see $P/ctl.log, which ends:"
    tail_log "$P/ctl.log"
    exit 1
fi
STATE_URL=postgresql://postgres@127.0.0.1:$PG_PORT/weft
say "PostgreSQL accepts connections: $STATE_URL"

# --- workers ----------------------------------------------------------------------------------

# What every weft process here shares: the broker, the state, the span store (the workers'
# spans land in the same weft.db as the orchestrator's, so one tree shows both). Nothing of the
# caller's WEFT_* settings that would point elsewhere.
export WEFT_HOME="$DIR/home" WEFT_BROKER_URL="$BROKER_URL" WEFT_STATE_URL="$STATE_URL"
unset WEFT_QUEUE_PREFIX WEFT_EXECUTOR WEFT_WORKER_CONCURRENCY

i=1
while [ "$i" -le "$WORKERS" ]; do
    # WEFT_DEBUG=1: a worker logs each task it starts. A short batch delay puts its spans in
    # the store soon after each task.
    (
        export WEFT_DEBUG=1 OTEL_BSP_SCHEDULE_DELAY=200
        cd "$DIR/home"
        exec setsid "$WEFT_BIN" worker --id "worker-$i" --metrics-addr 127.0.0.1:0
    ) >"$DIR/worker-$i.log" 2>&1 </dev/null &
    echo $! >"$DIR/run/worker-$i.pid"
    i=$((i + 1))
done
# Each worker consumes before the run publishes, so that the broker spreads the tasks.
deadline=$(($(now_s) + WORKER_TIMEOUT_S))
i=1
while [ "$i" -le "$WORKERS" ]; do
    log=$DIR/worker-$i.log
    until grep -qs "worker worker-$i: consuming" "$log"; do
        alive "$(readpid "$DIR/run/worker-$i.pid")" ||
            { say "worker-$i exited; see $log"; tail_log "$log"; exit 1; }
        if [ "$(now_s)" -ge "$deadline" ]; then
            say "worker-$i is not consuming after ${WORKER_TIMEOUT_S} s; see $log"
            tail_log "$log"
            exit 1
        fi
        sleep 0.1
    done
    port=$(sed -n 's/.*serving metrics on port \([0-9]*\).*/\1/p' "$log" | head -n 1)
    say "worker-$i consuming (log $log, metrics http://127.0.0.1:$port/metrics)"
    i=$((i + 1))
done

# --- the run ----------------------------------------------------------------------------------

say "weft run $WORKFLOW --executor amqp"
STARTED=1
rc=0
if [ -n "${INPUT:-}" ]; then
    "$WEFT_BIN" run "$WORKFLOW" --input "$INPUT" --executor amqp --no-trace || rc=$?
else
    "$WEFT_BIN" run "$WORKFLOW" --executor amqp --no-trace || rc=$?
fi

# The trace tree, once the workers' spans are in the store: stopping them flushes their spans;
# with KEEP=1 their short batch delay has to do.
if [ "$KEEP" -eq 1 ]; then
    sleep 1
else
    stop_workers "$DIR" || { [ "$rc" -ne 0 ] || rc=1; }
fi
echo
"$WEFT_BIN" trace show last || true

if [ "$KEEP" -eq 1 ]; then
    KEPT=1
    cat <<EOF

Everything is still running (run exit status $rc):
  broker     $BROKER_URL   (log $RABBITMQ_LOG)
  database   $STATE_URL   (log $P/postgres.log)
  workers    $WORKERS, logs $DIR/worker-N.log
Use them from this shell with:
  export WEFT_HOME=$DIR/home WEFT_BROKER_URL=$BROKER_URL WEFT_STATE_URL=$STATE_URL
  $WEFT_BIN run WORKFLOW --executor amqp      # another run
  $WEFT_BIN runs; $WEFT_BIN trace show last
Stop everything and remove $DIR with:
  $ROOT/scripts/distributed.sh stop $DIR
EOF
fi
exit "$rc"
