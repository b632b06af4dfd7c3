/* dashboards/ui/src/compare.js - two runs side by side (#/compare/A/B), weft.compare/v1.
 *
 * What differed around the runs comes first, since it explains what differed in them: their
 * inputs and their workflows (hash, and a diff of the documents each run's snapshot kept), with
 * a warning when either differs. Then the steps: a fork's reused steps marked, time coloured
 * only above the noise, each step's result diff one Enter (or click) away. */
import { api, dur, el, short, show, when } from "./dom.js";

function tokens(side) { return side ? (side.input_tokens || 0) + (side.output_tokens || 0) : "–"; }

/* A duration's change is coloured only above the noise: at least DELTA_MIN_NS and
 * DELTA_MIN_SHARE of the longer of the two (a scripted step's ±4 µs is noise). */
const DELTA_MIN_NS = 1e6;
const DELTA_MIN_SHARE = 0.2;
function deltaClass(da, db) {
  if (da == null || db == null) return "";
  const d = db - da;
  if (Math.abs(d) < DELTA_MIN_NS || Math.abs(d) < DELTA_MIN_SHARE * Math.max(da, db)) return "delta-noise";
  return d > 0 ? "delta-pos" : "delta-neg";
}

/* A line diff ([{op, line}]) as lines marked by colour and by a text marker ("+", "−", two
 * spaces for an unchanged line); runs of more than 2 * CONTEXT + 1 unchanged lines are cut to
 * CONTEXT lines each side and "… N unchanged lines". */
const CONTEXT = 3;
const MARK = { "-": "−", "+": "+", "=": " " };
export function diffBlock(lines, attrs) {
  const out = [];
  const line = (d) => el("div", { class: d.op === "-" ? "del" : d.op === "+" ? "add" : "same", "data-op": d.op },
    el("span", { class: "mark", "aria-label": d.op === "-" ? "removed" : d.op === "+" ? "added" : "unchanged" }, MARK[d.op] || " "),
    " " + d.line);
  for (let i = 0; i < lines.length;) {
    if (lines[i].op !== "=") { out.push(line(lines[i++])); continue; }
    let j = i;
    while (j < lines.length && lines[j].op === "=") j++;
    const head = i === 0 ? 0 : CONTEXT, tail = j === lines.length ? 0 : CONTEXT;
    if (j - i > head + tail + 1) {
      for (let k = i; k < i + head; k++) out.push(line(lines[k]));
      out.push(el("div", { class: "gap muted" }, "… " + (j - i - head - tail) + " unchanged lines"));
      for (let k = j - tail; k < j; k++) out.push(line(lines[k]));
    } else {
      for (let k = i; k < j; k++) out.push(line(lines[k]));
    }
    i = j;
  }
  return el("div", Object.assign({ class: "diff" }, attrs || {}), out);
}

/* A side's time: "reused" for a step a fork took from its original (it did not run). */
function timeCell(side) {
  if (side && side.reused) return el("td", { class: "reused", title: "reused from the original run: it did not run again" }, "reused");
  return el("td", {}, dur(side && side.duration_ns));
}

function statusCell(side) {
  if (!side) return el("td", { class: "status" }, "absent");
  return el("td", { class: "status status-" + side.status }, side.status, side.reused ? el("span", { class: "muted" }, " · reused") : null);
}

/* The inputs and workflows: shown side by side, diffed when they differ, with the warning. */
function context(c) {
  const inputs = c.inputs || { same: true, diff: [] };
  const wfs = c.workflows || { same: null, a: {}, b: {}, diff: [] };
  const differ = [];
  if (inputs.same === false) differ.push("inputs");
  if (wfs.same === false || (wfs.same === null && c.a.workflow !== c.b.workflow)) differ.push("workflows");
  const side = (w) => w && w.hash ? [w.name || "?", " ", el("code", { class: "hash" }, w.hash)]
    : [(w && w.name) || "?", el("span", { class: "muted" }, " (no hash kept: a run from before weft kept them)")];
  const text = (v) => v === null || v === undefined ? el("span", { class: "muted" }, "(no input)") : el("pre", { class: "input" }, v);
  return [
    differ.length
      ? el("p", { id: "compare-warning", class: "warn-box", role: "alert" }, el("b", {}, "⚠ "),
        "These runs had different " + differ.join(" and ") + ": differences below may come from that.")
      : el("p", { id: "compare-same", class: "muted" }, "Same input and same workflow (hash): the differences below come from the runs themselves."),
    el("table", { id: "compare-context", class: "context" },
      el("thead", {}, el("tr", {}, el("th", {}, ""), el("th", {}, "A"), el("th", {}, "B"), el("th", {}, ""))),
      el("tbody", {},
        el("tr", { "data-what": "input", class: inputs.same === false ? "differs" : "" }, el("th", {}, "input"),
          el("td", {}, text(inputs.a)), el("td", {}, text(inputs.b)), el("td", {}, inputs.same === false ? "different" : "same")),
        el("tr", { "data-what": "workflow", class: differ.includes("workflows") ? "differs" : "" }, el("th", {}, "workflow"),
          el("td", {}, side(wfs.a)), el("td", {}, side(wfs.b)),
          el("td", {}, wfs.same === false ? "different" : wfs.same === true ? "same" : "unknown")))),
    inputs.same === false && (inputs.diff || []).length
      ? [el("h3", {}, "Input diff"), diffBlock(inputs.diff, { id: "input-diff" })] : null,
    wfs.same === false
      ? ((wfs.diff || []).length
        ? el("details", { id: "workflow-diff-box", open: true }, el("summary", {}, "Workflow diff (the documents each run was started with)"),
          diffBlock(wfs.diff, { id: "workflow-diff" }))
        : el("p", { class: "muted", id: "workflow-diff-none" }, "The workflows' hashes differ, but a run kept no copy of its document (an older run, or one over the snapshot's bounds): compare the files by hand."))
      : null,
  ];
}

