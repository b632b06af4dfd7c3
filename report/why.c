/* report/why.c - why a run failed (weft.why/v1): the document `weft run why --json`, the
 * explorer's "Why did it fail?" panel (/api/v1/runs/REF/why) and `weft run why` read, so the
 * terminal and the browser name the same span and the same causes.
 *
 * The failure: the deepest ERROR span of the run's latest trace, among equals the latest in tree
 * order (the last failure: a step retried after a correction fails again later in the trace),
 * and the path of spans from the root down to it. Its causes, each a structured member:
 * - failed_steps: the steps that failed with what the state store kept of each (exit status,
 *   stderr and stdout tails, a timeout, any other field of the stored error);
 * - exceptions: the `exception` events (OTel semantic conventions: exception.type, .message,
 *   .stacktrace) of the failing path's spans and of every ERROR span, the latest
 *   WHY_EXCEPTIONS_MAX, each stack trace's last lines;
 * - last_answer: the last model answer before the failure: the LLM call (gen_ai.operation.name
 *   chat, or a Langfuse generation) that ended last at or before the failing span's end, its
 *   text from the span's gen_ai.output.messages when content was captured, else from the
 *   run's stored LLM exchange of that call (the state store keeps every exchange for replay);
 * - stuck_loops: each loop the watchdog reported (a weft.stuck_loop event that is not a budget
 *   warning), with its repetitions' spans (weft.stuck_loop.span_ids);
 * - budget: the budget that ended the run (weft.run.budget, .limit, .used on the root; for a
 *   run traced before those, read back from the run's stored reason and totals).
 * Everything is bounded: a document about a 100,000-span trace stays a few KB.
 */
#include "report/why.h"

#include "base/mem.h"
#include "base/utf8.h"
#include "report/docs.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <weft/trace.h>

#define WHY_TEXT_MAX        1500 /* bytes of an answer's excerpt */
#define WHY_EXCEPTIONS_MAX  10   /* exception events listed, the latest */
#define WHY_STACK_LINES     12   /* last lines of a stack trace */
#define WHY_STACK_MAX       2000 /* bytes of those */
#define WHY_LOOPS_MAX       10   /* stuck loops listed */
#define WHY_REPETITIONS_MAX 32   /* repetitions listed per loop */

static json_t *
str_or_null(const char *s)
{
    return s != NULL ? json_string(s) : json_null();
}

static const char *
attr_str(const struct weft_span_data *s, const char *key)
{
    const struct weft_value *v = weft_span_data_attr(s, key);

    return v != NULL && v->type == WEFT_VALUE_STRING ? v->u.str : NULL;
}

static const char *
event_str(const struct weft_event_data *ev, const char *key)
{
    for (size_t i = 0; i < ev->attr_count; i++) {
        if (ev->attrs[i].key != NULL && strcmp(ev->attrs[i].key, key) == 0 &&
            ev->attrs[i].value.type == WEFT_VALUE_STRING) {
            return ev->attrs[i].value.u.str;
        }
    }
    return NULL;
}

static void
span_hex(const struct weft_span_data *s, char out[2 * WEFT_SPAN_ID_SIZE + 1])
{
    weft_hex_encode(s->span_id, WEFT_SPAN_ID_SIZE, out);
}

/* @p text's first @p max bytes (cut between characters) as a JSON string; *is_cut when that
 * left something out. */
static json_t *
excerpt(const char *text, size_t max, bool *is_cut)
{
    size_t len = strlen(text);
    size_t keep = weft__utf8_cut(text, len, max);

    *is_cut = keep < len;
    return json_stringn(text, keep);
}

/* The last @p lines lines of @p text, at most @p max bytes (cut between characters). */
static json_t *
tail_of(const char *text, size_t lines, size_t max)
{
    size_t len = strlen(text);
    size_t start = len;
    size_t seen = 0;

    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r')) {
        len--;
    }
    for (start = len; start > 0; start--) {
        if (text[start - 1] == '\n' && ++seen == lines) {
            break;
        }
    }
    if (len - start > max) {
        start = len - max;
        while (start < len && ((unsigned char)text[start] & 0xc0) == 0x80) {
            start++; /* not inside a character */
        }
    }
    return json_stringn(text + start, len - start);
}

