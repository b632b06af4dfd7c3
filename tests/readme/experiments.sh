#!/usr/bin/env bash
# tests/readme/experiments.sh SRC_DIR BUILD_DIR - docs/experiments.md's walk on
# examples/support_triage ("The loop on examples/support_triage"), as a user types it.
#
# The commands are the lines of the ```sh block after the "<!-- walk: experiments" marker, run in
# order from a directory holding the example (examples/ linked from SRC_DIR) and the build (as
# build/), with a fresh WEFT_HOME. Each must be in EXPECT with its exit status and a line its
# output must match (grep -E); a command missing from EXPECT, or an entry no longer in the doc,
# fails the test.
set -u

src=$(cd "${1:?usage: experiments.sh SRC_DIR BUILD_DIR}" && pwd)
build=$(cd "${2:?usage: experiments.sh SRC_DIR BUILD_DIR}" && pwd)

read -r -d '' EXPECT <<'EOF'
jq -r .input examples/support_triage/tickets.jsonl | while read -r t; do build/weft run examples/support_triage/workflow.json --input "$t" -q --no-trace > /dev/null; done	any	.*
build/weft runs --limit 30	0	step route \(command\) failed
build/weft dataset create refunds --from-runs --workflow support-triage --status failed	0	8 items added
build/weft dataset create tickets --from-runs --workflow support-triage	0	30 items added
build/weft eval examples/support_triage/workflow_fixed.json --dataset refunds --from-failure	0	saved +8 LLM call\(s\)
build/weft eval examples/support_triage/workflow.json --dataset tickets --name before	0	pass rate +73\.3%
build/weft eval examples/support_triage/workflow_fixed.json --dataset tickets --name after --fail-under 0.9	0	pass rate +100\.0%
build/weft eval compare before after	0	fixed 8   broken 0   unchanged 22
EOF

fail=0
mapfile -t commands < <(awk '
    /<!-- walk: experiments/ { armed = 1; next }
    armed && /^```sh$/ { in_block = 1; next }
    in_block && /^```/ { exit }
    in_block { print }' "$src/docs/experiments.md")
if [ "${#commands[@]}" -lt 5 ]; then
    echo "FAIL: found only ${#commands[@]} commands in docs/experiments.md's walk" >&2
    exit 1
fi
while IFS=$'\t' read -r c _; do
    printf '%s\n' "${commands[@]}" | grep -qxF -- "$c" ||
        { echo "FAIL: no longer in docs/experiments.md (remove it from this test): $c" >&2; fail=1; }
done <<<"$EXPECT"

work=$(mktemp -d "${TMPDIR:-/tmp}/weft-experiments.XXXXXX")
trap 'rm -rf "$work"' EXIT
ln -s "$src/examples" "$work/examples"
ln -s "$build" "$work/build"
cd "$work" || exit 1
for c in "${commands[@]}"; do
    entry=$(printf '%s\n' "$EXPECT" | awk -F'\t' -v c="$c" '$1 == c { print; exit }')
    if [ -z "$entry" ]; then
        echo "FAIL: doc command not in this test (add it to EXPECT): $c" >&2
        fail=1
        continue
    fi
    want=$(printf '%s' "$entry" | cut -f2)
    pattern=$(printf '%s' "$entry" | cut -f3)
    out=$(env -u WEFT_STATE_URL -u WEFT_EXECUTOR WEFT_HOME="$work/home" bash -c "$c" 2>&1)
    status=$?
    if [ "$want" != any ] && [ "$status" != "$want" ]; then
        echo "FAIL: exit $status, expected $want: $c" >&2
        printf '%s\n' "$out" | tail -20 >&2
        fail=1
    elif ! printf '%s\n' "$out" | grep -qE -- "$pattern"; then
        echo "FAIL: no line matches /$pattern/: $c" >&2
        printf '%s\n' "$out" | tail -20 >&2
        fail=1
    else
        echo "ok: $c"
    fi
done
exit "$fail"