/* One step's row, and under it its result diff (hidden until opened by Enter, a click or its
 * button). */
function stepRows(s, first) {
  const da = s.a && !s.a.reused ? s.a.duration_ns : null, db = s.b && !s.b.reused ? s.b.duration_ns : null;
  const delta = da != null && db != null ? db - da : null;
  const hasDiff = (s.result_diff || []).length > 0;
  const detailId = "result-diff-" + s.id.replace(/[^A-Za-z0-9_-]/g, "_");
  const detail = el("tr", { class: "result-diff-row", "data-diff-step": s.id, hidden: true },
    el("td", { colspan: 10 }, hasDiff ? diffBlock(s.result_diff, { id: detailId, class: "diff result-diff" })
      : el("p", { class: "muted" }, "Same result in both runs.")));
  const toggle = el("button", { class: "diff-toggle", "aria-expanded": "false", "aria-controls": detailId, tabindex: -1,
    title: "show the line diff of this step's result A → B" }, hasDiff ? "▸ result diff" : "▸ same result");
  const open = (on) => {
    detail.hidden = !on;
    toggle.setAttribute("aria-expanded", String(on));
    toggle.textContent = (on ? "▾ " : "▸ ") + (hasDiff ? "result diff" : "same result");
    row.setAttribute("aria-expanded", String(on));
  };
  const flip = () => open(detail.hidden);
  toggle.addEventListener("click", (e) => { e.stopPropagation(); flip(); });
  const reusedDelta = (s.a && s.a.reused) || (s.b && s.b.reused);
  const row = el("tr", { class: "clickable step-row" + (s.id === first ? " diverge" : ""), "data-step": s.id, tabindex: 0,
    "aria-expanded": "false", title: "Enter or click: the step's result diff",
    onclick: flip,
    onkeydown: (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); flip(); }
      else if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        const rows = [...row.parentNode.querySelectorAll("tr.step-row")];
        const next = rows[rows.indexOf(row) + (e.key === "ArrowDown" ? 1 : -1)];
        if (next) next.focus();
      }
    } },
    el("td", {}, s.id), el("td", {}, s.a ? s.a.agent : s.b ? s.b.agent : "–"),
    statusCell(s.a), statusCell(s.b), timeCell(s.a), timeCell(s.b),
    el("td", { class: "delta " + deltaClass(da, db), "data-delta-ns": delta == null ? "" : delta },
      delta == null ? (reusedDelta ? "reused" : "–") : (delta > 0 ? "+" : delta < 0 ? "−" : "") + dur(Math.abs(delta))),
    el("td", {}, tokens(s.a) + " → " + tokens(s.b)),
    el("td", {}, s.changed.join(", ")),
    el("td", {}, toggle));
  return [row, detail];
}

export async function viewCompare(a, b) {
  let c;
  try {
    c = await api("/api/v1/compare?a=" + encodeURIComponent(a) + "&b=" + encodeURIComponent(b));
  } catch (err) {
    const missing = /no such run|not found|404/i.test(err.message);
    show(el("h1", {}, "Compare"), el("div", { class: "empty", id: "error-box" },
      el("p", { class: "status-failed", id: "error" }, "Cannot compare " + short(a) + " with " + short(b) + ": " + err.message),
      el("p", { id: "error-hint" }, missing
        ? "Pick two runs instead: tick two in the runs list and press \"Compare the two ticked\", or open a run and type in its \"Compare with\" box."
        : "Reload the page; if it persists, check that `weft serve` is running."),
      el("p", {}, el("a", { href: "#/runs" }, "← back to the runs"))));
    return;
  }
  const first = c.first_divergence ? c.first_divergence.step : null;
  const runLink = (label, r) => el("a", { href: "#/run/" + r.run_id, class: "cmp-run", "data-run": r.run_id },
    label + " " + short(r.run_id) + " (" + r.status + ", " + (r.workflow || "?") + ", " + when(r.started) + ")");
  const reused = c.steps.filter((s) => (s.a && s.a.reused) || (s.b && s.b.reused)).length;
  show(el("h1", {}, "Compare"),
    el("p", { id: "compare-runs" }, runLink("A", c.a), " vs ", runLink("B", c.b)),
    el("h2", {}, "Input and workflow"), ...context(c).flat().filter((n) => n),
    el("h2", {}, "Steps"),
    el("p", { id: "first-divergence" }, first ? "First divergence: step " + first + " (" + c.first_divergence.changed.join(", ") + ")" : "No divergence: the runs did the same."),
    reused ? el("p", { class: "muted", id: "reused-note" }, reused + " step" + (reused === 1 ? "" : "s") + " reused from the original (a fork's steps before its fork point did not run again: no time).") : null,
    el("p", { class: "muted" }, "Tab to a step and press Enter (or click it) for the line diff of its result; Δ time is coloured only above 1 ms and 20 % of the longer."),
    el("table", { id: "compare-steps" }, el("thead", {}, el("tr", {}, ["step", "agent", "A", "B", "A time", "B time", "Δ time", "tokens A → B", "changed", "result"].map((h) => el("th", {}, h)))),
      el("tbody", {}, c.steps.flatMap((s) => stepRows(s, first)))),
    el("h2", {}, "Final output"), diffBlock(c.output_diff || [], { id: "output-diff" }));
}
