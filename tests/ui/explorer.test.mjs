// tests/ui/explorer.test.mjs - the trace explorer in a real browser: Debian's chromium driven
// by playwright-core (no browser download), against a `weft serve` this test starts on a free
// loopback port over a store it fills by running examples with the scripted provider.
//
// Checks: the runs list shows the runs; a failed run's page marks the failing step and "why did
// it fail" reaches the error span; a stuck-loop run shows its loop marker; correction mode's
// surgery shows the plan before and after; compare shows where two runs diverge, and a fork's
// page opens it on the fork and its original; a span whose
// prompt holds <script> shows it as text and runs nothing; the collaboration page draws; no page
// logs a console error; behind a token (a second server, WEFT_SERVE_TOKEN) the explorer refuses
// a browser without it, /?token= logs it in with an HttpOnly, SameSite=Strict cookie and leaves
// the address clean, and the pages then load through that cookie. Screenshots of each page go to $WEFT_UI_ARTIFACTS (default
// ./ui-artifacts).
//
// Usage: WEFT_BIN=build/weft node tests/ui/explorer.test.mjs
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const weft = process.env.WEFT_BIN || path.join(root, "build/weft");
const chromiumPath = process.env.WEFT_CHROMIUM || "/usr/bin/chromium";
const artifacts = path.resolve(process.env.WEFT_UI_ARTIFACTS || "ui-artifacts");
const home = fs.mkdtempSync(path.join(os.tmpdir(), "weft-ui-"));
const env = { ...process.env, WEFT_HOME: home, OTEL_TRACES_EXPORTER: "store" };
delete env.WEFT_STATE_URL;

function run(args, expectOk = true) {
  const r = spawnSync(weft, args, { env, encoding: "utf8", cwd: home });
  if (expectOk && r.status !== 0) {
    throw new Error(`weft ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
  }
  return r;
}
function lastRunId() {
  const r = run(["runs", "--json", "--limit", "1"]);
  return JSON.parse(r.stdout).runs[0].run_id;
}
function write(name, text) {
  const p = path.join(home, name);
  fs.writeFileSync(p, text);
  return p;
}

// The store: a completed run, a corrected one, a stuck one, a failed one, a run whose prompt
// holds markup, and two runs of one workflow with different answers (to compare).
run(["run", path.join(root, "examples/code_review/workflow.json"), "--input", "Add a login endpoint", "-q"]);
const codeReview = lastRunId();
run(["run", path.join(root, "examples/correction/workflow.json"), "-q"]);
const corrected = lastRunId();
run(["run", path.join(root, "examples/stuck_loops/handoff.json"), "-q"], false);
const stuck = lastRunId();
const failingWf = write("failing.json", JSON.stringify({
  name: "failing", models: { m: { provider: "scripted", script: "failing_script.json" } },
  agents: [{ name: "writer" }],
  plan: [
    { id: "prepare", agent: "writer", task: "Prepare the notes" },
    { id: "build", executor: "command", task: "Build the report", argv: ["sh", "-c", "echo compiler exploded >&2; exit 3"], depends_on: ["prepare"] },
  ],
}));
write("failing_script.json", JSON.stringify({ responses: { writer: { act: [{ content: "notes ready" }] } } }));
run(["run", failingWf, "-q"], false);
const failed = lastRunId();
// Its fix, tried with a fork: the step that worked is reused, the failed one runs fixed.
const fixedWf = write("fixed.json", fs.readFileSync(failingWf, "utf8").replace("echo compiler exploded >&2; exit 3", "echo report built"));
run(["fork", failed, "--from", "build", "--workflow", fixedWf, "-q"]);
const fork = lastRunId();
const evil = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";
const markupWf = write("markup.json", JSON.stringify({
  name: "markup", capture_content: true, models: { m: { provider: "scripted", script: "markup_script.json" } },
  agents: [{ name: "echo" }], plan: [{ id: "say", agent: "echo", task: "Repeat: " + evil }],
}));
write("markup_script.json", JSON.stringify({ responses: { echo: { act: [{ content: evil }] } } }));
run(["run", markupWf, "-q"]);
const markup = lastRunId();
write("cmp_a.json", JSON.stringify({ responses: { w: { act: [{ content: "alpha\nbeta" }, { content: "same end" }] } } }));
write("cmp_b.json", JSON.stringify({ responses: { w: { act: [{ content: "alpha\ngamma" }, { content: "same end" }] } } }));
for (const side of ["a", "b"]) {
  const wf = write(`cmp_${side}_wf.json`, JSON.stringify({
    name: "compare-me", models: { m: { provider: "scripted", script: `cmp_${side}.json` } }, agents: [{ name: "w" }],
    plan: [{ id: "one", agent: "w", task: "first" }, { id: "two", agent: "w", task: "second", depends_on: ["one"] }],
  }));
  run(["run", wf, "-q"]);
}
const runs = JSON.parse(run(["runs", "--json", "--limit", "2"]).stdout).runs;
const [cmpB, cmpA] = [runs[0].run_id, runs[1].run_id];
// A run whose trace tail sampling dropped (docs/sampling.md): kept in the runs list, no spans.
run(["run", path.join(root, "examples/code_review/workflow.json"), "--sampling", "failed,0%", "-q"]);
const sampledOut = lastRunId();

// A server, on a port of its choosing; its first line names it. @p extraEnv: e.g. a token.
function startServe(extraEnv) {
  const proc = spawn(weft, ["serve", "--addr", "127.0.0.1:0"], { env: { ...env, ...extraEnv }, cwd: home, stdio: ["ignore", "ignore", "pipe"] });
  const url = new Promise((resolve, reject) => {
    let err = "";
    const t = setTimeout(() => reject(new Error("weft serve did not start: " + err)), 10000);
    proc.stderr.on("data", (d) => {
      err += d;
      const m = /http:\/\/127\.0\.0\.1:(\d+)\//.exec(err);
      if (m) { clearTimeout(t); resolve(`http://127.0.0.1:${m[1]}`); }
    });
    proc.on("exit", (code) => reject(new Error(`weft serve exited ${code}: ${err}`)));
  });
  return [proc, url];
}
const [serve, baseP] = startServe({ WEFT_SERVE_TOKEN: "" });
const base = await baseP;
// The same runs behind a token, as a server beyond loopback is run (WEFT_SERVE_TOKEN).
const token = "ui-test-token-0123456789abcdef";
const [tokenServe, tokenBaseP] = startServe({ WEFT_SERVE_TOKEN: token });
const tokenBase = await tokenBaseP;

