#!/bin/sh
# scripts/bench-peers.sh - weft's tracing hot path beside the OpenTelemetry SDKs for Go and
# JavaScript on the same scenario (docs/PERFORMANCE.md, "Peers side by side"): span_bench's
# `attrs5` (span start + 5 attributes: string, int, double, bool, string + end, through a batch
# processor with queue 65536, batch 512, delay 10 ms, into an exporter that discards).
#
#   weft  BUILD/span_bench SPANS RUNS attrs5:T            (bench/span_bench.c)
#   go    bench/peers/otel_go_span_bench (Debian 12's golang-go 1.19 and
#         golang-opentelemetry-otel-dev, built offline in GOPATH mode into BUILD/peers)
#   js    bench/peers/otel_js_span_bench.mjs (@opentelemetry/sdk-trace-base, pinned by
#         bench/peers/package.json and package-lock.json, `npm ci` into BUILD/peers/js)
#
# The three run one after another, ROUNDS times in one session (weft, go, js, weft, go, js, ...),
# so that a shared machine's load falls on all three alike. Each program prints its own JSON
# lines (the median of RUNS runs of SPANS spans); they are echoed, kept in
# BUILD/peers/results.jsonl, and followed by one summary line per thread count, the medians
# over the rounds and their ratios:
#   {"bench":"peers","case":"attrs5","threads":1,"rounds":3,"weft_ns_per_span":...,
#    "go_ns_per_span":...,"js_ns_per_span":...,"go_over_weft":...,"js_over_weft":...,...}
# JavaScript runs on one thread, so the 2-thread line compares weft and Go only.
#
# Usage: scripts/bench-peers.sh [--build DIR] [--spans N] [--runs N] [--rounds N]
#                               [--threads 1|2|1,2] [--js-dir DIR]
#   defaults: --build build --spans 1000000 --runs 3 --rounds 3 --threads 1,2
#   --js-dir: a directory whose node_modules already holds the pinned SDK (the test uses
#   tests/ingest's); without it, BUILD/peers/js is installed with `npm ci` when stale.
# Needs BUILD/span_bench (`make build`), go with the Debian OpenTelemetry sources, node and
# npm: `make bench-peers` installs them (scripts/deps.sh peers, as root).
set -eu

PROG="bench-peers"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
GOCODE=/usr/share/gocode
BUILD=build
SPANS=1000000
RUNS=3
ROUNDS=3
THREADS=1,2
JS_DIR=""

say() {
    printf '%s: %s\n' "$PROG" "$*" >&2
}

die() {
    say "error: $*"
    exit 1
}

usage() {
    echo "usage: scripts/bench-peers.sh [--build DIR] [--spans N] [--runs N] [--rounds N]" \
        "[--threads 1|2|1,2] [--js-dir DIR]" >&2
    exit 2
}

while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || usage
    case "$1" in
    --build) BUILD=$2 ;;
    --spans) SPANS=$2 ;;
    --runs) RUNS=$2 ;;
    --rounds) ROUNDS=$2 ;;
    --threads) THREADS=$2 ;;
    --js-dir) JS_DIR=$2 ;;
    *) usage ;;
    esac
    shift 2
done
for n in "$SPANS" "$RUNS" "$ROUNDS"; do
    case "$n" in '' | *[!0-9]*) usage ;; esac
