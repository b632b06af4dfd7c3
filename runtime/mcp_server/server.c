/* runtime/mcp_server/server.c - weft as an MCP server (include/weft/mcp.h, docs/mcp.md):
 * JSON-RPC 2.0 over the MCP lifecycle (initialize, notifications/initialized, ping) and seven tools
 * over weft's own stores: list_runs, show_run, get_trace, get_span, search_spans, why_failed (the
 * state database and the span store, read through their public APIs) and start_run (weft_run
 * on a workflow file below an allowed directory). The stdio transport lives here too; the
 * Streamable HTTP one is serve_http.c.
 *
 * Shape: one entry point, weft__mcp_server_handle(), turns one message into at most one
 * answer; transports only move bytes and keep sessions. Every tool builds a jansson object
 * (its structuredContent, described by its outputSchema); the answer carries it twice, as
 * structuredContent and as the text of one content item, for clients that read only text.
 *
 * Invariants: every input is bounded (a message by max_message_bytes, a list by its limit
 * argument, a trace by MAX_TRACE_SPANS, a string attribute by MAX_VALUE_BYTES) and every result
 * by max_result_bytes: a result that would pass it is cut, and says so ("truncated": true).
 * Results are scrubbed of registered secrets before they leave (trace attributes were redacted
 * at record time already). A mutex makes the server handle one message at a time.
 */
#define _GNU_SOURCE /* realpath */
#include "runtime/mcp_server/server.h"
#include "report/docs.h"

#include "base/buf.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <weft/export.h>
#include <weft/mcp.h>
#include <weft/runtime.h>
#include <weft/secrets.h>
#include <weft/store.h>
#include <weft/trace.h>
#include <weft/weft.h>

#define DEFAULT_MAX_MESSAGE (4u * 1024u * 1024u)
#define DEFAULT_MAX_RESULT  (1024u * 1024u)
#define MIN_MAX_RESULT      (64u * 1024u)
#define MAX_TRACE_SPANS     2000   /* spans get_trace returns at most */
#define MAX_VALUE_BYTES     4096   /* a string attribute value in a result */
#define MAX_TEXT_BYTES      2000   /* a step's result, input or feedback in a result */
#define MAX_LIST_RUNS       500    /* list_runs limit */
#define MAX_SEARCH          500    /* search_spans limit */
#define MAX_SEARCH_TRACES   200    /* traces search_spans scans at most */
#define MAX_SEARCH_SPANS    200000 /* spans search_spans scans at most */
#define RUN_FLUSH_MS        10000  /* start_run: wait for the run's spans to reach the store */

/* Revisions spoken, newest first: initialize answers the client's when it is one of these. */
static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};
#define VERSION_COUNT (sizeof(versions) / sizeof(versions[0]))

/* JSON-RPC error codes. */
#define RPC_PARSE_ERROR      (-32700)
#define RPC_INVALID_REQUEST  (-32600)
#define RPC_METHOD_NOT_FOUND (-32601)
#define RPC_INVALID_PARAMS   (-32602)
#define RPC_INTERNAL_ERROR   (-32603)

struct weft_mcp_server {
    pthread_mutex_t lock;
    char *state_path;               /* NULL: the default */
    char *db_path;                  /* NULL: the default */
    struct weft_store_pool *stores; /* open span store handles, reused across tool calls */
    char *workflows_dir;            /* resolved (realpath) */
    struct weft_provider *provider;
    struct weft_meter *meter;
    const volatile sig_atomic_t *abort_flag;
    size_t max_message;
    size_t max_result;
};

/* A tool's outcome: its structured result, or an error sentence for isError. */
struct tool_out {
    json_t *result;  /* owned; NULL when failed */
    char error[512]; /* set when result is NULL */
};

typedef void (*tool_fn)(struct weft_mcp_server *srv, const json_t *args, struct tool_out *out);

struct tool {
    const char *name;
    const char *title;
    const char *description;
    const char *input_schema;  /* JSON text */
    const char *output_schema; /* JSON text */
    tool_fn run;
};

/* ---------------------------------------------------------------------------------------- */
/* Small helpers                                                                              */

static char *
own(char *text)
{
    char *copy = text != NULL ? weft__strdup(text) : NULL;

    free(text);
    return copy;
}

static void fail_tool(struct tool_out *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
fail_tool(struct tool_out *out, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(out->error, sizeof(out->error), fmt, ap);
    va_end(ap);
}

static void
to_hex(const uint8_t *bytes, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 0xf];
    }
    out[2 * n] = '\0';
}

/* RFC 3339 in UTC with milliseconds; null for 0. */
static json_t *
time_json(uint64_t ns)
{
    char buf[64];
    struct tm tm;
    time_t secs = (time_t)(ns / 1000000000u);

    if (ns == 0 || gmtime_r(&secs, &tm) == NULL) {
        return json_null();
    }
    snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (unsigned)(ns % 1000000000u / 1000000u));
    return json_string(buf);
}

/* Milliseconds between two times; null when the end is unknown. */
static json_t *
duration_json(uint64_t start_ns, uint64_t end_ns)
{
    if (start_ns == 0 || end_ns == 0 || end_ns < start_ns) {
        return json_null();
    }
    return json_real((double)(end_ns - start_ns) / 1e6);
}

/* @p s cut to @p max bytes (on a UTF-8 boundary) with a note of how much was cut; null for
 * NULL. */
static json_t *
text_json(const char *s, size_t max)
{
    size_t len = 0;
    char *cut = NULL;
    json_t *j = NULL;

    if (s == NULL) {
        return json_null();
    }
    len = strlen(s);
    if (len <= max) {
        j = json_stringn(s, len);
        return j != NULL ? j : json_string("(not valid UTF-8)");
    }
    while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80) {
        max--;
    }
    cut = weft__malloc(max + 64);
    if (cut == NULL) {
        return NULL;
    }
    memcpy(cut, s, max);
    snprintf(cut + max, 64, "... [%zu bytes cut]", len - max);
    j = json_string(cut);
    weft__free(cut);
    return j != NULL ? j : json_string("(not valid UTF-8)");
}

static const char *
kind_name(weft_span_kind kind)
{
    static const char *const names[] = {"UNSPECIFIED", "INTERNAL", "SERVER",
                                        "CLIENT",      "PRODUCER", "CONSUMER"};

    return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "UNSPECIFIED";
}

static const char *
status_name(weft_status_code code)
{
    return code == WEFT_STATUS_ERROR ? "ERROR" : code == WEFT_STATUS_OK ? "OK" : "UNSET";
}

static json_t *
value_json(const struct weft_value *v)
{
    json_t *a = NULL;

    switch (v->type) {
    case WEFT_VALUE_STRING:
        return text_json(v->u.str, MAX_VALUE_BYTES);
    case WEFT_VALUE_BOOL:
        return json_boolean(v->u.b);
    case WEFT_VALUE_INT:
        return json_integer(v->u.i);
    case WEFT_VALUE_DOUBLE:
        return json_real(v->u.d);
    default:
        break;
    }
    a = json_array();
    for (size_t i = 0; a != NULL && i < v->len && i < 128; i++) {
        json_t *item = v->type == WEFT_VALUE_STRING_ARRAY ? text_json(v->u.strs[i], 512)
                       : v->type == WEFT_VALUE_BOOL_ARRAY ? json_boolean(v->u.bools[i])
                       : v->type == WEFT_VALUE_INT_ARRAY  ? json_integer(v->u.ints[i])
                                                          : json_real(v->u.doubles[i]);
        json_array_append_new(a, item);
    }
    return a;
}

/* An attribute's value as text, for comparisons (search_spans). */
static void
value_text(const struct weft_value *v, char *buf, size_t len)
{
    switch (v->type) {
    case WEFT_VALUE_STRING:
        snprintf(buf, len, "%s", v->u.str);
        break;
    case WEFT_VALUE_BOOL:
        snprintf(buf, len, "%s", v->u.b ? "true" : "false");
        break;
    case WEFT_VALUE_INT:
        snprintf(buf, len, "%" PRId64, v->u.i);
        break;
    case WEFT_VALUE_DOUBLE:
        snprintf(buf, len, "%.17g", v->u.d);
        break;
    default:
        buf[0] = '\0';
        break;
    }
}

