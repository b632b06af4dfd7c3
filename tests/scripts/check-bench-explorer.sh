#!/bin/sh
# tests/scripts/check-bench-explorer.sh BUILD_DIR SOURCE_DIR - ctest scripts/bench_explorer:
# `make bench-explorer` at a tiny size (a 2,000-span trace, 50 runs, one page load), so that
# what docs/PERFORMANCE.md's figures come from keeps working: explorer_bench prints its JSON
# lines (the runs list; per trace the first part of the rows, every row, the older waterfall, a
# span, a page) with sizes as decoded and as sent, and explorer_render.mjs opens the trace in
# Debian's chromium and prints the first rows' and the fully loaded times and the bytes per span.
# Asserts nothing about speed.
set -eu

BUILD=$1
SRC=$2
DIR=$BUILD/bench-explorer-check
rm -rf "$DIR"
"$BUILD/explorer_bench" --runs 50 --spans 2000 --requests 10 --keep "$DIR" >"$DIR.out"
WEFT_BIN=$BUILD/weft node "$SRC/bench/explorer_render.mjs" "$DIR" --loads 1 >>"$DIR.out"
cat "$DIR.out"
node - "$DIR.out" <<'JS'
const fs = require('fs');
const rows = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
const fail = (msg) => { console.error(`bench-explorer: FAIL: ${msg}`); process.exit(1); };
const one = (what) => rows.find((r) => r.what === what) || fail(`no "${what}" line`);
const pos = (r, keys) => { for (const k of keys) if (!(r[k] > 0)) fail(`${r.what}: ${k} ${r[k]}`); };
pos(one('runs_list'), ['p50_ms', 'bytes', 'gzip_bytes']);
for (const w of ['rows_first', 'rows', 'waterfall', 'span', 'trace']) {
  const r = one(w);
  if (r.spans !== 2000 || r.error) fail(`${w}: ${JSON.stringify(r)}`);
  pos(r, ['p50_ms', 'bytes', 'gzip_bytes']);
}
pos(one('rows'), ['bytes_per_span', 'gzip_bytes_per_span']);
if (!(one('rows').gzip_bytes < one('rows').bytes)) fail('the rows were not sent compressed');
for (const w of ['page', 'page_median']) {
  const r = one(w);
  if (r.spans !== 2000) fail(`${w}: spans ${r.spans}`);
  pos(r, ['first_rows_ms', 'loaded_ms', 'bytes', 'gzip_bytes', 'bytes_per_span', 'gzip_bytes_per_span']);
  if (r.loaded_ms < r.first_rows_ms) fail(`${w}: loaded before the first rows`);
}
if (one('page').parts !== 2) fail(`page: ${one('page').parts} parts of rows, expected the first and the rest`);
console.log(`bench-explorer: ${rows.length} JSON lines ok`);
JS
rm -rf "$DIR" "$DIR.out"
