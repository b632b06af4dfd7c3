/* runtime/mcp_server/tools_trace.c - the tools over the span store (docs/mcp.md): get_trace (a
 * trace's spans in tree order), get_span (one span whole) and search_spans (spans by attribute
 * across the latest traces), read through include/weft/store.h.
 */
#include "runtime/mcp_server/tools.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <weft/weft.h>

#define MAX_TRACE_SPANS   2000   /* spans get_trace returns at most */
#define MAX_SEARCH        500    /* search_spans limit */
#define MAX_SEARCH_TRACES 200    /* traces search_spans scans at most */
#define MAX_SEARCH_SPANS  200000 /* spans search_spans scans at most */

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
span_json(const struct weft_trace *trace, size_t index, bool is_whole)
{
    const struct weft_span_data *s = weft_trace_span(trace, index);
    char trace_id[33];
    char span_id[17];
    char parent[17];
    json_t *o = NULL;

    weft_hex_encode(s->trace_id, 16, trace_id);
    weft_hex_encode(s->span_id, 8, span_id);
    weft_hex_encode(s->parent_span_id, 8, parent);
    o = json_pack("{s:s, s:s, s:s, s:o, s:s, s:s, s:o, s:o, s:o, s:I, s:o}", "name",
                  s->name != NULL ? s->name : "", "trace_id", trace_id, "span_id", span_id,
                  "parent_span_id", s->has_parent ? json_string(parent) : json_null(), "kind",
                  weft__mcp_kind_name(s->kind), "status", weft__mcp_status_name(s->status_code),
                  "status_message",
                  weft__mcp_text_json(s->status_message, WEFT__MCP_MAX_TEXT_BYTES), "start",
                  weft__mcp_time_json(s->start_time_ns), "duration_ms",
                  weft__mcp_duration_json(s->start_time_ns, s->end_time_ns), "depth",
                  (json_int_t)weft_trace_span_depth(trace, index), "attributes",
                  weft__mcp_attrs_json(s->attrs, s->attr_count));
    if (o == NULL || !is_whole) {
        return o;
    }
    json_t *events = json_array();
    json_t *links = json_array();

    for (size_t i = 0; events != NULL && i < s->event_count; i++) {
        const struct weft_event_data *e = &s->events[i];

        json_array_append_new(events,
                              json_pack("{s:s, s:o, s:o}", "name", e->name != NULL ? e->name : "",
                                        "time", weft__mcp_time_json(e->time_ns), "attributes",
                                        weft__mcp_attrs_json(e->attrs, e->attr_count)));
    }
    for (size_t i = 0; links != NULL && i < s->link_count; i++) {
        const struct weft_link_data *l = &s->links[i];
        char lt[33];
        char ls[17];

        weft_hex_encode(l->trace_id, 16, lt);
        weft_hex_encode(l->span_id, 8, ls);
        json_array_append_new(links, json_pack("{s:s, s:s, s:o}", "trace_id", lt, "span_id", ls,
                                               "attributes",
                                               weft__mcp_attrs_json(l->attrs, l->attr_count)));
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
        weft_hex_encode(weft_trace_span(trace, i)->span_id, 8, id);
        if (strcasecmp(id, hex) == 0) {
            return i;
        }
    }
    return SIZE_MAX;
}

/* Trace @p ref (an id or a prefix; its full id into @p id) loaded whole from the span store,
 * or NULL with @p to's error. */
static struct weft_trace *
load_trace(struct weft_mcp_server *srv,
           const char *ref,
           char id[WEFT_TRACE_ID_HEX_LEN + 1],
           struct tool_out *to)
{
    struct weft_store *store = weft__mcp_open_store(srv, to);
    struct weft_trace *trace = NULL;
    weft_err err = store != NULL ? weft__mcp_resolve_trace(srv, store, ref, id, to) : WEFT_EIO;

    if (store != NULL && err == WEFT_OK) {
        err = weft_store_load_trace(store, id, &trace);
        if (err != WEFT_OK) {
            weft__mcp_fail_tool(to, "trace %s cannot be loaded: %s", id, weft_strerror(err));
        }
    }
    weft__mcp_close_store(srv, store);
    return err == WEFT_OK ? trace : NULL;
}