static json_t *
attrs_json(const struct weft_attr *attrs, size_t count)
{
    json_t *o = json_object();

    for (size_t i = 0; o != NULL && i < count; i++) {
        json_object_set_new(o, attrs[i].key, value_json(&attrs[i].value));
    }
    return o;
}

/* Is @p text's JSON size within @p budget? Adds it to *used when it is. */
static bool
fits(const json_t *item, size_t *used, size_t budget)
{
    size_t n = json_dumpb(item, NULL, 0, JSON_COMPACT);

    if (*used + n + 1 > budget) {
        return false;
    }
    *used += n + 1;
    return true;
}

/* Integer argument @p key of @p args in [min, max], @p def when absent. */
static bool
int_arg(const json_t *args,
        const char *key,
        long long min,
        long long max,
        long long def,
        long long *out,
        struct tool_out *to)
{
    const json_t *v = json_object_get(args, key);

    *out = def;
    if (v == NULL || json_is_null(v)) {
        return true;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        snprintf(to->error, sizeof(to->error),
                 "argument \"%s\": expected an integer from %lld to %lld", key, min, max);
        return false;
    }
    *out = json_integer_value(v);
    return true;
}

/* String argument @p key; NULL when absent and not required. */
static bool
str_arg(
    const json_t *args, const char *key, bool is_required, const char **out, struct tool_out *to)
{
    const json_t *v = json_object_get(args, key);

    *out = NULL;
    if ((v == NULL || json_is_null(v)) && !is_required) {
        return true;
    }
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 4096) {
        snprintf(to->error, sizeof(to->error), "argument \"%s\": expected a non-empty string%s",
                 key, is_required ? " (required)" : "");
        return false;
    }
    *out = json_string_value(v);
    return true;
}

/* ---------------------------------------------------------------------------------------- */
/* Stores                                                                                     */

/* Open the span store; fills @p to on failure. */
static struct weft_store *
open_store(struct weft_mcp_server *srv, struct tool_out *to)
{
    struct weft_store *store = NULL;
    weft_err err = weft_store_pool_acquire(srv->stores, &store);

    if (err == WEFT_ENOTFOUND) {
        fail_tool(to, "no span store yet at %s: no run has been traced",
                  srv->db_path != NULL ? srv->db_path : "$WEFT_HOME/weft.db");
        return NULL;
    }
    if (err != WEFT_OK) {
        fail_tool(to, "the span store cannot be read: %s", weft_strerror(err));
        return NULL;
    }
    return store;
}

/* Give back a handle open_store() gave (NULL: nothing). */
static void
close_store(struct weft_mcp_server *srv, struct weft_store *store)
{
    weft_store_pool_release(srv->stores, store);
}

/* Resolve a trace reference: "last", a trace id or a prefix, or a run id (its latest trace).
 * @return WEFT_OK with @p out filled, else fills @p to. */
static weft_err
resolve_trace(struct weft_mcp_server *srv,
              struct weft_store *store,
              const char *ref,
              char out[WEFT_TRACE_ID_HEX_LEN + 1],
              struct tool_out *to)
{
    struct weft_run_details *run = NULL;
    weft_err err = weft_store_resolve(store, ref, out);
    weft_err run_err = WEFT_OK;

    if (err == WEFT_OK) {
        return WEFT_OK;
    }
    if (strcmp(ref, "last") != 0) {
        run_err = weft_run_load(srv->state_path, ref, &run);
    } else {
        run_err = WEFT_ENOTFOUND;
    }
    if (run_err == WEFT_OK && run->info.trace_id != NULL &&
        strlen(run->info.trace_id) == WEFT_TRACE_ID_HEX_LEN) {
        memcpy(out, run->info.trace_id, WEFT_TRACE_ID_HEX_LEN + 1);
        weft_run_details_free(run);
        return WEFT_OK;
    }
    if (run_err == WEFT_OK) {
        fail_tool(to, "run %s was not traced", run->info.run_id);
        weft_run_details_free(run);
        return WEFT_ENOTFOUND;
    }
    if (err == WEFT_EINVAL && weft_store_errmsg(store)[0] != '\0') {
        fail_tool(to, "%s", weft_store_errmsg(store));
    } else {
        fail_tool(to, "no trace or run matches \"%s\" (use list_runs, or \"last\")", ref);
    }
    return err == WEFT_OK ? WEFT_ENOTFOUND : err;
}

/* Load a run by reference; fills @p to on failure. */
static struct weft_run_details *
load_run(struct weft_mcp_server *srv, const char *ref, struct tool_out *to)
{
    struct weft_run_details *run = NULL;
    weft_err err = weft_run_load(srv->state_path, ref, &run);

    if (err == WEFT_ENOTFOUND) {
        fail_tool(to, "no run matches \"%s\" (use list_runs to see the run ids, or \"last\")", ref);
    } else if (err == WEFT_EINVAL) {
        fail_tool(to, "\"%s\" matches several runs: give more characters of the run id", ref);
    } else if (err != WEFT_OK) {
        fail_tool(to, "the state database cannot be read: %s", weft_strerror(err));
    }
    return err == WEFT_OK ? run : NULL;
}

static json_t *
run_info_json(const struct weft_run_info *r)
{
    return json_pack(
        "{s:s, s:s?, s:s?, s:s, s:o, s:o, s:o, s:I, s:I, s:I, s:f, s:o, s:s?, s:f}", "run_id",
        r->run_id, "workflow", r->workflow, "workflow_path", r->workflow_path, "status",
        r->status != NULL ? r->status : "unknown", "started", time_json(r->started_ns),
        "duration_ms", duration_json(r->started_ns, r->ended_ns), "reason",
        text_json(r->reason, MAX_TEXT_BYTES), "steps", (json_int_t)r->step_count, "iterations",
        (json_int_t)r->iterations, "corrections", (json_int_t)r->corrections, "reward", r->reward,
        "input", text_json(r->input, MAX_TEXT_BYTES), "trace_id", r->trace_id, "cost_usd",
        r->cost_usd);
}

/* ---------------------------------------------------------------------------------------- */
/* Spans                                                                                      */

static json_t *
span_json(const struct weft_trace *trace, size_t index, bool is_whole)
{
    const struct weft_span_data *s = weft_trace_span(trace, index);
    char trace_id[33];
    char span_id[17];
    char parent[17];
    json_t *o = NULL;

    to_hex(s->trace_id, 16, trace_id);
    to_hex(s->span_id, 8, span_id);
    to_hex(s->parent_span_id, 8, parent);
    o = json_pack("{s:s, s:s, s:s, s:o, s:s, s:s, s:o, s:o, s:o, s:I, s:o}", "name",
                  s->name != NULL ? s->name : "", "trace_id", trace_id, "span_id", span_id,
                  "parent_span_id", s->has_parent ? json_string(parent) : json_null(), "kind",
                  kind_name(s->kind), "status", status_name(s->status_code), "status_message",
                  text_json(s->status_message, MAX_TEXT_BYTES), "start",
                  time_json(s->start_time_ns), "duration_ms",
                  duration_json(s->start_time_ns, s->end_time_ns), "depth",
                  (json_int_t)weft_trace_span_depth(trace, index), "attributes",
                  attrs_json(s->attrs, s->attr_count));
    if (o == NULL || !is_whole) {
        return o;
    }
    json_t *events = json_array();
    json_t *links = json_array();

    for (size_t i = 0; events != NULL && i < s->event_count; i++) {
        const struct weft_event_data *e = &s->events[i];

        json_array_append_new(events,
                              json_pack("{s:s, s:o, s:o}", "name", e->name != NULL ? e->name : "",
                                        "time", time_json(e->time_ns), "attributes",
                                        attrs_json(e->attrs, e->attr_count)));
    }
    for (size_t i = 0; links != NULL && i < s->link_count; i++) {
        const struct weft_link_data *l = &s->links[i];
        char lt[33];
        char ls[17];

        to_hex(l->trace_id, 16, lt);
        to_hex(l->span_id, 8, ls);
        json_array_append_new(links, json_pack("{s:s, s:s, s:o}", "trace_id", lt, "span_id", ls,
                                               "attributes", attrs_json(l->attrs, l->attr_count)));
    }
    json_object_set_new(o, "events", events);
    json_object_set_new(o, "links", links);
    json_object_set_new(o, "dropped",
                        json_pack("{s:i, s:i, s:i}", "attributes", (int)s->dropped_attrs, "events",
                                  (int)s->dropped_events, "links", (int)s->dropped_links));
    if (s->scope != NULL && s->scope->name != NULL) {
        json_object_set_new(o, "scope", json_string(s->scope->name));
    }
    return o;
}

