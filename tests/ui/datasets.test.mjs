// tests/ui/datasets.test.mjs - the explorer's Datasets and Experiments pages in a real browser:
// Debian's chromium driven by playwright-core, against `weft serve` this test starts over a
// store it makes with the weft binary as docs/experiments.md's walk does (examples/support_triage:
// 30 runs, a dataset of the failed ones and one of all, an experiment of the workflow, one of
// its fix and a --from-failure one).
//
// Checks: #/datasets lists them with the API's versions and items; a dataset's page shows its
// items (input, source run linked to its page, failing step) and the experiments over it;
// #/experiments lists the experiments with pass rate and from-failure; an experiment's page
// shows its summary and per-item status (icon and word), scores with evaluator and explanation,
// run links; two experiments ticked (one by the keyboard) open their comparison, whose counts are
// the API's and whose changed items come first; one click on an item lands on #/compare/A_RUN/B_RUN
// with both runs; a run page offers "Add to dataset" only with the token, adds to an existing
// dataset and to a new one and says the version made (then on #/datasets), and shows the
// server's error for a bad name; the dark palette colours a passed item; no page logs a console
// error. Screenshots in $WEFT_UI_ARTIFACTS (default ./ui-artifacts).
//
// Usage: WEFT_BIN=build/weft node tests/ui/datasets.test.mjs
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { checker, startServe } from "./support.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const weft = path.resolve(process.env.WEFT_BIN || path.join(root, "build/weft"));
const chromiumPath = process.env.WEFT_CHROMIUM || "/usr/bin/chromium";
const artifacts = path.resolve(process.env.WEFT_UI_ARTIFACTS || "ui-artifacts");
const home = fs.mkdtempSync(path.join(os.tmpdir(), "weft-ui-ds-"));
const env = { ...process.env, WEFT_HOME: home };
delete env.WEFT_STATE_URL;
delete env.WEFT_EXECUTOR;
delete env.WEFT_SERVE_TOKEN;
const example = path.join(root, "examples/support_triage");

