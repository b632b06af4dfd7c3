#!/usr/bin/env bash
# tests/readme/walkthrough.sh SRC_DIR BUILD_DIR - the README's walkthrough, as a newcomer runs it.
#
# The commands are taken from README.md itself: every line of the ```sh blocks of the sections
# below (continuation lines joined, comments dropped), so the test follows the README when it
# changes. Each one must appear in EXPECT with its exit status and a key line of its output,
# or in EXCLUDED with the reason it cannot run here; a README command missing from both, or an
# entry no longer in the README, fails the test (drift fails, nothing is skipped silently).
#
# They run in order in a fresh copy of the tree (git's files, no build directories, no .weft),
# from its root as the README's `build/...` paths imply, with the built binaries linked in as
# `build/` (the state after `make`: the test never builds), the npm packages `make` installs
# linked in too, and a clean environment (no WEFT_* or OTEL_* variables of the caller).
# Long-running commands (`weft serve`) are started, asked for /healthz and the explorer, and
# stopped with SIGTERM, which must end them with status 0.
set -u

src=$(cd "${1:?usage: walkthrough.sh SRC_DIR BUILD_DIR}" && pwd)
build=$(cd "${2:?usage: walkthrough.sh SRC_DIR BUILD_DIR}" && pwd)
sections='^(## The explorer|## The two commands|## Running workflows|### Stuck loops|## Sending the quickstart to a collector)$'