/* Index of span @p hex (16 hex digits) in @p trace, or SIZE_MAX. */
static size_t
find_span(const struct weft_trace *trace, const char *hex)
{
    size_t n = weft_trace_span_count(trace);
    char id[17];

    for (size_t i = 0; i < n; i++) {
        to_hex(weft_trace_span(trace, i)->span_id, 8, id);
        if (strcasecmp(id, hex) == 0) {
            return i;
        }
    }
    return SIZE_MAX;
}

/* Index of the parent of span @p index, or SIZE_MAX (a root or an orphan). */
/* ---------------------------------------------------------------------------------------- */
/* Tools                                                                                      */

static void
tool_list_runs(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    struct weft_run_info *runs = NULL;
    size_t count = 0;
    long long limit = 0;
    const char *status = NULL;
    json_t *list = NULL;
    size_t used = 0;
    bool is_truncated = false;
    weft_err err = WEFT_OK;

    if (!int_arg(args, "limit", 1, MAX_LIST_RUNS, 20, &limit, to) ||
        !str_arg(args, "status", false, &status, to)) {
        return;
    }
    /* With a status filter, read further back so that the filter still finds limit runs. */
    err = weft_runs_list(srv->state_path, status != NULL ? (size_t)limit * 10 : (size_t)limit,
                         &runs, &count);
    if (err == WEFT_ENOTFOUND) {
        count = 0;
    } else if (err != WEFT_OK) {
        fail_tool(to, "the state database cannot be read: %s", weft_strerror(err));
        return;
    }
    list = json_array();
    for (size_t i = 0; list != NULL && i < count && json_array_size(list) < (size_t)limit; i++) {
        json_t *item = NULL;

        if (status != NULL && (runs[i].status == NULL || strcmp(runs[i].status, status) != 0)) {
            continue;
        }
        item = run_info_json(&runs[i]);
        if (item != NULL && !fits(item, &used, srv->max_result - 1024)) {
            json_decref(item);
            is_truncated = true;
            break;
        }
        json_array_append_new(list, item);
    }
    to->result = json_pack("{s:o, s:I, s:b}", "runs", list, "count",
                           (json_int_t)json_array_size(list), "truncated", is_truncated);
    weft_run_infos_free(runs, count);
}

static json_t *
depends_json(const char *csv)
{
    json_t *a = json_array();

    while (a != NULL && csv != NULL && *csv != '\0') {
        size_t n = strcspn(csv, ",");

        if (n > 0) {
            json_array_append_new(a, json_stringn(csv, n));
        }
        csv += n + (csv[n] == ',');
    }
    return a;
}

static json_t *
failure_json(const struct weft_run_step *st, const struct weft_run_step_extra *x)
{
    json_t *error = x->error != NULL ? json_loads(x->error, 0, NULL) : NULL;

    return json_pack("{s:s, s:s?, s:s, s:I, s:s?, s:o, s:o, s:s?, s:s?}", "id", st->id, "agent",
                     st->agent, "status", st->status != NULL ? st->status : "unknown", "attempts",
                     (json_int_t)st->attempts, "error_type", x->error_type, "feedback",
                     text_json(x->feedback, MAX_TEXT_BYTES), "error",
                     error != NULL ? error : json_null(), "skipped_because_of",
                     x->skipped_dependency, "dependency_status", x->skipped_dependency_status);
}

static void
tool_show_run(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    const char *ref = NULL;
    struct weft_run_details *run = NULL;
    json_t *o = NULL;
    json_t *steps = NULL;
    json_t *failed = NULL;
    json_t *corrections = NULL;
    size_t used = 0;
    bool is_truncated = false;

    if (!str_arg(args, "run_id", true, &ref, to)) {
        return;
    }
    run = load_run(srv, ref, to);
    if (run == NULL) {
        return;
    }
    o = run_info_json(&run->info);
    steps = json_array();
    failed = json_array();
    corrections = json_array();
    for (size_t i = 0; o != NULL && steps != NULL && failed != NULL && i < run->step_count; i++) {
        const struct weft_run_step *st = &run->steps[i];
        const struct weft_run_step_extra *x = &run->step_extras[i];
        json_t *item = json_pack(
            "{s:s, s:s?, s:s?, s:o, s:s, s:I, s:o, s:o, s:s?, s:s?, s:o, s:s?, s:o}", "id", st->id,
            "agent", st->agent, "executor", st->executor, "task", text_json(st->task, 500),
            "status", st->status != NULL ? st->status : "unknown", "attempts",
            (json_int_t)st->attempts, "reward",
            st->has_reward ? json_real(st->reward) : json_null(), "depends_on",
            depends_json(st->depends_on), "requested_by", st->requested_by, "parent", st->parent,
            "duration_ms", duration_json(x->started_ns, x->ended_ns), "error_type", x->error_type,
            "result", text_json(st->result, 500));

        if (item != NULL && !fits(item, &used, srv->max_result / 2)) {
            json_decref(item);
            is_truncated = true;
            break;
        }
        json_array_append_new(steps, item);
    }
    for (size_t i = 0; failed != NULL && i < run->step_count; i++) {
        const struct weft_run_step *st = &run->steps[i];
        const struct weft_run_step_extra *x = &run->step_extras[i];
        bool is_failed = st->status != NULL && strcmp(st->status, "failed") == 0;
        json_t *item = NULL;

        if (!is_failed && x->skipped_dependency == NULL && x->error_type == NULL) {
            continue;
        }
        item = failure_json(st, x);
        if (item != NULL && !fits(item, &used, srv->max_result - srv->max_result / 4)) {
            json_decref(item);
            is_truncated = true;
            break;
        }
        json_array_append_new(failed, item);
    }
    for (size_t i = 0; corrections != NULL && i < run->correction_count && i < 50; i++) {
        const struct weft_run_correction *c = &run->corrections[i];

        json_array_append_new(
            corrections, json_pack("{s:I, s:s?, s:s?, s:s?, s:s?, s:s?}", "seq", (json_int_t)c->seq,
                                   "failed_step", c->failed_step, "error_type", c->error_type,
                                   "inserted", c->inserted, "depends_before", c->depends_before,
                                   "depends_after", c->depends_after));
    }
    if (o != NULL) {
        json_object_set_new(o, "plan", steps);
        json_object_set_new(o, "failed_steps", failed);
        json_object_set_new(o, "corrections_applied", corrections);
        json_object_set_new(o, "truncated", json_boolean(is_truncated));
        steps = failed = corrections = NULL;
    }
    json_decref(steps);
    json_decref(failed);
    json_decref(corrections);
    to->result = o;
    weft_run_details_free(run);
}

