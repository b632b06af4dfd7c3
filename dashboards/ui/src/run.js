/* dashboards/ui/src/run.js - a run's page (#/run/ID), why it failed, and a trace's page (#/trace/ID). */
import { api, attrText, dur, el, fail, loopCount, short, show, when } from "./dom.js";
import { fitPlan, planGraph } from "./plan.js";
import { firstRows, waterfall } from "./waterfall.js";
import { ui } from "./state.js";
import { addToDatasetBox } from "./add_dataset.js";

export async function viewRun(ref, spanId) {
  const doc = await api("/api/v1/runs/" + encodeURIComponent(ref));
  const r = doc.run;
  const cards = el("div", { class: "cards" },
    [["status", r.status], ["workflow", r.workflow], ["duration", dur(r.duration_ns)], ["steps", r.step_count],
      ["tokens", (r.input_tokens || 0) + " / " + (r.output_tokens || 0)], ["cost", "$" + (r.cost_usd || 0).toFixed(4)],
      ["reward", (r.reward || 0).toFixed(2)], ["loops", loopCount(r.loops)], ["stuck loops", (r.loops && r.loops.stuck) || 0],
      ["corrections", r.corrections]]
      .map(([k, v]) => el("div", { class: "card" }, el("span", { class: "muted" }, k), el("b", { class: k === "status" ? "status status-" + v : "" }, v))));
  const whyBox = el("div", { id: "why-box" });
  const detail = el("div", { class: "detail", id: "span-detail" }, el("p", { class: "muted" }, "Select a span: click a row, or move with ↑↓ and press Enter."));
  const parts = [el("h1", {}, "Run " + r.run_id), cards];
  if (r.reason) parts.push(el("p", { id: "run-reason" }, r.reason));
  if ((doc.tool_errors || []).length) {
    /* Failed tool calls by agent and kind, as `weft run show` and /metrics count them. */
    parts.push(el("p", { id: "tool-errors" }, el("b", {}, "Tool errors: "),
      doc.tool_errors.map((e) => e.agent + ": " + e.kind + " ×" + e.count).join(", ")));
  }
  if (r.origin && r.origin.run_id) {
    parts.push(el("p", { id: "origin" }, (r.origin.kind || "copy") + " of ",
      el("a", { href: "#/run/" + r.origin.run_id }, short(r.origin.run_id)),
      r.origin.step ? " from step " + r.origin.step : "", " · ",
      el("a", { id: "compare-origin", href: "#/compare/" + r.origin.run_id + "/" + r.run_id }, "compare with the original")));
  }
  parts.push(el("p", {},
    r.status !== "completed" ? el("button", { class: "primary", id: "why", onclick: () => why(r.run_id, whyBox, wf, doc.steps).catch(fail) }, "Why did it fail?") : null,
    " ", comparePicker(r)));
  parts.push(addToDatasetBox(r));
  parts.push(whyBox, el("h2", {}, "Plan"));
  const plans = [];
  if ((doc.corrections || []).length) {
    const planBefore = planGraph(doc, true);
    plans.push(planBefore);
    parts.push(el("p", { class: "muted" }, "Before correction mode's surgery:"), planBefore, planBefore.legend || null,
      el("p", { class: "muted" }, "After (inserted steps dashed, rewired steps outlined):"));
  }
  const plan = planGraph(doc, false);
  plans.push(plan);
  parts.push(plan, plan.legend || null);
  let wf = null;
  /* A plan node opens its step's span (click, or Enter on the focused node). */
  const openStep = (e) => {
    const g = e.target.closest && e.target.closest("g[data-step]");
    if (g && wf && (e.type === "click" || e.key === "Enter")) wf.findStep(g.getAttribute("data-step")).catch(fail);
  };
  plan.addEventListener("click", openStep);
  plan.addEventListener("keydown", openStep);
  const dropped = r.trace_sampling && !r.trace_sampling.kept;
  if (dropped) {
    parts.push(el("p", { class: "muted", id: "trace-not-kept" },
      "Trace not kept (rule " + r.trace_sampling.rule + "): tail sampling dropped its spans; the run's numbers above are complete."));
  } else if (r.trace_id) {
    const tracePath = "/api/v1/runs/" + encodeURIComponent(r.run_id) + "/trace";
    const trace = await firstRows(tracePath);
    parts.push(el("h2", { id: "span-count", "data-count": trace.span_count }, "Spans (" + trace.span_count + ", " + trace.error_count + " with errors)"));
    if (trace.count) {
      wf = waterfall(trace, detail, "#/run/" + r.run_id, tracePath);
      parts.push(el("div", { class: "split" }, wf.box, detail));
    } else {
      parts.push(el("p", { class: "muted", id: "no-spans" }, "No spans stored for this trace yet: the exporter may still be delivering them (OTEL_TRACES_EXPORTER=store). Reload in a moment."));
    }
  } else {
    parts.push(el("p", { class: "muted", id: "not-traced" }, "This run was not traced: run it with OTEL_TRACES_EXPORTER=store (the default) to see its spans here."));
  }
  show(...parts.filter((p) => p));
  for (const p of plans) fitPlan(p);
  ui.current = { key: "run/" + ref, wf };
  if (wf) {
    wf.render();
    wf.loadRest();
    if (spanId) await wf.select(spanId, true);
  }
  if (r.status === "running") ui.poll = setInterval(() => ui.route(true), 3000);
}

