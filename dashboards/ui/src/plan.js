/* dashboards/ui/src/plan.js - the plan graph as it ran (dagre layout drawn as SVG). */
import { el, svg } from "./dom.js";
import { dagre } from "./vendor.js";

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
export function planGraph(doc, before) {
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
export function fitPlan(root) {
  if (!root.isConnected || root.tagName.toLowerCase() !== "svg") return;
  const b = root.querySelector(".plan-content").getBBox(), pad = 10;
  const w = Math.ceil(b.width + 2 * pad), h = Math.ceil(b.height + 2 * pad);
  root.setAttribute("viewBox", `${Math.floor(b.x - pad)} ${Math.floor(b.y - pad)} ${w} ${h}`);
  root.setAttribute("width", w);
  root.setAttribute("height", h);
}