static void
tool_get_trace(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    const char *ref = NULL;
    long long limit = 0;
    struct weft_store *store = NULL;
    struct weft_trace *trace = NULL;
    char id[WEFT_TRACE_ID_HEX_LEN + 1];
    json_t *spans = NULL;
    size_t n = 0;
    size_t used = 0;
    size_t errors = 0;
    bool is_truncated = false;
    weft_err err = WEFT_OK;

    if (!str_arg(args, "trace_id", true, &ref, to) ||
        !int_arg(args, "limit", 1, MAX_TRACE_SPANS, MAX_TRACE_SPANS, &limit, to)) {
        return;
    }
    store = open_store(srv, to);
    if (store == NULL) {
        return;
    }
    err = resolve_trace(srv, store, ref, id, to);
    if (err == WEFT_OK) {
        err = weft_store_load_trace(store, id, &trace);
        if (err != WEFT_OK) {
            fail_tool(to, "trace %s cannot be loaded", id);
        }
    }
    if (err != WEFT_OK) {
        close_store(srv, store);
        return;
    }
    n = weft_trace_span_count(trace);
    spans = json_array();
    for (size_t i = 0; spans != NULL && i < n; i++) {
        json_t *item = NULL;

        errors += weft_trace_span(trace, i)->status_code == WEFT_STATUS_ERROR;
        if (is_truncated) {
            continue;
        }
        if (json_array_size(spans) >= (size_t)limit) {
            is_truncated = true;
            continue;
        }
        item = span_json(trace, i, false);
        if (item != NULL && !fits(item, &used, srv->max_result - 1024)) {
            json_decref(item);
            is_truncated = true;
            continue;
        }
        json_array_append_new(spans, item);
    }
    to->result =
        json_pack("{s:s, s:I, s:I, s:I, s:b, s:o}", "trace_id", id, "span_count", (json_int_t)n,
                  "error_count", (json_int_t)errors, "returned", (json_int_t)json_array_size(spans),
                  "truncated", is_truncated, "spans", spans);
    if (to->result != NULL && is_truncated) {
        json_object_set_new(to->result, "note",
                            json_string("the trace has more spans than this result holds (limit "
                                        "or size cap): the first ones in tree order are listed"));
    }
    weft_trace_free(trace);
    close_store(srv, store);
}

static void
tool_get_span(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    const char *ref = NULL;
    const char *span_id = NULL;
    struct weft_store *store = NULL;
    struct weft_trace *trace = NULL;
    char id[WEFT_TRACE_ID_HEX_LEN + 1];
    size_t index = SIZE_MAX;
    weft_err err = WEFT_OK;

    if (!str_arg(args, "trace_id", true, &ref, to) ||
        !str_arg(args, "span_id", true, &span_id, to)) {
        return;
    }
    store = open_store(srv, to);
    if (store == NULL) {
        return;
    }
    err = resolve_trace(srv, store, ref, id, to);
    if (err == WEFT_OK) {
        err = weft_store_load_trace(store, id, &trace);
        if (err != WEFT_OK) {
            fail_tool(to, "trace %s cannot be loaded", id);
        }
    }
    if (err == WEFT_OK) {
        index = find_span(trace, span_id);
        if (index == SIZE_MAX) {
            fail_tool(to, "trace has no span \"%s\" (span ids are 16 hex digits: see get_trace)",
                      span_id);
        }
    }
    if (index != SIZE_MAX) {
        to->result = span_json(trace, index, true);
    }
    weft_trace_free(trace);
    close_store(srv, store);
}

/* Does span @p s match the search? */
static bool
span_matches(const struct weft_span_data *s,
             const char *key,
             const char *value,
             const char *name,
             char *text,
             size_t text_len)
{
    const struct weft_value *v = NULL;

    if (name != NULL && (s->name == NULL || strstr(s->name, name) == NULL)) {
        return false;
    }
    v = weft_span_data_attr(s, key);
    if (v == NULL) {
        return false;
    }
    value_text(v, text, text_len);
    return value == NULL || strcmp(text, value) == 0;
}

static void
tool_search_spans(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    const char *key = NULL;
    const char *value = NULL;
    const char *name = NULL;
    long long limit = 0;
    long long max_traces = 0;
    struct weft_store *store = NULL;
    struct weft_trace_summary *sums = NULL;
    size_t sum_count = 0;
    size_t scanned_spans = 0;
    size_t scanned = 0;
    size_t used = 0;
    bool is_truncated = false;
    json_t *matches = NULL;
    char text[MAX_VALUE_BYTES];
    weft_err err = WEFT_OK;

    if (!str_arg(args, "key", true, &key, to) || !str_arg(args, "value", false, &value, to) ||
        !str_arg(args, "name", false, &name, to) ||
        !int_arg(args, "limit", 1, MAX_SEARCH, 50, &limit, to) ||
        !int_arg(args, "traces", 1, MAX_SEARCH_TRACES, 50, &max_traces, to)) {
        return;
    }
    store = open_store(srv, to);
    if (store == NULL) {
        return;
    }
    err = weft_store_list_traces(store, (size_t)max_traces, &sums, &sum_count);
    if (err != WEFT_OK) {
        fail_tool(to, "the span store cannot be read: %s", weft_strerror(err));
        close_store(srv, store);
        return;
    }
    matches = json_array();
    for (size_t t = 0; matches != NULL && t < sum_count && !is_truncated; t++) {
        struct weft_trace *trace = NULL;
        size_t n = 0;

        if (scanned_spans + sums[t].span_count > MAX_SEARCH_SPANS && scanned > 0) {
            is_truncated = true;
            break;
        }
        err = weft_store_load_trace(store, sums[t].trace_id, &trace);
        if (err != WEFT_OK) {
            continue;
        }
        scanned++;
        n = weft_trace_span_count(trace);
        scanned_spans += n;
        for (size_t i = 0; i < n; i++) {
            const struct weft_span_data *s = weft_trace_span(trace, i);
            char span_id[17];
            json_t *item = NULL;

            if (!span_matches(s, key, value, name, text, sizeof(text))) {
                continue;
            }
            if (json_array_size(matches) >= (size_t)limit) {
                is_truncated = true;
                break;
            }
            to_hex(s->span_id, 8, span_id);
            item =
                json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "trace_id", sums[t].trace_id,
                          "span_id", span_id, "name", s->name != NULL ? s->name : "", "status",
                          status_name(s->status_code), "status_message",
                          text_json(s->status_message, 500), "start", time_json(s->start_time_ns),
                          "duration_ms", duration_json(s->start_time_ns, s->end_time_ns), "value",
                          value_json(weft_span_data_attr(s, key)));
            if (item != NULL && !fits(item, &used, srv->max_result - 1024)) {
                json_decref(item);
                is_truncated = true;
                break;
            }
            json_array_append_new(matches, item);
        }
        weft_trace_free(trace);
    }
    to->result =
        json_pack("{s:o, s:I, s:I, s:I, s:b}", "matches", matches, "count",
                  (json_int_t)json_array_size(matches), "traces_scanned", (json_int_t)scanned,
                  "spans_scanned", (json_int_t)scanned_spans, "truncated", is_truncated);
    weft_trace_summaries_free(sums, sum_count);
    close_store(srv, store);
}

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

    to_hex(s->span_id, 8, span_id);
    for (size_t i = 0; attrs != NULL && i < s->attr_count; i++) {
        if (is_telling(s->attrs[i].key)) {
            json_object_set_new(attrs, s->attrs[i].key, value_json(&s->attrs[i].value));
        }
    }
    for (size_t i = 0; attrs != NULL && i < s->event_count; i++) {
        const char *ev = s->events[i].name != NULL ? s->events[i].name : "";

        if (strcmp(ev, "exception") == 0 || strncmp(ev, "weft.", 5) == 0) {
            json_object_set_new(attrs, "event", json_string(ev));
        }
    }
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:I, s:o, s:o}", "name",
                     s->name != NULL ? s->name : "", "span_id", span_id, "kind", kind_name(s->kind),
                     "status", status_name(s->status_code), "error_type",
                     et != NULL && et->type == WEFT_VALUE_STRING ? json_string(et->u.str)
                                                                 : json_null(),
                     "status_message", text_json(s->status_message, MAX_TEXT_BYTES), "depth",
                     (json_int_t)weft_trace_span_depth(trace, index), "duration_ms",
                     duration_json(s->start_time_ns, s->end_time_ns), "attributes", attrs);
}