/* "Compare with": a type-ahead over the recent runs (/api/v1/runs?q=, the same workflow's
 * first), an ARIA combobox: ↓↑ move through the list, Enter picks (a whole id typed or pasted
 * with nothing picked is taken as it is), Esc closes. Picking opens compare, the older run as A. */
const PICK_MAX = 12;
function comparePicker(r) {
  const listId = "compare-list";
  const input = el("input", { id: "compare-with", type: "text", role: "combobox", autocomplete: "off",
    "aria-autocomplete": "list", "aria-expanded": "false", "aria-controls": listId,
    placeholder: "type a run id, workflow or input", "aria-label": "compare with another run: type to find it" });
  const list = el("ul", { id: listId, role: "listbox", "aria-label": "runs to compare with", hidden: true });
  let options = [];
  let active = -1;
  let seq = 0;
  const go = (other) => {
    const older = (other.started || "") < (r.started || "");
    location.hash = "#/compare/" + encodeURIComponent(older ? other.run_id : r.run_id) + "/" + encodeURIComponent(older ? r.run_id : other.run_id);
  };
  const mark = (i) => {
    active = i;
    [...list.children].forEach((li, k) => li.setAttribute("aria-selected", String(k === i)));
    if (i >= 0 && list.children[i]) {
      input.setAttribute("aria-activedescendant", list.children[i].id);
      list.children[i].scrollIntoView({ block: "nearest" });
    } else {
      input.removeAttribute("aria-activedescendant");
    }
  };
  const close = () => { list.hidden = true; input.setAttribute("aria-expanded", "false"); mark(-1); };
  /* One request at a time, the last keystroke's when it ends (the server answers a third
   * concurrent read 503), after a short pause in the typing. */
  let timer = null;
  let busy = false;
  let again = false;
  const refill = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (busy) { again = true; return; }
      busy = true;
      fill().catch((err) => {
        list.replaceChildren(el("li", { class: "status-failed", id: "compare-none", "aria-disabled": "true" }, "Cannot list the runs: " + err.message + ". Try again in a moment."));
        list.hidden = false;
      }).finally(() => { busy = false; if (again) { again = false; refill(); } });
    }, 120);
  };
  let shownQ = null;
  async function fill() {
    const q = input.value.trim();
    if (q === shownQ && !list.hidden) return; /* the list on show is this query's */
    const mine = ++seq;
    const p = new URLSearchParams({ limit: "100" });
    if (q) p.set("q", q);
    const doc = await api("/api/v1/runs?" + p);
    if (mine !== seq) return; /* a later keystroke's answer wins */
    const others = doc.runs.filter((o) => o.run_id !== r.run_id);
    /* Same workflow first, newest first within each group (the API's order). */
    options = others.filter((o) => o.workflow === r.workflow).concat(others.filter((o) => o.workflow !== r.workflow)).slice(0, PICK_MAX);
    list.replaceChildren(...(options.length ? options.map((o, i) => el("li", { role: "option", id: "compare-opt-" + i, "data-run": o.run_id, "aria-selected": "false",
      onmousedown: (e) => { e.preventDefault(); go(o); } },
      el("b", {}, short(o.run_id)), " ", el("span", { class: "status-" + o.status }, o.status), " · ", o.workflow || "?", " · ", when(o.started),
      o.workflow === r.workflow ? el("span", { class: "same-wf" }, " · same workflow") : null,
      o.input ? el("span", { class: "muted" }, " · " + (o.input.length > 40 ? o.input.slice(0, 40) + "…" : o.input)) : null))
      : [el("li", { class: "muted", id: "compare-none", "aria-disabled": "true" }, "No other run matches: try part of an id, a workflow's name or an input.")]));
    list.hidden = false;
    shownQ = q;
    input.setAttribute("aria-expanded", "true");
    mark(-1);
  }
  input.addEventListener("input", refill);
  input.addEventListener("focus", () => { if (list.hidden) refill(); });
  input.addEventListener("blur", () => close());
  input.addEventListener("keydown", (e) => {
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      if (list.hidden) { refill(); return; }
      if (!options.length) return;
      mark(e.key === "ArrowDown" ? (active + 1) % options.length : (active <= 0 ? options.length - 1 : active - 1));
    } else if (e.key === "Enter") {
      e.preventDefault();
      if (active >= 0 && options[active]) go(options[active]);
      else if (options.length === 1) go(options[0]);
      else if (input.value.trim()) location.hash = "#/compare/" + encodeURIComponent(r.run_id) + "/" + encodeURIComponent(input.value.trim());
    } else if (e.key === "Escape") {
      close();
    }
  });
  return el("span", { class: "typeahead" }, el("label", { for: "compare-with" }, "Compare with "), input, list);
}

