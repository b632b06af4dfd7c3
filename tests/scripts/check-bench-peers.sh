#!/bin/sh
# tests/scripts/check-bench-peers.sh BUILD_DIR SOURCE_DIR - ctest scripts/bench_peers: runs
# scripts/bench-peers.sh (what `make bench-peers` runs) on a tiny span count, one round, so
# that what the README promises keeps working offline:
#   1. the Go peer (bench/peers/otel_go_span_bench) builds offline from Debian's golang-go and
#      golang-opentelemetry-otel-dev into BUILD_DIR/peers;
#   2. weft's span_bench, the Go peer and the JS peer (with tests/ingest's node_modules, the
#      same pinned @opentelemetry/sdk-trace-base, installed by `scripts/deps.sh test`: no npm
#      at test time) each print valid JSON lines for attrs5 with the span count asked for and
#      nothing dropped, and the summary has a line per thread count with positive ratios;
#   3. without span_bench the script fails, naming the command that builds it.
# Asserts nothing about speed. Missing Go packages fail the test (the script names the
# install command): `make test` installs them (scripts/deps.sh test).
set -eu

BUILD=$1
SRC=$2
OUT=$BUILD/peers/check-bench-peers.out
mkdir -p "$BUILD/peers"

echo "bench-peers: tiny run (2000 spans, 1 run, 1 round)"
sh "$SRC/scripts/bench-peers.sh" --build "$BUILD" --spans 2000 --runs 1 --rounds 1 \
    --js-dir "$SRC/tests/ingest" >"$OUT"
cat "$OUT"

node - "$OUT" <<'EOF'
const fs = require('fs');
const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter((l) => l.trim());
const rows = lines.map((l) => JSON.parse(l)); // throws (fails the test) on a line that is not JSON
const fail = (msg) => { console.error(`bench-peers: FAIL: ${msg}`); process.exit(1); };
const want = [['span_bench', 1], ['span_bench', 2], ['otel_go_span_bench', 1],
  ['otel_go_span_bench', 2], ['otel_js_span_bench', 1]];
for (const [bench, threads] of want) {
  const r = rows.find((x) => x.bench === bench && x.threads === threads);
  if (!r) fail(`no ${bench} line for ${threads} thread(s)`);
  if (r.case !== 'attrs5') fail(`${bench}: case ${r.case}`);
  if (!(r.ns_per_span > 0) || !(r.spans_per_sec > 0)) fail(`${bench}: no timing`);
  if (r.spans_per_run !== 2000) fail(`${bench}: spans_per_run ${r.spans_per_run}`);
  if (r.dropped !== 0) fail(`${bench}: dropped ${r.dropped}`);
  if (bench !== 'span_bench' && !/^\d+\.\d+\.\d+/.test(r.sdk_version)) {
    fail(`${bench}: sdk_version ${r.sdk_version}`);
  }
}
for (const threads of [1, 2]) {
  const s = rows.find((x) => x.bench === 'peers' && x.threads === threads);
  if (!s) fail(`no summary line for ${threads} thread(s)`);
  const keys = ['weft_ns_per_span', 'go_ns_per_span', 'go_over_weft', 'go_cpu_over_weft_cpu']
    .concat(threads === 1 ? ['js_ns_per_span', 'js_over_weft'] : []);
  for (const k of keys) if (!(s[k] > 0)) fail(`summary (${threads} thread(s)): ${k} ${s[k]}`);
}
console.log(`bench-peers: ${rows.length} JSON lines ok`);
EOF

echo "bench-peers: without span_bench"
EMPTY=$BUILD/peers/empty-build
mkdir -p "$EMPTY"
if sh "$SRC/scripts/bench-peers.sh" --build "$EMPTY" >"$EMPTY/out" 2>"$EMPTY/err"; then
    echo "bench-peers: FAIL: exit 0 without span_bench"
    exit 1
fi
grep -q "make build" "$EMPTY/err" || {
    echo "bench-peers: FAIL: the error names no install command:"
    cat "$EMPTY/err"
    exit 1
}
cat "$EMPTY/err"
echo "bench-peers: ok"
