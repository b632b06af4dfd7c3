/* runtime/mcp_server/tools_why.c - why_failed (docs/mcp.md): why a run failed, as the
 * explorer's why panel and `weft run why` say it. The answer is the path of spans from the run's
 * root down to its deepest ERROR span (each with the attributes that tell what went wrong), the
 * failed steps as the state database records them (exit status, stderr and stdout tails), and
 * the causes of the weft.why/v1 document (report/why.h: exception events, the last model answer
 * before the failure, stuck loops with their repetitions, the budget that ran out), with a
 * one-sentence summary naming the cause.
 *
 * A run that was not traced, or whose trace the span store does not hold, still answers with
 * what the state database kept (failed steps, budget) and an empty path; its stored LLM
 * exchanges are read for the last answer, a failure to read them said, never fatal.
 */
#include "report/docs.h"
#include "report/why.h"
#include "runtime/mcp_server/tools.h"

#include <stdio.h>
#include <string.h>
#include <weft/weft.h>

/* The attributes that say why a span failed, for the path of why_failed. */
static bool
is_telling(const char *key)
{
    return strncmp(key, "error.", 6) == 0 || strncmp(key, "exception.", 10) == 0 ||
           strstr(key, "status") != NULL || strstr(key, "reason") != NULL ||
           strstr(key, "outcome") != NULL || strstr(key, "exit_code") != NULL ||
           strcmp(key, "weft.step.id") == 0 || strcmp(key, "gen_ai.tool.name") == 0 ||
           strcmp(key, "gen_ai.agent.name") == 0 || strstr(key, "stderr") != NULL;
}

static json_t *
path_entry(const struct weft_trace *trace, size_t index)
{
    const struct weft_span_data *s = weft_trace_span(trace, index);
    const struct weft_value *et = weft_span_data_attr(s, "error.type");
    char span_id[17];
    json_t *attrs = json_object();

    weft_hex_encode(s->span_id, 8, span_id);
    for (size_t i = 0; attrs != NULL && i < s->attr_count; i++) {
        if (is_telling(s->attrs[i].key)) {
            json_object_set_new(attrs, s->attrs[i].key, weft__mcp_value_json(&s->attrs[i].value));
        }
    }
    for (size_t i = 0; attrs != NULL && i < s->event_count; i++) {
        const char *ev = s->events[i].name != NULL ? s->events[i].name : "";

        if (strcmp(ev, "exception") == 0 || strncmp(ev, "weft.", 5) == 0) {
            json_object_set_new(attrs, "event", json_string(ev));
        }
    }
    return json_pack(
        "{s:s, s:s, s:s, s:s, s:o, s:o, s:I, s:o, s:o}", "name", s->name != NULL ? s->name : "",
        "span_id", span_id, "kind", weft__mcp_kind_name(s->kind), "status",
        weft__mcp_status_name(s->status_code), "error_type",
        et != NULL && et->type == WEFT_VALUE_STRING ? json_string(et->u.str) : json_null(),
        "status_message", weft__mcp_text_json(s->status_message, WEFT__MCP_MAX_TEXT_BYTES), "depth",
        (json_int_t)weft_trace_span_depth(trace, index), "duration_ms",
        weft__mcp_duration_json(s->start_time_ns, s->end_time_ns), "attributes", attrs);
}

/* The run's trace from the span store, or NULL with @p why saying why not ("" when the run was
 * not traced). *store is the handle to give back. */
static struct weft_trace *
load_trace(struct weft_mcp_server *srv,
           const struct weft_run_details *run,
           struct weft_store **store,
           char *why,
           size_t why_len)
{
    struct weft_trace *trace = NULL;
    struct tool_out opened;
    weft_err err = WEFT_OK;

    why[0] = '\0';
    *store = NULL;
    if (run->info.trace_id == NULL) {
        return NULL;
    }
    memset(&opened, 0, sizeof(opened));
    *store = weft__mcp_open_store(srv, &opened);
    if (*store == NULL) {
        snprintf(why, why_len, "%s", opened.error);
        return NULL;
    }
    err = weft_store_load_trace(*store, run->info.trace_id, &trace);
    if (err == WEFT_ENOTFOUND) {
        snprintf(why, why_len, "the trace of the run (%s) is not in the span store",
                 run->info.trace_id);
    } else if (err != WEFT_OK) {
        snprintf(why, why_len, "the trace of the run (%s) cannot be read from the span store: %s",
                 run->info.trace_id, weft_strerror(err));
    }
    return err == WEFT_OK ? trace : NULL;
}

static const char *
text_or(const json_t *s)
{
    return json_is_string(s) ? json_string_value(s) : "?";
}

/* What ended the run, from the why document @p doc, in a few words ("" when it names no
 * cause): the budget that ran out, else the stuck loop, else a failed step's exit status. */