/* What a failed step's stored error says (exit status, the tails of stderr and stdout, a
 * timeout, any other field), first: the cause, not only the path to it. */
function causeOf(step) {
  const e = step.error && typeof step.error === "object" ? step.error : {};
  const what = e.exit_code !== undefined && e.exit_code !== null ? "exit status " + e.exit_code
    : e.timed_out ? "timed out" : (step.feedback || step.error_type || "failed");
  const shown = new Set(["exit_code", "stderr_tail", "stdout_tail", "error_type", "timed_out"]);
  const rest = Object.entries(e).filter(([k, v]) => !shown.has(k) && v !== null && v !== "");
  const tail = (label, text, cls) => text ? [el("div", { class: "muted" }, label), el("pre", { class: cls }, text)] : null;
  return el("div", { class: "cause", "data-step": step.id },
    el("p", {}, el("b", {}, "Step " + step.id), " (" + (step.executor && step.executor !== "agent" ? step.executor : step.agent || "agent") + ") failed: ",
      el("span", { class: "cause-what" }, what), e.error_type && e.error_type !== what ? el("span", { class: "muted" }, " · " + e.error_type) : null,
      step.attempts > 1 ? el("span", { class: "muted" }, " · after " + step.attempts + " attempts") : null),
    tail("stderr (last lines)", e.stderr_tail, "stderr"), tail("stdout (last lines)", e.stdout_tail, "stdout"),
    rest.length ? el("ul", {}, rest.map(([k, v]) => el("li", {}, k + ": ", attrText(v)))) : null);
}

/* The causes weft.why/v1 names beyond the failed steps, each a block with links to its spans
 * (#/run/ID/span/SPAN selects the span in the waterfall below): exception events, the last
 * model answer before the failure, the stuck loops with their repetitions, the budget that
 * ran out. */
function spanLink(base, id, text, cls) {
  return el("a", { href: base + "/span/" + id, class: cls, "data-span": id }, text || short(id));
}
function exceptionsBlock(list, base) {
  if (!(list || []).length) return null;
  return el("div", { id: "why-exceptions", class: "cause" }, el("p", {}, el("b", {}, "Exceptions")),
    list.map((x) => el("div", { class: "exception", "data-span": x.span_id },
      el("p", {}, el("span", { class: "exc-type" }, x.type || "exception"), x.message ? ": " : "",
        x.message ? el("span", { class: "exc-message" }, x.message) : null,
        el("span", { class: "muted" }, " in "), spanLink(base, x.span_id, x.span_name)),
      x.stacktrace ? [el("div", { class: "muted" }, "stack trace (last lines)"), el("pre", { class: "stack" }, x.stacktrace)] : null)));
}
function answerBlock(a, base) {
  if (!a) return null;
  const from = a.source === "exchange" ? "from the stored exchange" : a.source === "span" ? "from the span" : null;
  return el("div", { id: "why-answer", class: "cause", "data-span": a.span_id },
    el("p", {}, el("b", {}, "Last model answer before the failure"), " · ", spanLink(base, a.span_id, a.span_name),
      a.agent ? el("span", { class: "muted" }, " · agent " + a.agent) : null, from ? el("span", { class: "muted" }, " · " + from) : null),
    a.text ? el("pre", { class: "answer" }, a.text + (a.truncated ? "\n…" : "")) : null,
    !a.text && !a.source ? el("p", { class: "muted" }, "Its content was not captured (weft run --capture-content) and no stored exchange matches it.") : null,
    (a.tool_calls || []).length ? el("p", { class: "muted" }, "tool calls: " + a.tool_calls.join(", ")) : null,
    a.error ? el("p", { class: "status-failed" }, "the call failed: " + a.error) : null);
}
function loopsBlock(loops, base) {
  if (!(loops || []).length) return null;
  return el("div", { id: "why-loops", class: "cause" }, loops.map((l) => el("div", { class: "loop", "data-span": l.span_id },
    el("p", {}, el("b", {}, "Stuck loop (" + l.kind + ")"), l.policy ? el("span", { class: "muted" }, " · policy " + l.policy) : null,
      ": ", l.evidence || "", el("span", { class: "muted" }, " · found at "), spanLink(base, l.span_id, l.span_name)),
    el("ol", { class: "repetitions" }, (l.repetitions || []).map((r, i) =>
      el("li", {}, spanLink(base, r.span_id, (r.name || "span") + " " + short(r.span_id), "repetition"),
        el("span", { class: "muted" }, " · repetition " + (i + 1))))))));
}
function budgetBlock(b) {
  if (!b) return null;
  const num = (v) => v === null || v === undefined ? "?" : Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6)));
  return el("div", { id: "why-budget", class: "cause" },
    el("p", {}, el("b", {}, "Budget ran out: "), el("span", { class: "budget-name" }, b.name),
      " · limit ", el("span", { class: "budget-limit" }, num(b.limit)),
      " · used ", el("span", { class: "budget-used" }, num(b.used)), b.unit ? " " + b.unit : ""));
}

