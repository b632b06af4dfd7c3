/* dashboards/ui/src/runs.js - the runs list (#/runs), live by server-sent events. */
import { api, dur, el, fail, loopCount, short, show, when } from "./dom.js";
import { ui } from "./state.js";

/* @p ticked: the runs ticked for compare (id -> run), kept across reloads of the list. */
function runRow(r, ticked, onTick) {
  const box = el("input", { type: "checkbox", class: "tick", "data-run": r.run_id, checked: ticked.has(r.run_id),
    "aria-label": "tick run " + r.run_id + " to compare",
    onclick: (e) => e.stopPropagation(),
    onchange: (e) => onTick(r, e.target.checked) });
  return el("tr", { class: "clickable", "data-run": r.run_id, onclick: () => { location.hash = "#/run/" + r.run_id; } },
    el("td", { class: "tick" }, box),
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

/* Two ticked runs, the older first (A), as #/compare/A/B. */
function compareHash(ticked) {
  const [x, y] = [...ticked.values()];
  const older = (x.started || "") <= (y.started || "") ? [x, y] : [y, x];
  return "#/compare/" + encodeURIComponent(older[0].run_id) + "/" + encodeURIComponent(older[1].run_id);
}

export async function viewRuns() {
  const q = el("input", { id: "q", placeholder: "search id, workflow, input, reason" });
  const status = el("select", { id: "status" },
    ["", "running", "completed", "failed", "stuck", "interrupted", "timed_out", "budget_exhausted", "aborted"]
      .map((s) => el("option", { value: s }, s || "any status")));
  const body = el("tbody", {});
  const table = el("table", { id: "runs" },
    el("thead", {}, el("tr", {}, el("th", { class: "tick" }, el("span", { class: "muted", title: "tick two runs to compare them" }, "☐")),
      ["status", "run", "workflow", "started", "duration", "tokens in / out", "cost",
        "reward", "loops", "stuck loops"].map((h) => el("th", {}, h)))), body);
  const count = el("p", { class: "muted", id: "run-count" });
  /* Compare: tick two runs (Tab to a box, Space), then the button; A is the older. */
  const ticked = new Map();
  const compareBtn = el("button", { id: "compare-ticked", class: "primary", disabled: true,
    onclick: () => { if (ticked.size === 2) location.hash = compareHash(ticked); } }, "Compare the two ticked");
  const tickNote = el("span", { class: "muted", id: "ticked-count", "aria-live": "polite" }, "Tick two runs to compare them.");
  const onTick = (r, on) => {
    if (on) ticked.set(r.run_id, r); else ticked.delete(r.run_id);
    compareBtn.disabled = ticked.size !== 2;
    tickNote.textContent = ticked.size === 2 ? "2 ticked: ready to compare."
      : ticked.size > 2 ? ticked.size + " ticked: untick all but two." : ticked.size + " of 2 ticked.";
  };
  show(el("h1", {}, "Runs"), el("div", { class: "filters" }, q, status), el("div", { class: "runs-actions" }, compareBtn, tickNote), count, table);
  async function load() {
    const p = new URLSearchParams({ limit: "500" });
    if (q.value) p.set("q", q.value);
    if (status.value) p.set("status", status.value);
    const doc = await api("/api/v1/runs?" + p);
    body.replaceChildren(...doc.runs.map((r) => runRow(r, ticked, onTick)));
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
    ui.events = new EventSource("/api/v1/events");
    ui.events.addEventListener("run", () => load().catch(() => {}));
    /* The server cannot read the state store: say it, the list may be stale. */
    ui.events.addEventListener("store_error", (e) => {
      const msg = (JSON.parse(e.data || "{}").error) || "the state store cannot be read";
      count.replaceChildren(el("span", { class: "status-failed", id: "runs-stale" }, "Not live: " + msg + ". Reload once it is back."));
    });
    ui.events.onerror = () => {
      if (ui.events && ui.events.readyState === EventSource.CLOSED) { ui.events = null; if (live) pollWhileLive(); }
    };
  } else if (live) {
    pollWhileLive();
  }
  function pollWhileLive() {
    ui.poll = setInterval(() => load().then((still) => { if (!still) { clearInterval(ui.poll); ui.poll = null; } }).catch(() => {}), 2000);
  }
}