static void
cause_text(const json_t *doc, char *out, size_t len)
{
    const json_t *budget = json_object_get(doc, "budget");
    const json_t *loop = json_array_get(json_object_get(doc, "stuck_loops"), 0);
    size_t i = 0;
    const json_t *step = NULL;

    out[0] = '\0';
    if (json_is_object(budget)) {
        const char *unit = json_string_value(json_object_get(budget, "unit"));

        snprintf(out, len, "the %s budget ran out (limit %g, used %g%s%s)",
                 text_or(json_object_get(budget, "name")),
                 json_number_value(json_object_get(budget, "limit")),
                 json_number_value(json_object_get(budget, "used")), unit != NULL ? " " : "",
                 unit != NULL ? unit : "");
        return;
    }
    if (loop != NULL) {
        snprintf(out, len, "a stuck %s loop (%zu repetitions)",
                 text_or(json_object_get(loop, "kind")),
                 json_array_size(json_object_get(loop, "repetitions")));
        return;
    }
    json_array_foreach(json_object_get(doc, "failed_steps"), i, step)
    {
        const json_t *code = json_object_get(json_object_get(step, "error"), "exit_code");

        if (json_is_integer(code)) {
            snprintf(out, len, "step %.100s exited with status %lld",
                     text_or(json_object_get(step, "id")), (long long)json_integer_value(code));
            return;
        }
    }
}

/* The one-sentence answer: how the run ended, its deepest error span, and the cause. */
static void
summary_text(const struct weft_run_details *run,
             const struct weft_trace *trace,
             size_t deepest,
             const char *cause,
             char *out,
             size_t len)
{
    const struct weft_run_info *r = &run->info;
    char span[700];

    if (trace == NULL) {
        snprintf(span, sizeof(span), "%s",
                 r->trace_id == NULL ? "it was not traced" : "its trace could not be read");
    } else if (deepest != SIZE_MAX) {
        const struct weft_span_data *s = weft_trace_span(trace, deepest);
        const struct weft_value *et = weft_span_data_attr(s, "error.type");
        bool has_type = et != NULL && et->type == WEFT_VALUE_STRING;

        snprintf(span, sizeof(span), "the deepest error is span \"%.200s\"%s%.100s%s%s%.300s",
                 s->name != NULL ? s->name : "", has_type ? " (error.type " : "",
                 has_type ? et->u.str : "", has_type ? ")" : "",
                 s->status_message != NULL ? ": " : "",
                 s->status_message != NULL ? s->status_message : "");
    } else {
        snprintf(span, sizeof(span), "no span of its trace has status ERROR");
    }
    snprintf(out, len, "run %s %s%s%.300s; %s%s%s", r->run_id,
             r->status != NULL ? r->status : "ended", r->reason != NULL ? ": " : "",
             r->reason != NULL ? r->reason : "", span, cause[0] != '\0' ? "; cause: " : "", cause);
}

/* The why document's causes (report/why.h) onto @p o: exceptions, last_answer, stuck_loops,
 * budget, trace_read. */
static void
add_causes(json_t *o, const json_t *doc)
{
    static const char *const keys[] = {"exceptions", "last_answer", "stuck_loops", "budget",
                                       "trace_read"};

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        json_t *v = json_object_get(doc, keys[i]);

        json_object_set(o, keys[i], v != NULL ? v : json_null());
    }
}

/* The answer without the document's causes: the run, the path to the deepest ERROR span (the
 * same rule as the explorer's: report/docs.h) and the failed steps as show_run lists them. */
static json_t *
base_answer(const struct weft_run_details *run, const struct weft_trace *trace, const char *cause)
{
    size_t errors = 0;
    size_t deepest = trace != NULL ? weft__why_deepest(trace, &errors) : SIZE_MAX;
    json_t *path = json_array();
    json_t *failed = json_array();
    char summary[1280];

    for (size_t i = deepest; path != NULL && i != SIZE_MAX; i = weft__trace_parent(trace, i)) {
        json_array_insert_new(path, 0, path_entry(trace, i));
    }
    for (size_t i = 0; failed != NULL && i < run->step_count; i++) {
        if (run->steps[i].status != NULL && strcmp(run->steps[i].status, "failed") == 0) {
            json_array_append_new(failed,
                                  weft__mcp_failure_json(&run->steps[i], &run->step_extras[i]));
        }
    }
    summary_text(run, trace, deepest, cause, summary, sizeof(summary));
    return json_pack("{s:s, s:s, s:o, s:o, s:s, s:I, s:o, s:o, s:o}", "run_id", run->info.run_id,
                     "status", run->info.status != NULL ? run->info.status : "unknown", "reason",
                     weft__mcp_text_json(run->info.reason, WEFT__MCP_MAX_TEXT_BYTES), "trace_id",
                     run->info.trace_id != NULL ? json_string(run->info.trace_id) : json_null(),
                     "summary", summary, "error_span_count", (json_int_t)errors, "path", path,
                     "failed_span", deepest != SIZE_MAX ? path_entry(trace, deepest) : json_null(),
                     "failed_steps", failed);
}

