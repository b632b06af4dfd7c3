/* dashboards/ui/src/detail.js - a span's detail: the conversation, weft's own blocks, fork from a step. */
import { api, attrText, costOf, dur, el, isLlm, money, statusIcon } from "./dom.js";

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
export function spanDetail(s, link, onClose, forkCtx) {
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
