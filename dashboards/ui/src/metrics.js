/* dashboards/ui/src/metrics.js - the collaboration metrics page (#/metrics). */
import { api, el, show } from "./dom.js";
import { Chart } from "./vendor.js";

let chart = null; /* the success-rate chart on show, destroyed before the next is drawn */

export async function viewMetrics() {
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