static void
tool_why_failed(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    const char *ref = NULL;
    struct weft_run_details *run = NULL;
    struct weft_store *store = NULL;
    struct weft_trace *trace = NULL;
    struct weft_run_exchange *ex = NULL;
    size_t ex_count = 0;
    json_t *doc = NULL;
    char trace_error[512];
    char cause[400];
    weft_err ex_err = WEFT_OK;

    if (!weft__mcp_str_arg(args, "run_id", true, &ref, to)) {
        return;
    }
    run = weft__mcp_load_run(srv, ref, to);
    if (run == NULL) {
        return;
    }
    /* A run that was not traced (or whose trace is gone) still has its stored causes. */
    trace = load_trace(srv, run, &store, trace_error, sizeof(trace_error));
    ex_err = weft_run_exchanges_load(srv->state_path, run->info.run_id, &ex, &ex_count);
    doc = weft__doc_why(run, trace, ex, ex_count);
    if (doc != NULL) {
        cause_text(doc, cause, sizeof(cause));
        to->result = base_answer(run, trace, cause);
    }
    if (to->result != NULL) {
        add_causes(to->result, doc);
        if (trace_error[0] != '\0') {
            json_object_set_new(to->result, "trace_error", json_string(trace_error));
        }
        if (ex_err != WEFT_OK) {
            json_object_set_new(to->result, "exchanges_error",
                                json_sprintf("the run's stored LLM exchanges cannot be read: %s",
                                             weft_strerror(ex_err)));
        }
    }
    json_decref(doc);
    weft_run_exchanges_free(ex, ex_count);
    weft_trace_free(trace);
    weft__mcp_close_store(srv, store);
    weft_run_details_free(run);
}

/* ---------------------------------------------------------------------------------------- */
/* Tool table                                                                                 */

const struct tool weft__mcp_tools_why[] = {
    {"why_failed", "Explain why a run failed",
     "Answer \"why did this run fail?\" as the explorer's why panel does: the path of spans "
     "from the run's root down to its deepest ERROR span (status, status message, error.type "
     "and the attributes that tell what went wrong), the failed steps with their stored errors "
     "(exit status, stderr and stdout tails), the exception events, the last model answer "
     "before the failure, stuck loops with their repeated spans, the budget that ran out, and "
     "a one-sentence summary naming the cause. A run that was not traced answers with its "
     "stored causes and an empty path. run_id may be a run id, a unique prefix, or \"last\".",
     "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":\"string\"}},\"required\":["
     "\"run_id\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":\"string\"},\"status\":{"
     "\"type\":\"string\"},\"reason\":{\"type\":[\"string\",\"null\"]},\"summary\":{\"type\":"
     "\"string\"},\"trace_id\":{\"type\":[\"string\",\"null\"]},\"trace_read\":{\"type\":"
     "\"boolean\"},\"error_span_count\":{\"type\":\"integer\"},\"path\":{\"type\":\"array\","
     "\"items\":{\"type\":\"object\"}},\"failed_span\":{\"type\":[\"object\",\"null\"]},"
     "\"failed_steps\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},\"exceptions\":{"
     "\"type\":\"array\",\"items\":{\"type\":\"object\"}},\"last_answer\":{\"type\":["
     "\"object\",\"null\"]},\"stuck_loops\":{\"type\":\"array\",\"items\":{\"type\":"
     "\"object\",\"properties\":{\"kind\":{\"type\":\"string\"},\"span_id\":{\"type\":"
     "\"string\"},\"repetitions\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}}}}},"
     "\"budget\":{\"type\":[\"object\",\"null\"],\"properties\":{\"name\":{\"type\":"
     "\"string\"},\"limit\":{\"type\":[\"number\",\"null\"]},\"used\":{\"type\":[\"number\","
     "\"null\"]},\"unit\":{\"type\":[\"string\",\"null\"]}}},\"trace_error\":{\"type\":"
     "\"string\"},\"exchanges_error\":{\"type\":\"string\"}},\"required\":[\"run_id\","
     "\"status\",\"summary\",\"path\",\"failed_steps\",\"exceptions\",\"last_answer\","
     "\"stuck_loops\",\"budget\"]}",
     tool_why_failed, true},
};
const size_t weft__mcp_tools_why_count =
    sizeof(weft__mcp_tools_why) / sizeof(weft__mcp_tools_why[0]);