/* ------------------------------------------------------------------------------------------ */
/* The failing span and its path                                                               */

size_t
weft__why_deepest(const struct weft_trace *trace, size_t *errors)
{
    size_t deepest = SIZE_MAX;
    size_t n = weft_trace_span_count(trace);

    *errors = 0;
    for (size_t i = 0; i < n; i++) {
        if (weft_trace_span(trace, i)->status_code != WEFT_STATUS_ERROR) {
            continue;
        }
        (*errors)++;
        if (deepest == SIZE_MAX ||
            weft_trace_span_depth(trace, i) >= weft_trace_span_depth(trace, deepest)) {
            deepest = i;
        }
    }
    return deepest;
}

size_t
weft__trace_parent(const struct weft_trace *trace, size_t index)
{
    const struct weft_span_data *s = weft_trace_span(trace, index);
    size_t depth = weft_trace_span_depth(trace, index);

    if (s == NULL || !s->has_parent || depth == 0) {
        return SIZE_MAX;
    }
    /* Tree order: the parent is the nearest earlier span one level up. */
    for (size_t i = index; i-- > 0;) {
        if (weft_trace_span_depth(trace, i) == depth - 1) {
            return i;
        }
    }
    return SIZE_MAX;
}

static json_t *
why_entry(const struct weft_trace *trace, size_t i)
{
    const struct weft_span_data *s = weft_trace_span(trace, i);
    char id[2 * WEFT_SPAN_ID_SIZE + 1];

    span_hex(s, id);
    return json_pack("{s:s, s:o, s:s, s:o, s:o, s:o, s:I}", "span_id", id, "name",
                     str_or_null(s->name), "status",
                     s->status_code == WEFT_STATUS_ERROR ? "error"
                     : s->status_code == WEFT_STATUS_OK  ? "ok"
                                                         : "unset",
                     "status_message", str_or_null(s->status_message), "error_type",
                     str_or_null(attr_str(s, "error.type")), "step_id",
                     str_or_null(attr_str(s, "weft.step.id")), "depth",
                     (json_int_t)weft_trace_span_depth(trace, i));
}

/* ------------------------------------------------------------------------------------------ */
/* Failed steps                                                                                */

static json_t *
failed_steps(const struct weft_run_details *run)
{
    json_t *failed = json_array();

    for (size_t i = 0; failed != NULL && i < run->step_count; i++) {
        const char *status = weft__doc_step_status(run, i);
        const struct weft_run_step *s = &run->steps[i];
        const struct weft_run_step_extra *x =
            run->step_extras != NULL ? &run->step_extras[i] : NULL;
        json_t *error = NULL;

        if (status == NULL || strcmp(status, "failed") != 0) {
            continue;
        }
        if (x != NULL && x->error != NULL) {
            error = json_loads(x->error, JSON_DECODE_ANY, NULL);
            error = error != NULL ? error : json_string(x->error); /* not JSON: as stored */
        }
        json_array_append_new(
            failed, json_pack("{s:o, s:o, s:o, s:I, s:o, s:o, s:o}", "id", str_or_null(s->id),
                              "agent", str_or_null(s->agent), "executor", str_or_null(s->executor),
                              "attempts", (json_int_t)s->attempts, "error_type",
                              str_or_null(x != NULL ? x->error_type : NULL), "feedback",
                              str_or_null(x != NULL ? x->feedback : NULL), "error",
                              error != NULL ? error : json_null()));
    }
    return failed;
}

/* ------------------------------------------------------------------------------------------ */
/* Exception events                                                                            */

static json_t *
exception_json(const struct weft_span_data *s, const struct weft_event_data *ev)
{
    const char *stack = event_str(ev, "exception.stacktrace");
    const struct weft_value *escaped = NULL;
    char id[2 * WEFT_SPAN_ID_SIZE + 1];

    for (size_t i = 0; i < ev->attr_count; i++) {
        if (ev->attrs[i].key != NULL && strcmp(ev->attrs[i].key, "exception.escaped") == 0 &&
            ev->attrs[i].value.type == WEFT_VALUE_BOOL) {
            escaped = &ev->attrs[i].value;
        }
    }
    span_hex(s, id);
    return json_pack("{s:s, s:o, s:I, s:o, s:o, s:o, s:o}", "span_id", id, "span_name",
                     str_or_null(s->name), "time_ns", (json_int_t)ev->time_ns, "type",
                     str_or_null(event_str(ev, "exception.type")), "message",
                     str_or_null(event_str(ev, "exception.message")), "stacktrace",
                     stack != NULL ? tail_of(stack, WHY_STACK_LINES, WHY_STACK_MAX) : json_null(),
                     "escaped", escaped != NULL ? json_boolean(escaped->u.b) : json_null());
}

