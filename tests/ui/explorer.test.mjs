// tests/ui/explorer.test.mjs - the trace explorer in a real browser: Debian's chromium driven
// by playwright-core (no browser download), against a `weft serve` this test starts on a free
// loopback port over a store it fills by running examples with the scripted provider.
//
// Checks: the runs list shows the runs; a failed run's page marks the failing step and "why did
// it fail" reaches the error span; the why panel's causes (a stuck loop's repetitions as links,
// the last model answer, an ingested exception, a token budget); a trace's resource attributes;
// the runs list's store_error state (a second server over a state store the test damages); a
// stuck-loop run shows its loop marker; correction mode's
// surgery shows the plan before and after; compare shows where two runs diverge, and a fork's
// page opens it on the fork and its original; compare picked by ticking two runs in the list
// or with the run page's type-ahead (keyboard), the input and workflow warning and diffs, a
// fork's reused steps, a step's result diff opened with Enter, time noise left uncoloured;
// the traces list finds a trace the OpenTelemetry JS SDK sent; a span whose
// prompt holds <script> shows it as text and runs nothing; the collaboration page draws; no page
// logs a console error; the timeline (axis ticks, durations, tokens and cost, zoom and reset,
// the critical path against the chain computed here, a 30,000-span trace's first rows before the
// rest of its rows, folding with counts), find in a trace, span URLs and copy link, the keyboard tree, an LLM
// span's conversation (a run with --capture-content), the verdict/reward/stuck-loop/correction
// blocks, empty and error states and the dark palette's toggle; behind a token (a second server, WEFT_SERVE_TOKEN) the explorer refuses
// a browser without it, /?token= logs it in with an HttpOnly, SameSite=Strict cookie and leaves
// the address clean, and the pages then load through that cookie. Screenshots of each page go to $WEFT_UI_ARTIFACTS (default
// ./ui-artifacts).
//
// Usage: WEFT_BIN=build/weft node tests/ui/explorer.test.mjs
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { checker, startServe } from "./support.mjs";
import * as otelApi from "@opentelemetry/api";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";

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
// Flows: the stuck-loop flow (check -> patch until the watchdog stops it) and the translation
// flow (a fan-out over chunks, each looping audit -> translate): the plan graph draws their loops.
run(["run", path.join(root, "examples/stuck_loops/flow.json"), "-q"], false);
const stuckFlow = lastRunId();
run(["run", path.join(root, "examples/translation/workflow.json"), "-q"]);
const translation = lastRunId();
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
// The code review again with another input: compare warns that the inputs differed.
run(["run", path.join(root, "examples/code_review/workflow.json"), "--input", "Add a logout endpoint", "-q"]);
const otherInput = lastRunId();

const [serve, baseP] = startServe(weft, env, home, { WEFT_SERVE_TOKEN: "" });
const base = await baseP;
// The same runs behind a token, as a server beyond loopback is run (WEFT_SERVE_TOKEN).
const token = "ui-test-token-0123456789abcdef";
const [tokenServe, tokenBaseP] = startServe(weft, env, home, { WEFT_SERVE_TOKEN: token });
const tokenBase = await tokenBaseP;

fs.mkdirSync(artifacts, { recursive: true });
const browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox", "--disable-gpu"] });
const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
const consoleErrors = [];
page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
page.on("pageerror", (e) => consoleErrors.push(e.message));

// Open run @p id's page and wait until it is that run's (the previous view's nodes are gone).
async function openRun(id) {
  await page.goto(`${base}/#/run/${id}`);
  await page.waitForFunction((want) => (document.querySelector("h1") || {}).textContent === "Run " + want, id);
}

// Open the compare view of runs @p a and @p b and wait until it is theirs (not the last view's).
async function openCompare(a, b) {
  await page.goto(`${base}/#/compare/${a}/${b}`);
  await page.waitForSelector(`#compare-runs a.cmp-run[data-run="${a}"] ~ a.cmp-run[data-run="${b}"]`);
}