static void
tool_why_failed(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    const char *ref = NULL;
    struct weft_run_details *run = NULL;
    struct weft_store *store = NULL;
    struct weft_trace *trace = NULL;
    size_t deepest = SIZE_MAX;
    size_t errors = 0;
    json_t *path = NULL;
    json_t *failed = NULL;
    char summary[1024];
    weft_err err = WEFT_OK;

    if (!str_arg(args, "run_id", true, &ref, to)) {
        return;
    }
    run = load_run(srv, ref, to);
    if (run == NULL) {
        return;
    }
    if (run->info.trace_id == NULL) {
        fail_tool(to, "run %s was not traced: use show_run for its failed steps", run->info.run_id);
        weft_run_details_free(run);
        return;
    }
    store = open_store(srv, to);
    if (store != NULL) {
        err = weft_store_load_trace(store, run->info.trace_id, &trace);
        if (err != WEFT_OK) {
            fail_tool(to, "the trace of the run (%s) is not in the span store", run->info.trace_id);
        }
    }
    if (trace == NULL) {
        close_store(srv, store);
        weft_run_details_free(run);
        return;
    }
    /* The deepest ERROR span; among equals the latest in tree order, which is the last
     * failure (a step retried after a correction fails again later in the trace). The same
     * rule as the explorer's (report/docs.h). */
    deepest = weft__why_deepest(trace, &errors);
    path = json_array();
    for (size_t i = deepest; path != NULL && i != SIZE_MAX; i = weft__trace_parent(trace, i)) {
        json_array_insert_new(path, 0, path_entry(trace, i));
    }
    failed = json_array();
    for (size_t i = 0; failed != NULL && i < run->step_count; i++) {
        if (run->steps[i].status != NULL && strcmp(run->steps[i].status, "failed") == 0) {
            json_array_append_new(failed, failure_json(&run->steps[i], &run->step_extras[i]));
        }
    }
    if (deepest != SIZE_MAX) {
        const struct weft_span_data *s = weft_trace_span(trace, deepest);
        const struct weft_value *et = weft_span_data_attr(s, "error.type");

        snprintf(summary, sizeof(summary),
                 "run %s %s%s%.300s; the deepest error is span \"%s\"%s%s%s%s%.300s",
                 run->info.run_id, run->info.status != NULL ? run->info.status : "ended",
                 run->info.reason != NULL ? ": " : "",
                 run->info.reason != NULL ? run->info.reason : "", s->name != NULL ? s->name : "",
                 et != NULL && et->type == WEFT_VALUE_STRING ? " (error.type " : "",
                 et != NULL && et->type == WEFT_VALUE_STRING ? et->u.str : "",
                 et != NULL && et->type == WEFT_VALUE_STRING ? ")" : "",
                 s->status_message != NULL ? ": " : "",
                 s->status_message != NULL ? s->status_message : "");
    } else {
        snprintf(
            summary, sizeof(summary), "run %s %s%s%.300s; no span of its trace has status ERROR",
            run->info.run_id, run->info.status != NULL ? run->info.status : "ended",
            run->info.reason != NULL ? ": " : "", run->info.reason != NULL ? run->info.reason : "");
    }
    to->result = json_pack(
        "{s:s, s:s, s:o, s:s, s:s, s:I, s:o, s:o, s:o}", "run_id", run->info.run_id, "status",
        run->info.status != NULL ? run->info.status : "unknown", "reason",
        text_json(run->info.reason, MAX_TEXT_BYTES), "trace_id", run->info.trace_id, "summary",
        summary, "error_span_count", (json_int_t)errors, "path", path, "failed_span",
        deepest != SIZE_MAX ? path_entry(trace, deepest) : json_null(), "failed_steps", failed);
    weft_trace_free(trace);
    close_store(srv, store);
    weft_run_details_free(run);
}

/* The real path of @p workflow when it is a file below the allowed directory; else fills
 * @p to. Ownership: free the result with free() (realpath allocates with malloc). */
static char *
allowed_path(const struct weft_mcp_server *srv, const char *workflow, struct tool_out *to)
{
    struct weft__buf joined;
    char *real = NULL;
    size_t dir_len = strlen(srv->workflows_dir);
    struct stat st;
    bool is_below = false;

    weft__buf_init(&joined, PATH_MAX * 2);
    if (workflow[0] != '/') {
        (void)weft__buf_printf(&joined, "%s/", srv->workflows_dir);
    }
    if (weft__buf_append_str(&joined, workflow) != WEFT_OK) {
        weft__buf_cleanup(&joined);
        fail_tool(to, "argument \"workflow\": path too long");
        return NULL;
    }
    real = realpath(joined.data, NULL);
    weft__buf_cleanup(&joined);
    if (real == NULL) {
        fail_tool(to, "no workflow file \"%s\" in the allowed directory", workflow);
        return NULL;
    }
    is_below = strncmp(real, srv->workflows_dir, dir_len) == 0 &&
               (real[dir_len] == '/' || strcmp(srv->workflows_dir, "/") == 0);
    if (!is_below) {
        fail_tool(to, "refused: \"%s\" is outside the allowed workflows directory", workflow);
        free(real);
        return NULL;
    }
    if (stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
        fail_tool(to, "\"%s\" is not a workflow file", workflow);
        free(real);
        return NULL;
    }
    return real;
}

static void
tool_start_run(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    const char *workflow = NULL;
    const char *input = NULL;
    char *path = NULL;
    struct weft_workflow *wf = NULL;
    struct weft_diags diags = {0};
    struct weft_run_options ro;
    struct weft_run_result *result = NULL;
    char error[512] = "";
    weft_err err = WEFT_OK;

    if (!str_arg(args, "workflow", true, &workflow, to) ||
        !str_arg(args, "input", false, &input, to)) {
        return;
    }
    path = allowed_path(srv, workflow, to);
    if (path == NULL) {
        return;
    }
    err = weft_workflow_load(path, &wf, &diags);
    if (err != WEFT_OK) {
        char line[400] = "";

        if (diags.count > 0) {
            weft_diag_format(&diags.items[0], line, sizeof(line));
        }
        snprintf(to->error, sizeof(to->error), "workflow %.100s cannot be loaded: %s%s%.300s",
                 workflow, weft_strerror(err), line[0] != '\0' ? ": " : "", line);
        goto out;
    }
    memset(&ro, 0, sizeof(ro));
    ro.provider = srv->provider;
    ro.meter = srv->meter;
    ro.input = input;
    ro.state_path = srv->state_path;
    ro.abort_flag = srv->abort_flag;
    ro.capture_content = -1;
    err = weft_run(wf, &ro, &result, error, sizeof(error));
    if (err != WEFT_OK) {
        snprintf(to->error, sizeof(to->error), "workflow %.200s did not run: %.250s", workflow,
                 error[0] != '\0' ? error : weft_strerror(err));
        goto out;
    }
    if (srv->provider != NULL) {
        /* The caller's next question is about this run's trace: have it in the store. */
        (void)weft_provider_force_flush(srv->provider, RUN_FLUSH_MS);
    }
    to->result = json_pack(
        "{s:s, s:s, s:s, s:o, s:o, s:o, s:f, s:I, s:f, s:o}", "run_id",
        result->run_id != NULL ? result->run_id : "", "workflow", weft_workflow_name(wf), "status",
        weft_run_status_name(result->status), "reason", text_json(result->reason, MAX_TEXT_BYTES),
        "trace_id", result->trace_id[0] != '\0' ? json_string(result->trace_id) : json_null(),
        "output", text_json(result->output, MAX_TEXT_BYTES * 2), "duration_ms",
        (double)result->duration_ns / 1e6, "steps", (json_int_t)result->step_count, "reward",
        result->reward, "iterations", json_integer((json_int_t)result->iterations));
out:
    weft_run_result_free(result);
    weft_workflow_free(wf);
    weft_diags_cleanup(&diags);
    free(path);
}

/* ---------------------------------------------------------------------------------------- */
/* Tool table                                                                                 */

#define RUN_ITEM_SCHEMA                                                                        \
    "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":\"string\"},\"workflow\":{"     \
    "\"type\":\"string\"},\"status\":{\"type\":\"string\"},\"started\":{\"type\":[\"string\"," \
    "\"null\"]},\"duration_ms\":{\"type\":[\"number\",\"null\"]},\"steps\":{\"type\":"         \
    "\"integer\"},\"reward\":{\"type\":\"number\"},\"reason\":{\"type\":[\"string\","          \
    "\"null\"]},\"trace_id\":{\"type\":\"string\"}},\"required\":[\"run_id\",\"status\"]}"

