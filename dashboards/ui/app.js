/* dashboards/ui/app.js - the trace explorer (docs/explorer.md), served by `weft serve`.
 *
 * Everything from the stores reaches the page as text (textContent, attribute values): the UI
 * never builds markup from data, so a prompt holding <script> shows as that text. The server's
 * Content-Security-Policy forbids inline script besides. Views: #/runs, #/run/ID,
 * #/trace/ID, #/compare/A/B, #/metrics; data from /api/v1 only.
 */
"use strict";

(function () {
  const ROW_H = 22;
  const SPAN_LIMIT = 100000;
  let poll = null;
  let chart = null;

  /* el("div", {class: "x", onclick: f}, "text", child...) */
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const k of kids.flat()) {
      if (k === undefined || k === null) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }
  function svg(tag, attrs, ...kids) {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    return e;
  }
  async function api(path) {
    let r = await fetch(path, { credentials: "same-origin" });
    /* The server answers 503 with Retry-After when two reads are already in (docs/serve.md):
       wait as told and ask again, a few times, before showing an error. */
    for (let i = 0; i < 5 && r.status === 503 && r.headers.get("Retry-After"); i++) {
      await new Promise((ok) => setTimeout(ok, 1000 * (Number(r.headers.get("Retry-After")) || 1)));
      r = await fetch(path, { credentials: "same-origin" });
    }
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error((body.error && body.error.message) || r.status + " " + r.statusText);
    return body;
  }
  function dur(ns) {
    if (ns === null || ns === undefined) return "–";
    if (ns < 1e3) return ns + "ns";
    if (ns < 1e6) return (ns / 1e3).toFixed(1) + "µs";
    if (ns < 1e9) return (ns / 1e6).toFixed(1) + "ms";
    if (ns < 60e9) return (ns / 1e9).toFixed(2) + "s";
    return Math.floor(ns / 60e9) + "m" + String(Math.round((ns % 60e9) / 1e9)).padStart(2, "0") + "s";
  }
  function when(iso) { return iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "Z") : "–"; }
  function short(id) { return id ? id.slice(0, 8) : "–"; }
  function loopCount(loops) {
    let n = 0;
    for (const [k, v] of Object.entries(loops || {})) if (k !== "stuck") n += v;
    return n;
  }
  function show(...nodes) {
    const m = document.getElementById("main");
    m.replaceChildren(...nodes);
    return m;
  }
  function fail(err) { show(el("p", { class: "status-failed", id: "error" }, "Error: " + err.message)); }

  /* ---------------------------------------------------------------------------- runs */

  function runRow(r) {
    return el("tr", { class: "clickable", "data-run": r.run_id, onclick: () => { location.hash = "#/run/" + r.run_id; } },
      el("td", { class: "status status-" + r.status }, r.status),
      el("td", {}, short(r.run_id)),
      el("td", {}, r.workflow),
      el("td", {}, when(r.started)),
      el("td", {}, dur(r.duration_ns)),
      el("td", {}, (r.input_tokens || 0) + " / " + (r.output_tokens || 0)),
      el("td", {}, "$" + (r.cost_usd || 0).toFixed(4)),
      el("td", {}, (r.reward || 0).toFixed(2)),
      el("td", {}, loopCount(r.loops)),
      el("td", { class: (r.loops && r.loops.stuck) ? "status-failed" : "" }, (r.loops && r.loops.stuck) || 0));
  }

  async function viewRuns() {
    const q = el("input", { id: "q", placeholder: "search id, workflow, input, reason" });
    const status = el("select", { id: "status" },
      ["", "running", "completed", "failed", "stuck", "interrupted", "timed_out", "budget_exhausted", "aborted"]
        .map((s) => el("option", { value: s }, s || "any status")));
    const body = el("tbody", {});
    const table = el("table", { id: "runs" },
      el("thead", {}, el("tr", {}, ["status", "run", "workflow", "started", "duration", "tokens in / out", "cost",
        "reward", "loops", "stuck loops"].map((h) => el("th", {}, h)))), body);
    const count = el("p", { class: "muted", id: "run-count" });
    show(el("h1", {}, "Runs"), el("div", { class: "filters" }, q, status), count, table);
    async function load() {
      const p = new URLSearchParams({ limit: "500" });
      if (q.value) p.set("q", q.value);
      if (status.value) p.set("status", status.value);
      const doc = await api("/api/v1/runs?" + p);
      body.replaceChildren(...doc.runs.map(runRow));
      count.textContent = doc.runs.length + " run" + (doc.runs.length === 1 ? "" : "s");
      const live = doc.runs.some((r) => r.status === "running");
      document.getElementById("live").hidden = !live;
      return live;
    }
    q.addEventListener("input", () => load().catch(fail));
    status.addEventListener("change", () => load().catch(fail));
    await load();
    poll = setInterval(() => load().catch(() => {}), 2000);
  }

  /* ------------------------------------------------------------------------ plan graph */

  /* The plan as a DAG: dependencies as edges, loop-back requests as back-edges counted per
   * pair, steps that correction mode inserted or rewired marked. @p before: the plan before
   * the first surgery (inserted steps left out, rewired steps with their old dependencies). */
  function planGraph(doc, before) {
    const g = new dagre.graphlib.Graph({ multigraph: true });
    g.setGraph({ rankdir: "LR", nodesep: 18, ranksep: 40, marginx: 10, marginy: 10 });
    g.setDefaultEdgeLabel(() => ({}));
    const inserted = new Set();
    const rewired = new Map();
    for (const c of doc.corrections || []) {
      for (const id of c.inserted || []) inserted.add(id);
      /* The failed step is rewired: it waits for the inserted steps after the surgery. */
      if (c.failed_step && !rewired.has(c.failed_step)) rewired.set(c.failed_step, c.depends_before || []);
    }
    const steps = doc.steps.filter((s) => !(before && inserted.has(s.id)));
    for (const s of steps) {
      const w = Math.max(90, 7 * Math.max(s.id.length, (s.agent || "").length) + 20);
      g.setNode(s.id, { width: w, height: 38, step: s });
    }
    const back = new Map();
    for (const s of steps) {
      const deps = before && rewired.has(s.id) ? rewired.get(s.id) : s.depends_on;
      for (const d of deps || []) if (g.hasNode(d)) g.setEdge(d, s.id, { kind: "dep" }, "dep-" + d + "-" + s.id);
      if (s.requested_by && g.hasNode(s.requested_by)) {
        const key = s.requested_by + "->" + s.agent;
        back.set(key, (back.get(key) || { from: s.requested_by, to: s.id, n: 0 }));
        back.get(key).n++;
        back.get(key).to = s.id;
      }
    }
    dagre.layout(g);
    const gg = g.graph();
    const root = svg("svg", { class: "plan", id: before ? "plan-before" : "plan", width: gg.width + 20, height: gg.height + 20 });
    for (const e of g.edges()) {
      const pts = g.edge(e).points;
      root.append(svg("path", { class: "edge", d: "M" + pts.map((p) => p.x + "," + p.y).join(" L") }));
    }
    for (const b of back.values()) {
      const a = g.node(b.to), z = g.node(b.from);
      if (!a || !z) continue;
      const mid = Math.min(a.y, z.y) - 34;
      root.append(svg("path", { class: "edge back", d: `M${a.x},${a.y - 19} C${a.x},${mid} ${z.x},${mid} ${z.x},${z.y - 19}` }));
      root.append(svg("text", { class: "count", x: (a.x + z.x) / 2, y: mid + 8 }, "⟲ ×" + b.n));
    }
    for (const id of g.nodes()) {
      const n = g.node(id), s = n.step;
      const cls = ["node", "node-" + s.status];
      if (!before && inserted.has(id)) cls.push("node-inserted");
      if (!before && rewired.has(id)) cls.push("node-rewired");
      root.append(svg("g", { class: cls.join(" "), "data-step": id, transform: `translate(${n.x - n.width / 2},${n.y - n.height / 2})` },
        svg("title", {}, s.status + (s.feedback ? ": " + s.feedback : "")),
        svg("rect", { width: n.width, height: n.height }),
        svg("text", { x: 6, y: 15 }, id),
        svg("text", { x: 6, y: 30 }, s.agent || s.executor || "")));
    }
    return root;
  }

  /* ------------------------------------------------------------------------- waterfall */

  function attrText(v) { return typeof v === "string" ? v : JSON.stringify(v); }

  function spanDetail(s) {
    const rows = Object.entries(s.attributes || {}).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, el("pre", {}, attrText(v)))));
    return [
      el("h2", { id: "span-name" }, s.name),
      el("p", { class: "muted", id: "span-ids" }, "span " + s.span_id + (s.parent_span_id ? " · parent " + s.parent_span_id : "") + " · " + dur(s.duration_ns)),
      el("p", { class: "status status-" + (s.status === "error" ? "failed" : "completed"), id: "span-status" },
        "status: " + s.status + (s.status_message ? " — " + s.status_message : "")),
      el("table", { id: "span-attrs" }, el("tbody", {}, rows)),
      (s.events || []).length ? el("h2", {}, "Events") : null,
      (s.events || []).map((e) => el("div", {}, el("b", {}, e.name), el("pre", {}, JSON.stringify(e.attributes || {}, null, 1)))),
      (s.links || []).length ? el("h2", {}, "Links") : null,
      (s.links || []).map((l) => el("div", {}, el("pre", {}, l.trace_id + " / " + l.span_id))),
    ];
  }

  /* A virtualised waterfall: only the rows in view are in the document, so a 100,000-span
   * trace scrolls like a short one. Rows come from the compact view (weft.waterfall/v1: [id,
   * depth, name, start, duration, status, marker]); a span's detail is fetched on click. */
  function waterfall(view, detail) {
    const spans = view.spans;
    const traceId = view.trace_id;
    let total = 1;
    for (const s of spans) total = Math.max(total, s[3] + s[4]);
    const box = el("div", { class: "waterfall", id: "waterfall" });
    const spacer = el("div", { class: "spacer" });
    spacer.style.height = spans.length * ROW_H + "px";
    box.append(spacer);
    const state = { selected: null, path: new Set() };
    function row(i) {
      const [id, depth, nm, start, len, status, marker] = spans[i];
      const bar = el("div", { class: "bar" });
      bar.style.left = (start / total) * 100 + "%";
      bar.style.width = Math.max(0.2, (len / total) * 100) + "%";
      const name = el("div", { class: "name" }, marker ? el("span", { class: "flag", title: "stuck loop or circuit breaker" }, "⟲") : null, nm);
      name.style.paddingLeft = 6 + depth * 12 + "px";
      const r = el("div", {
        class: "row" + (status === "error" ? " error" : "") + (marker ? " marker" : "") + (state.path.has(id) ? " onpath" : "") +
          (state.selected === id ? " selected" : ""),
        "data-span": id, "data-index": i,
        onclick: () => select(id),
      }, name, el("div", { class: "track" }, bar));
      r.style.top = i * ROW_H + "px";
      return r;
    }
    function render() {
      const first = Math.max(0, Math.floor(box.scrollTop / ROW_H) - 10);
      const last = Math.min(spans.length, first + Math.ceil((box.clientHeight || 480) / ROW_H) + 20);
      const rows = [];
      for (let i = first; i < last; i++) rows.push(row(i));
      spacer.replaceChildren(...rows);
    }
    async function select(id, scroll) {
      const i = spans.findIndex((s) => s[0] === id);
      if (i < 0) return;
      state.selected = id;
      if (scroll) box.scrollTop = Math.max(0, i * ROW_H - box.clientHeight / 2);
      render();
      detail.replaceChildren(el("p", { class: "muted" }, "Loading span…"));
      const s = await api("/api/v1/traces/" + traceId + "/spans/" + id);
      if (state.selected === id) detail.replaceChildren(...spanDetail(s).flat().filter((x) => x));
    }
    box.addEventListener("scroll", render);
    requestAnimationFrame(render);
    return { box, select, render, markPath(ids) { state.path = new Set(ids); render(); } };
  }

  /* --------------------------------------------------------------------------- a run */

  async function viewRun(ref) {
    const doc = await api("/api/v1/runs/" + encodeURIComponent(ref));
    const r = doc.run;
    const cards = el("div", { class: "cards" },
      [["status", r.status], ["workflow", r.workflow], ["duration", dur(r.duration_ns)], ["steps", r.step_count],
        ["tokens", (r.input_tokens || 0) + " / " + (r.output_tokens || 0)], ["cost", "$" + (r.cost_usd || 0).toFixed(4)],
        ["reward", (r.reward || 0).toFixed(2)], ["loops", loopCount(r.loops)], ["stuck loops", (r.loops && r.loops.stuck) || 0],
        ["corrections", r.corrections]]
        .map(([k, v]) => el("div", { class: "card" }, el("span", { class: "muted" }, k), el("b", { class: k === "status" ? "status status-" + v : "" }, v))));
    const whyBox = el("div", { id: "why-box" });
    const detail = el("div", { class: "detail", id: "span-detail" }, el("p", { class: "muted" }, "Select a span."));
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
    const compareTo = el("input", { id: "compare-with", placeholder: "another run id to compare" });
    parts.push(el("p", {},
      r.status !== "completed" ? el("button", { class: "primary", id: "why", onclick: () => why(r.run_id, whyBox, wf).catch(fail) }, "Why did it fail?") : null,
      " ", compareTo, " ", el("button", { id: "compare", onclick: () => { if (compareTo.value) location.hash = "#/compare/" + r.run_id + "/" + compareTo.value; } }, "Compare")));
    parts.push(whyBox, el("h2", {}, "Plan"));
    if ((doc.corrections || []).length) {
      parts.push(el("p", { class: "muted" }, "Before correction mode's surgery:"), planGraph(doc, true),
        el("p", { class: "muted" }, "After (inserted steps dashed, rewired steps outlined):"));
    }
    parts.push(planGraph(doc, false));
    let wf = null;
    const dropped = r.trace_sampling && !r.trace_sampling.kept;
    if (dropped) {
      parts.push(el("p", { class: "muted", id: "trace-not-kept" },
        "Trace not kept (rule " + r.trace_sampling.rule + "): tail sampling dropped its spans; the run's numbers above are complete."));
    } else if (r.trace_id) {
      const trace = await api("/api/v1/runs/" + encodeURIComponent(r.run_id) + "/trace?view=waterfall&limit=" + SPAN_LIMIT);
      wf = waterfall(trace, detail);
      parts.push(el("h2", { id: "span-count", "data-count": trace.span_count }, "Spans (" + trace.span_count + ", " + trace.error_count + " with errors)"),
        el("div", { class: "split" }, wf.box, detail));
    } else {
      parts.push(el("p", { class: "muted" }, "This run was not traced."));
    }
    show(...parts);
    if (wf) wf.render();
    if (r.status === "running") poll = setInterval(() => route(), 3000);
  }

  async function why(ref, box, wf) {
    const w = await api("/api/v1/runs/" + encodeURIComponent(ref) + "/why");
    const list = el("ol", { id: "why-path" }, w.path.map((p) =>
      el("li", { "data-span": p.span_id, onclick: () => wf && wf.select(p.span_id, true) },
        p.name, p.error_type ? " (" + p.error_type + ")" : "", p.status_message ? ": " + p.status_message : "")));
    box.replaceChildren(el("div", { class: "why" },
      el("b", {}, "Why did it fail? "), w.reason || w.status,
      w.failed_steps.length ? el("p", {}, "Failed steps: " + w.failed_steps.map((s) => s.id + " (" + (s.error_type || "failed") + ")").join(", ")) : null,
      w.path.length ? list : el("p", { class: "muted" }, "No span of its trace has status ERROR.")));
    if (wf && w.failed_span) {
      wf.markPath(w.path.map((p) => p.span_id));
      await wf.select(w.failed_span.span_id, true);
    }
  }

  /* A trace of its own (one that belongs to no run: an ingested service's, say). */
  async function viewTrace(id) {
    const trace = await api("/api/v1/traces/" + encodeURIComponent(id) + "?view=waterfall&limit=" + SPAN_LIMIT);
    const detail = el("div", { class: "detail", id: "span-detail" }, el("p", { class: "muted" }, "Select a span."));
    const wf = waterfall(trace, detail);
    show(el("h1", {}, "Trace " + trace.trace_id),
      trace.run_id ? el("p", {}, el("a", { href: "#/run/" + trace.run_id }, "its run")) : null,
      el("h2", { id: "span-count", "data-count": trace.span_count }, "Spans (" + trace.span_count + ", " + trace.error_count + " with errors)"),
      el("div", { class: "split" }, wf.box, detail));
    wf.render();
  }

  /* --------------------------------------------------------------------------- compare */

  function tokens(side) { return side ? (side.input_tokens || 0) + (side.output_tokens || 0) : "–"; }

  async function viewCompare(a, b) {
    const c = await api("/api/v1/compare?a=" + encodeURIComponent(a) + "&b=" + encodeURIComponent(b));
    const first = c.first_divergence ? c.first_divergence.step : null;
    const rows = c.steps.map((s) => {
      const da = s.a && s.a.duration_ns, db = s.b && s.b.duration_ns;
      const delta = da != null && db != null ? db - da : null;
      return el("tr", { class: s.id === first ? "diverge" : "", "data-step": s.id },
        el("td", {}, s.id), el("td", {}, s.a ? s.a.agent : "–"),
        el("td", { class: "status status-" + (s.a ? s.a.status : "") }, s.a ? s.a.status : "absent"),
        el("td", { class: "status status-" + (s.b ? s.b.status : "") }, s.b ? s.b.status : "absent"),
        el("td", {}, dur(da)), el("td", {}, dur(db)),
        el("td", { class: delta > 0 ? "delta-pos" : delta < 0 ? "delta-neg" : "" }, delta == null ? "–" : (delta > 0 ? "+" : "") + dur(Math.abs(delta)).replace(/^/, delta < 0 ? "−" : "")),
        el("td", {}, tokens(s.a) + " → " + tokens(s.b)),
        el("td", {}, s.changed.join(", ")));
    });
    const diff = el("div", { class: "diff", id: "output-diff" }, (c.output_diff || []).map((d) =>
      el("div", { class: d.op === "-" ? "del" : d.op === "+" ? "add" : "" }, d.op + " " + d.line)));
    show(el("h1", {}, "Compare"),
      el("p", {}, el("a", { href: "#/run/" + c.a.run_id }, "A " + short(c.a.run_id) + " (" + c.a.status + ")"), " vs ",
        el("a", { href: "#/run/" + c.b.run_id }, "B " + short(c.b.run_id) + " (" + c.b.status + ")")),
      el("p", { id: "first-divergence" }, first ? "First divergence: step " + first + " (" + c.first_divergence.changed.join(", ") + ")" : "No divergence: the runs did the same."),
      el("table", { id: "compare-steps" }, el("thead", {}, el("tr", {}, ["step", "agent", "A", "B", "A time", "B time", "Δ time", "tokens A → B", "changed"].map((h) => el("th", {}, h)))), el("tbody", {}, rows)),
      el("h2", {}, "Final output"), diff);
  }

  /* --------------------------------------------------------------------------- metrics */

  async function viewMetrics() {
    const m = await api("/api/v1/metrics");
    const agents = Object.keys(m.agents).sort();
    const names = [...new Set([...Object.keys(m.handoffs), ...Object.values(m.handoffs).flatMap(Object.keys)])].sort();
    const matrix = el("table", { id: "handoffs" },
      el("thead", {}, el("tr", {}, el("th", {}, "from \\ to"), names.map((n) => el("th", {}, n)))),
      el("tbody", {}, names.map((f) => el("tr", {}, el("th", {}, f), names.map((t) => el("td", {}, ((m.handoffs[f] || {})[t]) || ""))))));
    const canvas = el("canvas", { id: "success-chart" });
    const loops = el("table", { id: "loops" }, el("tbody", {}, Object.entries(m.loops).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))));
    show(el("h1", {}, "Collaboration"), el("p", { class: "muted" }, "Over the last " + m.runs + " runs."),
      el("h2", {}, "Hand-offs (who hands work to whom)"), matrix,
      el("h2", {}, "Success rate per agent"), el("div", { class: "chart" }, canvas),
      el("h2", {}, "Loops"), loops);
    if (chart) chart.destroy();
    chart = new Chart(canvas, {
      type: "bar",
      data: { labels: agents, datasets: [{ label: "completed / steps", data: agents.map((a) => m.agents[a].steps ? m.agents[a].completed / m.agents[a].steps : 0) }] },
      options: { animation: false, scales: { y: { min: 0, max: 1 } } },
    });
  }

  /* ---------------------------------------------------------------------------- router */

  function route() {
    if (poll) { clearInterval(poll); poll = null; }
    document.getElementById("live").hidden = true;
    const parts = (location.hash || "#/runs").slice(2).split("/").map(decodeURIComponent);
    const p = parts[0] === "run" && parts[1] ? viewRun(parts[1])
      : parts[0] === "compare" && parts[2] ? viewCompare(parts[1], parts[2])
      : parts[0] === "metrics" ? viewMetrics()
      : parts[0] === "trace" && parts[1] ? viewTrace(parts[1])
      : viewRuns();
    p.catch(fail);
  }
  window.addEventListener("hashchange", route);
  route();
})();
