/* dashboards/ui/src/experiments.js - the experiments (#/experiments, weft.experiments/v1), one
 * experiment's items (#/experiment/REF, weft.experiment/v1) and two side by side
 * (#/experiments/compare/A/B, weft.experiment_compare/v1, A the baseline): the documents
 * `weft eval list|show|compare --json` print. An item of the comparison opens its two runs in
 * the run compare view (#/compare/A_RUN/B_RUN) with one click. */
import { api, attrText, dur, el, money, pct, short, show, whenNs } from "./dom.js";

/* An item's status with an icon, so that it reads without its colour too. */
const ITEM_ICON = { passed: "✓", failed: "✕", errored: "!", running: "○" };
const CHANGE_ICON = { fixed: "▲", broken: "▼", unchanged: "=", added: "+", removed: "−" };
function itemStatus(st) {
  return el("span", { class: "status status-" + (st || "absent"), "data-status": st || "" },
    el("span", { class: "st-icon", "aria-hidden": "true" }, ITEM_ICON[st] || "·"), " ", st || "absent");
}
function expLink(x) {
  return el("a", { href: "#/experiment/" + encodeURIComponent(x.id), class: "exp-link", "data-experiment": x.id }, x.name || short(x.id));
}
function card(k, v, attrs) {
  return el("div", Object.assign({ class: "card" }, attrs || {}), el("span", { class: "muted" }, k), el("b", {}, v));
}

export async function viewExperiments() {
  const doc = await api("/api/v1/experiments");
  const ticked = new Map();
  const compareBtn = el("button", { id: "compare-experiments", class: "primary", disabled: true, onclick: () => {
    if (ticked.size !== 2) return;
    /* The older is the baseline (A). */
    const [x, y] = [...ticked.values()].sort((p, q) => (p.started_ns || 0) - (q.started_ns || 0));
    location.hash = "#/experiments/compare/" + encodeURIComponent(x.id) + "/" + encodeURIComponent(y.id);
  } }, "Compare the two ticked");
  const note = el("span", { class: "muted", id: "experiments-ticked", "aria-live": "polite" }, "Tick two experiments to compare them (the older is the baseline).");
  const onTick = (x, on) => {
    if (on) ticked.set(x.id, x); else ticked.delete(x.id);
    compareBtn.disabled = ticked.size !== 2;
    note.textContent = ticked.size === 2 ? "2 ticked: ready to compare." : ticked.size > 2 ? ticked.size + " ticked: untick all but two." : ticked.size + " of 2 ticked.";
  };
  const row = (x) => {
    const s = x.summary || {};
    return el("tr", { class: "clickable", "data-experiment": x.id, onclick: () => { location.hash = "#/experiment/" + encodeURIComponent(x.id); } },
      el("td", { class: "tick" }, el("input", { type: "checkbox", class: "tick", "data-experiment": x.id,
        "aria-label": "tick experiment " + (x.name || x.id) + " to compare", onclick: (e) => e.stopPropagation(),
        onchange: (e) => onTick(x, e.target.checked) })),
      el("td", {}, expLink(x)),
      el("td", {}, el("a", { href: "#/dataset/" + encodeURIComponent(x.dataset) + "@" + x.dataset_version, onclick: (e) => e.stopPropagation() }, x.dataset + "@" + x.dataset_version)),
      el("td", {}, x.workflow || "–"),
      el("td", { class: "status status-" + x.status }, x.status),
      el("td", { class: "pass-rate" }, pct(s.pass_rate)),
      el("td", {}, s.items ?? "–"),
      el("td", {}, money(s.cost_usd ?? 0)),
      el("td", {}, s.tokens ?? "–"),
      el("td", {}, x.from_failure ? "yes" : el("span", { class: "muted" }, "no")),
      el("td", {}, whenNs(x.started_ns)));
  };
  show(el("h1", {}, "Experiments"),
    el("p", { class: "muted" }, "A workflow run over one version of a ", el("a", { href: "#/datasets" }, "dataset"), ": each item's run, status and scores."),
    ...(doc.experiments.length
      ? [el("div", { class: "runs-actions" }, compareBtn, note),
        el("table", { id: "experiments" },
          el("thead", {}, el("tr", {}, el("th", { class: "tick" }, el("span", { class: "muted", title: "tick two experiments to compare them" }, "☐")),
            ["name", "dataset", "workflow", "status", "pass rate", "items", "cost", "tokens", "from failure", "started"].map((h) => el("th", {}, h)))),
          el("tbody", {}, doc.experiments.map(row)))]
      : [el("p", { class: "empty", id: "experiments-empty" }, "No experiments yet: run a workflow over a dataset with ",
        el("code", {}, "weft eval WORKFLOW --dataset NAME"), " (docs/experiments.md).")]));
}

