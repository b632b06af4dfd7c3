// bench/explorer_render.mjs - first render of a 100,000-span trace in the explorer: Debian's
// chromium (playwright-core from tests/ui) opens the run page of the trace explorer_bench left
// in DIR and waits for the waterfall's first rows; three loads, one JSON line each:
//   {"bench":"explorer","what":"first_render","spans":N,"load":i,"ms":...}
// Usage: node bench/explorer_render.mjs DIR   (`make bench-explorer` runs it after
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
const weft = process.env.WEFT_BIN || path.join(root, "build/weft");
if (!dir) {
  console.error("usage: node bench/explorer_render.mjs DIR");
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
// The bench's trace belongs to no run: open it through a run whose trace_id it is, or as a
// bare trace page when there is none.
const browser = await chromium.launch({ executablePath: process.env.WEFT_CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
try {
  for (let i = 0; i < 3; i++) {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const t = Date.now();
    await page.goto(`${base}/#/trace/abababababababababababababababab`);
    await page.waitForSelector("#waterfall .row", { timeout: 120000 });
    const ms = Date.now() - t;
    const spans = await page.$eval("#span-count", (e) => e.getAttribute("data-count"));
    console.log(JSON.stringify({ bench: "explorer", what: "first_render", spans: Number(spans), load: i + 1, ms }));
    await page.close();
  }
} finally {
  await browser.close();
  serve.kill("SIGTERM");
}
