/* runtime/mcp_server/tool_util.c - the helpers `weft mcp serve`'s tools share (tools.h): results
 * as JSON (times, durations, cut texts, attributes, a failed step), arguments, the size budget,
 * and the stores (the span store pool, trace and run references).
 */
#include "runtime/mcp_server/tools.h"

#include "base/mem.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/weft.h>

void
weft__mcp_fail_tool(struct tool_out *out, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(out->error, sizeof(out->error), fmt, ap);
    va_end(ap);
}

/* RFC 3339 in UTC with milliseconds; null for 0. */
json_t *
weft__mcp_time_json(uint64_t ns)
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
json_t *
weft__mcp_duration_json(uint64_t start_ns, uint64_t end_ns)
{
    if (start_ns == 0 || end_ns == 0 || end_ns < start_ns) {
        return json_null();
    }
    return json_real((double)(end_ns - start_ns) / 1e6);
}

/* @p s cut to @p max bytes (on a UTF-8 boundary) with a note of how much was cut; null for
 * NULL. */
json_t *
weft__mcp_text_json(const char *s, size_t max)
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

const char *
weft__mcp_kind_name(weft_span_kind kind)
{
    static const char *const names[] = {"UNSPECIFIED", "INTERNAL", "SERVER",
                                        "CLIENT",      "PRODUCER", "CONSUMER"};

    return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "UNSPECIFIED";
}

const char *
weft__mcp_status_name(weft_status_code code)
{
    return code == WEFT_STATUS_ERROR ? "ERROR" : code == WEFT_STATUS_OK ? "OK" : "UNSET";
}

json_t *
weft__mcp_value_json(const struct weft_value *v)
{
    json_t *a = NULL;

    switch (v->type) {
    case WEFT_VALUE_STRING:
        return weft__mcp_text_json(v->u.str, WEFT__MCP_MAX_VALUE_BYTES);
    case WEFT_VALUE_BOOL:
        return json_boolean(v->u.b);
    case WEFT_VALUE_INT:
        return json_integer(v->u.i);
    case WEFT_VALUE_DOUBLE:
        a = json_real(v->u.d); /* NaN and infinities have no JSON form: null, as report/docs.c */
        return a != NULL ? a : json_null();
    default:
        break;
    }
    a = json_array();
    for (size_t i = 0; a != NULL && i < v->len && i < 128; i++) {
        json_t *item = v->type == WEFT_VALUE_STRING_ARRAY ? weft__mcp_text_json(v->u.strs[i], 512)
                       : v->type == WEFT_VALUE_BOOL_ARRAY ? json_boolean(v->u.bools[i])
                       : v->type == WEFT_VALUE_INT_ARRAY  ? json_integer(v->u.ints[i])
                                                          : json_real(v->u.doubles[i]);
        json_array_append_new(a, item != NULL ? item : json_null()); /* an element is kept */
    }
    return a;
}

json_t *
weft__mcp_attrs_json(const struct weft_attr *attrs, size_t count)
{
    json_t *o = json_object();

    for (size_t i = 0; o != NULL && i < count; i++) {
        json_object_set_new(o, attrs[i].key, weft__mcp_value_json(&attrs[i].value));
    }
    return o;
}

/* The report's documents (report/experiment.h) count time in nanoseconds since the epoch; the
 * MCP results have always given times in RFC 3339 too (list_runs' "started"), which a model
 * reads without arithmetic. */
bool
weft__mcp_add_time(json_t *o, const char *ns_key, const char *key)
{
    json_int_t ns = json_integer_value(json_object_get(o, ns_key));

    return json_object_set_new(o, key, weft__mcp_time_json(ns > 0 ? (uint64_t)ns : 0)) == 0;
}

bool
weft__mcp_cut_member(json_t *o, const char *key, size_t max)
{
    const json_t *v = json_object_get(o, key);

    if (!json_is_string(v) || json_string_length(v) <= max) {
        return true;
    }
    return json_object_set_new(o, key, weft__mcp_text_json(json_string_value(v), max)) == 0;
}