/* One score: evaluator, value, passed or not, and why. */
function scoreView(s) {
  const ok = s.passed === true;
  return el("div", { class: "score", "data-evaluator": s.evaluator || "" },
    el("span", { class: "st-icon " + (ok ? "st-ok" : "st-error"), "aria-label": ok ? "passed" : "failed" }, ok ? "✓" : "✕"), " ",
    el("b", {}, s.evaluator || "?"), " ", typeof s.value === "number" ? s.value.toFixed(2) : attrText(s.value),
    s.explanation ? el("span", { class: "explanation" }, " — " + s.explanation) : null);
}

export async function viewExperiment(ref) {
  const x = await api("/api/v1/experiments/" + encodeURIComponent(ref));
  const s = x.summary || {};
  /* The items' inputs come from the dataset version it ran (may be gone: dropped since). */
  const ds = await api("/api/v1/datasets/" + encodeURIComponent(x.dataset) + "?version=" + x.dataset_version).catch(() => null);
  const inputs = new Map(((ds && ds.items) || []).map((it) => [it.id, it.input]));
  const others = (await api("/api/v1/experiments?dataset=" + encodeURIComponent(x.dataset)).catch(() => ({ experiments: [] })))
    .experiments.filter((o) => o.id !== x.id);
  const cards = [card("status", x.status, { id: "exp-status" }), card("dataset", x.dataset + "@" + x.dataset_version),
    card("workflow", x.workflow || "–"), card("pass rate", pct(s.pass_rate), { id: "exp-pass-rate" }),
    card("items", (s.items ?? 0) + " (" + (s.passed ?? 0) + " passed, " + (s.failed ?? 0) + " failed, " + (s.errored ?? 0) + " errored)"),
    card("mean reward", typeof s.mean_reward === "number" ? s.mean_reward.toFixed(3) : "–"),
    card("cost", money(s.cost_usd ?? 0)), card("tokens", s.tokens ?? "–"), card("LLM calls", s.llm_calls ?? "–"),
    card("duration", dur(s.duration_ns)), card("started", whenNs(x.started_ns))];
  if (x.from_failure) {
    cards.push(card("from failure", (s.forked ?? 0) + " forked at their failing step", { id: "exp-forked" }),
      card("saved", (s.saved_llm_calls ?? 0) + " LLM calls, " + (s.saved_tokens ?? 0) + " tokens"));
  }
  const items = x.items || [];
  const row = (it) => el("tr", { "data-item": it.item_id, class: "exp-item status-row-" + it.status },
    el("td", {}, itemStatus(it.status)),
    el("td", { title: it.item_id }, short(it.item_id), inputs.has(it.item_id) ? el("div", { class: "muted item-input" }, attrText(inputs.get(it.item_id))) : null),
    el("td", { class: "scores" }, (it.scores || []).length ? (it.scores || []).map(scoreView) : el("span", { class: "muted" }, "–"),
      it.error ? el("div", { class: "status-failed item-error" }, it.error) : null),
    el("td", {}, it.tokens), el("td", {}, money(it.cost_usd || 0)), el("td", {}, dur(it.duration_ns)),
    el("td", {}, it.run_id ? el("a", { href: "#/run/" + encodeURIComponent(it.run_id), class: "item-run", "data-run": it.run_id }, short(it.run_id)) : el("span", { class: "muted" }, "–")));
  /* Not passed first: what needs a look. */
  const order = { errored: 0, failed: 1, running: 2, passed: 3 };
  const sorted = items.slice().sort((p, q) => (order[p.status] ?? 2) - (order[q.status] ?? 2));
  show(el("h1", {}, "Experiment " + (x.name || short(x.id))),
    el("p", { class: "muted", id: "exp-id" }, x.id, " · over ", el("a", { href: "#/dataset/" + encodeURIComponent(x.dataset) + "@" + x.dataset_version, id: "exp-dataset" }, "dataset " + x.dataset + "@" + x.dataset_version)),
    el("div", { class: "cards", id: "exp-summary" }, cards),
    others.length ? el("p", { id: "exp-compare-with" }, "Compare with: ", others.slice(0, 8).flatMap((o, i) => [i ? ", " : "",
      el("a", { href: "#/experiments/compare/" + encodeURIComponent((o.started_ns || 0) < (x.started_ns || 0) ? o.id : x.id) + "/" +
        encodeURIComponent((o.started_ns || 0) < (x.started_ns || 0) ? x.id : o.id), "data-experiment": o.id }, o.name || short(o.id))])) : null,
    el("h2", {}, "Items (" + items.length + ", not passed first)"),
    items.length
      ? el("table", { id: "exp-items" }, el("thead", {}, el("tr", {}, ["status", "item", "scores", "tokens", "cost", "duration", "run"].map((h) => el("th", {}, h)))),
        el("tbody", {}, sorted.map(row)))
      : el("p", { class: "empty" }, "No item has a result yet."),
    el("p", {}, el("a", { href: "#/experiments" }, "← all experiments")));
}