#define SPAN_ITEM_SCHEMA                                                                    \
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"span_id\":{"     \
    "\"type\":\"string\"},\"parent_span_id\":{\"type\":[\"string\",\"null\"]},\"kind\":{"   \
    "\"type\":\"string\"},\"status\":{\"type\":\"string\",\"enum\":[\"UNSET\",\"OK\","      \
    "\"ERROR\"]},\"status_message\":{\"type\":[\"string\",\"null\"]},\"start\":{\"type\":[" \
    "\"string\",\"null\"]},\"duration_ms\":{\"type\":[\"number\",\"null\"]},\"depth\":{"    \
    "\"type\":\"integer\"},\"attributes\":{\"type\":\"object\"}},\"required\":[\"name\","   \
    "\"span_id\",\"status\"]}"

static const struct tool tools[] = {
    {"list_runs", "List workflow runs",
     "List the most recent workflow runs weft has stored, newest first: run id, workflow name, "
     "status (running, completed, failed, stuck, aborted, interrupted, ...), start time, "
     "duration, step count, reward, the reason the run ended and its trace id. Start here to "
     "find a run id; filter with status (e.g. \"failed\").",
     "{\"type\":\"object\",\"properties\":{\"limit\":{\"type\":\"integer\",\"minimum\":1,"
     "\"maximum\":500,\"description\":\"at most this many runs (default 20)\"},\"status\":{"
     "\"type\":\"string\",\"description\":\"only runs with this status, e.g. failed or "
     "completed\"}},\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"runs\":{\"type\":\"array\",\"items\":" RUN_ITEM_SCHEMA
     "},\"count\":{\"type\":\"integer\"},\"truncated\":{\"type\":\"boolean\"}},\"required\":["
     "\"runs\",\"count\",\"truncated\"]}",
     tool_list_runs},
    {"show_run", "Show a run's plan",
     "Show one run: its status and reason, its plan (every step with status, agent or "
     "executor, attempts, reward, dependencies), the failed steps with their error type, "
     "feedback and error details, corrections applied, and the run's trace id for get_trace "
     "and why_failed. run_id may be a full run id, a unique prefix, or \"last\".",
     "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":\"string\",\"description\":"
     "\"run id, unique prefix, or \\\"last\\\"\"}},\"required\":[\"run_id\"],"
     "\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":\"string\"},\"status\":{"
     "\"type\":\"string\"},\"reason\":{\"type\":[\"string\",\"null\"]},\"trace_id\":{\"type\":"
     "[\"string\",\"null\"]},\"plan\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},"
     "\"failed_steps\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},\"truncated\":{"
     "\"type\":\"boolean\"}},\"required\":[\"run_id\",\"status\",\"plan\",\"failed_steps\"]}",
     tool_show_run},
    {"get_trace", "Get a trace's spans",
     "Get the spans of one trace in tree order (name, span and parent ids, kind, status and "
     "message, start, duration, depth, attributes), at most 2000 (truncated says when there "
     "are more). trace_id may be a trace id, a unique prefix, \"last\", or a run id (its "
     "trace).",
     "{\"type\":\"object\",\"properties\":{\"trace_id\":{\"type\":\"string\",\"description\":"
     "\"trace id, prefix, \\\"last\\\" or a run id\"},\"limit\":{\"type\":\"integer\","
     "\"minimum\":1,\"maximum\":2000}},\"required\":[\"trace_id\"],\"additionalProperties\":"
     "false}",
     "{\"type\":\"object\",\"properties\":{\"trace_id\":{\"type\":\"string\"},\"span_count\":{"
     "\"type\":\"integer\"},\"error_count\":{\"type\":\"integer\"},\"returned\":{\"type\":"
     "\"integer\"},\"truncated\":{\"type\":\"boolean\"},\"spans\":{\"type\":\"array\","
     "\"items\":" SPAN_ITEM_SCHEMA "}},\"required\":[\"trace_id\",\"spans\",\"truncated\"]}",
     tool_get_trace},
    {"get_span", "Get one span whole",
     "Get one span with everything stored about it: attributes, events (with their "
     "attributes), links and dropped counts. Use the span_id from get_trace, search_spans or "
     "why_failed.",
     "{\"type\":\"object\",\"properties\":{\"trace_id\":{\"type\":\"string\",\"description\":"
     "\"trace id, prefix, \\\"last\\\" or a run id\"},\"span_id\":{\"type\":\"string\","
     "\"description\":\"16 hex digits\"}},\"required\":[\"trace_id\",\"span_id\"],"
     "\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"span_id\":{"
     "\"type\":\"string\"},\"status\":{\"type\":\"string\"},\"attributes\":{\"type\":"
     "\"object\"},\"events\":{\"type\":\"array\"},\"links\":{\"type\":\"array\"}},"
     "\"required\":[\"name\",\"span_id\",\"status\",\"attributes\",\"events\",\"links\"]}",
     tool_get_span},
    {"search_spans", "Search spans by attribute",
     "Find spans, across the most recent traces, whose attribute key equals value (or that "
     "have the attribute at all when value is omitted), optionally only spans whose name "
     "contains name. Examples: key weft.step.status value failed; key error.type; key "
     "gen_ai.agent.name value coder. Values compare as text.",
     "{\"type\":\"object\",\"properties\":{\"key\":{\"type\":\"string\"},\"value\":{\"type\":"
     "\"string\"},\"name\":{\"type\":\"string\",\"description\":\"span name contains this\"},"
     "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":500,\"description\":\"default "
     "50\"},\"traces\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":200,\"description\":"
     "\"recent traces scanned (default 50)\"}},\"required\":[\"key\"],"
     "\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"matches\":{\"type\":\"array\",\"items\":{\"type\":"
     "\"object\",\"properties\":{\"trace_id\":{\"type\":\"string\"},\"span_id\":{\"type\":"
     "\"string\"},\"name\":{\"type\":\"string\"},\"status\":{\"type\":\"string\"}}}},"
     "\"count\":{\"type\":\"integer\"},\"traces_scanned\":{\"type\":\"integer\"},"
     "\"truncated\":{\"type\":\"boolean\"}},\"required\":[\"matches\",\"count\","
     "\"truncated\"]}",
     tool_search_spans},
    {"why_failed", "Explain why a run failed",
     "Answer \"why did this run fail?\": the path of spans from the run's root down to its "
     "deepest ERROR span, each with status, status message, error.type and the attributes "
     "that tell what went wrong, plus the failed steps as the state database records them "
     "and a one-sentence summary. run_id may be a run id, a unique prefix, or \"last\".",
     "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":\"string\"}},\"required\":["
     "\"run_id\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":\"string\"},\"status\":{"
     "\"type\":\"string\"},\"summary\":{\"type\":\"string\"},\"trace_id\":{\"type\":\"string\"},"
     "\"path\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},\"failed_span\":{\"type\":"
     "[\"object\",\"null\"]},\"failed_steps\":{\"type\":\"array\"}},\"required\":[\"run_id\","
     "\"status\",\"summary\",\"path\"]}",
     tool_why_failed},
    {"start_run", "Start a workflow run",
     "Run a workflow file (a path relative to the server's workflows directory; paths outside "
     "it are refused) to its end, with an optional input (the user's request), and return the "
     "run id, status, reason, output and trace id. The run may take as long as the workflow "
     "does.",
     "{\"type\":\"object\",\"properties\":{\"workflow\":{\"type\":\"string\",\"description\":"
     "\"workflow file, relative to the workflows directory\"},\"input\":{\"type\":\"string\"}},"
     "\"required\":[\"workflow\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"run_id\":{\"type\":\"string\"},\"workflow\":{"
     "\"type\":\"string\"},\"status\":{\"type\":\"string\"},\"reason\":{\"type\":[\"string\","
     "\"null\"]},\"trace_id\":{\"type\":[\"string\",\"null\"]},\"output\":{\"type\":[\"string\","
     "\"null\"]}},\"required\":[\"run_id\",\"status\"]}",
     tool_start_run},
};
#define TOOL_COUNT (sizeof(tools) / sizeof(tools[0]))