/* The exception events of the spans on the path (@p on_path) and of every ERROR span, in tree
 * order, the latest WHY_EXCEPTIONS_MAX. */
static json_t *
exceptions(const struct weft_trace *trace, const bool *on_path)
{
    json_t *list = json_array();
    size_t n = weft_trace_span_count(trace);

    for (size_t i = 0; list != NULL && i < n; i++) {
        const struct weft_span_data *s = weft_trace_span(trace, i);

        if (s->status_code != WEFT_STATUS_ERROR && (on_path == NULL || !on_path[i])) {
            continue;
        }
        for (size_t e = 0; e < s->event_count; e++) {
            if (s->events[e].name == NULL || strcmp(s->events[e].name, "exception") != 0) {
                continue;
            }
            json_array_append_new(list, exception_json(s, &s->events[e]));
            if (json_array_size(list) > WHY_EXCEPTIONS_MAX) {
                json_array_remove(list, 0);
            }
        }
    }
    return list;
}

/* ------------------------------------------------------------------------------------------ */
/* The last model answer                                                                       */

static bool
is_llm_call(const struct weft_span_data *s)
{
    const char *op = attr_str(s, "gen_ai.operation.name");
    const char *type = attr_str(s, "langfuse.observation.type");

    return (op != NULL && (strcmp(op, "chat") == 0 || strcmp(op, "text_completion") == 0 ||
                           strcmp(op, "generate_content") == 0)) ||
           (type != NULL && strcmp(type, "generation") == 0);
}

/* What a call's span kept of its answer: the text parts and tool calls of
 * gen_ai.output.messages, else langfuse.observation.output or output.value as text. Sets
 * "text", "truncated" and "tool_calls" on @p out; false when the span kept none. */
static bool
answer_from_span(const struct weft_span_data *s, json_t *out)
{
    const char *messages = attr_str(s, "gen_ai.output.messages");
    json_t *parsed = messages != NULL ? json_loads(messages, 0, NULL) : NULL;
    json_t *calls = json_array();
    char *text = NULL;
    size_t text_len = 0;
    bool is_cut = false;
    size_t i = 0;
    json_t *msg = NULL;

    json_array_foreach(parsed, i, msg)
    {
        size_t k = 0;
        json_t *part = NULL;

        json_array_foreach(json_object_get(msg, "parts"), k, part)
        {
            const char *type = json_string_value(json_object_get(part, "type"));
            const char *content = json_string_value(json_object_get(part, "content"));
            const char *name = json_string_value(json_object_get(part, "name"));

            if (type != NULL && strcmp(type, "text") == 0 && content != NULL) {
                size_t add = strlen(content);
                char *grown = weft__realloc(text, text_len + add + 2);

                if (grown == NULL) {
                    continue;
                }
                text = grown;
                if (text_len > 0) {
                    text[text_len++] = '\n';
                }
                memcpy(text + text_len, content, add + 1);
                text_len += add;
            } else if (type != NULL && strcmp(type, "tool_call") == 0 && name != NULL) {
                json_array_append_new(calls, json_string(name));
            }
        }
    }
    json_decref(parsed);
    if (text == NULL && json_array_size(calls) == 0) {
        const char *plain = attr_str(s, "langfuse.observation.output");

        plain = plain != NULL ? plain : attr_str(s, "output.value");
        text = plain != NULL ? weft__strdup(plain) : NULL;
    }
    if (text == NULL && json_array_size(calls) == 0) {
        json_decref(calls);
        return false;
    }
    json_object_set_new(out, "text",
                        text != NULL ? excerpt(text, WHY_TEXT_MAX, &is_cut) : json_null());
    json_object_set_new(out, "truncated", json_boolean(is_cut));
    json_object_set_new(out, "tool_calls", calls);
    weft__free(text);
    return true;
}

