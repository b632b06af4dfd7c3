// tests/ui/explorer.test.mjs - the trace explorer in a real browser: Debian's chromium driven
// by playwright-core (no browser download), against a `weft serve` this test starts on a free
// loopback port over a store it fills by running examples with the scripted provider.
//
// Checks: the runs list shows the runs; a failed run's page marks the failing step and "why did
// it fail" reaches the error span; a stuck-loop run shows its loop marker; correction mode's
// surgery shows the plan before and after; compare shows where two runs diverge, and a fork's
// page opens it on the fork and its original; a span whose
// prompt holds <script> shows it as text and runs nothing; the collaboration page draws; no page
// logs a console error; the timeline (axis ticks, durations, tokens and cost, zoom and reset,
// folding with counts), find in a trace, span URLs and copy link, the keyboard tree, an LLM
// span's conversation (a run with --capture-content), the verdict/reward/stuck-loop/correction
// blocks, empty and error states and the dark palette's toggle; behind a token (a second server, WEFT_SERVE_TOKEN) the explorer refuses
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
// The same with its messages captured: the conversation view reads them.
run(["run", path.join(root, "examples/code_review/workflow.json"), "--input", "Add a login endpoint", "--capture-content", "-q"]);
const captured = lastRunId();
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
// A run that ended before any plan: its supervisor's script has no plan answer.
write("noplan_script.json", JSON.stringify({ responses: {} }));
run(["run", write("noplan.json", JSON.stringify({
  name: "noplan", models: { m: { provider: "scripted", script: "noplan_script.json" } },
  supervisor: { model: "m" }, agents: [{ name: "a", model: "m" }],
})), "-q"], false);
const noPlan = lastRunId();
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
    await page.waitForFunction(() => document.querySelectorAll("#runs tbody tr").length === 2);
    const failedIds = await page.$$eval("#runs tbody tr", (rows) => rows.map((r) => r.getAttribute("data-run")).sort());
    assert.deepEqual(failedIds, [failed, noPlan].sort());
    await page.selectOption("#status", "");
    await page.fill("#q", "compare-me");
    await page.waitForFunction(() => document.querySelectorAll("#runs tbody tr").length === 2);
  });

  await check("failed run: failing step marked, why reaches the error span", async () => {
    await openRun(failed);
    assert.ok(await page.$('#plan g.node-failed[data-step="build"]'), "the failing step is not marked");
    await page.click("#why");
    await page.waitForSelector("#why-path li");
    /* The cause first: the failed command step's exit status and the tail of its stderr. */
    const cause = await page.textContent('#why-cause .cause[data-step="build"]');
    assert.match(cause, /exit status 3/);
    assert.equal((await page.textContent('#why-cause .cause[data-step="build"] pre.stderr')).trim(), "compiler exploded");
    const last = await page.$eval("#why-path li:last-child", (li) => ({ id: li.getAttribute("data-span"), text: li.textContent }));
    const why = await (await fetch(`${base}/api/v1/runs/${failed}/why`)).json();
    assert.equal(last.id, why.failed_span.span_id);
    assert.match(last.text, /exit_status|compiler exploded|exit/);
    await page.waitForSelector(`#waterfall .row.selected[data-span="${why.failed_span.span_id}"]`);
    await page.waitForFunction((want) => (document.querySelector("#span-ids") || {}).textContent?.includes("span " + want), why.failed_span.span_id);
    assert.equal(await page.textContent("#span-name"), why.failed_span.name);
    /* A plan node opens its step's span. */
    await page.click('#plan g[data-step="prepare"]');
    await page.waitForFunction(() => (document.querySelector("#span-name") || {}).textContent === "invoke_agent writer");
    assert.equal(await page.inputValue("#span-search"), "step:prepare");
  });

  await check("plan graph: arrowheads on edges, a clear state when no plan was produced", async () => {
    await openRun(failed);
    assert.ok(await page.$('#plan path.edge[marker-end]'), "a dependency edge has no arrowhead");
    assert.ok(await page.$('#plan marker path'), "no arrowhead marker");
    await openRun(noPlan);
    await page.waitForSelector("#plan[data-empty]");
    assert.match(await page.textContent("#plan"), /No plan was produced/);
    assert.equal(await page.$("svg.plan"), null, "an empty plan drew a graph");
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
    /* Time is coloured only above the noise threshold (1 ms and 20 % of the longer). */
    const cells = await page.$$eval("#compare-steps td.delta", (tds) => tds.map((td) => ({ cls: td.className, d: td.getAttribute("data-delta-ns") })));
    assert.ok(cells.length > 0, "no duration delta cells");
    for (const c of cells) {
      const d = c.d === "" ? null : Math.abs(Number(c.d));
      if (d !== null && d < 1e6) assert.match(c.cls, /delta-noise/, "a sub-millisecond change is coloured: " + JSON.stringify(c));
      if (/delta-(pos|neg)/.test(c.cls)) assert.ok(d >= 1e6, "coloured below the threshold: " + JSON.stringify(c));
    }
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

  await check("traces list: a trace another SDK sent is one click away", async () => {
    /* An OTLP/HTTP JSON export, as an OpenTelemetry SDK sends it, with an error span. */
    const now = BigInt(Date.now()) * 1000000n;
    const traceId = "5eed" + "0".repeat(24) + "c0de";
    const otlp = { resourceSpans: [{ resource: { attributes: [{ key: "service.name", value: { stringValue: "checkout-js" } }] },
      scopeSpans: [{ scope: { name: "ui-test" }, spans: [
        { traceId, spanId: "aaaaaaaaaaaaaaa1", name: "POST /checkout", kind: 2, startTimeUnixNano: String(now), endTimeUnixNano: String(now + 5000000n), status: { code: 1 } },
        { traceId, spanId: "aaaaaaaaaaaaaaa2", parentSpanId: "aaaaaaaaaaaaaaa1", name: "charge card", kind: 3, startTimeUnixNano: String(now + 1000000n),
          endTimeUnixNano: String(now + 4000000n), status: { code: 2, message: "card declined" } }] }] }] };
    const r = await fetch(base + "/v1/traces", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(otlp) });
    assert.equal(r.status, 200, "OTLP ingest answered " + r.status);
    await page.goto(base + "/#/traces");
    await page.waitForSelector("#traces tbody tr");
    await page.fill("#t-service", "checkout-js");
    await page.waitForFunction((id) => { const rows = document.querySelectorAll("#traces tbody tr"); return rows.length === 1 && rows[0].getAttribute("data-trace") === id; }, traceId);
    const rowText = await page.textContent(`#traces tr[data-trace="${traceId}"]`);
    assert.match(rowText, /checkout-js/);
    assert.match(rowText, /POST \/checkout/);
    await page.selectOption("#t-status", "ok");
    await page.waitForSelector("#traces-empty");
    await page.selectOption("#t-status", "error");
    await page.click(`#traces tr[data-trace="${traceId}"]`);
    await page.waitForSelector("#trace-service");
    assert.match(await page.textContent("#trace-service"), /checkout-js/);
    assert.doesNotMatch(await page.textContent("main"), /\bnull\b/, "the trace page prints a literal null");
    assert.equal(await page.getAttribute("#span-count", "data-count"), "2");
  });

  await check("runs list is live without polling: a run pushed by server-sent events", async () => {
    await page.goto(base + "/");
    await page.waitForSelector("#runs tbody tr");
    const requests = [];
    const onReq = (req) => { if (req.url().includes("/api/v1/runs?")) requests.push(Date.now()); };
    page.on("request", onReq);
    await page.waitForTimeout(2500);
    assert.equal(requests.length, 0, "the runs list fetched while nothing ran");
    const before = await page.$$eval("#runs tbody tr", (rows) => rows.length);
    run(["run", path.join(root, "examples/code_review/workflow.json"), "--input", "pushed", "-q"]);
    const pushed = lastRunId();
    await page.waitForSelector(`#runs tr[data-run="${pushed}"]`, { timeout: 15000 });
    page.off("request", onReq);
    assert.ok((await page.$$eval("#runs tbody tr", (rows) => rows.length)) > before);
  });

  await check("collaboration metrics page", async () => {
    await page.goto(`${base}/#/metrics`);
    await page.waitForSelector("#handoffs");
    assert.match(await page.textContent("#handoffs"), /architect|codesmith|reviewer/);
    /* A heat map that fits a 1,280 px window: the largest count is the darkest cell. */
    await page.setViewportSize({ width: 1280, height: 1000 });
    const fit = await page.$eval("#handoffs", (t) => ({ right: t.getBoundingClientRect().right, max: Math.max(...[...t.querySelectorAll("td.heat")].map((td) => Number(td.textContent) || 0)),
      darkest: [...t.querySelectorAll("td.heat-5")].map((td) => Number(td.textContent)) }));
    await page.setViewportSize({ width: 1400, height: 1000 });
    assert.ok(fit.right <= 1280, "the hand-off matrix is " + fit.right + " px wide in a 1,280 px window");
    assert.ok(fit.max > 0 && fit.darkest.includes(fit.max), "the largest hand-off count is not the darkest cell");
    await page.waitForFunction(() => document.querySelector("#success-chart").width > 0);
  });

  // ---- the timeline, find and link, the keyboard, the LLM-aware detail, the palette ----
  const apiGet = async (p) => (await fetch(base + p)).json();
  const capTrace = await apiGet(`/api/v1/runs/${captured}/trace?limit=10000`);
  const capRows = (await apiGet(`/api/v1/runs/${captured}/trace?view=waterfall&limit=100000`)).spans;
  const rowName = (id) => page.$eval(`#waterfall .row[data-span="${id}"] .name`, (e) => e.textContent);

  await check("timeline: time axis ticks, duration, self time, tokens and cost per row", async () => {
    await openRun(captured);
    await page.waitForFunction(() => document.querySelectorAll("#axis .tick").length >= 3);
    const labels = await page.$$eval("#axis .tick", (t) => t.map((e) => e.textContent));
    for (const l of labels) assert.match(l, /^\d+(\.\d+)?(ns|µs|ms|s)$/, "tick " + l);
    assert.ok(new Set(labels.map((l) => l.replace(/[\d.]/g, ""))).size === 1, "one unit on the axis: " + labels);
    // An LLM row shows its tokens and cost once the attributes are read; self time <= duration.
    const chat = capTrace.spans.find((s) => s.attributes["gen_ai.operation.name"] === "chat" && s.attributes["gen_ai.usage.input_tokens"] > 0);
    const sel = `#waterfall .row[data-span="${chat.span_id}"]`;
    /* The attributes are read behind the first screen, retried when the server is busy (under
     * sanitizers and a parallel suite, reads can take a while): a generous wait. */
    await page.waitForFunction((s) => /\d+\/\d+/.test((document.querySelector(s + " .num.tok") || {}).textContent || ""), sel, { timeout: 90000 });
    const cells = await page.$$eval(sel + " .num", (n) => n.map((e) => e.textContent));
    assert.equal(cells[2], chat.attributes["gen_ai.usage.input_tokens"] + "/" + chat.attributes["gen_ai.usage.output_tokens"]);
    assert.match(cells[3], /^\$0\.\d+$/);
    assert.match(cells[0], /(ns|µs|ms|s)$/);
    // A span with status unset: an icon, and not drawn green.
    const unset = capRows.find((r) => r[5] === "unset");
    const icon = await page.$eval(`#waterfall .row[data-span="${unset[0]}"] .st-icon`, (e) => [e.textContent, getComputedStyle(e).color]);
    assert.equal(icon[0], "○");
    assert.notEqual(icon[1], "rgb(46, 125, 50)");
    assert.ok(await page.$(`#waterfall .row[data-span="${unset[0]}"] .bar-unset`));
    assert.ok(await page.$eval("#minimap", (c) => c.width > 100), "no minimap");
    // The last span's bar is inside the track and at least 2 px wide.
    const last = capRows.reduce((a, b) => (b[3] > a[3] ? b : a));
    await page.$eval("#waterfall", (b) => { b.scrollTop = b.scrollHeight; });
    const lastBar = await page.waitForSelector(`#waterfall .row[data-span="${last[0]}"] .bar`);
    const [bb, tb] = [await lastBar.boundingBox(), await (await page.$(`#waterfall .row[data-span="${last[0]}"] .track`)).boundingBox()];
    assert.ok(bb.width >= 2 && bb.x + bb.width <= tb.x + tb.width + 0.5, `late bar not visible: bar ${JSON.stringify(bb)} track ${JSON.stringify(tb)}`);
  });

  await check("timeline: drag on the axis zooms, reset restores", async () => {
    await openRun(captured);
    await page.waitForSelector("#axis .tick");
    const before = await page.$$eval("#axis .tick", (t) => t.map((e) => e.textContent).join(","));
    const ax = await (await page.$("#axis")).boundingBox();
    await page.mouse.move(ax.x + ax.width * 0.5, ax.y + 10);
    await page.mouse.down();
    await page.mouse.move(ax.x + ax.width * 0.6, ax.y + 10, { steps: 4 });
    await page.mouse.up();
    await page.waitForFunction(() => !document.querySelector("#zoom-reset").disabled);
    assert.match(await page.textContent("#zoom-range"), /^showing /);
    assert.notEqual(await page.$$eval("#axis .tick", (t) => t.map((e) => e.textContent).join(",")), before);
    const win = await (await page.$("#minimap-window")).boundingBox();
    const mm = await (await page.$("#minimap")).boundingBox();
    assert.ok(win.width < mm.width * 0.3, "the minimap window does not show the zoom");
    await page.click("#zoom-reset");
    await page.waitForFunction(() => document.querySelector("#zoom-reset").disabled);
    assert.equal(await page.$$eval("#axis .tick", (t) => t.map((e) => e.textContent).join(",")), before);
  });

  await check("fold a subtree: its span and error counts", async () => {
    await openRun(failed);
    const wf = (await apiGet(`/api/v1/runs/${failed}/trace?view=waterfall&limit=100000`)).spans;
    const rootId = wf[0][0];
    const below = wf.length - 1, errs = wf.slice(1).filter((r) => r[5] === "error").length;
    assert.ok(errs > 0);
    await page.click(`#waterfall .row[data-span="${rootId}"] .twisty`);
    await page.waitForSelector(`#waterfall .row[data-span="${rootId}"][aria-expanded="false"]`);
    assert.equal(await page.textContent(`#waterfall .row[data-span="${rootId}"] .fold-count`),
      ` +${below} span${below === 1 ? "" : "s"}, ${errs} error${errs === 1 ? "" : "s"}`);
    assert.equal(await page.$$eval("#waterfall .row", (r) => r.length), 1);
    await page.click(`#waterfall .row[data-span="${rootId}"] .twisty`);
    await page.waitForFunction((n) => document.querySelectorAll("#waterfall .row").length === n, wf.length);
  });

  await check("find in a trace: step through the matches", async () => {
    await openRun(captured);
    const chats = capRows.filter((r) => r[2].includes("chat"));
    await page.fill("#span-search", "chat");
    await page.press("#span-search", "Enter");
    await page.waitForFunction((n) => document.querySelector("#search-count").textContent === "1 of " + n, chats.length);
    await page.waitForSelector(`#waterfall .row.selected[data-span="${chats[0][0]}"]`);
    await page.press("#span-search", "Enter");
    await page.waitForFunction((n) => document.querySelector("#search-count").textContent === "2 of " + n, chats.length);
    await page.waitForSelector(`#waterfall .row.selected[data-span="${chats[1][0]}"]`);
    assert.match(page.url(), new RegExp(`#/run/${captured}/span/${chats[1][0]}$`));
    await page.press("#span-search", "Shift+Enter");
    await page.waitForFunction((n) => document.querySelector("#search-count").textContent === "1 of " + n, chats.length);
    await page.click("#search-prev");
    await page.waitForFunction((n) => document.querySelector("#search-count").textContent === n + " of " + n, chats.length);
    await page.waitForSelector(`#waterfall .row.selected[data-span="${chats[chats.length - 1][0]}"]`);
    // The other forms: step:ID, agent:NAME, key=value.
    const step2 = capTrace.spans.filter((s) => s.attributes["weft.step.id"] === "s2");
    await page.fill("#span-search", "step:s2");
    await page.press("#span-search", "Enter");
    await page.waitForFunction((n) => document.querySelector("#search-count").textContent === "1 of " + n, step2.length);
    assert.ok(step2.some((s) => s.name === "invoke_agent codesmith"));
    const reviewers = capRows.filter((r) => r[2] === "invoke_agent reviewer").length;
    await page.fill("#span-search", "agent:reviewer");
    await page.click("#search-next");
    await page.waitForFunction((n) => document.querySelector("#search-count").textContent === "1 of " + n, reviewers);
    const tok = capTrace.spans.filter((s) => s.attributes["gen_ai.usage.input_tokens"] === 350).length;
    await page.fill("#span-search", "gen_ai.usage.input_tokens=350");
    await page.press("#span-search", "Enter");
    await page.waitForFunction((n) => document.querySelector("#search-count").textContent === "1 of " + n, tok);
    await page.fill("#span-search", "no-such-span-name");
    await page.waitForFunction(() => /^0 of 0/.test(document.querySelector("#search-count").textContent));
    // status:error on the failed run
    await openRun(failed);
    const why = await apiGet(`/api/v1/runs/${failed}/why`);
    await page.fill("#span-search", "status:error");
    await page.press("#span-search", "Enter");
    await page.waitForFunction((n) => document.querySelector("#search-count").textContent === "1 of " + n, why.error_span_count);
  });

  await check("a span's URL restores it; copy link", async () => {
    // A late chat under a step: opened directly, the page selects it and scrolls to it.
    const deep = capRows.filter((r) => r[1] >= 2).pop();
    await page.goto(`${base}/#/run/${captured}/span/${deep[0]}`);
    await page.waitForSelector(`#waterfall .row.selected[data-span="${deep[0]}"][aria-selected="true"]`);
    await page.waitForFunction((want) => (document.querySelector("#span-ids") || {}).textContent?.includes("span " + want), deep[0]);
    assert.equal(await page.inputValue("#span-link"), `${base}/#/run/${captured}/span/${deep[0]}`);
    await page.click("#copy-link");
    await page.waitForFunction(() => /Copied|copy/.test(document.querySelector("#copy-link").textContent) && document.querySelector("#copy-link").textContent !== "Copy link");
    // Its parent folded, then the link opened: the ancestors unfold.
    const parentIdx = capRows.slice(0, capRows.indexOf(deep)).map((r, i) => [r, i]).filter(([r]) => r[1] === deep[1] - 1).pop()[1];
    await page.click(`#waterfall .row[data-span="${capRows[parentIdx][0]}"] .twisty`);
    await page.waitForSelector(`#waterfall .row[data-span="${capRows[parentIdx][0]}"][aria-expanded="false"]`);
    await page.goto(`${base}/#/run/${captured}/span/${capRows[0][0]}`);
    await page.waitForSelector(`#waterfall .row.selected[data-span="${capRows[0][0]}"]`);
    await page.goto(`${base}/#/run/${captured}/span/${deep[0]}`);
    await page.waitForSelector(`#waterfall .row.selected[data-span="${deep[0]}"]`);
    assert.equal(await page.getAttribute(`#waterfall .row[data-span="${capRows[parentIdx][0]}"]`, "aria-expanded"), "true");
    // The same for a trace's page.
    // The run page already shows this span selected: wait for the trace page's own link, not
    // the stale row (CI once read the run page's link here).
    const traceLink = `${base}/#/trace/${capTrace.trace_id}/span/${deep[0]}`;
    await page.goto(traceLink);
    await page.waitForFunction((want) => (document.querySelector("#span-link") || {}).value === want, traceLink);
    await page.waitForSelector(`#waterfall .row.selected[data-span="${deep[0]}"]`);
  });

  await check("keyboard: the rows are a tree", async () => {
    await openRun(captured);
    await page.waitForSelector('#span-tree[role="tree"] .row[role="treeitem"][aria-level="1"]');
    await page.press("body", "/");
    assert.equal(await page.evaluate(() => document.activeElement.id), "span-search");
    await page.focus("#span-tree");
    await page.keyboard.press("ArrowDown");
    await page.waitForSelector(`#waterfall .row[data-index="0"][aria-selected="true"]`);
    await page.keyboard.press("j");
    await page.keyboard.press("j");
    await page.waitForSelector(`#waterfall .row[data-index="2"][aria-selected="true"]`);
    await page.keyboard.press("k");
    await page.waitForSelector(`#waterfall .row[data-index="1"][aria-selected="true"]`);
    assert.equal(await page.getAttribute("#span-tree", "aria-activedescendant"), "r-" + capRows[1][0]);
    // Up to the root, fold it with ←, unfold with →.
    await page.keyboard.press("ArrowUp");
    await page.keyboard.press("ArrowLeft");
    await page.waitForSelector(`#waterfall .row[data-index="0"][aria-expanded="false"]`);
    await page.keyboard.press("ArrowRight");
    await page.waitForSelector(`#waterfall .row[data-index="0"][aria-expanded="true"]`);
    await page.keyboard.press("Enter");
    await page.waitForFunction((want) => (document.querySelector("#span-ids") || {}).textContent?.includes("span " + want), capRows[0][0]);
    await page.keyboard.press("Escape");
    await page.waitForFunction(() => !document.querySelector("#span-name"));
  });

  await check("LLM span: header strip, conversation, raw attributes toggle", async () => {
    const withTool = capTrace.spans.find((s) => String(s.attributes["gen_ai.output.messages"] || "").includes('"tool_call"'));
    const withResult = capTrace.spans.find((s) => String(s.attributes["gen_ai.input.messages"] || "").includes('"tool_call_response"'));
    assert.ok(withTool && withResult, "no tool call captured in the trace");
    await page.goto(`${base}/#/run/${captured}/span/${withTool.span_id}`);
    await page.waitForSelector("#llm-strip");
    const strip = await page.textContent("#llm-strip");
    assert.match(strip, /scripted-gpt-4o-mini/);
    assert.match(strip, new RegExp("tokens in" + withTool.attributes["gen_ai.usage.input_tokens"]));
    assert.match(strip, /cost\$0\.\d+/);
    for (const role of ["system", "user", "assistant"]) assert.ok(await page.$(`#conversation .msg[data-role="${role}"]`), "no " + role + " message");
    const args = await page.$eval("#conversation .tool-call pre", (e) => e.textContent);
    assert.doesNotThrow(() => JSON.parse(args));
    assert.match(args, /\n  "/, "arguments are not formatted JSON");
    assert.doesNotMatch(await page.textContent("#span-attrs"), /langfuse\.|openinference\./);
    assert.equal(await page.isVisible("#raw-attrs"), false);
    await page.click("#raw-toggle");
    assert.match(await page.textContent("#raw-attrs"), /langfuse\.observation\.type/);
    await page.goto(`${base}/#/run/${captured}/span/${withResult.span_id}`);
    await page.waitForFunction((want) => (document.querySelector("#span-ids") || {}).textContent?.includes("span " + want), withResult.span_id);
    await page.waitForSelector("#conversation .tool-result pre");
  });

  await check("weft blocks: reward, stuck loop, correction", async () => {
    await page.goto(`${base}/#/run/${captured}/span/${capRows[0][0]}`);
    await page.waitForSelector("#reward-block");
    assert.match(await page.textContent("#reward-block"), /Reward: 9/);
    await openRun(stuck);
    await page.click("#waterfall .row.marker");
    await page.waitForSelector("#stuck-block, #breaker-block");
    assert.match(await page.textContent("#span-detail"), /Stuck loop|Circuit breaker/);
    const corr = (await apiGet(`/api/v1/runs/${corrected}/trace?limit=10000`)).spans.find((s) => Object.keys(s.attributes).some((k) => k.startsWith("weft.correction.")));
    await page.goto(`${base}/#/run/${corrected}/span/${corr.span_id}`);
    await page.waitForSelector("#correction-block");
  });

  await check("empty and error states say what to do", async () => {
    await page.route("**/api/v1/runs?*", (r) => r.fulfill({ contentType: "application/json", body: '{"schema":"weft.runs/v1","runs":[]}' }));
    await page.goto(`${base}/#/runs`);
    await page.waitForSelector("#runs-empty");
    assert.match(await page.textContent("#runs-empty"), /make run/);
    await page.unroute("**/api/v1/runs?*");
    const seen = consoleErrors.length;
    await page.goto(`${base}/#/run/ffffffffffff`);
    await page.waitForSelector("#error-hint");
    assert.match(await page.textContent("#error-box"), /runs list|back to the runs/);
    // The browser logs the 404 itself; that one is expected here.
    const extra = consoleErrors.splice(seen);
    assert.ok(extra.every((m) => /404/.test(m)), "unexpected: " + extra);
  });

  await check("dark palette: the browser's preference, a toggle that persists", async () => {
    await page.emulateMedia({ colorScheme: "dark" });
    await page.goto(`${base}/#/run/${captured}`);
    await page.waitForSelector("#waterfall .row");
    assert.equal(await page.getAttribute("html", "data-theme"), "dark");
    const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.equal(bg, "rgb(11, 15, 23)");
    await page.click("#theme-toggle");
    assert.equal(await page.getAttribute("html", "data-theme"), "light");
    await page.reload();
    await page.waitForSelector("#theme-toggle");
    assert.equal(await page.getAttribute("html", "data-theme"), "light", "the choice was not kept");
    await page.click("#theme-toggle");
    assert.equal(await page.getAttribute("html", "data-theme"), "dark");
    await page.evaluate(() => localStorage.removeItem("weft.theme"));
    await page.emulateMedia({ colorScheme: "light" });
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

  await check("fork from a step with an edited answer", async () => {
    // The captured code_review run: s2's first LLM call, forked with its answer edited.
    const spans = (await apiGet(`/api/v1/runs/${captured}/trace?limit=10000`)).spans;
    const ofS2 = new Set(spans.filter((x) => x.attributes["weft.step.id"] === "s2").map((x) => x.span_id));
    const chat = spans.find((x) => ofS2.has(x.parent_span_id) && x.attributes["gen_ai.operation.name"] === "chat");
    assert.ok(chat, "no LLM span under step s2");
    const edited = "EDITED BY THE UI: login.py uses bcrypt";
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    const forkErrors = [];
    try {
      const p = await ctx.newPage();
      p.on("pageerror", (e) => forkErrors.push(e.message));
      await p.goto(`${tokenBase}/?token=${token}`);
      await p.goto(`${tokenBase}/#/run/${captured}/span/${chat.span_id}`);
      await p.waitForSelector("#fork-open");
      // The plain server (no token) offers no fork.
      await page.goto(`${base}/#/run/${captured}/span/${chat.span_id}`);
      await page.waitForFunction((want) => (document.querySelector("#span-ids") || {}).textContent?.includes("span " + want), chat.span_id);
      assert.equal(await page.$("#fork-open"), null, "a fork is offered without the token");
      await p.click("#fork-open");
      assert.equal(await p.inputValue("#fork-task"), "Implement the login endpoint in login.py.");
      await p.fill("#fork-answer", edited);
      await p.click("#fork-submit");
      await p.waitForFunction((orig) => /^Run [0-9a-f]+$/.test((document.querySelector("h1") || {}).textContent || "") &&
        document.querySelector("h1").textContent !== "Run " + orig, captured);
      const forkId = (await p.textContent("h1")).slice(4);
      assert.match(p.url(), new RegExp(`#/run/${forkId}$`));
      // The fork's run, read from the API once it ended: s2's output is the edited answer.
      const auth = { headers: { Authorization: "Bearer " + token } };
      let doc = null;
      for (const t0 = Date.now(); Date.now() - t0 < 30000;) {
        doc = await (await fetch(`${tokenBase}/api/v1/runs/${forkId}`, auth)).json();
        if (doc.run.status !== "running") break;
        await new Promise((ok) => setTimeout(ok, 100));
      }
      assert.equal(doc.run.status, "completed");
      assert.equal(doc.run.origin.run_id, captured);
      assert.equal(doc.run.origin.step, "s2");
      assert.equal(doc.steps.find((x) => x.id === "s2").result, edited);
      // Its page links the comparison with the original, and that opens the pair.
      await p.waitForSelector("#compare-origin");
      await p.click("#compare-origin");
      await p.waitForSelector('#compare-steps tr[data-step="s2"]');
      assert.match(p.url(), new RegExp(`#/compare/${captured}/${forkId}$`));
      assert.match(await p.textContent('#compare-steps tr[data-step="s2"]'), /completed/);
      // An error of the route shows in the form.
      await p.goto(`${tokenBase}/#/run/${captured}/span/${chat.span_id}`);
      await p.waitForSelector("#fork-open");
      await p.click("#fork-open");
      await p.route("**/api/v1/runs/*/fork", (r) => r.fulfill({ status: 409, contentType: "application/json",
        body: JSON.stringify({ error: { status: 409, message: "fork: run x is still running; fork it once it ended" } }) }));
      await p.click("#fork-submit");
      await p.waitForFunction(() => /still running/.test((document.querySelector("#fork-error") || {}).textContent || ""));
      assert.deepEqual(forkErrors, []);
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