static void
tool_get_trace(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    const char *ref = NULL;
    long long limit = 0;
    struct weft_trace *trace = NULL;
    char id[WEFT_TRACE_ID_HEX_LEN + 1];
    json_t *spans = NULL;
    size_t n = 0;
    size_t used = 0;
    size_t errors = 0;
    bool is_truncated = false;

    if (!weft__mcp_str_arg(args, "trace_id", true, &ref, to) ||
        !weft__mcp_int_arg(args, "limit", 1, MAX_TRACE_SPANS, MAX_TRACE_SPANS, &limit, to)) {
        return;
    }
    trace = load_trace(srv, ref, id, to);
    if (trace == NULL) {
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
        if (item != NULL && !weft__mcp_fits(item, &used, srv->max_result - 1024)) {
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
}

static void
tool_get_span(struct weft_mcp_server *srv, const json_t *args, struct tool_out *to)
{
    const char *ref = NULL;
    const char *span_id = NULL;
    struct weft_trace *trace = NULL;
    char id[WEFT_TRACE_ID_HEX_LEN + 1];
    size_t index = SIZE_MAX;

    if (!weft__mcp_str_arg(args, "trace_id", true, &ref, to) ||
        !weft__mcp_str_arg(args, "span_id", true, &span_id, to)) {
        return;
    }
    trace = load_trace(srv, ref, id, to);
    if (trace != NULL) {
        index = find_span(trace, span_id);
        if (index == SIZE_MAX) {
            weft__mcp_fail_tool(
                to, "trace has no span \"%s\" (span ids are 16 hex digits: see get_trace)",
                span_id);
        }
    }
    if (index != SIZE_MAX) {
        to->result = span_json(trace, index, true);
    }
    weft_trace_free(trace);
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
    char text[WEFT__MCP_MAX_VALUE_BYTES];
    weft_err err = WEFT_OK;

    if (!weft__mcp_str_arg(args, "key", true, &key, to) ||
        !weft__mcp_str_arg(args, "value", false, &value, to) ||
        !weft__mcp_str_arg(args, "name", false, &name, to) ||
        !weft__mcp_int_arg(args, "limit", 1, MAX_SEARCH, 50, &limit, to) ||
        !weft__mcp_int_arg(args, "traces", 1, MAX_SEARCH_TRACES, 50, &max_traces, to)) {
        return;
    }
    store = weft__mcp_open_store(srv, to);
    if (store == NULL) {
        return;
    }
    err = weft_store_list_traces(store, (size_t)max_traces, &sums, &sum_count);
    if (err != WEFT_OK) {
        weft__mcp_fail_tool(to, "the span store cannot be read: %s", weft_strerror(err));
        weft__mcp_close_store(srv, store);
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
        if (err == WEFT_ENOTFOUND) {
            continue; /* removed since the list was read (retention) */
        }
        if (err != WEFT_OK) {
            /* Not "no matches": the search could not look. */
            weft__mcp_fail_tool(to, "trace %s cannot be read from the span store: %s",
                                sums[t].trace_id, weft_strerror(err));
            json_decref(matches);
            weft_trace_summaries_free(sums, sum_count);
            weft__mcp_close_store(srv, store);
            return;
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
            weft_hex_encode(s->span_id, 8, span_id);
            item =
                json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "trace_id", sums[t].trace_id,
                          "span_id", span_id, "name", s->name != NULL ? s->name : "", "status",
                          weft__mcp_status_name(s->status_code), "status_message",
                          weft__mcp_text_json(s->status_message, 500), "start",
                          weft__mcp_time_json(s->start_time_ns), "duration_ms",
                          weft__mcp_duration_json(s->start_time_ns, s->end_time_ns), "value",
                          weft__mcp_value_json(weft_span_data_attr(s, key)));
            if (item != NULL && !weft__mcp_fits(item, &used, srv->max_result - 1024)) {
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
    weft__mcp_close_store(srv, store);
}

/* ---------------------------------------------------------------------------------------- */
/* Tool table                                                                                 */

#define SPAN_ITEM_SCHEMA                                                                    \
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"span_id\":{"     \
    "\"type\":\"string\"},\"parent_span_id\":{\"type\":[\"string\",\"null\"]},\"kind\":{"   \
    "\"type\":\"string\"},\"status\":{\"type\":\"string\",\"enum\":[\"UNSET\",\"OK\","      \
    "\"ERROR\"]},\"status_message\":{\"type\":[\"string\",\"null\"]},\"start\":{\"type\":[" \
    "\"string\",\"null\"]},\"duration_ms\":{\"type\":[\"number\",\"null\"]},\"depth\":{"    \
    "\"type\":\"integer\"},\"attributes\":{\"type\":\"object\"}},\"required\":[\"name\","   \
    "\"span_id\",\"status\"]}"

const struct tool weft__mcp_tools_trace[] = {
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
     tool_get_trace, true},
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
     tool_get_span, true},
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
     tool_search_spans, true},
};
const size_t weft__mcp_tools_trace_count =
    sizeof(weft__mcp_tools_trace) / sizeof(weft__mcp_tools_trace[0]);