static const char instructions[] =
    "weft runs multi-agent LLM workflows and records every run in a state database and every "
    "decision as a span in a trace. These tools read them: list_runs to find a run, show_run "
    "for its plan and failed steps, why_failed to answer why a run failed (the path to its "
    "deepest error), get_trace and get_span for the spans, search_spans to find spans by "
    "attribute across recent traces; start_run runs a workflow file from the allowed "
    "directory. Run ids accept a unique prefix or \"last\".";

/* ---------------------------------------------------------------------------------------- */
/* JSON-RPC                                                                                   */

bool
weft__mcp_server_speaks(const char *version)
{
    for (size_t i = 0; version != NULL && i < VERSION_COUNT; i++) {
        if (strcmp(versions[i], version) == 0) {
            return true;
        }
    }
    return false;
}

size_t
weft__mcp_server_max_message(const struct weft_mcp_server *server)
{
    return server->max_message;
}

static json_t *
rpc_error(json_t *id, int code, const char *message)
{
    return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
                     id != NULL ? id : json_null(), "error", "code", code, "message", message);
}

static json_t *
rpc_result(json_t *id, json_t *result)
{
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

static json_t *
do_initialize(const json_t *params, char *negotiated)
{
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
    const char *version = weft__mcp_server_speaks(asked) ? asked : versions[0];

    if (negotiated != NULL) {
        snprintf(negotiated, WEFT__MCP_PROTOCOL_LEN, "%s", version);
    }
    return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version,
                     "capabilities", "tools", "listChanged", 0, "serverInfo", "name", "weft",
                     "title", "weft runs and traces", "version", WEFT_VERSION, "instructions",
                     instructions);
}

static json_t *
do_tools_list(void)
{
    json_t *list = json_array();

    for (size_t i = 0; list != NULL && i < TOOL_COUNT; i++) {
        json_t *in = json_loads(tools[i].input_schema, 0, NULL);
        json_t *out = json_loads(tools[i].output_schema, 0, NULL);

        /* The schemas are constants: a typo is a bug the tests catch (assert would too). */
        json_array_append_new(
            list, json_pack("{s:s, s:s, s:s, s:o, s:o, s:{s:b, s:b}}", "name", tools[i].name,
                            "title", tools[i].title, "description", tools[i].description,
                            "inputSchema", in != NULL ? in : json_object(), "outputSchema",
                            out != NULL ? out : json_object(), "annotations", "readOnlyHint",
                            tools[i].run != tool_start_run, "openWorldHint", 0));
    }
    return json_pack("{s:o}", "tools", list);
}

/* The tool result: structuredContent and its text, or isError with a sentence. The text is
 * scrubbed of registered secrets; a result that could not be scrubbed is withheld. */
static json_t *
tool_result(struct weft_mcp_server *srv, struct tool_out *to)
{
    char *text = NULL;
    char *scrubbed = NULL;
    json_t *structured = NULL;
    json_t *r = NULL;
    weft_err err = WEFT_OK;

    if (to->result == NULL && to->error[0] == '\0') {
        snprintf(to->error, sizeof(to->error), "out of memory");
    }
    if (to->result == NULL) {
        return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", to->error,
                         "isError", 1);
    }
    text = json_dumps(to->result, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text == NULL) {
        return NULL;
    }
    if (strlen(text) > srv->max_result) {
        /* The tools keep within the cap as they build; this is the backstop. */
        free(text);
        return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                         "the result is larger than the server's result cap: ask for less "
                         "(limit) or narrower",
                         "isError", 1);
    }
    err = weft_secrets_scrub(text, strlen(text), &scrubbed);
    if (err != WEFT_OK) {
        free(text);
        return NULL;
    }
    if (scrubbed != NULL) {
        structured = json_loads(scrubbed, 0, NULL);
        if (structured != NULL) {
            r = json_pack("{s:[{s:s, s:s}], s:o, s:b}", "content", "type", "text", "text", scrubbed,
                          "structuredContent", structured, "isError", 0);
        } else {
            r = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                          "the result was withheld: it held a secret", "isError", 1);
        }
        weft_secrets_text_free(scrubbed);
        free(text);
        return r;
    }
    r = json_pack("{s:[{s:s, s:s}], s:O, s:b}", "content", "type", "text", "text", text,
                  "structuredContent", to->result, "isError", 0);
    free(text);
    return r;
}

/* tools/call. @return the result, or NULL with *code and @p msg set for a JSON-RPC error. */
static json_t *
do_tools_call(
    struct weft_mcp_server *srv, const json_t *params, int *code, char *msg, size_t msg_len)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    const json_t *args = json_object_get(params, "arguments");
    json_t *empty = NULL;
    struct tool_out to;
    json_t *r = NULL;
    const struct tool *tool = NULL;

    if (name == NULL) {
        *code = RPC_INVALID_PARAMS;
        snprintf(msg, msg_len, "tools/call: params.name (a string) is required");
        return NULL;
    }
    for (size_t i = 0; i < TOOL_COUNT; i++) {
        if (strcmp(tools[i].name, name) == 0) {
            tool = &tools[i];
        }
    }
    if (tool == NULL) {
        *code = RPC_INVALID_PARAMS;
        snprintf(msg, msg_len, "Unknown tool: %.100s", name);
        return NULL;
    }
    if (args != NULL && !json_is_object(args) && !json_is_null(args)) {
        *code = RPC_INVALID_PARAMS;
        snprintf(msg, msg_len, "tools/call: params.arguments must be an object");
        return NULL;
    }
    if (args == NULL || json_is_null(args)) {
        empty = json_object();
        args = empty;
    }
    memset(&to, 0, sizeof(to));
    tool->run(srv, args, &to);
    r = tool_result(srv, &to);
    json_decref(to.result);
    json_decref(empty);
    if (r == NULL) {
        *code = RPC_INTERNAL_ERROR;
        snprintf(msg, msg_len, "out of memory");
    }
    return r;
}

/* Answer one request (a message with a method and an id). */
static json_t *
dispatch(struct weft_mcp_server *srv,
         const char *method,
         json_t *id,
         const json_t *params,
         char *negotiated,
         bool *is_initialize)
{
    json_t *result = NULL;
    int code = RPC_METHOD_NOT_FOUND;
    char msg[256];

    snprintf(msg, sizeof(msg), "Method not found: %.100s", method);
    if (strcmp(method, "initialize") == 0) {
        *is_initialize = true;
        if (json_string_value(json_object_get(params, "protocolVersion")) == NULL) {
            return rpc_error(id, RPC_INVALID_PARAMS,
                             "initialize: params.protocolVersion (a string) is required");
        }
        result = do_initialize(params, negotiated);
    } else if (strcmp(method, "ping") == 0) {
        result = json_object();
    } else if (strcmp(method, "tools/list") == 0) {
        const json_t *cursor = json_object_get(params, "cursor");

        /* One page holds every tool: no cursor is ever issued, so any cursor is unknown. */
        if (cursor != NULL && !json_is_null(cursor) &&
            !(json_is_string(cursor) && json_string_length(cursor) == 0)) {
            return rpc_error(id, RPC_INVALID_PARAMS, "tools/list: unknown cursor");
        }
        result = do_tools_list();
    } else if (strcmp(method, "tools/call") == 0) {
        result = do_tools_call(srv, params, &code, msg, sizeof(msg));
    }
    if (result == NULL) {
        return rpc_error(id, code, msg);
    }
    return rpc_result(id, result);
}