const { check, failures } = checker(page, artifacts, "");

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
    // A row is reached with the keyboard (Shift+Tab from its tick box lands on the row) and
    // opened with Enter, as a link is.
    await page.focus("#runs tbody tr:first-child input[type=checkbox]");
    await page.keyboard.press("Shift+Tab");
    const focused = await page.evaluate(() => (document.activeElement.tagName === "TR" ? document.activeElement.getAttribute("data-run") : null));
    assert.ok([cmpA, cmpB].includes(focused), "Shift+Tab from the tick box did not reach its row: " + focused);
    await page.keyboard.press("Enter");
    await page.waitForFunction((id) => location.hash === "#/run/" + id, focused);
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

  await check("why: a stuck loop's repetitions are links that select their spans", async () => {
    await openRun(stuck);
    await page.click("#why");
    await page.waitForSelector("#why-loops .loop a.repetition");
    const why = await (await fetch(`${base}/api/v1/runs/${stuck}/why`)).json();
    const want = why.stuck_loops[0].repetitions.map((r) => r.span_id);
    assert.ok(want.length >= 2, "the API lists fewer than two repetitions");
    const links = await page.$$eval("#why-loops .loop:first-child a.repetition", (as) => as.map((a) => a.getAttribute("href")));
    assert.deepEqual(links, want.map((id) => `#/run/${stuck}/span/${id}`));
    assert.match(await page.textContent("#why-loops .loop"), new RegExp("Stuck loop \\(" + why.stuck_loops[0].kind + "\\)"));
    /* The first repetition is not the failing span the panel selected: clicking it moves there. */
    await page.click(`#why-loops a.repetition[data-span="${want[0]}"]`);
    await page.waitForSelector(`#waterfall .row.selected[data-span="${want[0]}"]`);
    await page.waitForFunction((id) => (document.querySelector("#span-ids") || {}).textContent?.includes("span " + id), want[0]);
    assert.match(page.url(), new RegExp(`#/run/${stuck}/span/${want[0]}$`));
    assert.ok(await page.$("#why-loops"), "the why panel went away on selecting a repetition");
  });

  await check("why: the last model answer before the failure, linked to its span", async () => {
    /* The failed run was not captured: the answer comes from the run's stored LLM exchange. */
    await openRun(failed);
    await page.click("#why");
    await page.waitForSelector("#why-answer pre.answer");
    assert.equal((await page.textContent("#why-answer pre.answer")).trim(), "notes ready");
    assert.match(await page.textContent("#why-answer"), /from the stored exchange/);
    const why = await (await fetch(`${base}/api/v1/runs/${failed}/why`)).json();
    assert.equal(why.last_answer.source, "exchange");
    await page.click(`#why-answer a[data-span="${why.last_answer.span_id}"]`);
    await page.waitForSelector(`#waterfall .row.selected[data-span="${why.last_answer.span_id}"]`);
    await page.waitForFunction((name) => (document.querySelector("#span-name") || {}).textContent === name, why.last_answer.span_name);
    assert.match(why.last_answer.span_name, /^chat /);
  });

  await check("why: exception events show their type, message and stack", async () => {
    /* A failed run whose failing step called a service traced by an OTel SDK: that service's
     * span, in the run's trace under the failing span, recorded the exception (OTLP ingest). */
    run(["run", failingWf, "-q"], false);
    const excRun = lastRunId();
    const before = await (await fetch(`${base}/api/v1/runs/${excRun}/why`)).json();
    const now = BigInt(Date.now()) * 1000000n;
    const otlp = { resourceSpans: [{ resource: { attributes: [{ key: "service.name", value: { stringValue: "report-renderer" } }] },
      scopeSpans: [{ scope: { name: "ui-test" }, spans: [{ traceId: before.trace_id, spanId: "e0e0e0e0e0e0e0e1", parentSpanId: before.failed_span.span_id,
        name: "render report", kind: 2, startTimeUnixNano: String(now), endTimeUnixNano: String(now + 1000000n), status: { code: 2, message: "ValueError" },
        events: [{ timeUnixNano: String(now + 500000n), name: "exception", attributes: [
          { key: "exception.type", value: { stringValue: "ValueError" } },
          { key: "exception.message", value: { stringValue: "template has no section 'summary'" } },
          { key: "exception.stacktrace", value: { stringValue: "Traceback (most recent call last):\n  File \"render.py\", line 9, in render\nValueError: template has no section 'summary'" } }] }] }] }] }] };
    const r = await fetch(base + "/v1/traces", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(otlp) });
    assert.equal(r.status, 200, "OTLP ingest answered " + r.status);
    await openRun(excRun);
    await page.click("#why");
    await page.waitForSelector("#why-exceptions .exception");
    assert.equal(await page.textContent("#why-exceptions .exc-type"), "ValueError");
    assert.equal(await page.textContent("#why-exceptions .exc-message"), "template has no section 'summary'");
    assert.match(await page.textContent("#why-exceptions pre.stack"), /File "render.py", line 9/);
    await page.click('#why-exceptions a[data-span="e0e0e0e0e0e0e0e1"]');
    await page.waitForSelector('#waterfall .row.selected[data-span="e0e0e0e0e0e0e0e1"]');
  });

  await check("why: the budget that ran out, its limit and the amount used", async () => {
    /* max_tokens 100; each answer uses 70 tokens: the second call crosses it. */
    write("budget_script.json", JSON.stringify({ responses: { w: { act: [
      { content: "first part", usage: { input_tokens: 40, output_tokens: 30 } },
      { content: "second part", usage: { input_tokens: 40, output_tokens: 30 } },
      { content: "third part", usage: { input_tokens: 40, output_tokens: 30 } }] } } }));
    run(["run", write("budget.json", JSON.stringify({
      name: "budgeted", models: { m: { provider: "scripted", script: "budget_script.json" } }, agents: [{ name: "w" }],
      supervisor: { max_tokens: 100 },
      plan: [{ id: "a", agent: "w", task: "A" }, { id: "b", agent: "w", task: "B", depends_on: ["a"] }, { id: "c", agent: "w", task: "C", depends_on: ["b"] }],
    })), "-q"], false);
    const spent = lastRunId();
    await openRun(spent);
    await page.click("#why");
    await page.waitForSelector("#why-budget");
    assert.equal(await page.textContent("#why-budget .budget-name"), "max_tokens");
    assert.equal(await page.textContent("#why-budget .budget-limit"), "100");
    assert.equal(await page.textContent("#why-budget .budget-used"), "140");
    assert.match(await page.textContent("#why-budget"), /140 tokens/);
    assert.equal((await page.textContent("#why-answer pre.answer")).trim(), "second part");
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

  // Every <text> of the plan inside the svg's viewBox, in its user space (nothing clipped).
  async function planClipped() {
    return page.$eval("svg#plan", (s) => {
      const vb = s.viewBox.baseVal, toSvg = s.getScreenCTM().inverse(), out = [];
      if (!vb || !vb.width) return ["no viewBox"];
      for (const t of s.querySelectorAll("text")) {
        const b = t.getBBox(), m = toSvg.multiply(t.getScreenCTM());
        for (const [x, y] of [[b.x, b.y], [b.x + b.width, b.y + b.height]]) {
          const p = new DOMPoint(x, y).matrixTransform(m);
          if (p.x < vb.x - 0.5 || p.y < vb.y - 0.5 || p.x > vb.x + vb.width + 0.5 || p.y > vb.y + vb.height + 0.5) out.push(t.textContent);
        }
      }
      return out;
    });
  }

  await check("plan graph: flow loops as counted back-edges, fan-out items grouped, a legend, nothing clipped", async () => {
    /* The stuck flow: check went back to patch; the count is the run's flow loops (one loop). */
    const doc = await (await fetch(`${base}/api/v1/runs/${stuckFlow}`)).json();
    const taken = doc.run.loops.flow;
    assert.ok(taken > 0, "the stuck flow counted no loop");
    await openRun(stuckFlow);
    const loop = await page.waitForSelector('#plan path.back.flow[data-from="check"][data-to="patch"]');
    assert.equal(Number(await loop.getAttribute("data-count")), taken);
    assert.ok(await loop.getAttribute("marker-end"), "the flow loop has no arrowhead");
    assert.match(await page.textContent('#plan text.count.flow[data-from="check"]'), new RegExp("×" + taken + "\\b.*stuck"));
    assert.equal(await page.$('#plan path.back[data-from="patch"]'), null, "a back-edge the wrong way");
    assert.ok(await page.$('#plan path.edge:not(.back)[data-from="patch"][data-to="check"]'), "no dependency patch -> check");
    const checkStep = doc.steps.find((s) => s.id === "check");
    assert.ok(checkStep.attempts > 1);
    assert.equal(await page.textContent('#plan g[data-step="check"] text.iterations'), "×" + checkStep.attempts);
    assert.equal(await page.$$eval("#plan g.node", (g) => g.length), doc.steps.length, "one node per step, not per iteration");
    assert.deepEqual(await page.$$eval("#plan-legend [data-kind]", (s) => s.map((x) => x.getAttribute("data-kind"))), ["dep", "flow"]);
    assert.deepEqual(await planClipped(), []);

    /* Translation: per_chunk's items in a box named with their count, each fed and feeding. */
    const tr = await (await fetch(`${base}/api/v1/runs/${translation}`)).json();
    const items = tr.steps.filter((s) => /^per_chunk\[\d+\]\./.test(s.id));
    const count = new Set(items.map((s) => /\[(\d+)\]/.exec(s.id)[1])).size;
    assert.ok(count > 1, "the translation fanned out to " + count + " items");
    await openRun(translation);
    const group = await page.waitForSelector('#plan g.group[data-group="per_chunk"]');
    assert.equal(Number(await group.getAttribute("data-items")), count);
    assert.match(await page.textContent('#plan g.group[data-group="per_chunk"] text'), new RegExp("per_chunk · " + count + " items"));
    const box = await page.$eval('#plan g.group[data-group="per_chunk"] rect', (r) => r.getBoundingClientRect().toJSON());
    for (const s of items) {
      const r = await page.$eval(`#plan g.node[data-step="${s.id}"] rect`, (x) => x.getBoundingClientRect().toJSON());
      assert.ok(r.left >= box.left && r.right <= box.right && r.top >= box.top && r.bottom <= box.bottom, s.id + " is outside its group");
      const ins = await page.$$(`#plan path.edge:not(.back)[data-to="${s.id}"]`);
      const outs = await page.$$(`#plan path.edge:not(.back)[data-from="${s.id}"]`);
      assert.ok(ins.length && outs.length, s.id + " is not connected");
    }
    assert.ok(await page.$('#plan path.edge.fanout[data-from="per_chunk"][data-to="per_chunk[0].translate"]'), "the fan-out does not feed its items");
    assert.ok(await page.$('#plan path.edge[data-from="per_chunk[0].audit"][data-to="combine"]'), "the items do not feed combine");
    /* Each item's loop, counted; together the run's flow loops. */
    const counts = await page.$$eval("#plan path.back.flow", (p) => p.map((x) => [x.getAttribute("data-from"), x.getAttribute("data-to"), Number(x.getAttribute("data-count"))]));
    assert.ok(counts.length > 0, "no flow loop drawn");
    for (const [from, to] of counts) assert.equal(from.replace(/\.audit$/, ".translate"), to);
    assert.equal(counts.reduce((a, [, , n]) => a + n, 0), tr.run.loops.flow);
    assert.deepEqual(await page.$$eval("#plan-legend [data-kind]", (s) => s.map((x) => x.getAttribute("data-kind"))), ["dep", "fanout", "flow"]);
    assert.match(await page.textContent("#plan-legend"), /dependency.*fan-out.*flow loop/);
    assert.deepEqual(await planClipped(), []);
    if (process.env.WEFT_UI_DOC_SHOTS) {
      /* docs/img/explorer-flow.png: the graph with its legend. */
      const [a, b] = [await (await page.$("svg#plan")).boundingBox(), await (await page.$("#plan-legend")).boundingBox()];
      await page.screenshot({ path: process.env.WEFT_UI_DOC_SHOTS, clip: { x: a.x - 4, y: a.y - 4, width: Math.max(a.width, b.width) + 8, height: b.y + b.height - a.y + 8 } });
    }

    /* Loop-back requests stay dashed and apart from flow loops and dependencies. */
    await openRun(stuck);
    const req = await page.waitForSelector("#plan path.edge.back:not(.flow)", { state: "attached" });
    assert.ok(await req.getAttribute("data-count"));
    assert.ok((await page.$$eval("#plan-legend [data-kind]", (s) => s.map((x) => x.getAttribute("data-kind")))).includes("request"));
    const dash = (sel) => page.$eval(sel, (p) => getComputedStyle(p).strokeDasharray);
    assert.notEqual(await dash("#plan path.edge.back:not(.flow)"), "none");
    assert.notEqual(await dash("#plan path.edge.back:not(.flow)"), await dash("#plan path.edge:not(.back)").catch(() => "none"));
    assert.deepEqual(await planClipped(), []);
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

  await check("compare: tick two runs in the list and compare them", async () => {
    await page.goto(base + "/#/runs");
    await page.waitForSelector(`#runs tr[data-run="${cmpB}"] input.tick`);
    assert.ok(await page.$eval("#compare-ticked", (b) => b.disabled), "the button is enabled with nothing ticked");
    /* Keyboard-reachable and labelled with the run id. */
    assert.match(await page.getAttribute(`#runs tr[data-run="${cmpA}"] input.tick`, "aria-label"), new RegExp(cmpA));
    await page.focus(`#runs tr[data-run="${cmpB}"] input.tick`);
    await page.keyboard.press("Space");
    assert.ok(await page.$eval("#compare-ticked", (b) => b.disabled), "enabled with one ticked");
    await page.check(`#runs tr[data-run="${cmpA}"] input.tick`);
    assert.equal(await page.$eval("#compare-ticked", (b) => b.disabled), false, "not enabled with two ticked");
    await page.check(`#runs tr[data-run="${codeReview}"] input.tick`);
    assert.ok(await page.$eval("#compare-ticked", (b) => b.disabled), "enabled with three ticked");
    await page.uncheck(`#runs tr[data-run="${codeReview}"] input.tick`);
    assert.equal(page.url().includes("#/run/"), false, "ticking a box opened the run");
    await page.click("#compare-ticked");
    /* A is the older run: cmpA ran before cmpB. */
    await page.waitForFunction((want) => location.hash === want, `#/compare/${cmpA}/${cmpB}`);
    await page.waitForSelector("#compare-steps");
    const shown = await page.$$eval("#compare-runs a.cmp-run", (as) => as.map((a) => a.getAttribute("data-run")));
    assert.deepEqual(shown, [cmpA, cmpB]);
    const head = await page.textContent("#compare-runs");
    assert.ok(head.includes(cmpA.slice(0, 8)) && head.includes(cmpB.slice(0, 8)), "both ids show: " + head);
  });

  await check("compare: the type-ahead on a run's page picks a run with the keyboard", async () => {
    await openRun(cmpB);
    await page.focus("#compare-with");
    await page.keyboard.type("compare-me");
    /* The other run of the same workflow is offered (the run itself is not). */
    await page.waitForSelector(`#compare-list [role="option"][data-run="${cmpA}"]`);
    assert.equal(await page.getAttribute("#compare-with", "aria-expanded"), "true");
    assert.equal(await page.$(`#compare-list [role="option"][data-run="${cmpB}"]`), null, "the run offers itself");
    const opts = await page.$$eval('#compare-list [role="option"]', (li) => li.map((x) => x.getAttribute("data-run")));
    await page.keyboard.press("ArrowDown");
    const activeId = await page.getAttribute("#compare-with", "aria-activedescendant");
    assert.equal(await page.getAttribute("#" + activeId, "aria-selected"), "true");
    /* Move to the option of cmpA, then Enter. */
    for (let i = 0; i < opts.indexOf(cmpA); i++) await page.keyboard.press("ArrowDown");
    assert.equal(await page.getAttribute("#" + (await page.getAttribute("#compare-with", "aria-activedescendant")), "data-run"), cmpA);
    await page.keyboard.press("Enter");
    await page.waitForFunction((want) => location.hash === want, `#/compare/${cmpA}/${cmpB}`);
    await page.waitForSelector("#compare-steps");
    /* Same workflow first: a search for nothing lists the same workflow's runs before others. */
    await openRun(codeReview);
    await page.focus("#compare-with");
    await page.waitForSelector('#compare-list [role="option"]');
    const wfs = await page.$$eval('#compare-list [role="option"]', (li) => li.map((x) => x.querySelector(".same-wf") !== null));
    assert.ok(wfs[0], "the first option is not of the same workflow");
    assert.ok(wfs.indexOf(false) === -1 || wfs.slice(wfs.indexOf(false)).every((x) => !x), "same-workflow runs are not first: " + wfs);
  });

  await check("compare: different inputs show the warning and the input diff", async () => {
    await openCompare(codeReview, otherInput);
    assert.match(await page.textContent("#compare-warning"), /different inputs: differences below may come from that/);
    const dels = await page.$$eval("#input-diff .del", (d) => d.map((x) => x.textContent));
    const adds = await page.$$eval("#input-diff .add", (d) => d.map((x) => x.textContent));
    assert.deepEqual(dels, ["− Add a login endpoint"]);
    assert.deepEqual(adds, ["+ Add a logout endpoint"]);
    assert.match(await page.textContent('#compare-context tr[data-what="workflow"]'), /same/);
    /* Two runs of one input and one workflow do not warn. */
    await openCompare(codeReview, captured);
    assert.ok(await page.$("#compare-same"), "no 'same input and workflow' note");
    assert.equal(await page.$("#compare-warning"), null);
  });

  await check("compare: a fork's reused steps are marked, the workflows' diff shown", async () => {
    await openCompare(failed, fork);
    const prep = await page.$$eval('#compare-steps tr.step-row[data-step="prepare"] td', (tds) => tds.map((t) => t.textContent));
    /* columns: step, agent, A, B, A time, B time, Δ time, ... */
    assert.match(prep[3], /reused/, "B's status does not say reused: " + prep);
    assert.equal(prep[5], "reused", "B's time is not 'reused': " + prep);
    assert.equal(prep[6], "reused");
    assert.notEqual(prep[4], "reused", "A (the original) ran the step");
    assert.doesNotMatch(prep.join("|"), /–/, "a reused step shows –");
    /* The fork ran with the fixed workflow: the warning, and the changed command in the diff. */
    assert.match(await page.textContent("#compare-warning"), /different workflows/);
    const wdel = await page.$$eval("#workflow-diff .del", (d) => d.map((x) => x.textContent).join("\n"));
    const wadd = await page.$$eval("#workflow-diff .add", (d) => d.map((x) => x.textContent).join("\n"));
    assert.match(wdel, /^− .*compiler exploded/);
    assert.match(wadd, /^\+ .*echo report built/);
    /* The step the fork ran again: its result diff, opened by a click on its row. */
    await page.click('#compare-steps tr.step-row[data-step="build"]');
    await page.waitForSelector('tr.result-diff-row[data-diff-step="build"]:not([hidden])');
    assert.match(await page.textContent('tr.result-diff-row[data-diff-step="build"] .diff .add'), /^\+ .*report built/);
  });

  await check("compare: a step's result diff opens with Enter, − and + lines", async () => {
    await openCompare(cmpA, cmpB);
    assert.ok(await page.$eval('tr.result-diff-row[data-diff-step="one"]', (r) => r.hidden), "the diff is open before asked");
    /* Tab reaches the rows: focus the first and press Enter. */
    await page.focus('#compare-steps tr.step-row[data-step="one"]');
    assert.equal(await page.evaluate(() => document.activeElement.getAttribute("data-step")), "one");
    await page.keyboard.press("Enter");
    await page.waitForSelector('tr.result-diff-row[data-diff-step="one"]:not([hidden])');
    assert.equal(await page.getAttribute('#compare-steps tr.step-row[data-step="one"]', "aria-expanded"), "true");
    const lines = await page.$$eval('tr.result-diff-row[data-diff-step="one"] .diff > div', (d) => d.map((x) => ({ cls: x.className, text: x.textContent })));
    const del = lines.find((l) => l.cls === "del"), add = lines.find((l) => l.cls === "add");
    assert.deepEqual([del && del.text, add && add.text], ["− beta", "+ gamma"]);
    /* Colour as well as the marker: the two lines have different backgrounds. */
    const bgs = await page.$$eval('tr.result-diff-row[data-diff-step="one"] .diff > div.del, tr.result-diff-row[data-diff-step="one"] .diff > div.add',
      (d) => d.map((x) => getComputedStyle(x).backgroundColor));
    assert.equal(new Set(bgs).size, 2, "del and add are not coloured apart: " + bgs);
    /* ArrowDown moves to the next step; Enter again closes. */
    await page.keyboard.press("ArrowDown");
    assert.equal(await page.evaluate(() => document.activeElement.getAttribute("data-step")), "two");
    await page.keyboard.press("ArrowUp");
    await page.keyboard.press("Enter");
    await page.waitForSelector('tr.result-diff-row[data-diff-step="one"][hidden]', { state: "attached" });
  });

  await check("compare: time noise below the threshold is not coloured", async () => {
    // Two runs of scripted steps differ by µs on a plain build; a sanitizer build can be slower
    // than the threshold, so a run compared with itself (every change 0) is checked as well.
    const deltas = async () => page.$$eval("#compare-steps td.delta", (tds) => tds.map((td) => ({ cls: td.className, d: td.getAttribute("data-delta-ns"), color: getComputedStyle(td).color })));
    await openCompare(codeReview, captured);
    const cells = await deltas();
    await openCompare(codeReview, codeReview);
    cells.push(...(await deltas()));
    const noisy = cells.filter((c) => c.d !== "" && Math.abs(Number(c.d)) < 1e6);
    assert.ok(noisy.length > 0, "no sub-millisecond change to check");
    for (const c of noisy) {
      assert.match(c.cls, /delta-noise/, JSON.stringify(c));
      assert.doesNotMatch(c.cls, /delta-(pos|neg)/);
      assert.notEqual(c.color, "rgb(198, 40, 40)", "noise drawn red");
      assert.notEqual(c.color, "rgb(46, 125, 50)", "noise drawn green");
    }
  });

  await check("compare: a run id that does not exist says what to do", async () => {
    const seen = consoleErrors.length;
    await page.goto(`${base}/#/compare/${cmpA}/feedfacecafe`);
    await page.waitForSelector("#error-box");
    assert.match(await page.textContent("#error"), /no such run/);
    assert.match(await page.textContent("#error-hint"), /tick two in the runs list/);
    // The browser logs the 404 itself; that one is expected here.
    const extra = consoleErrors.splice(seen);
    assert.ok(extra.every((m) => /404/.test(m)), "unexpected: " + extra);
  });

  await check("span content with <script> is text and runs nothing", async () => {
    await openRun(markup);
    await page.waitForSelector("#waterfall .row");
    // By id, not by element handle: the list may draw its rows again (the rest of the rows
    // arriving, a live update) between two clicks, which detaches a handle taken before.
    const ids = await page.$$eval("#waterfall .row", (rows) => rows.map((r) => r.getAttribute("data-span")));
    let found = false;
    for (const id of ids) {
      await page.click(`#waterfall .row[data-span="${id}"]`);
      await page.waitForFunction((want) => (document.querySelector("#span-ids") || {}).textContent?.includes("span " + want), id);
      const text = await page.textContent("#span-detail");
      if (text.includes("<script>window.__pwned = 1</script>")) { found = true; break; }
    }
    assert.ok(found, "the prompt's markup is not shown as text in any span");
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    assert.equal(await page.$$eval("#span-detail script, #span-detail img", (n) => n.length), 0);
  });

  await check("traces list: a trace another SDK sent is one click away", async () => {
    /* The OpenTelemetry JS SDK records a trace (a SERVER root, a CLIENT child with ERROR status)
     * with its service.name resource, and its own OTLP/HTTP exporter sends it, as a service
     * instrumented with it would. */
    const memory = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ "service.name": "checkout-js", "service.version": "4.2.0" }),
      spanProcessors: [new SimpleSpanProcessor(memory)],
    });
    const tracer = provider.getTracer("ui-test", "1.0.0");
    const root = tracer.startSpan("POST /checkout", { kind: otelApi.SpanKind.SERVER });
    const child = tracer.startSpan("charge card", { kind: otelApi.SpanKind.CLIENT }, otelApi.trace.setSpan(otelApi.context.active(), root));
    child.setStatus({ code: otelApi.SpanStatusCode.ERROR, message: "card declined" });
    child.end();
    root.end();
    const traceId = root.spanContext().traceId;
    const exporter = new OTLPTraceExporter({ url: base + "/v1/traces" });
    const result = await new Promise((ok) => exporter.export(memory.getFinishedSpans(), ok));
    assert.equal(result.code, 0, "the SDK's export failed: " + (result.error && result.error.message));
    await exporter.shutdown();
    await provider.shutdown();
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

  await check("a trace's page shows its service and resource attributes", async () => {
    const now = BigInt(Date.now()) * 1000000n;
    const traceId = "5eed" + "1".repeat(24) + "c0de";
    const attr = (key, v) => ({ key, value: typeof v === "number" ? { intValue: String(v) } : { stringValue: v } });
    const otlp = { resourceSpans: [{ resource: { attributes: [attr("service.name", "cart-js"), attr("service.version", "2.4.1"),
      attr("telemetry.sdk.language", "nodejs"), attr("telemetry.sdk.name", "opentelemetry"), attr("host.cpus", 8),
      attr("deployment.client_secret", "hunter2-hunter2")], droppedAttributesCount: 3 },
      scopeSpans: [{ scope: { name: "ui-test" }, spans: [
        { traceId, spanId: "bbbbbbbbbbbbbbb1", name: "GET /cart", kind: 2, startTimeUnixNano: String(now), endTimeUnixNano: String(now + 3000000n), status: { code: 1 } }] }] }] };
    const r = await fetch(base + "/v1/traces", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(otlp) });
    assert.equal(r.status, 200, "OTLP ingest answered " + r.status);
    await page.goto(`${base}/#/trace/${traceId}`);
    await page.waitForFunction((id) => (document.querySelector("h1") || {}).textContent === "Trace " + id, traceId);
    await page.waitForSelector("#trace-resource");
    assert.match(await page.textContent("#trace-service"), /cart-js/);
    const rows = Object.fromEntries(await page.$$eval("#trace-resource tr", (trs) => trs.map((tr) => [tr.getAttribute("data-key"), tr.cells[1].textContent])));
    assert.equal(rows["service.version"], "2.4.1");
    assert.equal(rows["telemetry.sdk.language"], "nodejs");
    assert.equal(rows["host.cpus"], "8");
    assert.equal(rows["deployment.client_secret"], "[REDACTED]", "a secret's value reached the page");
    assert.match(await page.textContent("#trace-resource-dropped"), /^3 more left out/);
    /* A trace of no run leaves the run's link out, not a "null" (glued to the title, \bnull\b missed it). */
    assert.equal(await page.$eval("#main", (m) => [...m.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.textContent === "null")), false);
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

  await check("runs list says when the state store cannot be read (store_error)", async () => {
    /* A second server over a state store of its own, which the test then damages: the stream
     * sends store_error and the list says it is not live. */
    const home2 = fs.mkdtempSync(path.join(os.tmpdir(), "weft-ui-broken-"));
    const env2 = { ...env, WEFT_HOME: home2 };
    const r2 = spawnSync(weft, ["run", path.join(root, "examples/code_review/workflow.json"), "-q"], { env: env2, encoding: "utf8", cwd: home2 });
    assert.equal(r2.status, 0, "the run in the second home failed: " + r2.stderr);
    const [serve2, base2P] = startServe(weft, env, home, { WEFT_HOME: home2, WEFT_SERVE_TOKEN: "" });
    try {
      const base2 = await base2P;
      /* The stream answers once the server has read its baseline: damage the database after. */
      const streamOpen = page.waitForResponse((resp) => resp.url() === base2 + "/api/v1/events");
      await page.goto(base2 + "/");
      await page.waitForSelector("#runs tbody tr");
      assert.equal((await streamOpen).status(), 200);
      assert.equal(await page.$("#runs-stale"), null, "stale before anything broke");
      fs.writeFileSync(path.join(home2, "state.db"), "this is not an SQLite database, and it is long enough to have a header");
      await page.waitForSelector("#runs-stale", { timeout: 15000 });
      assert.match(await page.textContent("#runs-stale"), /^Not live: .*state store.*Reload once it is back\.$/);
    } finally {
      serve2.kill("SIGTERM");
      fs.rmSync(home2, { recursive: true, force: true });
    }
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

  /* The critical path as docs/explorer.md defines it (Jaeger's, a child ending exactly when the
   * next starts counting as before it), from a weft.trace/v1 span list in tree order, by parent
   * ids and exact ns times: the ids on it. */
  const nsOf = (iso) => {
    const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(iso);
    return BigInt(Date.parse(m[1] + "Z")) * 1000000n + BigInt((m[2] || "").padEnd(9, "0").slice(0, 9));
  };
  function expectedCriticalPath(spans) {
    const at = new Map(spans.map((s, i) => [s.span_id, i]));
    const par = spans.map((s) => (s.parent_span_id && at.has(s.parent_span_id) ? at.get(s.parent_span_id) : -1));
    const cs = [], ce = [], keep = [];
    spans.forEach((s, i) => {
      const st = nsOf(s.start), e0 = nsOf(s.end), en = e0 > st ? e0 : st, p = par[i];
      keep[i] = i === 0 || (p >= 0 && keep[p] && st < ce[p] && en > cs[p]);
      cs[i] = keep[i] && i > 0 && st < cs[p] ? cs[p] : st;
      ce[i] = keep[i] && i > 0 && en > ce[p] ? ce[p] : en;
    });
    const kids = spans.map(() => []);
    for (let i = 1; i < spans.length; i++) if (keep[i]) kids[par[i]].push(i);
    for (const k of kids) k.sort((a, b) => (ce[a] > ce[b] ? -1 : ce[a] < ce[b] ? 1 : a - b));
    const on = new Set([spans[0].span_id]);
    let cur = 0, bound = ce[0], back = false;
    for (;;) {
      const next = kids[cur].find((j) => !on.has(spans[j].span_id) && (!back || ce[j] <= bound));
      if (next !== undefined) { cur = next; on.add(spans[cur].span_id); bound = ce[cur]; back = false; } else if (cur === 0) break;
      else { bound = cs[cur]; cur = par[cur]; back = true; }
    }
    return on;
  }

  await check("timeline: the critical path is marked, and its toggle shows only it", async () => {
    await openRun(captured);
    await page.waitForFunction((n) => (document.querySelector("#waterfall") || {}).getAttribute?.("data-loaded") === String(n), capTrace.spans.length);
    const want = expectedCriticalPath(capTrace.spans);
    assert.ok(want.size > 1, `a chain of ${want.size} of ${capTrace.spans.length} spans`);
    const rows = await page.$$eval("#waterfall .row", (rs) => rs.map((r) => [r.getAttribute("data-span"), r.classList.contains("critical"), r.getAttribute("aria-description"), !!r.querySelector(".crit[title='on the critical path']")]));
    assert.ok(rows.length > 0);
    for (const [id, c, d, dot] of rows) {
      assert.equal(c, want.has(id), "row " + id + (c ? " is marked but is not" : " is not marked but is") + " on the expected chain");
      assert.equal(d, c ? "on the critical path" : null);
      assert.equal(dot, c);
    }
    await page.click("#critical-toggle");
    await page.waitForFunction((n) => document.querySelector("#span-tree").getAttribute("data-rows") === String(n), want.size);
    assert.equal(await page.getAttribute("#critical-toggle", "aria-pressed"), "true");
    const only = await page.$$eval("#waterfall .row", (rs) => rs.map((r) => r.getAttribute("data-span")));
    const inOrder = capTrace.spans.map((s) => s.span_id).filter((id) => want.has(id));
    assert.deepEqual(only, inOrder.slice(0, only.length));
    await page.click("#critical-toggle");
    await page.waitForFunction((n) => document.querySelector("#span-tree").getAttribute("data-rows") === String(n), capTrace.spans.length);
    /* A run's steps follow one another, so every span of the captured run is on it. A trace
     * with parallel children (sent over OTLP): root 0-100 ms; a 10-60, b 20-90 (ends last),
     * c 30-50, d 0-15 (ends before b starts); under b, b1 20-40 and b2 35-80 (ends last). */
    const pid = "9a7a" + "0".repeat(24) + "11e1";
    const ms = (t) => String(BigInt(Date.now() - 60000) * 1000000n + BigInt(t) * 1000000n);
    const shape = [["r", null, 0, 100], ["a", "r", 10, 60], ["b", "r", 20, 90], ["c", "r", 30, 50], ["d", "r", 0, 15], ["b1", "b", 20, 40], ["b2", "b", 35, 80]];
    const hex = (k) => "ab" + Buffer.from(k.padEnd(7, "_")).toString("hex");
    const post = await fetch(base + "/v1/traces", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ resourceSpans: [{ resource: { attributes: [] }, scopeSpans: [{ scope: { name: "ui-test" },
      spans: shape.map(([k, p, s, e]) => ({ traceId: pid, spanId: hex(k), parentSpanId: p ? hex(p) : undefined, name: "op " + k, kind: 1, startTimeUnixNano: ms(s), endTimeUnixNano: ms(e) })) }] }] }) });
    assert.equal(post.status, 200);
    const par = await apiGet(`/api/v1/traces/${pid}?limit=100`);
    const parWant = expectedCriticalPath(par.spans);
    assert.deepEqual([...parWant].sort(), ["r", "b", "b2", "d"].map(hex).sort(), "the test's own rule");
    await page.goto(`${base}/#/trace/${pid}`);
    await page.waitForFunction((n) => (document.querySelector("#waterfall") || {}).getAttribute?.("data-loaded") === String(n), shape.length);
    const marks = await page.$$eval("#waterfall .row", (rs) => rs.filter((r) => r.classList.contains("critical")).map((r) => r.getAttribute("data-span")));
    assert.deepEqual(marks.sort(), [...parWant].sort());
    await page.click("#critical-toggle");
    await page.waitForFunction(() => document.querySelector("#span-tree").getAttribute("data-rows") === "4");
    /* In tree order: d starts first. */
    assert.deepEqual(await page.$$eval("#waterfall .row", (rs) => rs.map((r) => r.getAttribute("data-span"))), ["r", "d", "b", "b2"].map(hex));
  });

  await check("timeline: a 30,000-span trace draws its first rows before the rest arrives", async () => {
    /* An OTLP trace of 30,000 spans (a root, 100 steps of 299 children), sent in three posts. */
    const total = 30000, bigId = "b16" + "0".repeat(24) + "30000";
    const sid = (i) => (0xc0de000000000000n + BigInt(i + 1)).toString(16);
    const isStep = (i) => i > 0 && (i - 1) % 300 === 0;
    const nameOf = (i) => (i === 0 ? "GET /big" : isStep(i) ? "step" : i % 97 === 0 ? "needle" : "leaf");
    const t0 = BigInt(Date.now()) * 1000000n;
    for (let from = 0; from < total; from += 10000) {
      const spans = [];
      for (let i = from; i < from + 10000; i++) {
        const parent = i === 0 ? undefined : isStep(i) ? sid(0) : sid(1 + Math.floor((i - 1) / 300) * 300);
        const start = t0 + BigInt(i) * 10000n, len = i === 0 ? BigInt(total) * 10000n + 5000n : isStep(i) ? 300n * 10000n : 5000n;
        spans.push({ traceId: bigId, spanId: sid(i), parentSpanId: parent, name: nameOf(i), kind: 1,
          startTimeUnixNano: String(start), endTimeUnixNano: String(start + len), status: { code: i % 1000 === 7 ? 2 : 0 } });
      }
      const r = await fetch(base + "/v1/traces", { method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({ resourceSpans: [{ resource: { attributes: [{ key: "service.name", value: { stringValue: "big" } }] }, scopeSpans: [{ scope: { name: "ui-test" }, spans }] }] }) });
      assert.equal(r.status, 200, "OTLP ingest answered " + r.status);
    }
    /* The rest of the rows (any part after the first) is held until the first rows are checked. */
    let release = null;
    const gate = new Promise((ok) => { release = ok; });
    const isRest = (u) => u.pathname === `/api/v1/traces/${bigId}` && u.searchParams.get("view") === "rows" && Number(u.searchParams.get("offset") || 0) > 0;
    const hold = async (route) => { await gate; await route.continue(); };
    await page.route(isRest, hold);
    try {
      const late = 20000; /* a span whose row is not in the first part */
      const restAsked = page.waitForRequest((req) => isRest(new URL(req.url())));
      await page.goto(`${base}/#/trace/${bigId}/span/${sid(late)}`);
      await page.waitForSelector("#waterfall .row");
      await restAsked;
      const loaded = Number(await page.getAttribute("#waterfall", "data-loaded"));
      assert.ok(loaded > 0 && loaded < total, "rows drawn from the first part: " + loaded + " of " + total);
      assert.equal(await page.getAttribute("#span-tree", "aria-busy"), "true");
      assert.equal(await page.getAttribute("#span-count", "data-count"), String(total));
      await page.waitForSelector("#span-pending");
      /* Find works on the rows so far, and says so. */
      const needles = (upTo) => [...Array(upTo).keys()].filter((i) => nameOf(i) === "needle").length;
      await page.fill("#span-search", "needle");
      await page.waitForFunction((n) => document.querySelector("#search-count").textContent === n + " matches so far (Enter)", needles(loaded));
      /* The rest arrives: every row, the URL's span selected, the search counted again. */
      release();
      await page.waitForFunction((n) => document.querySelector("#waterfall").getAttribute("data-loaded") === String(n), total, { timeout: 30000 });
      await page.waitForSelector(`#waterfall .row.selected[data-span="${sid(late)}"]`);
      assert.equal(await page.getAttribute("#span-tree", "data-rows"), String(total));
      assert.equal(await page.getAttribute("#span-tree", "aria-busy"), "false");
      await page.waitForFunction((n) => document.querySelector("#search-count").textContent === n + " matches (Enter)", needles(total));
      await page.$eval("#waterfall", (b) => { b.scrollTop = b.scrollHeight; });
      await page.waitForSelector(`#waterfall .row[data-index="${total - 1}"][data-span="${sid(total - 1)}"]`);
    } finally {
      release();
      await page.unroute(isRest, hold);
    }
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
      // A later model call of a step: the given answer replaces the first call only, so its
      // form offers the task and says where the answer is edited.
      const byParent = new Map();
      for (const x of spans) if (x.attributes["gen_ai.operation.name"] === "chat") byParent.set(x.parent_span_id, [...(byParent.get(x.parent_span_id) || []), x]);
      const later = [...byParent.values()].find((l) => l.length > 1);
      assert.ok(later, "no step with two model calls in the captured run");
      await p.goto(`${tokenBase}/#/run/${captured}/span/${later[1].span_id}`);
      await p.waitForSelector("#fork-open");
      await p.click("#fork-open");
      await p.waitForSelector("#fork-answer-note");
      assert.equal(await p.$("#fork-answer"), null, "a later call offers the first call's answer");
      await p.goto(`${tokenBase}/#/run/${captured}/span/${chat.span_id}`);
      await p.waitForFunction((want) => (document.querySelector("#span-ids") || {}).textContent?.includes("span " + want), chat.span_id);
      await p.waitForSelector("#fork-open");
      await p.click("#fork-open");
      await p.waitForSelector("#fork-answer");
      assert.equal(await p.inputValue("#fork-task"), "Implement the login endpoint in login.py.");
      await p.fill("#fork-answer", edited);
      await p.click("#fork-submit");
      // The fork's page, or the form's refusal (said, not waited out): the child `weft fork` of a
      // sanitizer build under a loaded `make test` can take a while to start, hence 90 s.
      await p.waitForFunction((orig) => ((document.querySelector("#fork-error") || {}).textContent || "") !== "" ||
        (/^Run [0-9a-f]+$/.test((document.querySelector("h1") || {}).textContent || "") &&
        document.querySelector("h1").textContent !== "Run " + orig), captured, { timeout: 90000 });
      assert.equal((await p.$("#fork-error")) ? await p.textContent("#fork-error") : "", "", "the fork was refused");
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
if (failures() > 0) {
  console.log(`${failures()} check(s) failed; screenshots in ${artifacts}`);
  process.exit(1);
}
console.log("all explorer checks passed; screenshots in " + artifacts);