function run(args, expectOk = true) {
  const r = spawnSync(weft, args, { env, encoding: "utf8", cwd: home });
  if (expectOk && r.status !== 0) throw new Error(`weft ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
  return r;
}
function json(args) { return JSON.parse(run([...args, "--json"]).stdout); }

// The store, as docs/experiments.md's walk makes it.
for (const line of fs.readFileSync(path.join(example, "tickets.jsonl"), "utf8").split("\n")) {
  if (line.trim()) run(["run", path.join(example, "workflow.json"), "--input", JSON.parse(line).input, "-q"], false);
}
run(["dataset", "create", "refunds", "--from-runs", "--workflow", "support-triage", "--status", "failed"]);
run(["dataset", "create", "tickets", "--from-runs", "--workflow", "support-triage"]);
run(["eval", path.join(example, "workflow_fixed.json"), "--dataset", "refunds", "--from-failure", "--name", "refix", "-q"]);
run(["eval", path.join(example, "workflow.json"), "--dataset", "tickets", "--name", "before", "-q"]);
run(["eval", path.join(example, "workflow_fixed.json"), "--dataset", "tickets", "--name", "after", "-q"]);
const before = json(["eval", "show", "before"]);
const after = json(["eval", "show", "after"]);
const refunds = json(["dataset", "show", "refunds"]);
// A completed run of the original 30 that is not in refunds: the one to add.
const toAdd = json(["runs", "--limit", "200"]).runs.find((r) => r.status === "completed" && !refunds.items.some((it) => it.run_id === r.run_id)).run_id;

const token = "ui-datasets-token-0123456789";
const [tokenServe, baseP] = startServe(weft, env, home, { WEFT_SERVE_TOKEN: token });
const [plainServe, plainP] = startServe(weft, env, home, {});
const base = await baseP;
const plain = await plainP;
const auth = { headers: { Authorization: "Bearer " + token } };
async function apiGet(p) { return (await fetch(base + p, auth)).json(); }

fs.mkdirSync(artifacts, { recursive: true });
const browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox", "--disable-gpu"] });
const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
const page = await ctx.newPage();
const consoleErrors = [];
page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
page.on("pageerror", (e) => consoleErrors.push(e.message));

const { check, failures } = checker(page, artifacts, "datasets-");
const h1Is = (text) => page.waitForFunction((want) => (document.querySelector("h1") || {}).textContent === want, text);

try {
  await page.goto(`${base}/?token=${token}`); // the login cookie, as a user opens it
  await page.waitForSelector("#runs tbody tr");

  await check("datasets list", async () => {
    await page.click("#nav-datasets");
    await page.waitForSelector("#datasets tbody tr");
    const want = (await apiGet("/api/v1/datasets")).datasets;
    const rows = await page.$$eval("#datasets tbody tr", (trs) => trs.map((tr) => ({
      name: tr.getAttribute("data-dataset"), version: tr.querySelector(".ds-version").textContent, items: tr.querySelector(".ds-items").textContent })));
    assert.deepEqual(rows, want.map((d) => ({ name: d.name, version: String(d.version), items: String(d.items) })));
  });

  await check("a dataset: items with their source runs and failing steps, its experiments", async () => {
    await page.click('#datasets tr[data-dataset="refunds"] a');
    await h1Is("Dataset refunds");
    await page.waitForSelector("#dataset-items tbody tr");
    const rows = await page.$$eval("#dataset-items tbody tr", (trs) => trs.map((tr) => ({
      id: tr.getAttribute("data-item"), run: tr.querySelector("a.item-run").getAttribute("href"), step: tr.querySelector(".fail-step").textContent,
      input: tr.querySelector(".ds-input").textContent })));
    assert.deepEqual(rows, refunds.items.map((it) => ({ id: it.id, run: "#/run/" + it.run_id, step: it.fail_step, input: it.input })));
    const exps = await page.$$eval("#dataset-experiments tbody tr", (trs) => trs.map((tr) => tr.getAttribute("data-experiment")));
    assert.deepEqual(exps, [json(["eval", "show", "refix"]).id]);
    // The source run opens its page.
    await page.click(`#dataset-items a.item-run[data-run="${refunds.items[0].run_id}"]`);
    await h1Is("Run " + refunds.items[0].run_id);
  });

  await check("experiments list", async () => {
    await page.click("#nav-experiments");
    await page.waitForSelector("#experiments tbody tr");
    const want = (await apiGet("/api/v1/experiments")).experiments;
    const rows = await page.$$eval("#experiments tbody tr", (trs) => trs.map((tr) => tr.getAttribute("data-experiment")));
    assert.deepEqual(rows, want.map((x) => x.id));
    const rate = await page.textContent(`#experiments tr[data-experiment="${before.id}"] .pass-rate`);
    assert.equal(rate, (100 * before.summary.pass_rate).toFixed(1) + "%");
    assert.match(await page.textContent(`#experiments tr[data-experiment="${json(["eval", "show", "refix"]).id}"]`), /yes/);
  });

  await check("an experiment: summary, item statuses with icons, a score's explanation", async () => {
    await page.click(`#experiments tr[data-experiment="${before.id}"] a.exp-link`);
    await h1Is("Experiment before");
    await page.waitForSelector("#exp-items tbody tr");
    assert.equal(await page.textContent("#exp-pass-rate b"), (100 * before.summary.pass_rate).toFixed(1) + "%");
    const failed = before.items.find((it) => it.status === "failed");
    const row = `#exp-items tr[data-item="${failed.item_id}"]`;
    assert.equal((await page.textContent(`${row} .status`)).trim(), "✕ failed");
    const score = failed.scores[0];
    assert.equal(await page.textContent(`${row} .score[data-evaluator="${score.evaluator}"] .explanation`), " — " + score.explanation);
    assert.equal(await page.getAttribute(`${row} a.item-run`, "href"), "#/run/" + failed.run_id);
    // Not passed first.
    const first = await page.$eval("#exp-items tbody tr", (tr) => tr.querySelector(".status").getAttribute("data-status"));
    assert.notEqual(first, "passed");
    assert.equal(await page.$$eval("#exp-items tbody tr", (trs) => trs.length), before.items.length);
  });

  await check("tick two experiments, compare, one click to the runs compared", async () => {
    await page.click("#nav-experiments");
    await page.waitForSelector(`#experiments input.tick[data-experiment="${after.id}"]`);
    assert.equal(await page.isDisabled("#compare-experiments"), true);
    await page.check(`#experiments input.tick[data-experiment="${after.id}"]`);
    // The second by the keyboard: focus its box, Space.
    await page.focus(`#experiments input.tick[data-experiment="${before.id}"]`);
    await page.keyboard.press("Space");
    await page.waitForFunction(() => !document.getElementById("compare-experiments").disabled);
    await page.click("#compare-experiments");
    await page.waitForSelector("#cmp-items tbody tr");
    assert.equal(new URL(page.url()).hash, `#/experiments/compare/${before.id}/${after.id}`); // the older is A
    const c = await apiGet(`/api/v1/experiments/compare?a=${before.id}&b=${after.id}`);
    assert.equal(await page.textContent("#cmp-fixed b"), String(c.counts.fixed));
    assert.equal(await page.textContent("#cmp-broken b"), String(c.counts.broken));
    assert.equal(await page.textContent("#cmp-unchanged b"), String(c.counts.unchanged));
    const order = await page.$$eval("#cmp-items tbody tr", (trs) => trs.map((tr) => tr.getAttribute("data-item")));
    assert.deepEqual(order, c.items.map((it) => it.item_id));
    const fixed = c.items.find((it) => it.change === "fixed");
    assert.ok(fixed, "no fixed item to open");
    assert.equal(c.items.indexOf(fixed) < c.items.findIndex((it) => it.change === "unchanged"), true, "a changed item after an unchanged one");
    await page.screenshot({ path: path.join(artifacts, "datasets-experiments-compare.png"), fullPage: true });
    await page.click(`#cmp-items tr[data-item="${fixed.item_id}"] td.change`);
    await page.waitForSelector(`#compare-runs a.cmp-run[data-run="${fixed.a_run_id}"] ~ a.cmp-run[data-run="${fixed.b_run_id}"]`);
    assert.equal(new URL(page.url()).hash, `#/compare/${fixed.a_run_id}/${fixed.b_run_id}`);
    await page.waitForSelector("#compare-steps tbody tr.step-row");
  });

  await check("add to dataset from a run page (token), then on #/datasets", async () => {
    await page.goto(`${base}/#/run/${toAdd}`);
    await h1Is("Run " + toAdd);
    await page.waitForSelector("#add-dataset-open");
    await page.focus("#add-dataset-open");
    await page.keyboard.press("Enter");
    await page.waitForSelector("#add-dataset-form:not([hidden])");
    await page.selectOption("#add-dataset-pick", "refunds");
    await page.click("#add-dataset-submit");
    await page.waitForFunction(() => /Added to/.test(document.getElementById("add-dataset-result").textContent));
    assert.match(await page.textContent("#add-dataset-result"), new RegExp(`^Added to refunds, version ${refunds.version + 1}`));
    // A bad name: the server's sentence.
    await page.selectOption("#add-dataset-pick", { label: "a new dataset…" });
    await page.fill("#add-dataset-name", "bad name");
    const seen = consoleErrors.length;
    await page.click("#add-dataset-submit");
    await page.waitForFunction(() => document.getElementById("add-dataset-error").textContent !== "");
    assert.match(await page.textContent("#add-dataset-error"), /Could not add: dataset name 'bad name'/);
    // The browser logs the 400 itself; that one is expected here.
    const extra = consoleErrors.splice(seen);
    assert.ok(extra.every((m) => /400/.test(m)), "unexpected: " + extra);
    // A new one.
    await page.fill("#add-dataset-name", "picked-by-hand");
    await page.click("#add-dataset-submit");
    await page.waitForFunction(() => /Added to picked-by-hand, version 1/.test(document.getElementById("add-dataset-result").textContent));
    assert.equal(await page.textContent("#add-dataset-error"), "");
    await page.click("#nav-datasets");
    await page.waitForSelector('#datasets tr[data-dataset="picked-by-hand"]');
    assert.equal(await page.textContent('#datasets tr[data-dataset="refunds"] .ds-version'), String(refunds.version + 1));
    assert.equal(await page.textContent('#datasets tr[data-dataset="picked-by-hand"] .ds-items'), "1");
    const ds = json(["dataset", "show", "refunds"]);
    assert.ok(ds.items.some((it) => it.run_id === toAdd), "weft dataset show does not list the run added");
  });

  await check("no add to dataset without the token", async () => {
    const p = await browser.newPage();
    try {
      await p.goto(`${plain}/#/run/${toAdd}`);
      await p.waitForFunction((want) => (document.querySelector("h1") || {}).textContent === "Run " + want, toAdd);
      await p.waitForSelector("#add-dataset-box", { state: "attached" });
      await p.waitForTimeout(500); // the session's answer
      assert.equal(await p.$("#add-dataset-open"), null);
      const r = await fetch(`${plain}/api/v1/datasets/refunds/items`, { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ run_id: toAdd }) });
      assert.equal(r.status, 403);
    } finally {
      await p.close();
    }
  });

  await check("dark palette: a passed item in the dark green", async () => {
    await page.evaluate(() => localStorage.setItem("weft.theme", "dark"));
    await page.goto(`${base}/#/experiment/${after.id}`);
    await page.reload();
    await page.waitForSelector("#exp-items .status-passed");
    const color = await page.$eval("#exp-items .status-passed", (e) => getComputedStyle(e).color);
    assert.equal(color, "rgb(74, 222, 128)");
    await page.evaluate(() => localStorage.removeItem("weft.theme"));
  });

  await check("empty states say how to make one", async () => {
    const emptyHome = fs.mkdtempSync(path.join(os.tmpdir(), "weft-ui-ds-empty-"));
    const [proc, urlP] = startServe(weft, env, home, { WEFT_HOME: emptyHome });
    try {
      const url = await urlP;
      const p = await browser.newPage();
      await p.goto(`${url}/#/datasets`);
      await p.waitForSelector("#datasets-empty");
      assert.match(await p.textContent("#datasets-empty"), /weft dataset create NAME --from-runs --status failed/);
      await p.goto(`${url}/#/experiments`);
      await p.waitForSelector("#experiments-empty");
      await p.close();
    } finally {
      proc.kill("SIGTERM");
      fs.rmSync(emptyHome, { recursive: true, force: true });
    }
  });

  await check("no console errors", async () => {
    assert.deepEqual(consoleErrors, []);
  });
} finally {
  await browser.close();
  tokenServe.kill("SIGTERM");
  plainServe.kill("SIGTERM");
  fs.rmSync(home, { recursive: true, force: true });
}
if (failures()) {
  console.log(failures() + " check(s) failed");
  process.exit(1);
}
console.log("all checks passed");