function delta(v, fmt, lowerIsBetter) {
  if (typeof v !== "number") return "–";
  const cls = v === 0 ? "delta-noise" : (v > 0) === lowerIsBetter ? "delta-pos" : "delta-neg";
  return el("span", { class: cls }, (v > 0 ? "+" : v < 0 ? "−" : "±") + fmt(Math.abs(v)));
}

export async function viewExperimentCompare(a, b) {
  const c = await api("/api/v1/experiments/compare?a=" + encodeURIComponent(a) + "&b=" + encodeURIComponent(b));
  const n = c.counts || {};
  const d = c.deltas || {};
  const cardsList = [card("fixed", n.fixed ?? 0, { id: "cmp-fixed", class: "card change-fixed" }),
    card("broken", n.broken ?? 0, { id: "cmp-broken", class: "card change-broken" }), card("unchanged", n.unchanged ?? 0, { id: "cmp-unchanged" })];
  if (n.added !== undefined || n.removed !== undefined) cardsList.push(card("added", n.added ?? 0), card("removed", n.removed ?? 0));
  const row = (it) => {
    const both = it.a_run_id && it.b_run_id;
    const href = both ? "#/compare/" + encodeURIComponent(it.a_run_id) + "/" + encodeURIComponent(it.b_run_id) : null;
    return el("tr", { class: "cmp-item change-row-" + it.change + (both ? " clickable" : ""), "data-item": it.item_id,
      onclick: both ? () => { location.hash = href; } : null },
      el("td", { class: "change change-" + it.change }, el("span", { class: "st-icon", "aria-hidden": "true" }, CHANGE_ICON[it.change] || "·"), " ", it.change),
      el("td", { title: it.item_id }, short(it.item_id)),
      el("td", {}, itemStatus(it.a_status)), el("td", {}, itemStatus(it.b_status)),
      el("td", {}, it.a_run_id ? el("a", { href: "#/run/" + encodeURIComponent(it.a_run_id), onclick: (e) => e.stopPropagation() }, short(it.a_run_id)) : "–"),
      el("td", {}, it.b_run_id ? el("a", { href: "#/run/" + encodeURIComponent(it.b_run_id), onclick: (e) => e.stopPropagation() }, short(it.b_run_id)) : "–"),
      el("td", {}, href ? el("a", { href, class: "item-compare", "data-a-run": it.a_run_id, "data-b-run": it.b_run_id,
        "aria-label": "compare the runs of item " + short(it.item_id) + ": baseline A against B", onclick: (e) => e.stopPropagation() }, "compare runs →")
        : el("span", { class: "muted" }, "one side only")));
  };
  show(el("h1", {}, "Compare experiments"),
    el("p", { id: "cmp-experiments" }, "A (baseline) ", expLink(c.a), " · ", c.a.dataset + "@" + c.a.dataset_version, " · ", pct((c.a.summary || {}).pass_rate),
      "  vs  B ", expLink(c.b), " · ", c.b.dataset + "@" + c.b.dataset_version, " · ", pct((c.b.summary || {}).pass_rate)),
    c.a.dataset !== c.b.dataset || c.a.dataset_version !== c.b.dataset_version
      ? el("p", { class: "warn-box", role: "alert", id: "cmp-datasets-differ" }, el("b", {}, "⚠ "), "These experiments ran different datasets or versions: items are matched by id, some are in one only.")
      : null,
    el("div", { class: "cards", id: "cmp-counts" }, cardsList),
    el("div", { class: "cards", id: "cmp-deltas" },
      card("Δ pass rate", delta(d.pass_rate, (v) => (100 * v).toFixed(1) + " pts", false)),
      card("Δ mean reward", delta(d.mean_reward, (v) => v.toFixed(3), false)),
      card("Δ cost", delta(d.cost_usd, (v) => money(v), true)),
      card("Δ tokens", delta(d.tokens, (v) => String(v), true)),
      card("Δ duration", delta(d.duration_ns, (v) => dur(v), true)),
      card("Δ loops", delta(d.loops, (v) => String(v), true))),
    el("h2", {}, "Items, changed first"),
    el("p", { class: "muted" }, "Click an item (or Tab to its \"compare runs\" link) to open its two runs side by side, the baseline's as A."),
    el("table", { id: "cmp-items" }, el("thead", {}, el("tr", {}, ["change", "item", "A", "B", "A run", "B run", ""].map((h) => el("th", {}, h)))),
      el("tbody", {}, (c.items || []).map(row))),
    el("p", {}, el("a", { href: "#/experiments" }, "← all experiments")));
}
