/* dashboards/ui/src/waterfall.js - the virtualised waterfall on a time axis, its search, folds and minimap. */
import { api, attrText, costOf, dur, el, isLlm, money, statusIcon } from "./dom.js";
import { spanDetail } from "./detail.js";

const ROW_H = 22; /* a row's height in px, as app.css draws it */

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
export async function firstRows(path) {
  const first = await api(path + "?view=rows&limit=" + FIRST_ROWS);
  performance.mark("weft:first-part"); /* its body parsed (bench/explorer_render.mjs) */
  return first;
}

/* A virtualised waterfall on a time axis: only the rows in view are in the document, so a
 * 100,000-span trace scrolls like a short one; the minimap is one canvas. Rows come from the
 * rows view (rowsModel(): the first part drawn at once, the rest read behind it by
 * loadRest(), while everything below keeps working on the rows that have arrived); the
 * attributes (tokens, cost, step, agent) come from the whole spans, read behind the rows
 * once all have arrived (at once up to ENRICH_MAX spans, when a query needs them above); a
 * span's detail is fetched when it is opened. @p base: the page's address ("#/run/ID"), a
 * span's link adds /span/ID; @p path: the trace's API route, for the rest of the rows. */
const ENRICH_MAX = 20000;
export function waterfall(first, detail, base, path) {
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
    /* A bar a row was 100,000 fillRect() calls at 100,000 spans: the rows are counted into
       pixels instead (per status and line, +1 where a bar starts, -1 past its end), and each
       line's covered pixels drawn as runs, a few thousand calls whatever the size. */
    const lines = Math.max(1, h - 8), cover = new Int32Array(3 * lines * (w + 1));
    for (let i = 0; i < n; i++) {
      const x0 = Math.min(w - 1, Math.max(0, Math.floor((m.start[i] / total) * w)));
      const x1 = Math.min(w, Math.max(x0 + 1, Math.ceil(((m.start[i] + m.len[i]) / total) * w)));
      const at = (m.status[i] * lines + Math.floor((i / m.N) * lines)) * (w + 1);
      cover[at + x0]++;
      cover[at + x1]--;
    }
    for (let st = 0; st < 3; st++) {
      c.fillStyle = colors[st];
      for (let y = 0; y < lines; y++) {
        const at = (st * lines + y) * (w + 1);
        for (let x = 0, sum = 0, from = -1; x <= w; x++) {
          sum += cover[at + x];
          if (sum > 0 && from < 0) from = x;
          else if (sum <= 0 && from >= 0) { c.fillRect(from, 3 + y, x - from, 3); from = -1; }
        }
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
  /* performance marks "weft:first-rows" (the first rows in the page), "weft:first-rows-painted"
     (a task after the next frame: they are on screen) and "weft:rows-loaded" (every row in):
     what bench/explorer_render.mjs times. */
  let drawn = false;
  function layout() {
    drawMinimap(); drawAxis(); render();
    if (!drawn && root.isConnected && spacer.firstChild) {
      drawn = true;
      performance.mark("weft:first-rows");
      requestAnimationFrame(() => setTimeout(() => performance.mark("weft:first-rows-painted")));
    }
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