done
[ "$ROUNDS" -ge 1 ] || usage
case "$THREADS" in 1 | 2 | 1,2) ;; *) usage ;; esac
THREAD_LIST=$(echo "$THREADS" | tr ',' ' ')
case "$BUILD" in /*) ;; *) BUILD="$(pwd)/$BUILD" ;; esac

# ---- dependencies: fail naming the command that installs them ---------------------------
INSTALL_HINT="run 'make deps-peers' (or 'scripts/deps.sh peers') as root, or:"
[ -x "$BUILD/span_bench" ] ||
    die "$BUILD/span_bench is missing: run 'make build' first (or 'make bench-peers')"
command -v go >/dev/null 2>&1 ||
    die "go is missing: $INSTALL_HINT sudo apt-get install golang-go golang-opentelemetry-otel-dev"
[ -d "$GOCODE/src/go.opentelemetry.io/otel/sdk/trace" ] ||
    die "the OpenTelemetry Go SDK sources ($GOCODE/src/go.opentelemetry.io/otel) are missing:" \
        "$INSTALL_HINT sudo apt-get install golang-opentelemetry-otel-dev"
command -v node >/dev/null 2>&1 ||
    die "node is missing: $INSTALL_HINT sudo apt-get install nodejs npm"

# ---- build the Go peer offline, from Debian's sources (GOPATH mode: Debian ships the SDK's
# modules as one source tree without their go.mod files, so module mode cannot resolve it) ----
mkdir -p "$BUILD/peers"
GO_BIN="$BUILD/peers/otel_go_span_bench"
(cd "$SRC" && env GO111MODULE=off GOPATH="$GOCODE" GOCACHE="$BUILD/peers/go-cache" \
    GOPROXY=off GOFLAGS= GOWORK=off GOENV=off GOTOOLCHAIN=local \
    go build -o "$GO_BIN" ./bench/peers/otel_go_span_bench) ||
    die "building bench/peers/otel_go_span_bench failed (needs golang-go and" \
        "golang-opentelemetry-otel-dev: $INSTALL_HINT sudo apt-get install golang-go" \
        "golang-opentelemetry-otel-dev)"

# ---- install the JS peer's SDK (pinned) into the build directory, never into the tree ------
if [ -z "$JS_DIR" ]; then
    JS_DIR="$BUILD/peers/js"
    command -v npm >/dev/null 2>&1 ||
        die "npm is missing: $INSTALL_HINT sudo apt-get install npm"
    mkdir -p "$JS_DIR"
    # npm writes node_modules/.package-lock.json last: without it an install was cut short.
    if [ ! -f "$JS_DIR/node_modules/.package-lock.json" ] ||
        ! cmp -s "$SRC/bench/peers/package-lock.json" "$JS_DIR/package-lock.json"; then
        say "installing the OpenTelemetry JS SDK (npm ci in $JS_DIR)"
        cp "$SRC/bench/peers/package.json" "$SRC/bench/peers/package-lock.json" "$JS_DIR/"
        (cd "$JS_DIR" && npm ci --no-audit --no-fund >&2) ||
            die "npm ci in $JS_DIR failed (the npm registry must be reachable)"
    fi
fi
[ -d "$JS_DIR/node_modules/@opentelemetry/sdk-trace-base" ] ||
    die "$JS_DIR/node_modules has no @opentelemetry/sdk-trace-base"

# ---- alternate: weft, go, js, weft, go, js, ... -----------------------------------------
RESULTS="$BUILD/peers/results.jsonl"
: >"$RESULTS"
GO_ONLY=""
[ "$THREADS" = 1,2 ] || GO_ONLY="attrs5:$THREADS"

run() { # NAME COMMAND...: echo the command's JSON lines and keep them
    out=$("$@") || die "$1 failed: $*"
    printf '%s\n' "$out" | tee -a "$RESULTS"
}

say "$ROUNDS rounds of $SPANS spans x $RUNS runs, threads $THREADS; load: $(cat /proc/loadavg 2>/dev/null || echo '?')"
round=1
while [ "$round" -le "$ROUNDS" ]; do
    for t in $THREAD_LIST; do
        run "$BUILD/span_bench" "$SPANS" "$RUNS" "attrs5:$t"
    done
    # shellcheck disable=SC2086 # empty: both thread counts
    run "$GO_BIN" "$SPANS" "$RUNS" $GO_ONLY
    case " $THREAD_LIST " in
    *" 1 "*)
        out=$(cd "$JS_DIR" && node "$SRC/bench/peers/otel_js_span_bench.mjs" "$SPANS" "$RUNS") ||
            die "otel_js_span_bench.mjs failed"
        printf '%s\n' "$out" | tee -a "$RESULTS"
        ;;
    esac
    round=$((round + 1))
done

# ---- summary: medians over the rounds, ratios to weft ---------------------------------------
node - "$RESULTS" "$ROUNDS" <<'EOF'
const fs = require('fs');
const [file, rounds] = process.argv.slice(2);
const rows = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? null : s.length % 2 ? s[(s.length - 1) / 2]
                                              : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const r1 = (x) => (x == null ? null : Math.round(x * 10) / 10);
const r2 = (x) => (x == null ? null : Math.round(x * 100) / 100);
const pick = (bench, threads, field) => rows
  .filter((r) => r.bench === bench && r.case === 'attrs5' && r.threads === threads && field in r)
  .map((r) => r[field]);
const version = (bench) => (rows.find((r) => r.bench === bench) || {}).sdk_version ?? null;
const threadCounts = [...new Set(rows.filter((r) => r.bench === 'span_bench').map((r) => r.threads))]
  .sort((a, b) => a - b);
let ok = true;
for (const t of threadCounts) {
  const weft = median(pick('span_bench', t, 'ns_per_span'));
  const go = median(pick('otel_go_span_bench', t, 'ns_per_span'));
  const js = median(pick('otel_js_span_bench', t, 'ns_per_span'));
  const weftCpu = median(pick('span_bench', t, 'cpu_ns_per_span'));
  const goCpu = median(pick('otel_go_span_bench', t, 'cpu_ns_per_span'));
  const line = { bench: 'peers', case: 'attrs5', threads: t, rounds: Number(rounds),
    weft_ns_per_span: r1(weft), go_ns_per_span: r1(go) };
  if (js != null) line.js_ns_per_span = r1(js);
  line.go_over_weft = weft && go ? r2(go / weft) : null;
  if (js != null) line.js_over_weft = weft ? r2(js / weft) : null;
  line.weft_cpu_ns_per_span = r1(weftCpu);
  line.go_cpu_ns_per_span = r1(goCpu);
  line.go_cpu_over_weft_cpu = weftCpu && goCpu ? r2(goCpu / weftCpu) : null;
  line.go_sdk = version('otel_go_span_bench');
  if (js != null) line.js_sdk = version('otel_js_span_bench');
  if (weft == null || go == null || (t === 1 && js == null)) ok = false;
  console.log(JSON.stringify(line));
}
process.exit(ok && threadCounts.length ? 0 : 1);
EOF