/* The step each span works for: its own weft.step.id, else its nearest ancestor's (one pass in
 * tree order, a stack by depth). Ownership: borrowed strings in a new array (weft__free()). */
static const char **
steps_of(const struct weft_trace *trace)
{
    size_t n = weft_trace_span_count(trace);
    const char **step = weft__calloc(n > 0 ? n : 1, sizeof(*step));
    const char **at_depth = weft__calloc(n + 1, sizeof(*at_depth));

    if (step == NULL || at_depth == NULL) {
        weft__free(step);
        weft__free(at_depth);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        size_t d = weft_trace_span_depth(trace, i);
        const char *own = attr_str(weft_trace_span(trace, i), "weft.step.id");

        if (d > n) {
            d = n;
        }
        step[i] = own != NULL ? own : d > 0 ? at_depth[d - 1] : NULL;
        at_depth[d] = step[i];
    }
    weft__free(at_depth);
    return step;
}

/* Is span @p i an LLM call of queue @p who (its step, or its agent) for @p purpose? */
static bool
is_of_queue(const struct weft_trace *trace,
            const char *const *step,
            size_t i,
            const char *who,
            const char *purpose)
{
    const struct weft_span_data *s = weft_trace_span(trace, i);
    const char *agent = attr_str(s, "gen_ai.agent.name");
    const char *p = attr_str(s, "weft.llm.purpose");

    return is_llm_call(s) && p != NULL && strcmp(p, purpose) == 0 &&
           ((step[i] != NULL && strcmp(step[i], who) == 0) ||
            (agent != NULL && strcmp(agent, who) == 0));
}

/* The stored exchange of the call at span @p c: its queue is its step's (a flow step) or its
 * agent's, and the trace's calls of that queue are the queue's last ones (a resumed run's
 * earlier calls are in an earlier trace), so the call is the queue's entry at
 * stored - in trace + its rank. NULL when none matches. */
static const struct weft_run_exchange *
stored_answer(const struct weft_trace *trace,
              size_t c,
              const struct weft_run_exchange *ex,
              size_t ex_count)
{
    const struct weft_span_data *call = weft_trace_span(trace, c);
    const char *purpose = attr_str(call, "weft.llm.purpose");
    const char **step = purpose != NULL && ex_count > 0 ? steps_of(trace) : NULL;
    const char *who[2] = {NULL, attr_str(call, "gen_ai.agent.name")};
    const struct weft_run_exchange *found = NULL;

    if (step == NULL) {
        return NULL;
    }
    who[0] = step[c];
    for (int w = 0; w < 2 && found == NULL; w++) {
        size_t stored = 0;
        size_t in_trace = 0;
        size_t rank = 0;
        size_t seen = 0;

        for (size_t i = 0; who[w] != NULL && i < ex_count; i++) {
            stored += ex[i].who != NULL && ex[i].purpose != NULL &&
                      strcmp(ex[i].who, who[w]) == 0 && strcmp(ex[i].purpose, purpose) == 0;
        }
        for (size_t i = 0; stored > 0 && i < weft_trace_span_count(trace); i++) {
            const struct weft_span_data *s = weft_trace_span(trace, i);

            if (!is_of_queue(trace, step, i, who[w], purpose)) {
                continue;
            }
            in_trace++;
            rank += s->start_time_ns < call->start_time_ns ||
                    (s->start_time_ns == call->start_time_ns && i < c);
        }
        if (stored == 0 || in_trace > stored) {
            continue;
        }
        for (size_t i = 0; i < ex_count && found == NULL; i++) {
            if (ex[i].who != NULL && ex[i].purpose != NULL && strcmp(ex[i].who, who[w]) == 0 &&
                strcmp(ex[i].purpose, purpose) == 0 && seen++ == stored - in_trace + rank) {
                found = &ex[i];
            }
        }
    }
    weft__free(step);
    return found;
}