/* Is @p text's JSON size within @p budget? Adds it to *used when it is. */
bool
weft__mcp_fits(const json_t *item, size_t *used, size_t budget)
{
    size_t n = json_dumpb(item, NULL, 0, JSON_COMPACT);

    if (*used + n + 1 > budget) {
        return false;
    }
    *used += n + 1;
    return true;
}

/* Integer argument @p key of @p args in [min, max], @p def when absent. */
bool
weft__mcp_int_arg(const json_t *args,
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
bool
weft__mcp_str_arg(
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
struct weft_store *
weft__mcp_open_store(struct weft_mcp_server *srv, struct tool_out *to)
{
    struct weft_store *store = NULL;
    weft_err err = weft_store_pool_acquire(srv->stores, &store);

    if (err == WEFT_ENOTFOUND) {
        weft__mcp_fail_tool(to, "no span store yet at %s: no run has been traced",
                            srv->db_path != NULL ? srv->db_path : "$WEFT_HOME/weft.db");
        return NULL;
    }
    if (err != WEFT_OK) {
        weft__mcp_fail_tool(to, "the span store cannot be read: %s", weft_strerror(err));
        return NULL;
    }
    return store;
}

/* Give back a handle weft__mcp_open_store() gave (NULL: nothing). */
void
weft__mcp_close_store(struct weft_mcp_server *srv, struct weft_store *store)
{
    weft_store_pool_release(srv->stores, store);
}

/* Resolve a trace reference: "last", a trace id or a prefix, or a run id (its latest trace).
 * @return WEFT_OK with @p out filled, else fills @p to. */
weft_err
weft__mcp_resolve_trace(struct weft_mcp_server *srv,
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
        weft__mcp_fail_tool(to, "run %s was not traced", run->info.run_id);
        weft_run_details_free(run);
        return WEFT_ENOTFOUND;
    }
    if (err == WEFT_EINVAL && weft_store_errmsg(store)[0] != '\0') {
        weft__mcp_fail_tool(to, "%s", weft_store_errmsg(store));
    } else {
        weft__mcp_fail_tool(to, "no trace or run matches \"%s\" (use list_runs, or \"last\")", ref);
    }
    return err == WEFT_OK ? WEFT_ENOTFOUND : err;
}

/* Load a run by reference; fills @p to on failure. */
struct weft_run_details *
weft__mcp_load_run(struct weft_mcp_server *srv, const char *ref, struct tool_out *to)
{
    struct weft_run_details *run = NULL;
    weft_err err = weft_run_load(srv->state_path, ref, &run);

    if (err == WEFT_ENOTFOUND) {
        weft__mcp_fail_tool(
            to, "no run matches \"%s\" (use list_runs to see the run ids, or \"last\")", ref);
    } else if (err == WEFT_EINVAL) {
        weft__mcp_fail_tool(to, "\"%s\" matches several runs: give more characters of the run id",
                            ref);
    } else if (err != WEFT_OK) {
        weft__mcp_fail_tool(to, "the state database cannot be read: %s", weft_strerror(err));
    }
    return err == WEFT_OK ? run : NULL;
}

json_t *
weft__mcp_failure_json(const struct weft_run_step *st, const struct weft_run_step_extra *x)
{
    json_t *error = x->error != NULL ? json_loads(x->error, 0, NULL) : NULL;

    return json_pack("{s:s, s:s?, s:s, s:I, s:s?, s:o, s:o, s:s?, s:s?}", "id", st->id, "agent",
                     st->agent, "status", st->status != NULL ? st->status : "unknown", "attempts",
                     (json_int_t)st->attempts, "error_type", x->error_type, "feedback",
                     weft__mcp_text_json(x->feedback, WEFT__MCP_MAX_TEXT_BYTES), "error",
                     error != NULL ? error : json_null(), "skipped_because_of",
                     x->skipped_dependency, "dependency_status", x->skipped_dependency_status);
}
