#!/bin/bash
# tests/scripts/check-distributed.sh WEFT_BIN SOURCE_DIR - ctest scripts/distributed: runs
# scripts/distributed.sh (what `make distributed` runs) end to end, with real RabbitMQ and
# PostgreSQL servers, three times:
#   1. the default: the code-review example on 2 workers; exit 0, the run completed, the amqp
#      executor published tasks and received as many results, both workers ran tasks and
#      exited 0 on SIGTERM, their spans are in the trace tree, and afterwards no process refers
#      to the run's directory, the broker's and the database's ports are closed and the
#      directory is gone;
#   2. KEEP=1: everything still running after the run, both worker logs show the tasks they
#      started, and `scripts/distributed.sh stop DIR` then leaves nothing either;
#   3. a workflow whose step fails: the script exits non-zero, and still leaves nothing.
# A server that cannot start fails the test (the script exits 1 naming the log): never a skip.
set -eu

WEFT_BIN=$1
SRC=$2
SCRIPT=$SRC/scripts/distributed.sh
WORK=$(mktemp -d "${TMPDIR:-/tmp}/weft-check-distributed.XXXXXX")
# As root the script runs PostgreSQL as the user postgres, which must reach the directories.
chmod 711 "$WORK"
# The script's TMPDIR: every directory it makes is under it. Passed to the script only, so that
# no process of this test carries it in its environment.
T=$WORK/tmp
mkdir -m 711 "$T"
failures=0