static void
answer_from_exchange(const struct weft_run_exchange *x, json_t *out)
{
    json_t *calls = json_array();
    json_t *parsed = x->tool_calls != NULL ? json_loads(x->tool_calls, 0, NULL) : NULL;
    bool is_cut = false;
    size_t i = 0;
    json_t *call = NULL;

    json_array_foreach(parsed, i, call)
    {
        const char *name = json_string_value(json_object_get(call, "name"));

        if (name != NULL) {
            json_array_append_new(calls, json_string(name));
        }
    }
    json_decref(parsed);
    json_object_set_new(
        out, "text", x->content != NULL ? excerpt(x->content, WHY_TEXT_MAX, &is_cut) : json_null());
    json_object_set_new(out, "truncated", json_boolean(is_cut));
    json_object_set_new(out, "tool_calls", calls);
    json_object_set_new(out, "error", str_or_null(x->error));
}

/* The LLM call that ended last at or before the failure ended: the failing span (@p deepest),
 * or with @p is_run_end (a budget or the clock ended the run, not a span) or no failing span,
 * the trace's end; and its answer. null when the run made no call. */
static json_t *
last_answer(const struct weft_trace *trace,
            size_t deepest,
            bool is_run_end,
            const struct weft_run_exchange *ex,
            size_t ex_count)
{
    size_t n = weft_trace_span_count(trace);
    uint64_t until = 0;
    size_t best = SIZE_MAX;
    const struct weft_span_data *s = NULL;
    const struct weft_run_exchange *stored = NULL;
    char id[2 * WEFT_SPAN_ID_SIZE + 1];
    json_t *out = NULL;

    if (deepest != SIZE_MAX && !is_run_end) {
        until = weft_trace_span(trace, deepest)->end_time_ns;
    }
    for (size_t i = 0; until == 0 && i < n; i++) {
        uint64_t end = weft_trace_span(trace, i)->end_time_ns;
        until = end > until ? end : until;
    }
    for (size_t i = 0; i < n; i++) {
        s = weft_trace_span(trace, i);
        if (is_llm_call(s) && s->end_time_ns <= until &&
            (best == SIZE_MAX || s->end_time_ns >= weft_trace_span(trace, best)->end_time_ns)) {
            best = i;
        }
    }
    if (best == SIZE_MAX) {
        return json_null();
    }
    s = weft_trace_span(trace, best);
    span_hex(s, id);
    out = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o}", "span_id", id, "span_name",
                    str_or_null(s->name), "model",
                    str_or_null(attr_str(s, "gen_ai.response.model") != NULL
                                    ? attr_str(s, "gen_ai.response.model")
                                    : attr_str(s, "gen_ai.request.model")),
                    "agent", str_or_null(attr_str(s, "gen_ai.agent.name")), "purpose",
                    str_or_null(attr_str(s, "weft.llm.purpose")), "status_message",
                    str_or_null(s->status_code == WEFT_STATUS_ERROR ? s->status_message : NULL));
    if (out == NULL) {
        return json_null();
    }
    if (answer_from_span(s, out)) {
        json_object_set_new(out, "error", json_null());
        json_object_set_new(out, "source", json_string("span"));
    } else if ((stored = stored_answer(trace, best, ex, ex_count)) != NULL) {
        answer_from_exchange(stored, out);
        json_object_set_new(out, "source", json_string("exchange"));
    } else {
        json_object_set_new(out, "text", json_null()); /* not captured, not stored */
        json_object_set_new(out, "truncated", json_false());
        json_object_set_new(out, "tool_calls", json_array());
        json_object_set_new(out, "error", json_null());
        json_object_set_new(out, "source", json_null());
    }
    return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Stuck loops                                                                                 */

static bool
is_budget_kind(const char *kind)
{
    size_t n = kind != NULL ? strlen(kind) : 0;

    return n >= 7 && strcmp(kind + n - 7, "_budget") == 0;
}

/* The repetitions of a loop: "weft.stuck_loop.span_ids" (oldest first, comma-separated) with
 * each span's name when the trace holds it. */
