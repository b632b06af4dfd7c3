/* dashboards/ui/app.js - the trace explorer (docs/explorer.md), served by `weft serve`.
 *
 * Everything from the stores reaches the page as text (textContent, attribute values): the UI
 * never builds markup from data, so a prompt holding <script> shows as that text. The server's
 * Content-Security-Policy forbids inline script besides. Views: #/runs, #/run/ID,
 * #/run/ID/span/SPAN_ID, #/trace/ID[/span/SPAN_ID], #/compare/A/B, #/metrics, #/datasets,
 * #/dataset/NAME[@V], #/experiments, #/experiment/REF, #/experiments/compare/A/B; data from
 * /api/v1 only.
 */
import { el, fail } from "./src/dom.js";
import { viewRuns } from "./src/runs.js";
import { viewTraces } from "./src/traces.js";
import { viewRun, viewTrace } from "./src/run.js";
import { viewCompare } from "./src/compare.js";
import { viewMetrics } from "./src/metrics.js";
import { viewDataset, viewDatasets } from "./src/datasets.js";
import { viewExperiment, viewExperimentCompare, viewExperiments } from "./src/experiments.js";
import { ui } from "./src/state.js";

function route(fromPoll) {
  const parts = (location.hash || "#/runs").slice(2).split("/").map(decodeURIComponent);
  const key = parts[0] + "/" + parts[1];
  if (fromPoll !== true && ui.current.wf && key === ui.current.key && (parts[0] === "run" || parts[0] === "trace")) {
    if (parts[2] === "span" && parts[3]) ui.current.wf.select(parts[3], true);
    else ui.current.wf.closeDetail();
    return;
  }
  if (ui.poll) { clearInterval(ui.poll); ui.poll = null; }
  if (ui.events) { ui.events.close(); ui.events = null; }
  document.getElementById("live").hidden = true;
  ui.current = { key: null, wf: null };
  const p = parts[0] === "run" && parts[1] ? viewRun(parts[1], parts[2] === "span" ? parts[3] : null)
    : parts[0] === "compare" && parts[2] ? viewCompare(parts[1], parts[2])
    : parts[0] === "metrics" ? viewMetrics()
    : parts[0] === "datasets" ? viewDatasets()
    : parts[0] === "dataset" && parts[1] ? viewDataset(parts[1])
    : parts[0] === "experiments" && parts[1] === "compare" && parts[3] ? viewExperimentCompare(parts[2], parts[3])
    : parts[0] === "experiments" ? viewExperiments()
    : parts[0] === "experiment" && parts[1] ? viewExperiment(parts[1])
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
  } else if (e.key === "Escape" && !typing && ui.current.wf) {
    ui.current.wf.closeDetail();
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
  if (ui.current.wf) ui.current.wf.render();
} });
document.querySelector("header").append(toggle);
applyTheme(theme());
window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => applyTheme(theme()));

ui.route = route;
window.addEventListener("hashchange", route);
route();
