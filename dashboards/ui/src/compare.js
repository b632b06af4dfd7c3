/* dashboards/ui/src/compare.js - two runs side by side (#/compare/A/B). */
import { api, dur, el, short, show } from "./dom.js";

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

export async function viewCompare(a, b) {
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