static json_t *
repetitions(const struct weft_trace *trace, const char *ids)
{
    json_t *list = json_array();
    const char *p = ids;

    while (list != NULL && p != NULL && *p != '\0' && json_array_size(list) < WHY_REPETITIONS_MAX) {
        size_t len = strcspn(p, ",");
        char id[2 * WEFT_SPAN_ID_SIZE + 1];
        const char *name = NULL;

        if (len == 2 * WEFT_SPAN_ID_SIZE) {
            memcpy(id, p, len);
            id[len] = '\0';
            for (size_t i = 0; i < weft_trace_span_count(trace) && name == NULL; i++) {
                char hex[2 * WEFT_SPAN_ID_SIZE + 1];

                span_hex(weft_trace_span(trace, i), hex);
                name = strcmp(hex, id) == 0 ? weft_trace_span(trace, i)->name : NULL;
            }
            json_array_append_new(
                list, json_pack("{s:s, s:o}", "span_id", id, "name", str_or_null(name)));
        }
        p += len + (p[len] == ',');
    }
    return list;
}

static bool
is_listed(const json_t *loops, const char *kind, const char *evidence)
{
    size_t i = 0;
    json_t *loop = NULL;

    json_array_foreach(loops, i, loop)
    {
        const char *k = json_string_value(json_object_get(loop, "kind"));
        const char *e = json_string_value(json_object_get(loop, "evidence"));

        if (k != NULL && strcmp(k, kind) == 0 &&
            ((e == NULL && evidence == NULL) ||
             (e != NULL && evidence != NULL && strcmp(e, evidence) == 0))) {
            return true;
        }
    }
    return false;
}

/* The loops the watchdog reported: its event on the span where it found the loop (the root
 * carries a copy, listed only when no other span has it). */
static json_t *
stuck_loops(const struct weft_trace *trace)
{
    json_t *loops = json_array();
    size_t n = weft_trace_span_count(trace);

    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; loops != NULL && i < n && json_array_size(loops) < WHY_LOOPS_MAX; i++) {
            const struct weft_span_data *s = weft_trace_span(trace, i);
            char id[2 * WEFT_SPAN_ID_SIZE + 1];

            if ((weft_trace_span_depth(trace, i) == 0) != (pass == 1)) {
                continue;
            }
            span_hex(s, id);
            for (size_t e = 0; e < s->event_count && json_array_size(loops) < WHY_LOOPS_MAX; e++) {
                const struct weft_event_data *ev = &s->events[e];
                const char *kind = event_str(ev, "weft.stuck_loop.kind");
                const char *evidence = event_str(ev, "weft.stuck_loop.evidence");

                if (ev->name == NULL || strcmp(ev->name, "weft.stuck_loop") != 0 || kind == NULL ||
                    is_budget_kind(kind) || is_listed(loops, kind, evidence)) {
                    continue;
                }
                json_array_append_new(
                    loops,
                    json_pack("{s:s, s:o, s:s, s:o, s:o, s:o, s:o}", "span_id", id, "span_name",
                              str_or_null(s->name), "kind", kind, "evidence", str_or_null(evidence),
                              "policy", str_or_null(event_str(ev, "weft.stuck_loop.policy")),
                              "agents", str_or_null(event_str(ev, "weft.stuck_loop.agents")),
                              "repetitions",
                              repetitions(trace, event_str(ev, "weft.stuck_loop.span_ids"))));
            }
        }
    }
    return loops;
}

/* ------------------------------------------------------------------------------------------ */
/* The budget that ran out                                                                     */

static const char *
budget_unit(const char *name)
{
    return strcmp(name, "max_iterations") == 0 ? "iterations"
           : strcmp(name, "max_tokens") == 0   ? "tokens"
           : strcmp(name, "max_cost_usd") == 0 ? "USD"
           : strcmp(name, "timeout_s") == 0    ? "s"
                                               : NULL;
}

static json_t *
number_json(const struct weft_value *v)
{
    return v == NULL                      ? json_null()
           : v->type == WEFT_VALUE_INT    ? json_integer((json_int_t)v->u.i)
           : v->type == WEFT_VALUE_DOUBLE ? json_real(v->u.d)
                                          : json_null();
}

static json_t *
budget_json(const char *name, json_t *limit, json_t *used, const char *from)
{
    return json_pack("{s:s, s:o, s:o, s:o, s:s}", "name", name, "limit", limit, "used", used,
                     "unit", str_or_null(budget_unit(name)), "from", from);
}

/* The budget from the run's stored reason (the engine's own sentences) and totals: runs
 * traced before the root carried weft.run.budget, and runs that were not traced. */
