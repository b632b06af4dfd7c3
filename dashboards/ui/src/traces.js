/* dashboards/ui/src/traces.js - the traces list (#/traces): every trace in the span store. */
import { api, dur, el, fail, short, show } from "./dom.js";

/* Every trace in the span store, a weft run's or one any OTel SDK sent to /v1/traces. */
export async function viewTraces() {
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