weft_err
weft__mcp_server_handle(struct weft_mcp_server *srv,
                        const char *message,
                        size_t len,
                        char **response,
                        char *negotiated,
                        bool *is_initialize)
{
    json_t *msg = NULL;
    json_t *answer = NULL;
    json_t *id = NULL;
    const json_t *params = NULL;
    const char *method = NULL;
    json_error_t jerr;
    bool is_init = false;
    char text[300];

    if (srv == NULL || message == NULL || response == NULL) {
        return WEFT_EINVAL;
    }
    *response = NULL;
    if (negotiated != NULL) {
        negotiated[0] = '\0';
    }
    if (len > srv->max_message) {
        snprintf(text, sizeof(text), "Invalid Request: message larger than %zu bytes",
                 srv->max_message);
        answer = rpc_error(NULL, RPC_INVALID_REQUEST, text);
        goto out;
    }
    msg = json_loadb(message, len, JSON_REJECT_DUPLICATES, &jerr);
    if (msg == NULL) {
        snprintf(text, sizeof(text), "Parse error: %s (column %d)", jerr.text, jerr.column);
        answer = rpc_error(NULL, RPC_PARSE_ERROR, text);
        goto out;
    }
    if (!json_is_object(msg)) {
        answer = rpc_error(NULL, RPC_INVALID_REQUEST,
                           json_is_array(msg) ? "Invalid Request: batches are not supported"
                                              : "Invalid Request: expected a JSON object");
        goto out;
    }
    id = json_object_get(msg, "id");
    method = json_string_value(json_object_get(msg, "method"));
    params = json_object_get(msg, "params");
    if (id != NULL && !json_is_string(id) && !json_is_integer(id)) {
        answer = rpc_error(NULL, RPC_INVALID_REQUEST,
                           "Invalid Request: id must be a string or an integer");
        goto out;
    }
    if (json_object_get(msg, "method") == NULL &&
        (json_object_get(msg, "result") != NULL || json_object_get(msg, "error") != NULL)) {
        goto out; /* a response: the server sends no requests, so nothing waits for it */
    }
    if (!json_is_string(json_object_get(msg, "jsonrpc")) ||
        strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") != 0 || method == NULL) {
        answer = rpc_error(id, RPC_INVALID_REQUEST,
                           "Invalid Request: expected jsonrpc \"2.0\" and a method");
        goto out;
    }
    if (id == NULL) {
        goto out; /* a notification: initialized, cancelled, or one we do not know */
    }
    if (params != NULL && !json_is_object(params)) {
        answer = rpc_error(id, RPC_INVALID_PARAMS, "Invalid params: params must be an object");
        goto out;
    }
    pthread_mutex_lock(&srv->lock);
    answer = dispatch(srv, method, id, params, negotiated, &is_init);
    pthread_mutex_unlock(&srv->lock);
out:
    if (is_initialize != NULL) {
        *is_initialize = is_init;
    }
    if (answer != NULL) {
        *response = own(json_dumps(answer, JSON_COMPACT | JSON_PRESERVE_ORDER));
    }
    if (answer != NULL && *response == NULL) {
        json_decref(answer);
        json_decref(msg);
        return WEFT_ENOMEM;
    }
    json_decref(answer);
    json_decref(msg);
    return WEFT_OK;
}

weft_err
weft_mcp_server_handle(struct weft_mcp_server *server,
                       const char *message,
                       size_t len,
                       char **response)
{
    return weft__mcp_server_handle(server, message, len, response, NULL, NULL);
}

/* ---------------------------------------------------------------------------------------- */
/* Lifecycle and stdio                                                                        */

static char *
dup_or_null(const char *s)
{
    return s != NULL ? weft__strdup(s) : NULL;
}

weft_err
weft_mcp_server_new(const struct weft_mcp_server_options *options, struct weft_mcp_server **out)
{
    struct weft_mcp_server_options none;
    struct weft_mcp_server *srv = NULL;
    char *dir = NULL;
    weft_err err = WEFT_ENOMEM;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (options == NULL) {
        memset(&none, 0, sizeof(none));
        options = &none;
    }
    dir = realpath(options->workflows_dir != NULL ? options->workflows_dir : ".", NULL);
    if (dir == NULL) {
        return errno == ENOMEM ? WEFT_ENOMEM : WEFT_ENOTFOUND;
    }
    srv = weft__calloc(1, sizeof(*srv));
    if (srv == NULL) {
        goto fail;
    }
    srv->workflows_dir = weft__strdup(dir);
    srv->state_path = dup_or_null(options->state_path);
    srv->db_path = dup_or_null(options->db_path);
    if (srv->workflows_dir == NULL || (options->state_path != NULL && srv->state_path == NULL) ||
        (options->db_path != NULL && srv->db_path == NULL)) {
        goto fail;
    }
    err = weft_store_pool_new(srv->db_path, 0, &srv->stores);
    if (err != WEFT_OK) {
        goto fail;
    }
    srv->provider = options->provider;
    srv->meter = options->meter;
    srv->abort_flag = options->abort_flag;
    srv->max_message =
        options->max_message_bytes != 0 ? options->max_message_bytes : DEFAULT_MAX_MESSAGE;
    srv->max_result =
        options->max_result_bytes != 0 ? options->max_result_bytes : DEFAULT_MAX_RESULT;
    if (srv->max_result < MIN_MAX_RESULT) {
        srv->max_result = MIN_MAX_RESULT;
    }
    pthread_mutex_init(&srv->lock, NULL);
    free(dir);
    *out = srv;
    return WEFT_OK;
fail:
    if (srv != NULL) {
        weft__free(srv->workflows_dir);
        weft__free(srv->state_path);
        weft__free(srv->db_path);
    }
    weft__free(srv);
    free(dir);
    return err;
}

void
weft_mcp_server_free(struct weft_mcp_server *server)
{
    if (server == NULL) {
        return;
    }
    pthread_mutex_destroy(&server->lock);
    weft_store_pool_free(server->stores);
    weft__free(server->workflows_dir);
    weft__free(server->state_path);
    weft__free(server->db_path);
    weft__free(server);
}

/* Answer one line (without its newline). */
static weft_err
serve_line(struct weft_mcp_server *srv, int out_fd, const char *line, size_t len)
{
    char *response = NULL;
    weft_err err = WEFT_OK;

    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) {
        len--;
    }
    if (len == 0) {
        return WEFT_OK;
    }
    err = weft__mcp_server_handle(srv, line, len, &response, NULL, NULL);
    if (err == WEFT_OK && response != NULL) {
        err = weft__write_all(out_fd, response, strlen(response));
        if (err == WEFT_OK) {
            err = weft__write_all(out_fd, "\n", 1);
        }
    }
    weft__free(response);
    return err;
}

weft_err
weft_mcp_server_serve_stdio(struct weft_mcp_server *server, int in_fd, int out_fd)
{
    struct weft__buf line;
    char chunk[65536];
    bool is_skipping = false; /* inside a line longer than the cap */
    weft_err err = WEFT_OK;

    if (server == NULL || in_fd < 0 || out_fd < 0) {
        return WEFT_EINVAL;
    }
    weft__buf_init(&line, server->max_message);
    for (;;) {
        ssize_t n = 0;

        if (server->abort_flag != NULL && *server->abort_flag != 0) {
            break;
        }
        n = read(in_fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            err = WEFT_EIO;
            break;
        }
        if (n == 0) {
            if (!is_skipping && line.len > 0) {
                err = serve_line(server, out_fd, line.data, line.len);
            }
            break;
        }
        for (const char *p = chunk, *end = chunk + n; p < end && err == WEFT_OK;) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t take = (size_t)((nl != NULL ? nl : end) - p);

            weft_err added = is_skipping ? WEFT_OK : weft__buf_append(&line, p, take);

            if (added == WEFT_ELIMIT) {
                char text[128];

                snprintf(text, sizeof(text),
                         "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
                         "\"message\":\"Invalid Request: message larger than %zu bytes\"}}\n",
                         server->max_message);
                WEFT_LOG(WEFT_LOG_WARN, "mcp serve: a message larger than %zu bytes skipped",
                         server->max_message);
                err = weft__write_all(out_fd, text, strlen(text));
                is_skipping = true;
                weft__buf_reset(&line);
            } else if (added != WEFT_OK) {
                err = added;
            }
            if (nl == NULL) {
                break;
            }
            if (!is_skipping && err == WEFT_OK) {
                err = serve_line(server, out_fd, line.data != NULL ? line.data : "", line.len);
            }
            is_skipping = false;
            weft__buf_reset(&line);
            p = nl + 1;
        }
        if (err != WEFT_OK) {
            break;
        }
    }
    weft__buf_cleanup(&line);
    if (err == WEFT_EIO) {
        WEFT_LOG(WEFT_LOG_ERROR, "mcp serve: stdio: %s", strerror(errno));
    }
    return err;
}