static json_t *
budget_from_reason(const struct weft_run_info *info)
{
    const char *r = info->reason != NULL ? info->reason : "";
    unsigned long long n = 0;
    double d = 0;

    if (sscanf(r, "max_iterations (%llu) reached", &n) == 1) {
        return budget_json("max_iterations", json_integer((json_int_t)n),
                           json_integer((json_int_t)info->iterations), "reason");
    }
    if (sscanf(r, "token budget (%llu) spent", &n) == 1) {
        return budget_json("max_tokens", json_integer((json_int_t)n),
                           json_integer(info->input_tokens + info->output_tokens), "reason");
    }
    if (sscanf(r, "cost budget ($%lf) spent", &d) == 1) {
        return budget_json("max_cost_usd", json_real(d), json_real(info->cost_usd), "reason");
    }
    if (sscanf(r, "run timeout of %lfs reached", &d) == 1) {
        return budget_json("timeout_s", json_real(d),
                           info->ended_ns > info->started_ns
                               ? json_real((double)(info->ended_ns - info->started_ns) / 1e9)
                               : json_null(),
                           "reason");
    }
    return json_null();
}

static json_t *
budget(const struct weft_run_details *run, const struct weft_trace *trace)
{
    const char *status = run->info.status != NULL ? run->info.status : "";

    for (size_t i = 0; trace != NULL && i < weft_trace_span_count(trace); i++) {
        const struct weft_span_data *s = weft_trace_span(trace, i);
        const char *name =
            weft_trace_span_depth(trace, i) == 0 ? attr_str(s, "weft.run.budget") : NULL;

        if (name != NULL) {
            return budget_json(name, number_json(weft_span_data_attr(s, "weft.run.budget.limit")),
                               number_json(weft_span_data_attr(s, "weft.run.budget.used")), "span");
        }
    }
    if (strcmp(status, "budget_exhausted") != 0 && strcmp(status, "timed_out") != 0) {
        return json_null();
    }
    return budget_from_reason(&run->info);
}

/* ------------------------------------------------------------------------------------------ */
/* The document                                                                                */

json_t *
weft__doc_why(const struct weft_run_details *run,
              const struct weft_trace *trace,
              const struct weft_run_exchange *exchanges,
              size_t exchange_count)
{
    size_t errors = 0;
    size_t deepest = trace != NULL ? weft__why_deepest(trace, &errors) : SIZE_MAX;
    size_t n = trace != NULL ? weft_trace_span_count(trace) : 0;
    bool *on_path = n > 0 ? weft__calloc(n, sizeof(*on_path)) : NULL;
    json_t *path = json_array();
    json_t *doc = NULL;
    const char *status = run->info.status != NULL ? run->info.status : "";
    bool is_run_end = strcmp(status, "budget_exhausted") == 0 || strcmp(status, "timed_out") == 0;

    for (size_t i = deepest; path != NULL && i != SIZE_MAX; i = weft__trace_parent(trace, i)) {
        json_array_insert_new(path, 0, why_entry(trace, i));
        if (on_path != NULL) {
            on_path[i] = true;
        }
    }
    doc = json_pack("{s:s, s:o, s:o, s:o, s:o, s:b, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                    "schema", WEFT_DOC_SCHEMA_WHY, "run_id", str_or_null(run->info.run_id),
                    "status", str_or_null(run->info.status), "reason",
                    str_or_null(run->info.reason), "trace_id", str_or_null(run->info.trace_id),
                    "trace_read", trace != NULL, "error_span_count", (json_int_t)errors, "path",
                    path != NULL ? path : json_array(), "failed_span",
                    deepest != SIZE_MAX ? why_entry(trace, deepest) : json_null(), "failed_steps",
                    failed_steps(run), "exceptions",
                    trace != NULL ? exceptions(trace, on_path) : json_array(), "last_answer",
                    trace != NULL && strcmp(status, "completed") != 0
                        ? last_answer(trace, deepest, is_run_end, exchanges, exchange_count)
                        : json_null(),
                    "stuck_loops", trace != NULL ? stuck_loops(trace) : json_array(), "budget",
                    budget(run, trace));
    weft__free(on_path);
    return doc;
}
