// bench/explorer_render.mjs - the explorer's timeline in a browser: Debian's chromium
// (playwright-core from tests/ui) opens each trace explorer_bench left in DIR (smallest first),
// LOADS times each in a fresh browser context, and reads the page's own performance marks (ms
// after the navigation started, so the page's load, its scripts and the API's answers are in):
// the first rows of the waterfall in the page (the first part of the rows, docs/serve.md
// "view=rows") and every row in behind them ("weft:first-rows", "weft:rows-loaded", app.js). Bytes are the rows' answers
// as decoded and as sent (gzip). One JSON line per load:
//   {"bench":"explorer","what":"page","spans":N,"load":i,"first_rows_ms":...,"loaded_ms":...,
//    "parts":k,"bytes":...,"gzip_bytes":...,"bytes_per_span":...,"gzip_bytes_per_span":...}
// then one per trace with the medians ("what":"page_median").
// Usage: node bench/explorer_render.mjs DIR [--loads N]   (`make bench-explorer` runs it after
// explorer_bench --keep DIR; WEFT_BIN names the weft binary, default build/weft).
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..");
const require = createRequire(path.join(root, "tests/ui/package.json"));
const { chromium } = require("playwright-core");
const dir = process.argv[2];
const loadsAt = process.argv.indexOf("--loads");
const loads = loadsAt > 0 ? Number(process.argv[loadsAt + 1]) : 3;
const weft = process.env.WEFT_BIN || path.join(root, "build/weft");
if (!dir || !(loads >= 1)) {
  console.error("usage: node bench/explorer_render.mjs DIR [--loads N]   (N >= 1)");
  process.exit(2);
}
const serve = spawn(weft, ["serve", "--addr", "127.0.0.1:0", "--state", path.join(dir, "state.db"), "--store", path.join(dir, "weft.db")], { stdio: ["ignore", "ignore", "pipe"] });
const base = await new Promise((resolve, reject) => {
  let err = "";
  serve.stderr.on("data", (d) => {
    err += d;
    const m = /http:\/\/127\.0\.0\.1:(\d+)\//.exec(err);
    if (m) resolve(`http://127.0.0.1:${m[1]}`);
  });
  serve.on("exit", (c) => reject(new Error("weft serve exited " + c + ": " + err)));
});
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/* One load of trace @p t in a fresh context: times from the navigation, the rows' bytes. */
async function load(browser, t, i) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  const answers = [];
  page.on("requestfinished", (req) => {
    if (req.url().includes("/api/v1/traces/" + t.trace_id + "?view=rows")) {
      answers.push(Promise.all([req.sizes(), req.response().then((r) => r.body())]));
    }
  });
  await page.goto(`${base}/#/trace/${t.trace_id}`);
  await page.waitForFunction((n) => (document.querySelector("#waterfall") || {}).getAttribute?.("data-loaded") === String(n), t.span_count, { timeout: 120000 });
  /* The page's own marks, in ms after the navigation started (app.js): the first rows in the
     page, every row in. */
  const [first, loaded] = await page.evaluate(async () => {
    const at = (name) => new Promise((ok) => {
      const look = () => { const e = performance.getEntriesByName(name)[0]; if (e) ok(Math.round(e.startTime)); else setTimeout(look, 20); };
      look();
    });
    return [await at("weft:first-rows"), await at("weft:rows-loaded")];
  });
  const got = await Promise.all(answers);
  /* What the page reads behind the rows (a small trace's attributes) ends before the next load
     starts, so that it does not share the server with it. */
  await page.waitForLoadState("networkidle");
  const bytes = got.reduce((a, [, body]) => a + body.length, 0);
  const gzip = got.reduce((a, [sizes]) => a + sizes.responseBodySize, 0);
  await context.close();
  const r = { bench: "explorer", what: "page", spans: t.span_count, load: i + 1, first_rows_ms: first, loaded_ms: loaded, parts: got.length,
    bytes, gzip_bytes: gzip, bytes_per_span: +(bytes / t.span_count).toFixed(1), gzip_bytes_per_span: +(gzip / t.span_count).toFixed(1) };
  console.log(JSON.stringify(r));
  return r;
}

const browser = await chromium.launch({ executablePath: process.env.WEFT_CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
try {
  const traces = (await (await fetch(base + "/api/v1/traces?limit=50")).json()).traces.sort((a, b) => a.span_count - b.span_count);
  if (!traces.length) throw new Error("no trace in " + dir + ": run explorer_bench --keep " + dir + " first");
  for (const t of traces) {
    const rs = [];
    for (let i = 0; i < loads; i++) rs.push(await load(browser, t, i));
    console.log(JSON.stringify({ bench: "explorer", what: "page_median", spans: t.span_count, loads,
      first_rows_ms: median(rs.map((r) => r.first_rows_ms)), loaded_ms: median(rs.map((r) => r.loaded_ms)),
      bytes: rs[0].bytes, gzip_bytes: rs[0].gzip_bytes, bytes_per_span: rs[0].bytes_per_span, gzip_bytes_per_span: rs[0].gzip_bytes_per_span }));
  }
} finally {
  await browser.close();
  serve.kill("SIGTERM");
}