fs.mkdirSync(artifacts, { recursive: true });
const browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox", "--disable-gpu"] });
const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
const consoleErrors = [];
page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
page.on("pageerror", (e) => consoleErrors.push(e.message));
let failures = 0;

// Open run @p id's page and wait until it is that run's (the previous view's nodes are gone).
async function openRun(id) {
  await page.goto(`${base}/#/run/${id}`);
  await page.waitForFunction((want) => (document.querySelector("h1") || {}).textContent === "Run " + want, id);
}

async function check(name, fn) {
  try {
    await fn();
    console.log("ok   " + name);
  } catch (e) {
    failures++;
    console.log("FAIL " + name + ": " + (e && e.stack ? e.stack : e));
  }
  await page.screenshot({ path: path.join(artifacts, name.replace(/[^a-z0-9]+/gi, "-") + ".png"), fullPage: true }).catch(() => {});
}

try {
  await check("runs list shows the runs", async () => {
    await page.goto(base + "/");
    await page.waitForSelector("#runs tbody tr");
    const ids = await page.$$eval("#runs tbody tr", (rows) => rows.map((r) => r.getAttribute("data-run")));
    for (const id of [codeReview, corrected, stuck, failed, fork, markup, cmpA, cmpB]) assert.ok(ids.includes(id), "missing run " + id);
    const stuckRow = await page.textContent(`#runs tr[data-run="${stuck}"]`);
    assert.match(stuckRow, /stuck/);
    await page.selectOption("#status", "failed");
    await page.waitForFunction(() => document.querySelectorAll("#runs tbody tr").length === 1);
    assert.equal(await page.getAttribute("#runs tbody tr", "data-run"), failed);
    await page.selectOption("#status", "");
    await page.fill("#q", "compare-me");
    await page.waitForFunction(() => document.querySelectorAll("#runs tbody tr").length === 2);
  });

  await check("failed run: failing step marked, why reaches the error span", async () => {
    await openRun(failed);
    assert.ok(await page.$('#plan g.node-failed[data-step="build"]'), "the failing step is not marked");
    await page.click("#why");
    await page.waitForSelector("#why-path li");
    const last = await page.$eval("#why-path li:last-child", (li) => ({ id: li.getAttribute("data-span"), text: li.textContent }));
    const why = await (await fetch(`${base}/api/v1/runs/${failed}/why`)).json();
    assert.equal(last.id, why.failed_span.span_id);
    assert.match(last.text, /exit_status|compiler exploded|exit/);
    await page.waitForSelector(`#waterfall .row.selected[data-span="${why.failed_span.span_id}"]`);
    await page.waitForFunction((want) => (document.querySelector("#span-ids") || {}).textContent?.includes("span " + want), why.failed_span.span_id);
    assert.equal(await page.textContent("#span-name"), why.failed_span.name);
  });

  await check("a run whose trace was not kept says why", async () => {
    await openRun(sampledOut);
    await page.waitForSelector("#trace-not-kept");
    assert.match(await page.textContent("#trace-not-kept"), /Trace not kept \(rule sample\)/);
    assert.equal(await page.$("#waterfall .row"), null, "a dropped trace drew spans");
  });

  await check("stuck-loop run shows its loop marker", async () => {
    await openRun(stuck);
    await page.waitForSelector("#waterfall .row.marker .flag", { timeout: 5000 });
    assert.ok(await page.$("#plan path.back"), "no loop back-edge in the plan");
    assert.match(await page.textContent("#plan"), /×\d+/);
  });

  await check("correction surgery: plan before and after", async () => {
    await openRun(corrected);
    await page.waitForSelector("#plan-before");
    assert.ok(await page.$("#plan g.node-inserted"), "no inserted step marked");
    assert.ok(await page.$("#plan g.node-rewired"), "no rewired step marked");
    const before = await page.$$eval("#plan-before g.node", (g) => g.length);
    const after = await page.$$eval("#plan g.node", (g) => g.length);
    assert.ok(after > before, `after (${after}) should have more steps than before (${before})`);
  });

  await check("compare shows the divergence", async () => {
    await page.goto(`${base}/#/compare/${cmpA}/${cmpB}`);
    await page.waitForSelector("#compare-steps");
    assert.match(await page.textContent("#first-divergence"), /step one/);
    assert.ok(await page.$('#compare-steps tr.diverge[data-step="one"]'));
    const diff = await page.textContent("#output-diff");
    assert.match(diff, /same end/);
  });

  await check("a fork opens the compare view on the pair", async () => {
    await openRun(fork);
    await page.click("#compare-origin");
    await page.waitForSelector("#compare-steps");
    assert.match(await page.textContent("#first-divergence"), /step build \(status/);
    const row = await page.textContent('#compare-steps tr[data-step="build"]');
    assert.match(row, /failed/);
    assert.match(row, /completed/);
    assert.match(await page.textContent("#output-diff"), /report built/);
  });

  await check("span content with <script> is text and runs nothing", async () => {
    await openRun(markup);
    await page.waitForSelector("#waterfall .row");
    const rows = await page.$$("#waterfall .row");
    let found = false;
    for (const r of rows) {
      const id = await r.getAttribute("data-span");
      await r.click();
      await page.waitForFunction((want) => (document.querySelector("#span-ids") || {}).textContent?.includes("span " + want), id);
      const text = await page.textContent("#span-detail");
      if (text.includes("<script>window.__pwned = 1</script>")) { found = true; break; }
    }
    assert.ok(found, "the prompt's markup is not shown as text in any span");
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    assert.equal(await page.$$eval("#span-detail script, #span-detail img", (n) => n.length), 0);
  });

  await check("collaboration metrics page", async () => {
    await page.goto(`${base}/#/metrics`);
    await page.waitForSelector("#handoffs");
    assert.match(await page.textContent("#handoffs"), /architect|codesmith|reviewer/);
    await page.waitForFunction(() => document.querySelector("#success-chart").width > 0);
  });

  await check("no console errors", async () => {
    assert.deepEqual(consoleErrors, []);
  });

  // With a token: refused without it; /?token= logs the browser in with an HttpOnly,
  // SameSite=Strict cookie, drops the token from the address, and every page's API calls
  // then carry the cookie (the runs list and a run's plan and waterfall load).
  await check("token: login by /?token=, then the explorer works", async () => {
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    const tokenErrors = [];
    try {
      const p = await ctx.newPage();
      p.on("pageerror", (e) => tokenErrors.push(e.message));
      const refused = await p.goto(tokenBase + "/");
      assert.equal(refused.status(), 401);
      assert.match(await p.textContent("body"), /a token is needed/);
      await p.goto(`${tokenBase}/?token=${token}`);
      assert.equal(p.url(), tokenBase + "/", "the token stays in the address bar");
      await p.waitForSelector(`#runs tr[data-run="${codeReview}"]`);
      const cookie = (await ctx.cookies(tokenBase)).find((c) => c.name === "weft_token");
      assert.ok(cookie, "no weft_token cookie");
      assert.equal(cookie.httpOnly, true);
      assert.equal(cookie.sameSite, "Strict");
      assert.equal(await p.evaluate(() => document.cookie.includes("weft_token")), false);
      await p.goto(`${tokenBase}/#/run/${failed}`);
      await p.waitForFunction((want) => (document.querySelector("h1") || {}).textContent === "Run " + want, failed);
      await p.waitForSelector('#plan g.node-failed[data-step="build"]');
      await p.waitForSelector("#waterfall .row");
      // A wrong token logs nobody in.
      const other = await browser.newContext();
      const q = await other.newPage();
      const wrong = await q.goto(`${tokenBase}/?token=wrong-token-0123456789abcdef`);
      assert.equal(wrong.status(), 401);
      assert.equal((await other.cookies(tokenBase)).length, 0);
      await other.close();
      assert.deepEqual(tokenErrors, []);
    } finally {
      await ctx.close();
    }
  });
} finally {
  await browser.close();
  serve.kill("SIGTERM");
  tokenServe.kill("SIGTERM");
  fs.rmSync(home, { recursive: true, force: true });
}
if (failures > 0) {
  console.log(`${failures} check(s) failed; screenshots in ${artifacts}`);
  process.exit(1);
}
console.log("all explorer checks passed; screenshots in " + artifacts);