cleanup() {
    local d
    # A KEEP=1 run this test did not get to stop.
    for d in "$T"/weft-distributed.*; do
        [ -d "$d/run" ] && bash "$SCRIPT" stop "$d" >/dev/null 2>&1
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# Run the script with the given environment assignments; its output goes to $WORK/$1.out.
run_script() {
    local name=$1 rc=0
    shift
    env "$@" TMPDIR="$T" WEFT_BIN="$WEFT_BIN" timeout 75 bash "$SCRIPT" \
        >"$WORK/$name.out" 2>&1 </dev/null || rc=$?
    echo "$rc"
}

show() {
    echo "---- output of $1 ----" >&2
    cat "$WORK/$1.out" >&2
    echo "---- end of $1 ----" >&2
}

expect() { # expect NAME ERE: a line of NAME's output matches ERE
    grep -Eq -- "$2" "$WORK/$1.out" || fail "$1: no line matches: $2"
}

# Processes whose command line, environment or working directory names $1.
leftovers() {
    local d pid
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        [ "$pid" != "$$" ] || continue
        # A process may end meanwhile, and some (pid 1) keep their environment private.
        if { tr '\0' '\n' <"$d/cmdline" | grep -qF -- "$1"; } 2>/dev/null ||
            { tr '\0' '\n' <"$d/environ" | grep -qF -- "$1"; } 2>/dev/null ||
            { readlink "$d/cwd" | grep -qF -- "$1"; } 2>/dev/null; then
            echo "$pid $({ tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null)"
        fi
    done
}

listening() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# The run's directory, ports and URLs, from the script's output.
parse() {
    DIR=$(sed -n 's/^weft distributed: working directory //p' "$WORK/$1.out" | head -n 1)
    AMQP_PORT=$(sed -n 's|.*RabbitMQ accepts connections: amqp://guest:guest@127\.0\.0\.1:\([0-9]*\)/.*|\1|p' \
        "$WORK/$1.out" | head -n 1)
    PG_PORT=$(sed -n 's|.*PostgreSQL accepts connections: postgresql://postgres@127\.0\.0\.1:\([0-9]*\)/weft.*|\1|p' \
        "$WORK/$1.out" | head -n 1)
    [ -n "$DIR" ] || fail "$1: the output names no working directory"
    [ -n "$AMQP_PORT" ] || fail "$1: the output shows no broker URL"
    [ -n "$PG_PORT" ] || fail "$1: the output shows no PostgreSQL URL"
}

# Nothing of the run in $DIR left: no process, no open server port, no directory.
expect_nothing_left() {
    local left
    # Processes that were just signalled may take a moment to be reaped.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        left=$(leftovers "$DIR")
        [ -n "$left" ] || break
        sleep 0.5
    done
    [ -z "$left" ] || fail "$1: processes left running from $DIR:"$'\n'"$left"
    if [ -n "${AMQP_PORT:-}" ] && listening "$AMQP_PORT"; then
        fail "$1: the broker's port $AMQP_PORT still accepts connections"
    fi
    if [ -n "${PG_PORT:-}" ] && listening "$PG_PORT"; then
        fail "$1: PostgreSQL's port $PG_PORT still accepts connections"
    fi
    [ ! -e "$DIR" ] || fail "$1: $DIR still exists: $(find "$DIR" | head -n 20)"
    [ -z "$(ls -A "$T")" ] || fail "$1: left in TMPDIR: $(ls -A "$T")"
}

# Both workers ran tasks: the script reports each one's exit status and last log line.
expect_workers_ran() {
    local i n
    for i in 1 2; do
        expect "$1" "^weft distributed: worker-$i exited with status 0: stopped: [1-9][0-9]* received, [1-9][0-9]* succeeded, 0 failed"
        n=$(grep -c "weft.worker.id=worker-$i" "$WORK/$1.out" || true)
        [ "$n" -ge 1 ] || fail "$1: no span of worker-$i in the trace tree"
    done
}

# --- 1. the default ---------------------------------------------------------------------------
rc=$(run_script default WORKERS=2)
parse default
if [ "$rc" -ne 0 ]; then
    fail "default: exit status $rc, expected 0"
fi
expect default '^run [0-9a-f]+: completed in '
expect default '^  steps: +s1:architect\(completed\) .*s9:reviewer\(completed\)$'
published=$(sed -n 's/.*amqp executor: \([0-9]*\) task(s) published, \([0-9]*\) result(s), 0 duplicate(s).*/\1/p' \
    "$WORK/default.out")
results=$(sed -n 's/.*amqp executor: \([0-9]*\) task(s) published, \([0-9]*\) result(s), 0 duplicate(s).*/\2/p' \
    "$WORK/default.out")
if [ -z "$published" ] || [ "$published" -lt 1 ] || [ "$results" != "$published" ]; then
    fail "default: the amqp executor line shows ${published:-no} task(s) published and ${results:-no} result(s)"
fi
expect default '^trace [0-9a-f]{32} .*errors=0'
expect default '^invoke_workflow code-review .* ok '
expect_workers_ran default
expect_nothing_left default
[ "$failures" -eq 0 ] || show default

# --- 2. KEEP=1, then `stop DIR` ---------------------------------------------------------------
before=$failures
rc=$(run_script keep KEEP=1 WORKERS=2)
parse keep
[ "$rc" -eq 0 ] || fail "keep: exit status $rc, expected 0"
expect keep '^run [0-9a-f]+: completed in '
expect keep "^Everything is still running \\(run exit status 0\\):"
expect keep "scripts/distributed.sh stop $DIR\$"
if [ -n "$DIR" ] && [ -d "$DIR" ]; then
    for i in 1 2; do
        n=$(grep -c "worker worker-$i: task .* started: step " "$DIR/worker-$i.log" || true)
        [ "$n" -ge 1 ] || fail "keep: $DIR/worker-$i.log shows no task started"
    done
    listening "$AMQP_PORT" || fail "keep: the broker stopped although KEEP=1"
    listening "$PG_PORT" || fail "keep: PostgreSQL stopped although KEEP=1"
    [ -n "$(leftovers "$DIR")" ] || fail "keep: nothing runs although KEEP=1"
    src=0
    bash "$SCRIPT" stop "$DIR" >"$WORK/stop.out" 2>&1 || src=$?
    [ "$src" -eq 0 ] || fail "stop: exit status $src, expected 0"
    expect stop '^weft distributed: worker-1 stopped: [1-9][0-9]* received'
    expect stop "^weft distributed: stopped; $DIR removed\$"
else
    fail "keep: the working directory ${DIR:-?} is gone although KEEP=1"
fi
expect_nothing_left keep
[ "$failures" -eq "$before" ] || { show keep; [ ! -e "$WORK/stop.out" ] || show stop; }

# --- 3. a failed run --------------------------------------------------------------------------
before=$failures
mkdir "$WORK/failing"
cat >"$WORK/failing/workflow.json" <<'EOF'
{
  "name": "fails",
  "models": {"m": {"provider": "scripted", "model": "s", "script": "script.json"}},
  "supervisor": {"model": "m", "timeout_s": 60},
  "agents": [{"name": "unused", "model": "m", "instructions": "Never asked."}],
  "plan": [{"id": "boom", "executor": "command", "task": "Fail on purpose",
            "argv": ["sh", "-c", "echo broken >&2; exit 3"], "timeout_s": 10}]
}
EOF
echo '{"version": 1, "responses": {}}' >"$WORK/failing/script.json"
rc=$(run_script failed WORKERS=1 WORKFLOW="$WORK/failing/workflow.json")
parse failed
[ "$rc" -eq 1 ] || fail "failed: exit status $rc, expected 1 (the run's)"
expect failed '^run [0-9a-f]+: failed in '
expect failed 'amqp executor: 1 task\(s\) published, 1 result\(s\)'
expect failed '^weft distributed: worker-1 exited with status 0: stopped: 1 received, 0 succeeded, 1 failed'
expect_nothing_left failed
[ "$failures" -eq "$before" ] || show failed

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "ok: default run, KEEP=1 with stop, failed run; nothing left behind"