async function why(ref, box, wf, steps) {
  const w = await api("/api/v1/runs/" + encodeURIComponent(ref) + "/why");
  const base = "#/run/" + ref;
  const failedIds = new Set((w.failed_steps || []).map((s) => s.id));
  const causes = (steps || []).filter((s) => failedIds.has(s.id) || (s.status === "failed" && !failedIds.size));
  const list = el("ol", { id: "why-path" }, w.path.map((p) =>
    el("li", { "data-span": p.span_id, onclick: () => wf && wf.select(p.span_id, true) },
      p.name, p.error_type ? " (" + p.error_type + ")" : "", p.status_message ? ": " + p.status_message : "")));
  box.replaceChildren(el("div", { class: "why" },
    el("b", {}, "Why did it fail? "), w.reason || w.status,
    causes.length ? el("div", { id: "why-cause" }, causes.map(causeOf)) : null,
    budgetBlock(w.budget), loopsBlock(w.stuck_loops, base), exceptionsBlock(w.exceptions, base), answerBlock(w.last_answer, base),
    w.failed_steps.length ? el("p", {}, "Failed steps: " + w.failed_steps.map((s) => s.id + " (" + (s.error_type || "failed") + ")").join(", ")) : null,
    w.path.length ? list : el("p", { class: "muted", id: "why-no-path" }, w.trace_id && !w.trace_read
      ? "Its trace is not in the span store (tail sampling dropped it, or no store exporter was on): the causes above come from the stored run."
      : "No span of its trace has status ERROR.")));
  if (wf && w.failed_span) {
    wf.markPath(w.path.map((p) => p.span_id));
    await wf.select(w.failed_span.span_id, true);
  }
}

/* A trace of its own (one that belongs to no run: an ingested service's, say). */
export async function viewTrace(id, spanId) {
  const tracePath = "/api/v1/traces/" + encodeURIComponent(id);
  const trace = await firstRows(tracePath);
  const detail = el("div", { class: "detail", id: "span-detail" }, el("p", { class: "muted" }, "Select a span: click a row, or move with ↑↓ and press Enter."));
  const wf = trace.count ? waterfall(trace, detail, "#/trace/" + id, tracePath) : null;
  show(el("h1", {}, "Trace " + trace.trace_id),
    trace.run_id ? el("p", {}, el("a", { href: "#/run/" + trace.run_id }, "its run")) : null,
    el("p", { id: "trace-service" }, el("b", {}, "service "), trace.service || "unknown"),
    /* The resource the trace's root arrived with (service.version, telemetry.sdk.*, host.*,
     * ...), as the span store keeps it: bounded, secrets redacted, what was left out counted. */
    trace.resource && Object.keys(trace.resource).length
      ? el("details", { id: "trace-resource-box", open: true }, el("summary", {}, "Resource attributes"),
        el("table", { class: "attrs", id: "trace-resource" }, el("tbody", {}, Object.entries(trace.resource).map(([k, v]) =>
          el("tr", { "data-key": k }, el("td", {}, k), el("td", {}, attrText(v)))))),
        trace.resource_dropped ? el("p", { class: "muted", id: "trace-resource-dropped" }, trace.resource_dropped + " more left out (by the sender or the store's limits)") : null)
      : null,
    el("h2", { id: "span-count", "data-count": trace.span_count }, "Spans (" + trace.span_count + ", " + trace.error_count + " with errors)"),
    wf ? el("div", { class: "split" }, wf.box, detail) : el("p", { class: "muted", id: "no-spans" }, "This trace has no spans stored yet. Reload in a moment, or check that its service exports to this weft (OTLP /v1/traces)."));
  ui.current = { key: "trace/" + id, wf };
  if (wf) {
    wf.render();
    wf.loadRest();
    if (spanId) await wf.select(spanId, true);
  }
}
