/* dashboards/ui/src/dom.js - DOM building, the API fetch and the formatting every view shares. */

/* el("div", {class: "x", onclick: f}, "text", child...). A table row that opens something
 * (class "clickable" with an onclick, and no keys of its own) is reached with Tab and opened with
 * Enter, as a link is. */
export function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  if (tag === "tr" && attrs && typeof attrs.onclick === "function" && !attrs.onkeydown &&
      /\bclickable\b/.test(attrs.class || "")) {
    e.tabIndex = 0;
    e.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && ev.target === e) { ev.preventDefault(); attrs.onclick(ev); }
    });
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}
export function svg(tag, attrs, ...kids) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}
export async function api(path) {
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
export function dur(ns) {
  if (ns === null || ns === undefined) return "–";
  if (ns < 1e3) return ns + "ns";
  if (ns < 1e6) return (ns / 1e3).toFixed(1) + "µs";
  if (ns < 1e9) return (ns / 1e6).toFixed(1) + "ms";
  if (ns < 60e9) return (ns / 1e9).toFixed(2) + "s";
  return Math.floor(ns / 60e9) + "m" + String(Math.round((ns % 60e9) / 1e9)).padStart(2, "0") + "s";
}
export function when(iso) { return iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "Z") : "–"; }
export function short(id) { return id ? id.slice(0, 8) : "–"; }
export function loopCount(loops) {
  let n = 0;
  for (const [k, v] of Object.entries(loops || {})) if (k !== "stuck") n += v;
  return n;
}
export function show(...nodes) {
  const m = document.getElementById("main");
  /* A part a view leaves out is null: not a "null" text node. */
  m.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined));
  return m;
}
/* An error, and what to do about it. */
export function fail(err) {
  const msg = err && err.message ? err.message : String(err);
  const hint = /no such|not found|404/i.test(msg) ? "Check the id in the address, or pick a run from the runs list."
    : /fetch|network|Failed/i.test(msg) ? "The server did not answer: is `weft serve` still running? Start it again and reload."
    : "Reload the page; if it persists, run the same read in a terminal (`weft run show --json`, `weft trace show --json`) to see the store's error.";
  show(el("div", { class: "empty", id: "error-box" }, el("p", { class: "status-failed", id: "error" }, "Error: " + msg),
    el("p", { id: "error-hint" }, hint, " "), el("p", {}, el("a", { href: "#/runs" }, "← back to the runs"))));
}

export function attrText(v) { return typeof v === "string" ? v : JSON.stringify(v); }
const STATUS_ICON = { error: "✕", ok: "✓", unset: "○" };
export function statusIcon(st) {
  return el("span", { class: "st-icon st-" + (st || "unset"), title: "status " + (st || "unset"), "aria-label": "status " + (st || "unset") }, STATUS_ICON[st] || "○");
}
export function costOf(a) {
  const c = a["weft.cost.usd"];
  return typeof c === "number" ? c : null;
}
export function isLlm(a) { return a["gen_ai.operation.name"] === "chat" || a["langfuse.observation.type"] === "generation"; }
export function money(c) { return c === null || c === undefined ? "" : "$" + (c < 0.01 ? c.toFixed(6) : c.toFixed(4)); }
/* A time in ns since the epoch (the experiments' and datasets' documents) as when() shows it. */
export function whenNs(ns) { return ns ? when(new Date(Math.floor(ns / 1e6)).toISOString()) : "–"; }
export function pct(x) { return typeof x === "number" ? (100 * x).toFixed(1) + "%" : "–"; }
