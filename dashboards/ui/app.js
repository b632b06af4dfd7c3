/* dashboards/ui/app.js - the trace explorer (docs/explorer.md), served by `weft serve`.
 *
 * Everything from the stores reaches the page as text (textContent, attribute values): the UI
 * never builds markup from data, so a prompt holding <script> shows as that text. The server's
 * Content-Security-Policy forbids inline script besides. Views: #/runs, #/run/ID,
 * #/run/ID/span/SPAN_ID, #/trace/ID[/span/SPAN_ID], #/compare/A/B, #/metrics; data from /api/v1 only.
 */
import { Chart, dagre } from "./src/vendor.js";

(function () {
  const ROW_H = 22;
  let poll = null;
  let events = null; /* the runs page's EventSource */
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
    for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
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
    /* A part a view leaves out is null: not a "null" text node. */
    m.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined));
    return m;
  }
  /* An error, and what to do about it. */
  function fail(err) {
    const msg = err && err.message ? err.message : String(err);
    const hint = /no such|not found|404/i.test(msg) ? "Check the id in the address, or pick a run from the runs list."
      : /fetch|network|Failed/i.test(msg) ? "The server did not answer: is `weft serve` still running? Start it again and reload."
      : "Reload the page; if it persists, run the same read in a terminal (`weft run show --json`, `weft trace show --json`) to see the store's error.";
    show(el("div", { class: "empty", id: "error-box" }, el("p", { class: "status-failed", id: "error" }, "Error: " + msg),
      el("p", { id: "error-hint" }, hint, " "), el("p", {}, el("a", { href: "#/runs" }, "← back to the runs"))));
  }

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
      if (!doc.runs.length) {
        count.replaceChildren(el("span", { id: "runs-empty", class: "empty" }, q.value || status.value
          ? "No run matches: clear the search or pick another status."
          : ["No runs yet. Run one: ", el("code", {}, "make run"), " or ", el("code", {}, "weft run examples/code_review/workflow.json"),
            ", then reload (runs land in $WEFT_HOME's state store)."]));
      }
      const live = doc.runs.some((r) => r.status === "running");
      document.getElementById("live").hidden = !live;
      return live;
    }
    q.addEventListener("input", () => load().catch(fail));
    status.addEventListener("change", () => load().catch(fail));
    const live = await load();
    /* Live: the server pushes a "run" event when a run appears or changes status
     * (/api/v1/events), so nothing is fetched while nothing happens. Without the stream (an
     * older server, a proxy that buffers), poll every 2 s, and only while a run is running. */
    if (typeof EventSource === "function") {
      events = new EventSource("/api/v1/events");
      events.addEventListener("run", () => load().catch(() => {}));
      /* The server cannot read the state store: say it, the list may be stale. */
      events.addEventListener("store_error", (e) => {
        const msg = (JSON.parse(e.data || "{}").error) || "the state store cannot be read";
        count.replaceChildren(el("span", { class: "status-failed", id: "runs-stale" }, "Not live: " + msg + ". Reload once it is back."));
      });
      events.onerror = () => {
        if (events && events.readyState === EventSource.CLOSED) { events = null; if (live) pollWhileLive(); }
      };
    } else if (live) {
      pollWhileLive();
    }
    function pollWhileLive() {
      poll = setInterval(() => load().then((still) => { if (!still) { clearInterval(poll); poll = null; } }).catch(() => {}), 2000);
    }
  }

  /* ---------------------------------------------------------------------------- traces */

  /* Every trace in the span store, a weft run's or one any OTel SDK sent to /v1/traces. */
  async function viewTraces() {
    const service = el("input", { id: "t-service", placeholder: "service (exact)" });
    const q = el("input", { id: "t-q", placeholder: "root span name or trace id prefix" });
    const status = el("select", { id: "t-status" }, ["", "error", "ok"].map((s) => el("option", { value: s }, s ? "status " + s : "any status")));
    const body = el("tbody", {});
    const more = el("button", { id: "t-more", hidden: true }, "More");
    const count = el("p", { class: "muted", id: "trace-count" });
    const table = el("table", { id: "traces" },
      el("thead", {}, el("tr", {}, ["service", "root span", "start", "duration", "spans", "errors", "run"].map((h) => el("th", {}, h)))), body);
    show(el("h1", {}, "Traces"), el("div", { class: "filters" }, service, q, status), count, table, more);
    let next = null;
    let shown = 0;
    const row = (t) => el("tr", { class: "clickable", "data-trace": t.trace_id, onclick: () => { location.hash = "#/trace/" + t.trace_id; } },
      el("td", {}, t.service || "–"),
      el("td", {}, t.has_root === false ? el("span", { class: "muted", title: "the root span was not received" }, "(no root) " + t.root_name) : t.root_name),
      el("td", {}, new Date(Math.floor(t.start_ns / 1e6)).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z")),
      el("td", {}, dur(t.duration_ns)), el("td", {}, t.span_count),
      el("td", { class: t.error_count ? "status-failed" : "" }, t.error_count),
      el("td", {}, t.run_id ? el("a", { href: "#/run/" + t.run_id, onclick: (e) => e.stopPropagation() }, short(t.run_id)) : "–"));
    async function load(append) {
      const p = new URLSearchParams({ limit: "100" });
      if (service.value) p.set("service", service.value);
      if (q.value) p.set("q", q.value);
      if (status.value) p.set("status", status.value);
      if (append && next) p.set("cursor", next);
      const doc = await api("/api/v1/traces?" + p);
      const rows = doc.traces.map(row);
      if (append) body.append(...rows); else body.replaceChildren(...rows);
      shown = (append ? shown : 0) + doc.traces.length;
      next = doc.next;
      more.hidden = !next;
      count.textContent = shown + " trace" + (shown === 1 ? "" : "s") + (next ? " (more below)" : "");
      if (!shown) {
        count.replaceChildren(el("span", { class: "empty", id: "traces-empty" }, service.value || q.value || status.value
          ? "No trace matches: clear a filter."
          : ["No traces yet: run a workflow (", el("code", {}, "make run"), "), or point an OpenTelemetry SDK at this server (",
            el("code", {}, "OTEL_EXPORTER_OTLP_ENDPOINT=" + location.origin), ")."]));
      }
    }
    let timer = null;
    for (const box of [service, q]) box.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => load(false).catch(fail), 200); });
    status.addEventListener("change", () => load(false).catch(fail));
    more.addEventListener("click", () => load(true).catch(fail));
    await load(false);
  }

  /* ------------------------------------------------------------------------ plan graph */

  /* The plan as a DAG: dependencies as solid edges, loop-back requests (request_agent) as
   * dashed back-edges counted per pair, a flow's loops (doc.flow_loops, from the run's `loop`
   * spans) as dotted back-edges from the looping step to the step it returns to, counted as
   * taken, and a fan-out's items in a box under the fan-out's name and item count; steps that
   * correction mode inserted or rewired marked. A flow step that ran several times is one node
   * with a "×N" badge (its attempts), not one node per iteration: the store keeps one step per
   * node, re-opened in place when its loop returns, and the counted back-edge already says how
   * often, so N copies would only repeat the same edges. @p before: the plan before the first
   * surgery (inserted steps left out, rewired steps with their old dependencies). The returned
   * svg's .legend is the list of the edge kinds drawn; fitPlan() sets its viewBox once shown. */
  function planGraph(doc, before) {
    const g = new dagre.graphlib.Graph({ multigraph: true, compound: true });
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
    if (!steps.length) {
      /* No step: dagre would lay out an empty graph as -Infinity wide. */
      return el("p", { class: "muted", id: before ? "plan-before" : "plan", "data-empty": "" },
        "No plan was produced: the run ended before its supervisor planned any step (see the reason above and the run's first spans).");
    }
    const ids = new Set(steps.map((s) => s.id));
    /* Fan-out items: FANOUT[i].NODE, FANOUT being a step of this run. */
    const itemOf = (id) => {
      const m = /^(.*)\[(\d+)\]\.[^[\]]+$/.exec(id);
      return m && ids.has(m[1]) ? { fanout: m[1], index: m[2] } : null;
    };
    const groups = new Map();
    for (const s of steps) {
      const it = itemOf(s.id);
      if (!it) continue;
      if (!groups.has(it.fanout)) groups.set(it.fanout, { items: new Map() });
      const gr = groups.get(it.fanout);
      if (!gr.items.has(it.index)) gr.items.set(it.index, []);
      gr.items.get(it.index).push(s);
    }
    for (const [f, gr] of groups) g.setNode("group:" + f, { group: f, count: gr.items.size });
    for (const s of steps) {
      const w = Math.max(90, 7 * Math.max(s.id.length, (s.agent || "").length) + 20) + (s.attempts > 1 ? 26 : 0);
      g.setNode(s.id, { width: w, height: 38, step: s });
      const it = itemOf(s.id);
      if (it) g.setParent(s.id, "group:" + it.fanout);
    }
    const kinds = new Set();
    const edge = (from, to, kind) => { g.setEdge(from, to, { kind }, kind + "-" + from + "-" + to); kinds.add(kind); };
    const back = new Map();
    for (const s of steps) {
      const deps = before && rewired.has(s.id) ? rewired.get(s.id) : s.depends_on;
      /* A fan-out's dependents wait for its items: fed by each item's last steps. */
      const fed = [];
      for (const d of deps || []) {
        if (groups.has(d)) fed.push(d); else if (g.hasNode(d)) edge(d, s.id, "dep");
      }
      for (const f of fed) {
        for (const item of groups.get(f).items.values()) {
          const inner = new Set(item.flatMap((x) => x.depends_on || []));
          for (const x of item) if (!inner.has(x.id)) edge(x.id, s.id, "dep");
        }
      }
      if (s.requested_by && g.hasNode(s.requested_by)) {
        const key = s.requested_by + "->" + s.agent;
        back.set(key, (back.get(key) || { from: s.requested_by, to: s.id, n: 0, kind: "request" }));
        back.get(key).n++;
        back.get(key).to = s.id;
      }
    }
    /* The fan-out node feeds each item's first steps. */
    for (const [f, gr] of groups) {
      for (const item of gr.items.values()) {
        for (const x of item) if (!(x.depends_on || []).some((d) => ids.has(d))) edge(f, x.id, "fanout");
      }
    }
    /* A flow loop goes from the looping step (from) back to the step it returns to (to). */
    for (const l of doc.flow_loops || []) {
      /* A loop that never went back (its break_condition held at once) has no edge to draw. */
      if (l.taken === 0 && l.outcome === "break") continue;
      if (g.hasNode(l.step) && g.hasNode(l.back_to)) back.set("flow:" + l.step, { from: l.step, to: l.back_to, n: l.taken, kind: "flow", outcome: l.outcome });
    }
    /* A flow loop arcs above its row (its nodes are ranked apart): room for the arc and count
     * between rows. Loop-back requests keep the tight layout (their steps often share a rank). */
    if ([...back.values()].some((b) => b.kind === "flow")) g.graph().nodesep = 58;
    dagre.layout(g);
    const root = svg("svg", { class: "plan", id: before ? "plan-before" : "plan" });
    const content = svg("g", { class: "plan-content" });
    const defs = svg("defs", {});
    for (const [mid, cls] of [["arrow", "arrow"], ["arrow-back", "arrow back"], ["arrow-flow", "arrow flow"]]) {
      defs.append(svg("marker", { id: (before ? "b-" : "") + mid, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: mid === "arrow-flow" ? 5 : 7, markerHeight: mid === "arrow-flow" ? 5 : 7, orient: "auto-start-reverse" },
        svg("path", { class: cls, d: "M0,0 L10,5 L0,10 z" })));
    }
    root.append(defs, content);
    const arrow = (mid) => "url(#" + (before ? "b-" : "") + mid + ")";
    for (const [f, gr] of groups) {
      const c = g.node("group:" + f);
      content.append(svg("g", { class: "group", "data-group": f, "data-items": gr.items.size },
        svg("rect", { class: "group-box", x: c.x - c.width / 2, y: c.y - c.height / 2, width: c.width, height: c.height }),
        svg("text", { class: "group-label", x: c.x - c.width / 2 + 6, y: c.y + c.height / 2 + 13 }, f + " · " + gr.items.size + " item" + (gr.items.size === 1 ? "" : "s"))));
    }
    for (const e of g.edges()) {
      const lab = g.edge(e), pts = lab.points;
      content.append(svg("path", { class: "edge" + (lab.kind === "fanout" ? " fanout" : ""), "data-from": e.v, "data-to": e.w, "marker-end": arrow("arrow"), d: "M" + pts.map((p) => p.x + "," + p.y).join(" L") }));
    }
    for (const b of back.values()) {
      /* An arc above both nodes, from the step that went back (z) to where it went (a); beside
       * them, on the right, when dagre stacked the two in one rank. */
      const a = g.node(b.to), z = g.node(b.from);
      if (!a || !z) continue;
      kinds.add(b.kind);
      const flow = b.kind === "flow";
      const attrs = { class: "edge back" + (flow ? " flow" : ""), "data-from": b.from, "data-to": b.to, "data-count": b.n, "marker-end": arrow(flow ? "arrow-flow" : "arrow-back") };
      const label = (flow ? "↻ ×" : "⟲ ×") + b.n + (flow && b.outcome !== "loop_back" ? " · " + b.outcome.replace("_", " ") : "");
      const text = { class: "count" + (flow ? " flow" : ""), "data-from": b.from, "data-to": b.to };
      if (Math.abs(a.x - z.x) < 1) {
        const x0 = a.x + Math.max(a.width, z.width) / 2, x1 = x0 + 36;
        content.append(svg("path", { ...attrs, d: `M${z.x + z.width / 2},${z.y} C${x1},${z.y} ${x1},${a.y} ${a.x + a.width / 2},${a.y}` }));
        content.append(svg("text", { ...text, x: x0 + 30, y: (a.y + z.y) / 2 + 4 }, label));
        continue;
      }
      const top = Math.min(a.y, z.y) - 19, mid = top - 34 - (flow ? 8 : 0);
      content.append(svg("path", { ...attrs, d: `M${z.x},${z.y - 19} C${z.x},${mid} ${a.x},${mid} ${a.x},${a.y - 19}` }));
      content.append(svg("text", { ...text, "text-anchor": "middle", x: (a.x + z.x) / 2, y: top + 0.75 * (mid - top) - 4 }, label));
    }
    for (const id of g.nodes()) {
      const n = g.node(id), s = n.step;
      if (!s) continue;
      const cls = ["node", "node-" + s.status];
      if (!before && inserted.has(id)) cls.push("node-inserted");
      if (!before && rewired.has(id)) cls.push("node-rewired");
      if (groups.has(id)) cls.push("node-fanout");
      const label = groups.has(id) ? "fan-out ×" + groups.get(id).items.size : s.agent || s.executor || "";
      content.append(svg("g", { class: cls.join(" "), "data-step": id, tabindex: 0, role: "button", "aria-label": "step " + id + ", " + s.status + ": open its span",
        transform: `translate(${n.x - n.width / 2},${n.y - n.height / 2})` },
        svg("title", {}, s.status + (s.attempts > 1 ? ", ran " + s.attempts + " times" : "") + (s.feedback ? ": " + s.feedback : "")),
        svg("rect", { width: n.width, height: n.height }),
        svg("text", { x: 6, y: 15 }, id),
        svg("text", { x: 6, y: 30 }, label),
        s.attempts > 1 ? svg("text", { class: "iterations", "data-iterations": s.attempts, x: n.width - 6, y: 15, "text-anchor": "end" }, "×" + s.attempts) : null));
    }
    const names = { dep: "dependency", fanout: "fan-out to its items", request: "loop-back request (request_agent) ⟲ ×times", flow: "flow loop ↻ ×times taken" };
    root.legend = el("p", { class: "plan-legend muted", id: before ? "plan-before-legend" : "plan-legend" },
      ["dep", "fanout", "request", "flow"].filter((k) => kinds.has(k)).map((k) => el("span", { class: "legend-item legend-" + k, "data-kind": k }, names[k])),
      /* The loops could not be read (the span store failed): not the same as "no loops". */
      doc.flow_loops_error ? el("span", { class: "legend-error", id: "flow-loops-error" }, "Flow loops not drawn: " + doc.flow_loops_error) : null);
    return root;
  }

  /* Once shown: the plan's viewBox around everything drawn (arcs, their counts, group boxes). */
  function fitPlan(root) {
    if (!root.isConnected || root.tagName.toLowerCase() !== "svg") return;
    const b = root.querySelector(".plan-content").getBBox(), pad = 10;
    const w = Math.ceil(b.width + 2 * pad), h = Math.ceil(b.height + 2 * pad);
    root.setAttribute("viewBox", `${Math.floor(b.x - pad)} ${Math.floor(b.y - pad)} ${w} ${h}`);
    root.setAttribute("width", w);
    root.setAttribute("height", h);
  }

  /* ------------------------------------------------------------------------- waterfall */

  function attrText(v) { return typeof v === "string" ? v : JSON.stringify(v); }
  const STATUS_ICON = { error: "✕", ok: "✓", unset: "○" };
  function statusIcon(st) {
    return el("span", { class: "st-icon st-" + (st || "unset"), title: "status " + (st || "unset"), "aria-label": "status " + (st || "unset") }, STATUS_ICON[st] || "○");
  }
  function costOf(a) {
    const c = a["weft.cost.usd"];
    return typeof c === "number" ? c : null;
  }
  function isLlm(a) { return a["gen_ai.operation.name"] === "chat" || a["langfuse.observation.type"] === "generation"; }
  function money(c) { return c === null || c === undefined ? "" : "$" + (c < 0.01 ? c.toFixed(6) : c.toFixed(4)); }

  /* Nice tick step for a window of @p span ns: 1, 2 or 5 × 10^k, about 8 ticks; the unit is
   * chosen for the window (ns, µs, ms, s). */
  function ticks(v0, v1, n) {
    const span = Math.max(1, v1 - v0);
    const raw = span / Math.max(2, n);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    let step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) || 10 * p;
    /* At least three ticks: rounding up to a nice step can leave two (87 ms over 4 slots is a
     * step of 50 ms: 0 and 50), so step down (5 -> 2 -> 1 -> 0.5 ...) until three fit. */
    while (Math.floor(v1 / step) - Math.ceil(v0 / step) < 2 && step > 1) {
      const lead = Math.round(step / Math.pow(10, Math.floor(Math.log10(step) + 1e-9)));
      step *= lead === 5 ? 0.4 : 0.5;
    }
    const unit = span >= 2e9 ? ["s", 1e9] : span >= 2e6 ? ["ms", 1e6] : span >= 2e3 ? ["µs", 1e3] : ["ns", 1];
    const digits = Math.max(0, -Math.floor(Math.log10(step / unit[1]) + 1e-9));
    const out = [];
    for (let t = Math.ceil(v0 / step) * step; t <= v1 + 1e-6; t += step) {
      out.push({ t, label: (t / unit[1]).toFixed(Math.min(digits, 6)) + unit[0] });
    }
    return out;
  }

  /* The GenAI messages (gen_ai.input.messages / gen_ai.output.messages: [{role, parts: [{type:
   * text|tool_call|tool_call_response, ...}]}], or the older {role, content}) as a conversation. */
  function parseJson(v) {
    if (typeof v !== "string") return v;
    try { return JSON.parse(v); } catch (e) { return null; }
  }
  function pretty(v) {
    const j = typeof v === "string" ? parseJson(v) : v;
    return j !== null && j !== undefined && typeof j === "object" ? JSON.stringify(j, null, 2) : attrText(v);
  }
  function messageParts(m) {
    if (Array.isArray(m.parts)) return m.parts;
    const parts = [];
    if (typeof m.content === "string") parts.push({ type: "text", content: m.content });
    for (const c of m.tool_calls || []) parts.push({ type: "tool_call", id: c.id, name: (c.function || c).name, arguments: (c.function || c).arguments });
    return parts;
  }
  function conversation(attrs) {
    const msgs = [];
    const sys = parseJson(attrs["gen_ai.system_instructions"]);
    if (Array.isArray(sys)) msgs.push({ role: "system", parts: sys });
    for (const key of ["gen_ai.input.messages", "gen_ai.output.messages"]) {
      const list = parseJson(attrs[key]);
      if (Array.isArray(list)) for (const m of list) if (m && typeof m === "object") msgs.push(m);
    }
    if (!msgs.length) return null;
    return el("div", { class: "conversation", id: "conversation" }, msgs.map((m) => {
      const role = String(m.role || "user");
      return el("div", { class: "msg msg-" + role.replace(/[^a-z_]/gi, ""), "data-role": role },
        el("div", { class: "role" }, role, m.finish_reason ? el("span", { class: "muted" }, " · " + m.finish_reason) : null),
        messageParts(m).map((p) => {
          if (!p || typeof p !== "object") return el("pre", {}, attrText(p));
          if (p.type === "tool_call") {
            return el("div", { class: "tool-call" }, el("b", {}, "tool call " + (p.name || "")), p.id ? el("span", { class: "muted" }, " " + p.id) : null,
              el("pre", { class: "json" }, pretty(p.arguments === undefined ? {} : p.arguments)));
          }
          if (p.type === "tool_call_response") {
            return el("div", { class: "tool-result" }, el("b", {}, "tool result"), p.id ? el("span", { class: "muted" }, " " + p.id) : null,
              el("pre", { class: "json" }, pretty(p.response === undefined ? p.result : p.response)));
          }
          return el("pre", {}, p.content !== undefined ? attrText(p.content) : JSON.stringify(p, null, 2));
        }));
    }));
  }

  /* Blocks for what only weft knows: a verdict, a reward, a stuck loop, a correction. */
  function kv(pairs) {
    return el("dl", {}, pairs.filter(([, v]) => v !== undefined && v !== null && v !== "").map(([k, v]) => [el("dt", {}, k), el("dd", {}, attrText(v))]));
  }
  function weftBlocks(s) {
    const a = s.attributes || {};
    const out = [];
    if (a["weft.reflection.verdict"] !== undefined) {
      out.push(el("div", { class: "block verdict verdict-" + String(a["weft.reflection.verdict"]).toLowerCase(), id: "verdict-block" },
        el("h3", {}, "Reflection verdict: " + a["weft.reflection.verdict"]),
        kv([["attempt", a["weft.reflection.attempt"]], ["feedback", a["weft.reflection.feedback"]]])));
    }
    const reward = a["weft.step.reward"] !== undefined ? a["weft.step.reward"] : a["weft.run.reward"] !== undefined ? a["weft.run.reward"] : a["gen_ai.evaluation.score.value"];
    if (reward !== undefined) {
      out.push(el("div", { class: "block reward", id: "reward-block" }, el("h3", {}, "Reward: " + attrText(reward)),
        kv([["evaluation", a["gen_ai.evaluation.name"]], ["label", a["gen_ai.evaluation.score.label"]], ["explanation", a["gen_ai.evaluation.explanation"]]])));
    }
    for (const e of s.events || []) {
      if (e.name !== "weft.stuck_loop" && e.name !== "weft.circuit_breaker") continue;
      const ea = e.attributes || {};
      const stuck = e.name === "weft.stuck_loop";
      out.push(el("div", { class: "block stuck", id: stuck ? "stuck-block" : "breaker-block" },
        el("h3", {}, stuck ? "⟲ Stuck loop" + (ea["weft.stuck_loop.kind"] ? ": " + ea["weft.stuck_loop.kind"] : "") : "⟲ Circuit breaker"),
        kv(Object.entries(ea).map(([k, v]) => [k.replace(/^weft\.(stuck_loop|circuit_breaker)\./, ""), v]))));
    }
    const corr = Object.keys(a).filter((k) => k.startsWith("weft.correction."));
    if (corr.length) {
      out.push(el("div", { class: "block correction", id: "correction-block" },
        el("h3", {}, "Correction" + (a["weft.correction.failed_task"] ? " of " + a["weft.correction.failed_task"] : "")),
        kv(corr.map((k) => [k.slice("weft.correction.".length), a[k]]))));
    }
    if (a["weft.tool.exit_code"] !== undefined || a["weft.tool.error"] !== undefined) {
      out.push(el("div", { class: "block tool", id: "tool-block" }, el("h3", {}, "Tool " + (a["weft.tool.outcome"] || "")),
        kv([["exit code", a["weft.tool.exit_code"]], ["error", a["weft.tool.error"]]])));
    }
    return out;
  }

  /* "Fork from this step" (docs/explorer.md): on a span of a finished run that belongs to a step
   * (its agent's span or an LLM call under it), when the server has its token and the page is
   * logged in with it (GET /api/v1/session). The form sends the step's task and, for an LLM span,
   * the answer of the step's first model call, each only when edited, to POST
   * /api/v1/runs/ID/fork and opens the fork's page. @p ctx: {runId, traceId}. */
  let session = null;
  function forkBox(s, ctx) {
    const box = el("div", { class: "block fork", id: "fork-box", hidden: true });
    if (!ctx) return box;
    (async () => {
      session = session || api("/api/v1/session").catch(() => ({ can_fork: false }));
      if (!(await session).can_fork) return;
      const a = s.attributes || {};
      let step = a["weft.step.id"];
      if (!step && isLlm(a) && s.parent_span_id) {
        const p = await api("/api/v1/traces/" + ctx.traceId + "/spans/" + s.parent_span_id);
        step = (p.attributes || {})["weft.step.id"];
      }
      if (!step) return;
      const doc = await api("/api/v1/runs/" + encodeURIComponent(ctx.runId));
      const run = doc.run;
      const st = (doc.steps || []).find((x) => x.id === step);
      if (run.status === "running" || !st) return;
      /* The answer given replaces the step's first model call only: offered on that call's
       * span, prefilled with what the model said there; a later call's span says so. */
      const out = a["langfuse.observation.output"];
      const answer0 = isLlm(a) && ctx.isFirstCall ? (typeof out === "string" ? out : "") : null;
      const task = el("textarea", { id: "fork-task", rows: 3, "aria-label": "the step's task" });
      task.value = st.task || "";
      const ans = answer0 === null ? null : el("textarea", { id: "fork-answer", rows: 5, "aria-label": "the model's answer" });
      if (ans) ans.value = answer0;
      const err = el("p", { class: "status-failed", id: "fork-error", role: "alert" });
      const submit = el("button", { id: "fork-submit", type: "button" }, "Run the fork");
      const form = el("div", { id: "fork-form", hidden: true },
        el("label", {}, "Task of step " + step, task),
        ans ? el("label", {}, "Answer of the step's first model call (given instead of asking the model)", ans)
          : isLlm(a) ? el("p", { class: "muted", id: "fork-answer-note" }, "An answer can be given for the step's first model call only: open that call's span to edit it.") : null,
        el("p", {}, submit, el("span", { class: "muted" }, " steps before " + step + " are reused; " + step + " and what follows run live")), err);
      const open = el("button", { id: "fork-open", type: "button", "aria-expanded": "false", onclick: () => {
        form.hidden = !form.hidden;
        open.setAttribute("aria-expanded", String(!form.hidden));
      } }, "Fork from this step");
      submit.addEventListener("click", async () => {
        const set = {};
        if (task.value !== (st.task || "")) set["step." + step + ".task"] = task.value;
        if (ans && ans.value !== answer0) set["step." + step + ".answer"] = ans.value;
        submit.disabled = true;
        err.textContent = "";
        try {
          const r = await fetch("/api/v1/runs/" + encodeURIComponent(run.run_id) + "/fork", { method: "POST", credentials: "same-origin",
            headers: { "Content-Type": "application/json" }, body: JSON.stringify({ from: step, set }) });
          const body = await r.json().catch(() => ({}));
          if (r.status !== 202) throw new Error((body.error && body.error.message) || r.status + " " + r.statusText);
          location.hash = "#/run/" + body.run_id;
        } catch (e) {
          err.textContent = "Could not fork: " + e.message;
        } finally {
          submit.disabled = false;
        }
      });
      box.replaceChildren(el("h3", {}, "Fork"), open, form);
      box.hidden = false;
    })().catch(() => {});
    return box;
  }

  const CONTENT_KEYS = new Set(["gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions"]);
  function spanDetail(s, link, onClose, forkCtx) {
    const a = s.attributes || {};
    const llm = isLlm(a);
    const conv = conversation(a);
    const attrRows = (pred) => Object.entries(a).filter(([k]) => pred(k)).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, el("pre", {}, attrText(v)))));
    const raw = el("table", { id: "raw-attrs", hidden: true }, el("tbody", {}, attrRows(() => true)));
    const rawBtn = el("button", { id: "raw-toggle", "aria-expanded": "false", onclick: () => {
      raw.hidden = !raw.hidden;
      rawBtn.setAttribute("aria-expanded", String(!raw.hidden));
      rawBtn.textContent = (raw.hidden ? "Show" : "Hide") + " raw attributes";
    } }, "Show raw attributes");
    const linkBox = el("input", { id: "span-link", readonly: true, value: link, "aria-label": "link to this span" });
    const copy = el("button", { id: "copy-link", title: "copy a link to this span", onclick: () => {
      linkBox.select();
      const done = () => { copy.textContent = "Copied"; setTimeout(() => { copy.textContent = "Copy link"; }, 1500); };
      if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(link).then(done, () => { copy.textContent = "Select and copy (Ctrl+C)"; });
      else copy.textContent = "Select and copy (Ctrl+C)";
    } }, "Copy link");
    const tokIn = a["gen_ai.usage.input_tokens"], tokOut = a["gen_ai.usage.output_tokens"];
    return [
      el("div", { class: "detail-head" }, el("h2", { id: "span-name" }, s.name),
        el("button", { id: "detail-close", title: "close (Esc)", "aria-label": "close the detail", onclick: onClose }, "×")),
      el("p", { class: "muted", id: "span-ids" }, "span " + s.span_id + (s.parent_span_id ? " · parent " + s.parent_span_id : "") + " · " + dur(s.duration_ns)),
      el("p", { class: "linkbar" }, linkBox, copy),
      el("p", { class: "status st-" + (s.status || "unset"), id: "span-status" }, statusIcon(s.status), " status: " + s.status + (s.status_message ? " — " + s.status_message : "")),
      llm ? el("div", { class: "llm-strip", id: "llm-strip" },
        [["model", a["gen_ai.response.model"] || a["gen_ai.request.model"] || "–"], ["tokens in", tokIn === undefined ? "–" : tokIn],
          ["tokens out", tokOut === undefined ? "–" : tokOut], ["cost", money(costOf(a)) || "–"], ["latency", dur(s.duration_ns)]]
          .map(([k, v]) => el("div", {}, el("span", { class: "muted" }, k), el("b", {}, String(v))))) : null,
      weftBlocks(s),
      forkBox(s, forkCtx),
      conv ? [el("h3", {}, "Conversation"), conv] : llm ? el("p", { class: "muted", id: "no-content" },
        "No messages: content was not captured. Run with --capture-content (or \"capture_content\": true in the workflow) to see prompts and answers.") : null,
      el("h3", {}, "Attributes"),
      el("table", { id: "span-attrs" }, el("tbody", {}, attrRows((k) => !k.startsWith("langfuse.") && !k.startsWith("openinference.") && !(conv && CONTENT_KEYS.has(k))))),
      el("p", {}, rawBtn, el("span", { class: "muted" }, " every attribute, with the langfuse.* and openinference.* copies")), raw,
      (s.events || []).length ? el("h3", {}, "Events") : null,
      (s.events || []).map((e) => el("div", {}, el("b", {}, e.name), el("pre", {}, JSON.stringify(e.attributes || {}, null, 1)))),
      (s.links || []).length ? el("h3", {}, "Links") : null,
      (s.links || []).map((l) => el("div", {}, el("pre", {}, l.trace_id + " / " + l.span_id))),
    ];
  }

  /* The span query: whitespace-separated terms, all must hold. `status:error`, `step:ID`,
   * `agent:NAME`, `key=value` (an attribute), or text found in the span's name. */
  function parseQuery(q) {
    return q.trim().split(/\s+/).filter(Boolean).map((t) => {
      let m;
      if ((m = /^status:(\w+)$/i.exec(t))) return { kind: "status", v: m[1].toLowerCase() };
      if ((m = /^step:(.+)$/i.exec(t))) return { kind: "step", v: m[1], attrs: true };
      if ((m = /^agent:(.+)$/i.exec(t))) return { kind: "agent", v: m[1], attrs: true };
      if ((m = /^([^=\s]+)=(.*)$/.exec(t))) return { kind: "attr", k: m[1], v: m[2], attrs: true };
      return { kind: "text", v: t.toLowerCase() };
    });
  }

  /* A trace's rows (weft.rows/v1, docs/serve.md) as columns, filled part by part: the first
   * part is small so that the first screen is drawn at once, the rest arrives behind it. Times
   * are kept in ns (the document's unit times its numbers); a row's index is its place in tree
   * order, the same in every part. */
  const FIRST_ROWS = 300; /* the first part: more than a screen of rows */
  const PART_ROWS = 100000; /* the server's most rows in one answer */
  const STATUS = ["unset", "ok", "error"];
  function rowsModel(first) {
    const N = first.span_count;
    const m = {
      N, n: 0, traceId: first.trace_id, total: Math.max(1, first.end * first.unit_ns),
      ids: new Array(N), depth: new Int32Array(N), name: new Array(N), start: new Float64Array(N),
      len: new Float64Array(N), status: new Uint8Array(N), marker: new Uint8Array(N), crit: new Uint8Array(N),
    };
    m.add = (part) => {
      const u = part.unit_ns, o = part.offset, k = Math.min(part.count, N - o);
      for (let j = 0; j < k; j++) {
        const i = o + j;
        m.ids[i] = part.id.slice(16 * j, 16 * j + 16);
        m.depth[i] = part.depth[j];
        m.name[i] = part.names[part.name[j]];
        m.start[i] = part.start[j] * u;
        m.len[i] = part.dur[j] * u;
        m.status[i] = part.status[j];
      }
      for (const i of part.marker) if (i < N) m.marker[i] = 1;
      for (const i of part.critical) if (i < N) m.crit[i] = 1;
      m.n = Math.max(m.n, o + k);
    };
    m.add(first);
    return m;
  }
  /* The first part of the rows of @p path (a trace's or a run's trace route). */
  function firstRows(path) { return api(path + "?view=rows&limit=" + FIRST_ROWS); }

  /* A virtualised waterfall on a time axis: only the rows in view are in the document, so a
   * 100,000-span trace scrolls like a short one; the minimap is one canvas. Rows come from the
   * rows view (rowsModel(): the first part drawn at once, the rest read behind it by
   * loadRest(), while everything below keeps working on the rows that have arrived); the
   * attributes (tokens, cost, step, agent) come from the whole spans, read behind the rows
   * once all have arrived (at once up to ENRICH_MAX spans, when a query needs them above); a
   * span's detail is fetched when it is opened. @p base: the page's address ("#/run/ID"), a
   * span's link adds /span/ID; @p path: the trace's API route, for the rest of the rows. */
  const ENRICH_MAX = 20000;
  function waterfall(first, detail, base, path) {
    let m = rowsModel(first);
    let n = m.n;
    const traceId = first.trace_id;
    let total = m.total;
    /* The tree over the rows so far: parent, subtree end (rows not arrived yet count as inside
       every open subtree), errors up to each row; self time (duration minus the union of the
       children's intervals) is computed when a row is drawn. */
    let parent = new Int32Array(0), end = new Int32Array(0), errs = new Int32Array(1), self = new Float64Array(0);
    const index = new Map();
    function grow() {
      parent = new Int32Array(n); end = new Int32Array(n); errs = new Int32Array(n + 1);
      self = new Float64Array(n).fill(-1);
      const stack = [];
      for (let i = 0; i < n; i++) {
        index.set(m.ids[i], i);
        errs[i + 1] = errs[i] + (m.status[i] === 2 ? 1 : 0);
        while (stack.length && m.depth[stack[stack.length - 1]] >= m.depth[i]) end[stack.pop()] = i;
        parent[i] = stack.length ? stack[stack.length - 1] : -1;
        stack.push(i);
      }
      while (stack.length) end[stack.pop()] = n;
    }
    function selfTime(i) {
      if (self[i] >= 0) return self[i];
      const s0 = m.start[i], s1 = s0 + m.len[i];
      const ch = [];
      for (let j = i + 1; j < end[i]; j = end[j]) {
        const a = Math.max(s0, m.start[j]), b = Math.min(s1, m.start[j] + m.len[j]);
        if (b > a) ch.push([a, b]);
      }
      ch.sort((x, y) => x[0] - y[0]);
      let covered = 0, cs = -1, ce = -1;
      for (const [a, b] of ch) {
        if (a > ce) { if (ce > cs) covered += ce - cs; cs = a; ce = b; } else if (b > ce) ce = b;
      }
      if (ce > cs) covered += ce - cs;
      self[i] = Math.max(0, m.len[i] - covered);
      return self[i];
    }
    const attrs = new Map(); /* span id -> attributes, once read */
    let enriched = null;
    const collapsed = new Set();
    let visible = new Int32Array(0);
    let vpos = new Int32Array(0);
    function rebuild() {
      const v = [];
      if (vpos.length !== n) vpos = new Int32Array(n);
      vpos.fill(-1);
      for (let i = 0; i < n; i++) {
        if (state.critOnly && !m.crit[i]) continue;
        vpos[i] = v.length;
        v.push(i);
        if (collapsed.has(i)) i = end[i] - 1;
      }
      visible = Int32Array.from(v);
      spacer.style.height = visible.length * ROW_H + "px";
      spacer.setAttribute("data-rows", visible.length);
    }
    const state = { cursor: -1, open: null, pending: null, path: new Set(), v0: 0, v1: total, matches: [], match: -1, critOnly: false };

    const box = el("div", { class: "waterfall", id: "waterfall" });
    const spacer = el("div", { class: "spacer", role: "tree", tabindex: "0", "aria-label": "spans of trace " + traceId, id: "span-tree" });
    const axis = el("div", { class: "axis", id: "axis", title: "drag to zoom" });
    const sel = el("div", { class: "zoom-sel", hidden: true });
    const head = el("div", { class: "wf-head" }, el("div", { class: "name" }, "span"), el("div", { class: "num" }, "duration"),
      el("div", { class: "num" }, "self"), el("div", { class: "num tok" }, "tokens"), el("div", { class: "num" }, "cost"), el("div", { class: "track" }, axis));
    const canvas = el("canvas", { class: "minimap", id: "minimap", height: 48, title: "the whole trace: drag to zoom" });
    const mwin = el("div", { class: "minimap-window", id: "minimap-window" });
    const range = el("span", { class: "muted", id: "zoom-range" });
    const reset = el("button", { id: "zoom-reset", disabled: true, onclick: () => zoom(0, total) }, "Reset zoom");
    const mini = el("div", { class: "minimap-box" }, canvas, mwin);
    const search = el("input", { id: "span-search", type: "search", placeholder: "find: name, status:error, step:s1, agent:NAME, key=value  (/)", "aria-label": "find spans" });
    const count = el("span", { id: "search-count", class: "muted", "aria-live": "polite" });
    const prev = el("button", { id: "search-prev", title: "previous match (Shift+Enter)", onclick: () => go(-1) }, "↑ prev");
    const next = el("button", { id: "search-next", title: "next match (Enter)", onclick: () => go(1) }, "next ↓");
    const critical = el("button", { id: "critical-toggle", "aria-pressed": "false", title: "show only the spans on the critical path (the chain that determines when the trace ends)", onclick: () => toggleCritical() }, "Critical path");
    const loading = el("span", { id: "rows-loading", class: "muted", "aria-live": "polite" });
    const toolbar = el("div", { class: "wf-tools" }, search, prev, next, count, critical, loading, el("span", { class: "grow" }), range, reset);
    box.append(head, spacer);
    const root = el("div", { class: "timeline" }, toolbar, mini, box);

    function trackWidth() { return axis.clientWidth || 400; }
    function x(t, w) { return ((t - state.v0) / (state.v1 - state.v0)) * w; }
    function row(i) {
      const id = m.ids[i], depth = m.depth[i], nm = m.name[i], start = m.start[i], len = m.len[i], status = STATUS[m.status[i]], marker = m.marker[i];
      const crit = m.crit[i] === 1;
      const w = trackWidth();
      /* Bars at least 2 px and always inside the track: a span out of the window sits at its edge, faded. */
      let left = x(start, w), right = x(start + len, w);
      const out = right < 0 || left > w;
      left = Math.min(Math.max(left, 0), w - 2);
      right = Math.min(Math.max(right, left + 2), w);
      const bar = el("div", { class: "bar bar-" + status + (out ? " out" : "") });
      bar.style.left = left + "px";
      bar.style.width = Math.max(2, right - left) + "px";
      const hasKids = end[i] > i + 1;
      const folded = collapsed.has(i);
      const twisty = el("span", { class: "twisty", "aria-hidden": "true", onclick: hasKids ? (e) => { e.stopPropagation(); fold(i, !folded); } : null }, hasKids ? (folded ? "▸" : "▾") : "");
      const below = end[i] - i - 1, belowErr = errs[end[i]] - errs[i + 1];
      const name = el("div", { class: "name" }, twisty, statusIcon(status),
        crit ? el("span", { class: "crit", title: "on the critical path" }) : null,
        marker ? el("span", { class: "flag", title: "stuck loop or circuit breaker" }, "⟲") : null, " ", nm,
        folded ? el("span", { class: "fold-count", title: "folded subtree" }, " +" + below + " span" + (below === 1 ? "" : "s") + (belowErr ? ", " + belowErr + " error" + (belowErr === 1 ? "" : "s") : "")) : null);
      name.style.paddingLeft = 4 + depth * 12 + "px";
      const a = attrs.get(id);
      const llm = a && isLlm(a);
      const tin = llm ? a["gen_ai.usage.input_tokens"] : undefined, tout = llm ? a["gen_ai.usage.output_tokens"] : undefined;
      const r = el("div", {
        class: "row" + (status === "error" ? " error" : "") + (marker ? " marker" : "") + (crit ? " critical" : "") + (state.path.has(id) ? " onpath" : "") +
          (state.cursor === i ? " selected" : "") + (state.matches.length && state.matchSet.has(i) ? " match" : ""),
        role: "treeitem", id: "r-" + id, "aria-level": depth + 1, "aria-selected": String(state.cursor === i),
        "aria-expanded": hasKids ? String(!folded) : null, "aria-description": crit ? "on the critical path" : null,
        "data-span": id, "data-index": i,
        onclick: () => select(id),
      }, name, el("div", { class: "num" }, dur(len)), el("div", { class: "num" }, dur(selfTime(i))),
        el("div", { class: "num tok" }, tin !== undefined || tout !== undefined ? (tin || 0) + "/" + (tout || 0) : ""),
        el("div", { class: "num" }, llm ? money(costOf(a)) : ""), el("div", { class: "track" }, bar));
      r.style.top = vpos[i] * ROW_H + "px";
      return r;
    }
    function render() {
      const first = Math.max(0, Math.floor(box.scrollTop / ROW_H) - 10);
      const last = Math.min(visible.length, first + Math.ceil((box.clientHeight || 480) / ROW_H) + 20);
      const rows = [];
      for (let k = first; k < last; k++) rows.push(row(visible[k]));
      spacer.replaceChildren(...rows);
      if (state.cursor >= 0 && vpos[state.cursor] >= 0) spacer.setAttribute("aria-activedescendant", "r-" + m.ids[state.cursor]);
      else spacer.removeAttribute("aria-activedescendant");
    }
    function drawAxis() {
      const w = trackWidth();
      axis.replaceChildren(sel, ...ticks(state.v0, state.v1, Math.max(4, Math.floor(w / 70))).map((t) => {
        const e = el("span", { class: "tick" }, t.label);
        e.style.left = x(t.t, w) + "px";
        return e;
      }));
      const zoomed = state.v0 > 0 || state.v1 < total;
      reset.disabled = !zoomed;
      range.textContent = zoomed ? "showing " + dur(state.v0) + " – " + dur(state.v1) + " of " + dur(total) : "whole trace: " + dur(total);
      const mw = canvas.clientWidth || 1;
      mwin.style.left = (state.v0 / total) * mw + "px";
      mwin.style.width = Math.max(2, ((state.v1 - state.v0) / total) * mw) + "px";
    }
    function drawMinimap() {
      const w = canvas.clientWidth || 600, h = canvas.height;
      canvas.width = w;
      const c = canvas.getContext("2d");
      const css = getComputedStyle(document.documentElement);
      c.clearRect(0, 0, w, h);
      const colors = [css.getPropertyValue("--bar-unset").trim() || "#9ca3af", css.getPropertyValue("--bar").trim() || "#60a5fa", css.getPropertyValue("--err").trim() || "#c62828"];
      for (const st of [0, 1, 2]) {
        c.fillStyle = colors[st];
        for (let i = 0; i < n; i++) {
          if (m.status[i] !== st) continue;
          const x0 = (m.start[i] / total) * w;
          c.fillRect(x0, 3 + Math.floor((i / m.N) * (h - 8)), Math.max(1, (m.len[i] / total) * w), 3);
        }
      }
    }
    function zoom(a, b) {
      a = Math.max(0, Math.min(a, total)); b = Math.max(0, Math.min(b, total));
      if (b - a < 1) b = Math.min(total, a + 1);
      state.v0 = a; state.v1 = b;
      drawAxis();
      render();
    }
    /* Drag to zoom: on the axis within the window, on the minimap over the whole trace. */
    function dragZoom(target, toTime) {
      target.addEventListener("pointerdown", (e) => {
        const r = target.getBoundingClientRect();
        const x0 = e.clientX - r.left;
        target.setPointerCapture(e.pointerId);
        sel.hidden = target !== axis;
        const move = (ev) => {
          const x1 = ev.clientX - r.left;
          sel.style.left = Math.min(x0, x1) + "px";
          sel.style.width = Math.abs(x1 - x0) + "px";
        };
        const up = (ev) => {
          target.removeEventListener("pointermove", move);
          target.removeEventListener("pointerup", up);
          sel.hidden = true;
          const x1 = ev.clientX - r.left;
          if (Math.abs(x1 - x0) < 3) return;
          const w = r.width;
          zoom(toTime(Math.min(x0, x1) / w), toTime(Math.max(x0, x1) / w));
        };
        target.addEventListener("pointermove", move);
        target.addEventListener("pointerup", up);
        move(e);
      });
    }
    dragZoom(axis, (f) => state.v0 + f * (state.v1 - state.v0));
    dragZoom(mini, (f) => f * total);

    function fold(i, on) {
      if (end[i] <= i + 1) return;
      if (on) collapsed.add(i); else collapsed.delete(i);
      if (on && state.cursor > i && state.cursor < end[i]) state.cursor = i;
      rebuild();
      render();
    }
    function reveal(i) {
      let changed = false;
      for (let p = parent[i]; p >= 0; p = parent[p]) if (collapsed.delete(p)) changed = true;
      if (state.critOnly && !m.crit[i]) { state.critOnly = false; critical.setAttribute("aria-pressed", "false"); changed = true; }
      if (changed) rebuild();
    }
    function scrollTo(i) {
      const y = vpos[i] * ROW_H;
      if (y < box.scrollTop + ROW_H || y > box.scrollTop + box.clientHeight - 2 * ROW_H) box.scrollTop = Math.max(0, y - box.clientHeight / 2);
    }
    function setCursor(i, scroll) {
      state.cursor = i;
      reveal(i);
      if (scroll) scrollTo(i);
      render();
    }
    function closeDetail() {
      state.open = null;
      state.pending = null;
      detail.replaceChildren(el("p", { class: "muted" }, "Select a span: click a row, or move with ↑↓ and press Enter."));
      history.replaceState(null, "", base);
    }
    /* Select span @p id and open its detail; its link becomes the page's address. A span whose
       row has not arrived yet is selected when it does. */
    /* Whether row @p i is the first model call ("chat …") among its parent's children: the
     * only call a fork's given answer replaces (`step.ID.answer`). */
    function isFirstChat(i) {
      let p = i - 1;
      while (p >= 0 && m.depth[p] >= m.depth[i]) p--;
      for (let j = p + 1; j < n && m.depth[j] >= m.depth[i]; j++) {
        if (m.depth[j] === m.depth[i] && String(m.name[j]).startsWith("chat")) return j === i;
      }
      return false;
    }
    async function select(id, scroll) {
      const i = index.get(id);
      if (i === undefined && n < m.N) {
        state.pending = id;
        detail.replaceChildren(el("p", { class: "muted", id: "span-pending" }, "Loading span " + id + ": its row has not arrived yet (" + n + " of " + m.N + " spans read)."));
        return;
      }
      state.pending = null;
      if (i === undefined) {
        detail.replaceChildren(el("p", { class: "status-failed", id: "span-missing" }, "No span " + id + " in this trace: the link may be from another trace. Pick a span in the waterfall."));
        return;
      }
      setCursor(i, scroll !== false);
      state.open = id;
      const link = base + "/span/" + id;
      if (location.hash !== link) history.replaceState(null, "", link);
      detail.replaceChildren(el("p", { class: "muted" }, "Loading span…"));
      try {
        const s = await api("/api/v1/traces/" + traceId + "/spans/" + id);
        const forkCtx = base.startsWith("#/run/") ? { runId: base.slice(6), traceId, isFirstCall: isFirstChat(i) } : null;
        if (state.open === id) detail.replaceChildren(...spanDetail(s, location.origin + location.pathname + link, closeDetail, forkCtx).flat(3).filter((z) => z));
      } catch (e) {
        if (state.open === id) detail.replaceChildren(el("p", { class: "status-failed" }, "Could not read span " + id + ": " + e.message + ". Is weft serve still running? Click the row again to retry."));
      }
    }
    /* Keyboard: ↑↓ / j k move, ← fold (or go to the parent), → unfold (or go to the first
       child), Enter opens the detail, Esc closes it. */
    spacer.addEventListener("keydown", (e) => {
      if (e.altKey || e.ctrlKey || e.metaKey) return;
      let i = state.cursor >= 0 && vpos[state.cursor] >= 0 ? state.cursor : -1;
      const k = e.key;
      if (k === "ArrowDown" || k === "j" || k === "ArrowUp" || k === "k") {
        const down = k === "ArrowDown" || k === "j";
        const p = i < 0 ? (down ? 0 : visible.length - 1) : Math.max(0, Math.min(visible.length - 1, vpos[i] + (down ? 1 : -1)));
        if (visible.length) setCursor(visible[p], true);
      } else if (k === "ArrowLeft" && i >= 0) {
        if (end[i] > i + 1 && !collapsed.has(i)) fold(i, true); else if (parent[i] >= 0) setCursor(parent[i], true);
      } else if (k === "ArrowRight" && i >= 0) {
        if (collapsed.has(i)) fold(i, false); else if (end[i] > i + 1) setCursor(i + 1, true);
      } else if (k === "Enter" && i >= 0) {
        select(m.ids[i]);
      } else if (k === "Escape") {
        closeDetail();
      } else return;
      e.preventDefault();
    });

    /* Whole spans read page by page for their attributes (tokens, cost, step, agent, key=value). */
    function enrich() {
      if (!enriched) {
        enriched = (async () => {
          for (let off = 0; off < m.N;) {
            const page = await api("/api/v1/traces/" + traceId + "?offset=" + off + "&limit=10000");
            if (!page.spans || !page.spans.length) break;
            for (const s of page.spans) attrs.set(s.span_id, s.attributes || {});
            off += page.spans.length;
          }
          render();
        })();
      }
      return enriched;
    }
    function matches(q, i) {
      const a = attrs.get(m.ids[i]) || {};
      const nm = m.name[i];
      return q.every((t) => {
        if (t.kind === "text") return nm.toLowerCase().includes(t.v);
        if (t.kind === "status") return STATUS[m.status[i]] === t.v;
        if (t.kind === "step") return attrText(a["weft.step.id"]) === t.v;
        if (t.kind === "agent") return nm === "invoke_agent " + t.v || (a["gen_ai.agent.name"] === t.v && !String(nm).startsWith("chat"));
        return a[t.k] !== undefined && attrText(a[t.k]) === t.v;
      });
    }
    /* The matches of @p q among the rows so far; the current one kept when it still matches. */
    function collect(q) {
      const cur = state.match >= 0 ? state.matches[state.match] : -1;
      state.matches = [];
      for (let i = 0; i < n; i++) if (matches(q, i)) state.matches.push(i);
      state.matchSet = new Set(state.matches);
      state.match = cur >= 0 ? state.matches.indexOf(cur) : -1;
    }
    function countText() {
      const k = state.matches.length, more = n < m.N ? " so far" : "";
      count.textContent = state.match >= 0 ? state.match + 1 + " of " + k + more
        : k ? k + " match" + (k === 1 ? "" : "es") + more + " (Enter)"
        : "0 of 0" + more + ": no span matches; try part of a name, status:error, step:s1, agent:NAME or key=value";
    }
    let searchSeq = 0;
    async function find() {
      const seq = ++searchSeq;
      const q = parseQuery(search.value);
      if (!q.length) { state.matches = []; state.matchSet = new Set(); state.match = -1; count.textContent = ""; render(); return; }
      if (q.some((t) => t.attrs) && !attrs.size) {
        count.textContent = "reading attributes…";
        try { await enrich(); } catch (e) { count.textContent = "could not read attributes: " + e.message; return; }
        if (seq !== searchSeq) return;
      }
      state.match = -1;
      collect(q);
      countText();
      render();
    }
    function step(d) {
      if (!state.matches.length) return;
      state.match = state.match < 0 ? (d > 0 ? 0 : state.matches.length - 1) : (state.match + d + state.matches.length) % state.matches.length;
      countText();
      select(m.ids[state.matches[state.match]]);
    }
    let timer = null;
    /* Next (1) or previous (-1) match, the query run first when it changed. */
    async function go(d) {
      clearTimeout(timer);
      if (state.lastQuery !== search.value) { state.lastQuery = search.value; await find(); }
      step(d);
    }
    search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => find().catch(() => {}), 150); });
    search.addEventListener("keydown", async (e) => {
      if (e.key === "Enter") {
        e.preventDefault();
        go(e.shiftKey ? -1 : 1);
      } else if (e.key === "Escape") { search.blur(); spacer.focus(); }
    });
    search.addEventListener("input", () => { state.lastQuery = null; });
    /* Only the spans on the critical path, or every span. */
    function toggleCritical() {
      state.critOnly = !state.critOnly;
      critical.setAttribute("aria-pressed", String(state.critOnly));
      box.scrollTop = 0;
      rebuild();
      render();
    }

    box.addEventListener("scroll", render);
    state.matchSet = new Set();
    /* performance marks "weft:first-rows" (the first rows in the page) and "weft:rows-loaded"
       (every row in): what bench/explorer_render.mjs times. */
    let drawn = false;
    function layout() {
      drawMinimap(); drawAxis(); render();
      if (!drawn && root.isConnected && spacer.firstChild) { drawn = true; performance.mark("weft:first-rows"); }
    }
    /* Rows arrived (or the first part): the tree, the visible rows, the search, the minimap,
       and a span asked for before its row was there. */
    function grew() {
      grow();
      rebuild();
      box.setAttribute("data-loaded", n);
      spacer.setAttribute("aria-busy", String(n < m.N));
      loading.textContent = n < m.N ? "reading spans: " + n + " of " + m.N : "";
      const q = search.value.trim() ? parseQuery(search.value) : [];
      if (q.length && (!q.some((t) => t.attrs) || attrs.size)) { collect(q); countText(); }
      if (root.isConnected) layout();
      if (state.pending && index.has(state.pending)) select(state.pending, true);
    }
    grew();
    window.addEventListener("resize", () => { if (root.isConnected) layout(); });
    /* Read at once for traces up to ENRICH_MAX spans. A busy or slow server (503 past the
     * retries) must not leave the rows without tokens and cost for good: try again, a few
     * times, a little later. */
    function enrichSoon(tries) {
      enrich().catch(() => {
        enriched = null;
        if (tries > 1 && root.isConnected) setTimeout(() => enrichSoon(tries - 1), 2000);
      });
    }
    /* The rest of the rows, part by part, behind the rows on show. A trace that changed between
       two parts (a run still writing spans) is read again from its start. */
    let loadingRest = null;
    async function readRest() {
      while (n < m.N && root.isConnected) {
        const part = await api(path + "?view=rows&offset=" + n + "&limit=" + PART_ROWS);
        if (part.span_count !== m.N) {
          m = rowsModel(await api(path + "?view=rows&limit=" + PART_ROWS));
          index.clear(); collapsed.clear(); state.cursor = -1;
          total = m.total; state.v0 = 0; state.v1 = total;
        } else {
          m.add(part);
        }
        n = m.n;
        grew();
      }
      if (root.isConnected) performance.mark("weft:rows-loaded");
      if (state.pending && n >= m.N) select(state.pending, true);
      if (m.N <= ENRICH_MAX && root.isConnected) enrichSoon(5);
    }
    return {
      box: root, select, render: layout, focusSearch() { search.focus(); search.select(); },
      closeDetail, markPath(ids) { state.path = new Set(ids); render(); },
      /* Read the rest of the rows (once); resolves when all have arrived. */
      loadRest() {
        if (!loadingRest) {
          loadingRest = readRest().catch((e) => {
            loading.textContent = "could not read the rest of the spans (" + n + " of " + m.N + " shown): " + e.message + "; reload to try again";
          });
        }
        return loadingRest;
      },
      /* A plan node's step: the first of its spans (weft.step.id, tree order) that is not a
       * supervisor's decision about it, selected, and the search left at step:ID. */
      async findStep(id) {
        search.value = "step:" + id;
        state.lastQuery = search.value;
        await find();
        if (!state.matches.length) return;
        state.match = Math.max(0, state.matches.findIndex((i) => !String(m.name[i]).startsWith("plan ")));
        countText();
        await select(m.ids[state.matches[state.match]]);
      },
    };
  }

  /* --------------------------------------------------------------------------- a run */

  async function viewRun(ref, spanId) {
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
    const compareTo = el("input", { id: "compare-with", placeholder: "another run id to compare" });
    parts.push(el("p", {},
      r.status !== "completed" ? el("button", { class: "primary", id: "why", onclick: () => why(r.run_id, whyBox, wf, doc.steps).catch(fail) }, "Why did it fail?") : null,
      " ", compareTo, " ", el("button", { id: "compare", onclick: () => { if (compareTo.value) location.hash = "#/compare/" + r.run_id + "/" + compareTo.value; } }, "Compare")));
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
    current = { key: "run/" + ref, wf };
    if (wf) {
      wf.render();
      wf.loadRest();
      if (spanId) await wf.select(spanId, true);
    }
    if (r.status === "running") poll = setInterval(() => route(true), 3000);
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
  async function viewTrace(id, spanId) {
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
    current = { key: "trace/" + id, wf };
    if (wf) {
      wf.render();
      wf.loadRest();
      if (spanId) await wf.select(spanId, true);
    }
  }

  /* --------------------------------------------------------------------------- compare */

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
        el("td", { class: "delta " + deltaClass(da, db), "data-delta-ns": delta == null ? "" : delta },
          delta == null ? "–" : (delta > 0 ? "+" : "") + dur(Math.abs(delta)).replace(/^/, delta < 0 ? "−" : "")),
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
    /* A heat map: narrow cells shaded in five steps of the largest count, the column names
     * written upwards, so that a dozen agents fit a 1,280 px window. */
    const top = Math.max(1, ...names.flatMap((f) => names.map((t) => (m.handoffs[f] || {})[t] || 0)));
    const heat = (n) => (n ? "heat heat-" + Math.max(1, Math.ceil((5 * n) / top)) : "heat heat-0");
    const matrix = el("table", { id: "handoffs", class: "heatmap" },
      el("thead", {}, el("tr", {}, el("th", {}, "from \\ to"), names.map((n) => el("th", { class: "col", title: n }, el("span", {}, n))))),
      el("tbody", {}, names.map((f) => el("tr", {}, el("th", { title: f }, f), names.map((t) => {
        const n = (m.handoffs[f] || {})[t] || 0;
        return el("td", { class: heat(n), title: f + " → " + t + ": " + n }, n || "");
      })))));
    const canvas = el("canvas", { id: "success-chart" });
    const loops = el("table", { id: "loops" }, el("tbody", {}, Object.entries(m.loops).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))));
    if (!m.runs) {
      show(el("h1", {}, "Collaboration"), el("p", { class: "empty", id: "metrics-empty" }, "No runs to measure yet: run a workflow (",
        el("code", {}, "make run"), " or ", el("code", {}, "weft run examples/code_review/workflow.json"), ") and reload."));
      return;
    }
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

  /* The page on show: "run/ID" or "trace/ID" and its waterfall, so that a span's link opened
   * on its own page selects the span without drawing the page again. */
  let current = { key: null, wf: null };
  function route(fromPoll) {
    const parts = (location.hash || "#/runs").slice(2).split("/").map(decodeURIComponent);
    const key = parts[0] + "/" + parts[1];
    if (fromPoll !== true && current.wf && key === current.key && (parts[0] === "run" || parts[0] === "trace")) {
      if (parts[2] === "span" && parts[3]) current.wf.select(parts[3], true);
      else current.wf.closeDetail();
      return;
    }
    if (poll) { clearInterval(poll); poll = null; }
    if (events) { events.close(); events = null; }
    document.getElementById("live").hidden = true;
    current = { key: null, wf: null };
    const p = parts[0] === "run" && parts[1] ? viewRun(parts[1], parts[2] === "span" ? parts[3] : null)
      : parts[0] === "compare" && parts[2] ? viewCompare(parts[1], parts[2])
      : parts[0] === "metrics" ? viewMetrics()
      : parts[0] === "traces" ? viewTraces()
      : parts[0] === "trace" && parts[1] ? viewTrace(parts[1], parts[2] === "span" ? parts[3] : null)
      : viewRuns();
    p.catch(fail);
  }
  /* `/` focuses the span search (or the runs search); Esc in the page closes a span's detail. */
  document.addEventListener("keydown", (e) => {
    const t = e.target;
    const typing = t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT");
    if (e.key === "/" && !typing && !e.ctrlKey && !e.metaKey && !e.altKey) {
      const box = document.getElementById("span-search") || document.getElementById("q");
      if (box) { e.preventDefault(); box.focus(); box.select(); }
    } else if (e.key === "Escape" && !typing && current.wf) {
      current.wf.closeDetail();
    }
  });

  /* The palette: the browser's preference (prefers-color-scheme) until the toggle picks one,
   * kept in localStorage. */
  function theme() {
    let saved = null;
    try { saved = localStorage.getItem("weft.theme"); } catch (e) { /* storage off: follow the browser */ }
    const dark = saved ? saved === "dark" : window.matchMedia("(prefers-color-scheme: dark)").matches;
    return dark ? "dark" : "light";
  }
  function applyTheme(t) {
    document.documentElement.setAttribute("data-theme", t);
    const b = document.getElementById("theme-toggle");
    if (b) {
      b.textContent = t === "dark" ? "☀ light" : "☾ dark";
      b.setAttribute("aria-pressed", String(t === "dark"));
      b.title = "switch to the " + (t === "dark" ? "light" : "dark") + " palette";
    }
  }
  const toggle = el("button", { id: "theme-toggle", class: "theme-toggle", onclick: () => {
    const t = theme() === "dark" ? "light" : "dark";
    try { localStorage.setItem("weft.theme", t); } catch (e) { /* not kept: this page only */ }
    applyTheme(t);
    if (current.wf) current.wf.render();
  } });
  document.querySelector("header").append(toggle);
  applyTheme(theme());
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => applyTheme(theme()));

  window.addEventListener("hashchange", route);
  route();
})();