# Exit status, then a regular expression (grep -E) one line of stdout+stderr must match (EMPTY:
# there must be no output at all). "serve" for a long-running server. Tab-separated; the command is the README's text exactly.
read -r -d '' EXPECT <<'EOF'
build/weft serve	serve	weft serve: listening
build/weft run examples/code_review/workflow.json --input "Add a login endpoint"	0	^run [0-9a-f]+: completed
build/weft run examples/swarm_reflection/workflow.json --json	0	"status": "completed"
build/weft run examples/clarify/workflow.json --session demo --input "Tell me more about it"	0	^run [0-9a-f]+: completed
build/weft run examples/clarify/workflow.json --session demo --input "The Rust borrow checker"	0	^run [0-9a-f]+: completed
build/weft run examples/translation/workflow.json	0	^run [0-9a-f]+: completed
build/weft run examples/correction/workflow.json	0	agents: .*command:success=1
build/weft run examples/skills/workflow.json && build/weft run examples/skills/workflow.json	0	retrieval weft.skills
build/weft skills list	0	^[0-9a-f]{8} +coder +1\.00 +1 
build/weft run examples/lessons/workflow.json && build/weft run examples/lessons/workflow.json	0	^run [0-9a-f]+: completed
examples/architect/compose.sh	0	^run [0-9a-f]+: completed
build/weft run examples/mcp_filesystem/workflow.json	0	mcp_agent_filesystem
build/weft mcp list examples/mcp_filesystem/workflow.json filesystem	0	write_file
build/weft runs && build/weft run show last	0	^run [0-9a-f]+ +workflow=
build/weft run show last --json | jq '.steps[] | select(.status != "completed") | {id, status, skipped, error}'	0	EMPTY
build/weft run examples/translation/workflow.json --metrics-addr 127.0.0.1:9464	0	^run [0-9a-f]+: completed
build/weft run examples/stuck_loops/route.json --sampling "failed,stuck,reward<0.5,5%"	0	^  sampling: trace kept \(rule stuck\)
OTEL_TRACES_EXPORTER=otlp OTEL_METRICS_EXPORTER=otlp build/weft run examples/code_review/workflow.json	4	otlp: 0 delivered, [0-9]+ failed \(connection refused by http://localhost:4318/v1/traces\)
build/weft serve --addr 127.0.0.1:9464	serve	weft serve: listening
build/weft run examples/stuck_loops/handoff.json	3	stuck loop \(handoff\)
build/weft run examples/stuck_loops/tool.json	3	stuck loop \(tool
build/weft run examples/stuck_loops/reflection.json	3	stuck loop \(reflection
build/weft run examples/stuck_loops/flow.json	3	stuck loop \(flow
build/weft run examples/stuck_loops/route.json	0	^run [0-9a-f]+: completed
build/weft runs	0	stuck loop \(handoff\): handoff tester
build/weft trace show last	0	weft.stuck_loop
OTEL_TRACES_EXPORTER=otlp,store build/trace_quickstart	1	^  otlp: 0 delivered, 7 failed
OTEL_TRACES_EXPORTER=otlp OTEL_EXPORTER_OTLP_PROTOCOL=http/json OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 OTEL_EXPORTER_OTLP_HEADERS='x-tenant=team%20a' build/trace_quickstart	1	^  otlp: 0 delivered, 7 failed
TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 build/trace_quickstart	0	traceparent 00-4bf92f3577b34da6a3ce929d0e0e4736-
EOF

# Commands that cannot run here, with the reason.
read -r -d '' EXCLUDED <<'EOF'
make run	the state this test starts from: the build is linked in, and the walkthrough runs the same example
make test	runs this test
OPENAI_API_KEY=sk-... build/weft run examples/openai/workflow.json --record run.json	needs an OpenAI account and the network; the test runs offline
build/weft run examples/openai/workflow.json --replay run.json	replays the file the OpenAI command above records
LANGFUSE_PUBLIC_KEY=pk-lf-... LANGFUSE_SECRET_KEY=sk-lf-... build/weft run examples/code_review/workflow.json --user alice --tags nightly,canary	needs a Langfuse account and the network
EOF

fail=0
note() { printf '%s\n' "$*" >&2; }
bad() {
    note "FAIL: $*"
    fail=1
}

# The README's commands, in order, one a line.
readme_commands() {
    awk -v sections="$sections" '
        /^#+ / { in_section = ($0 ~ sections); next }
        /^```sh$/ { if (in_section) in_block = 1; next }
        /^```/ { in_block = 0; next }
        !in_block { next }
        {
            line = $0
            if (line ~ /^[ \t]*#/) { next }             # a comment line
            sub(/[ \t]+#.*$/, "", line)                  # a trailing comment
            sub(/^[ \t]+/, "", line)
            sub(/[ \t]+$/, "", line)
            if (line ~ /\\$/) {                          # a continuation line
                sub(/[ \t]*\\$/, "", line)
                pending = pending line " "
                next
            }
            line = pending line
            pending = ""
            if (line != "") { print line }
        }' "$src/README.md"
}

table_has() { # table command
    printf '%s\n' "$1" | cut -f1 | grep -qxF -- "$2"
}

mapfile -t commands < <(readme_commands)
if [ "${#commands[@]}" -lt 20 ]; then
    bad "found only ${#commands[@]} commands in README.md's walkthrough sections"
fi
for c in "${commands[@]}"; do
    if ! table_has "$EXPECT" "$c" && ! table_has "$EXCLUDED" "$c"; then
        bad "README command not in this test (add it to EXPECT or EXCLUDED): $c"
    fi
done
while IFS=$'\t' read -r c _; do
    if ! printf '%s\n' "${commands[@]}" | grep -qxF -- "$c"; then
        bad "no longer in README.md (remove it from this test): $c"
    fi
done < <(printf '%s\n%s\n' "$EXPECT" "$EXCLUDED")
[ "$fail" = 0 ] || exit 1

# The fresh copy: git's files (tracked, and new ones not ignored), no build directories.
work=$(mktemp -d "${TMPDIR:-/tmp}/weft-readme.XXXXXX")
serve_pid=
cleanup() {
    if [ -n "$serve_pid" ]; then
        kill -KILL "$serve_pid" 2>/dev/null
    fi
    rm -rf "$work"
}
trap cleanup EXIT
repo=$work/weft
mkdir -p "$repo" "$work/home"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$src" && git ls-files -z --cached --others --exclude-standard) |
        (cd "$src" && while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done) |
        (cd "$src" && xargs -0 cp --parents -t "$repo") || { note "cannot copy the tree"; exit 1; }
else # a source tree without git (an unpacked archive): everything but what builds and runs make
    tar -C "$src" --exclude='./build*' --exclude=./.weft --exclude=node_modules -cf - . |
        tar -C "$repo" -xf - || { note "cannot copy the tree"; exit 1; }
fi
rm -rf "$repo/build" "$repo/.weft"
ln -s "$build" "$repo/build"
# What `make` installs with npm (scripts/deps.sh build): the MCP example's server.
if [ -d "$src/examples/mcp_filesystem/node_modules" ]; then
    ln -s "$src/examples/mcp_filesystem/node_modules" "$repo/examples/mcp_filesystem/node_modules"
else
    bad "examples/mcp_filesystem/node_modules missing: make (scripts/deps.sh build) installs it"
fi

newcomer() { # a clean environment: no WEFT_* or OTEL_* of whoever runs the test
    env -i PATH="$PATH" HOME="$work/home" LANG=C.UTF-8 TERM=dumb "$@"
}

port_free() { # port: nothing answers on 127.0.0.1:port
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

wait_port_free() { # port: wait for another process to let go of it (at most 30 s)
    for _ in $(seq 300); do
        port_free "$1" && return 0
        sleep 0.1
    done
    return 1
}

check_output() { # n command pattern out
    if [ "$3" = EMPTY ]; then
        [ ! -s "$4" ] || { bad "[$1] $2: expected no output, got:"; head -n 20 "$4" >&2; }
        return
    fi
    if ! grep -qE -- "$3" "$4"; then
        bad "[$1] $2: no line matches /$3/; its output:"
        tail -n 40 "$4" >&2
    fi
}

run_serve() { # n command pattern
    local out=$work/out.$1 port=9464 body=$work/body.$1
    case "$2" in *--addr\ 127.0.0.1:*) port=${2##*127.0.0.1:} ;; esac
    wait_port_free "$port" || { bad "[$1] port $port stays busy: cannot run $2"; return; }
    (cd "$repo" && exec env -i PATH="$PATH" HOME="$work/home" LANG=C.UTF-8 TERM=dumb \
        bash -c "exec $2") >"$out" 2>&1 &
    serve_pid=$!
    local up=0
    for _ in $(seq 200); do
        if curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null; then
            up=1
            break
        fi
        kill -0 "$serve_pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ "$up" = 1 ]; then
        curl -fsS -o "$body" "http://127.0.0.1:$port/" ||
            bad "[$1] $2: the explorer at / does not answer"
        grep -qi '<html' "$body" 2>/dev/null || bad "[$1] $2: / is not the explorer's page"
        curl -fsS -o "$body.metrics" "http://127.0.0.1:$port/metrics" &&
            grep -q '^weft_' "$body.metrics" ||
            bad "[$1] $2: /metrics has no weft_ series"
    else
        bad "[$1] $2: /healthz never answered"
    fi
    kill -TERM "$serve_pid" 2>/dev/null
    wait "$serve_pid"
    local rc=$?
    serve_pid=
    [ "$rc" = 0 ] || bad "[$1] $2: exit $rc after SIGTERM, expected 0"
    check_output "$1" "$2" "$3" "$out"
}

run_one() { # n command status pattern
    local out=$work/out.$1
    case "$2" in *--metrics-addr\ 127.0.0.1:*)
        wait_port_free "${2##*127.0.0.1:}" || bad "[$1] its port stays busy" ;;
    esac
    (cd "$repo" && newcomer timeout 120 bash -c "$2") >"$out" 2>&1
    local rc=$?
    if [ "$rc" != "$3" ]; then
        bad "[$1] $2: exit $rc, expected $3; its output:"
        tail -n 40 "$out" >&2
        return
    fi
    check_output "$1" "$2" "$4" "$out"
}

# The three quickstart commands each wait up to 30 s for a collector that is not there: they
# run side by side (nothing later reads what they write), after the rest.
n=0
declare -a later=()
for c in "${commands[@]}"; do
    n=$((n + 1))
    if table_has "$EXCLUDED" "$c"; then
        note "[$n] excluded: $c ($(printf '%s\n' "$EXCLUDED" | grep -F -- "$c" | cut -f2))"
        continue
    fi
    line=$(printf '%s\n' "$EXPECT" | awk -F'\t' -v c="$c" '$1 == c { print; exit }')
    status=$(printf '%s' "$line" | cut -f2)
    pattern=$(printf '%s' "$line" | cut -f3)
    case "$c" in
    *build/trace_quickstart)
        later+=("$n")
        continue
        ;;
    esac
    note "[$n] $c"
    if [ "$status" = serve ]; then
        run_serve "$n" "$c" "$pattern"
    else
        run_one "$n" "$c" "$status" "$pattern"
    fi
done
declare -a pids=()
for n in "${later[@]}"; do
    c=${commands[$((n - 1))]}
    note "[$n] $c"
    line=$(printf '%s\n' "$EXPECT" | awk -F'\t' -v c="$c" '$1 == c { print; exit }')
    (run_one "$n" "$c" "$(printf '%s' "$line" | cut -f2)" "$(printf '%s' "$line" | cut -f3)"
        exit "$fail") &
    pids+=($!)
done
for p in "${pids[@]}"; do
    wait "$p" || fail=1
done

# The README's C program ("Embedding the library"), built against this build as `make install`
# would place it: with no collector it must say that its spans were not delivered.
awk '/^## Embedding the library/ { s = 1 } s && /^```c$/ { b = 1; next } b && /^```/ { exit }
     b { print }' "$src/README.md" >"$work/app.c"
if ! cc -o "$work/app" "$work/app.c" -I"$src/include" -I"$build/include" -L"$build" \
    -Wl,-rpath,"$build" -lweft 2>"$work/cc.err"; then
    bad "the README's C program does not build:"
    cat "$work/cc.err" >&2
else
    (cd "$work" && newcomer ./app) >"$work/app.out" 2>&1
    rc=$?
    [ "$rc" = 1 ] || bad "the README's C program without a collector: exit $rc, expected 1"
    check_output app "./app" "spans not delivered" "$work/app.out"
fi

if [ "$fail" = 0 ]; then
    note "README walkthrough: ${#commands[@]} commands, every one as the README says"
fi
exit "$fail"
