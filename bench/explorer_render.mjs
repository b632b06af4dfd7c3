// bench/explorer_render.mjs - the explorer's timeline in a browser: Debian's chromium
// (playwright-core from tests/ui) opens each trace explorer_bench left in DIR (smallest first),
// in a browser context warmed up by one navigation to the traces list (the page's bundle is
// not what is timed), LOADS times, and reads the page's own performance marks (src/waterfall.js:
// "weft:first-part" its body parsed, "weft:first-rows" in the DOM, "weft:first-rows-painted" a
// task after the next frame, "weft:rows-loaded") against the browser's Resource Timing of the
// rows' answers (docs/serve.md "view=rows"): the server's time of the first part and of the
// rest (request sent to first byte), the first rows painted counted from the first part's
// responseEnd and from the navigation, every row in, bytes decoded and as sent (gzip). The
// first load of a trace finds the server's rows cache cold, later ones warm (server_cache).
// One JSON line per load ("what":"page"), then per trace the medians with [min, max]
// ("what":"page_median").
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

/* One load of trace @p t in @p context (warmed up: the page, its stylesheet and its bundle
 * already loaded once, so that what is timed is the trace, not the bundle): the page's own
 * marks and the browser's Resource Timing of the rows' answers. */
async function load(context, t, i) {
  const page = await context.newPage();
  await page.goto(`${base}/#/trace/${t.trace_id}`);
  await page.waitForFunction((n) => (document.querySelector("#waterfall") || {}).getAttribute?.("data-loaded") === String(n), t.span_count, { timeout: 120000 });
  const m = await page.evaluate(async (id) => {
    const at = (name) => new Promise((ok) => {
      const look = () => { const e = performance.getEntriesByName(name)[0]; if (e) ok(e.startTime); else setTimeout(look, 20); };
      look();
    });
    const marks = { part: await at("weft:first-part"), rows: await at("weft:first-rows"), painted: await at("weft:first-rows-painted"), loaded: await at("weft:rows-loaded") };
    const rows = performance.getEntriesByType("resource").filter((e) => e.name.includes("/api/v1/traces/" + id + "?view=rows"))
      .map((e) => ({ first: !e.name.includes("offset="), req: e.requestStart, ttfb: e.responseStart - e.requestStart, end: e.responseEnd,
        bytes: e.decodedBodySize, gzip: e.encodedBodySize }));
    return { marks, rows };
  }, t.trace_id);
  /* What the page reads behind the rows (a small trace's attributes) ends before the next load
     starts, so that it does not share the server with it. */
  await page.waitForLoadState("networkidle");
  await page.close();
  const first = m.rows.find((r) => r.first);
  const rest = m.rows.filter((r) => !r.first);
  const sum = (xs, k) => xs.reduce((a, r) => a + r[k], 0);
  const ms = (v) => Math.round(v);
  const bytes = sum(m.rows, "bytes");
  const gzip = sum(m.rows, "gzip");
  const r = { bench: "explorer", what: "page", spans: t.span_count, load: i + 1, warm_page: true, server_cache: i === 0 ? "cold" : "warm",
    /* the first part: its request sent to its first byte (the server's time, gzip included) */
    server_first_ms: ms(first.ttfb), server_rest_ms: ms(sum(rest, "ttfb")),
    /* from the first part's responseEnd (Resource Timing): parsed, rows in the DOM, painted */
    first_parsed_from_response_ms: ms(m.marks.part - first.end), first_rows_dom_from_response_ms: ms(m.marks.rows - first.end),
    first_rows_from_response_ms: ms(m.marks.painted - first.end),
    /* from the navigation: the first rows request sent, the first rows painted, every row in */
    first_request_ms: ms(first.req), first_rows_ms: ms(m.marks.painted), loaded_ms: ms(m.marks.loaded),
    loaded_from_response_ms: ms(m.marks.loaded - first.end),
    parts: m.rows.length, bytes, gzip_bytes: gzip, bytes_per_span: +(bytes / t.span_count).toFixed(1), gzip_bytes_per_span: +(gzip / t.span_count).toFixed(1) };
  console.log(JSON.stringify(r));
  return r;
}

const browser = await chromium.launch({ executablePath: process.env.WEFT_CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
try {
  const traces = (await (await fetch(base + "/api/v1/traces?limit=50")).json()).traces.sort((a, b) => a.span_count - b.span_count);
  if (!traces.length) throw new Error("no trace in " + dir + ": run explorer_bench --keep " + dir + " first");
  for (const t of traces) {
    /* A context per trace, warmed up by one navigation to the traces list (the page, its
       stylesheet and bundle, no rows of this trace) before the loads timed. The first load
       finds the server's rows cache cold, the others warm (docs/serve.md "view=rows"). */
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    const warm = await context.newPage();
    await warm.goto(`${base}/#/traces`);
    await warm.waitForLoadState("networkidle");
    await warm.close();
    console.log(JSON.stringify({ bench: "explorer", what: "note", spans: t.span_count,
      note: "page times after a warm-up navigation (the bundle is not what is timed); load 1 finds the server's rows cache cold, later loads warm" }));
    const rs = [];
    for (let i = 0; i < loads; i++) rs.push(await load(context, t, i));
    await context.close();
    const med = {};
    for (const k of ["server_first_ms", "server_rest_ms", "first_parsed_from_response_ms", "first_rows_from_response_ms", "first_request_ms", "first_rows_ms", "loaded_ms", "loaded_from_response_ms"]) {
      med[k] = median(rs.map((r) => r[k]));
      med[k + "_spread"] = [Math.min(...rs.map((r) => r[k])), Math.max(...rs.map((r) => r[k]))];
    }
    console.log(JSON.stringify({ bench: "explorer", what: "page_median", spans: t.span_count, loads, warm_page: true, ...med,
      bytes: rs[0].bytes, gzip_bytes: rs[0].gzip_bytes, bytes_per_span: rs[0].bytes_per_span, gzip_bytes_per_span: rs[0].gzip_bytes_per_span }));
  }
} finally {
  await browser.close();
  serve.kill("SIGTERM");
}
