/* report/docs.c - the JSON documents of the read commands' `--json` and of `weft serve`'s
 * /api/v1 (see docs.h and docs/cli-json.md). The documents are built from the public read APIs
 * only, with their own schema version, so that scripts do not depend on the text layout.
 *
 * Stored text may hold invalid UTF-8 (a command's output cut by a byte limit): jansson
 * refuses such strings, so they are repaired (invalid bytes become U+FFFD) rather than
 * dropped or turned into null.
 */
#include "docs.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A JSON string for @p s, NULL as null; invalid UTF-8 is replaced, never dropped. */
static json_t *
str_or_null(const char *s)
{
    json_t *j = NULL;
    char *fixed = NULL;
    size_t len = 0;
    size_t n = 0;

    if (s == NULL) {
        return json_null();
    }
    j = json_string(s);
    if (j != NULL) {
        return j;
    }
    len = strlen(s);
    fixed = malloc(3 * len + 1);
    if (fixed == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < len;) {
        const unsigned char *p = (const unsigned char *)s + i;
        size_t want = p[0] < 0x80             ? 1
                      : (p[0] & 0xe0) == 0xc0 ? 2
                      : (p[0] & 0xf0) == 0xe0 ? 3
                      : (p[0] & 0xf8) == 0xf0 ? 4
                                              : 0;
        bool is_ok = want > 0 && i + want <= len;

        for (size_t k = 1; is_ok && k < want; k++) {
            is_ok = (p[k] & 0xc0) == 0x80;
        }
        if (is_ok) {
            json_t *probe = json_stringn((const char *)p, want);

            is_ok = probe != NULL; /* overlong forms and surrogates */
            json_decref(probe);
        }
        if (is_ok) {
            memcpy(fixed + n, p, want);
            n += want;
            i += want;
        } else {
            memcpy(fixed + n, "\xef\xbf\xbd", 3);
            n += 3;
            i++;
        }
    }
    j = json_stringn(fixed, n);
    free(fixed);
    return j;
}

static json_t *
ns_or_null(uint64_t ns)
{
    return ns == 0 ? json_null() : json_integer((json_int_t)ns);
}

/* RFC 3339 in UTC with nanoseconds, or null for 0. */
static json_t *
rfc3339(uint64_t ns)
{
    time_t secs = (time_t)(ns / 1000000000u);
    struct tm tm;
    char buf[64];
    size_t n = 0;

    if (ns == 0 || gmtime_r(&secs, &tm) == NULL) {
        return json_null();
    }
    n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, sizeof(buf) - n, ".%09uZ", (unsigned)(ns % 1000000000u));
    return json_string(buf);
}

static void
set_time(json_t *o, const char *key, uint64_t ns)
{
    char ns_key[64];

    snprintf(ns_key, sizeof(ns_key), "%s_ns", key);
    json_object_set_new(o, ns_key, ns_or_null(ns));
    json_object_set_new(o, key, rfc3339(ns));
}

json_t *
weft__doc_parsed_or(const char *text, json_t *fallback)
{
    json_error_t error;
    json_t *j = text != NULL ? json_loads(text, JSON_DECODE_ANY, &error) : NULL;

    if (j == NULL && text != NULL && json_error_code(&error) == json_error_out_of_memory) {
        json_decref(fallback); /* not "corrupt": the document cannot be built */
        return NULL;
    }
    if (j == NULL) {
        return fallback;
    }
    json_decref(fallback);
    return j;
}

/* "a,b" -> ["a", "b"]; "" -> []. */
static json_t *
id_list(const char *comma_list)
{
    json_t *arr = json_array();
    const char *p = comma_list;

    while (arr != NULL && p != NULL && *p != '\0') {
        size_t len = strcspn(p, ",");

        json_array_append_new(arr, json_stringn(p, len));
        p += len;
        p += *p == ',';
    }
    return arr;
}

/* "kept:RULE" / "dropped:RULE" as {"kept": bool, "rule": RULE}; null when no policy applied. */
static json_t *
sampling_doc(const char *text)
{
    const char *colon = text != NULL ? strchr(text, ':') : NULL;

    if (colon == NULL) {
        return json_null();
    }
    return json_pack("{s:b, s:s}", "kept", strncmp(text, "kept:", 5) == 0, "rule", colon + 1);
}

json_t *
weft__doc_run_info(const struct weft_run_info *info)
{
    json_t *o = json_object();
    json_t *loops = weft__doc_parsed_or(info->loops, json_object());

    if (o == NULL) {
        json_decref(loops);
        return NULL;
    }
    json_object_set_new(o, "run_id", str_or_null(info->run_id));
    json_object_set_new(o, "workflow", str_or_null(info->workflow));
    json_object_set_new(o, "workflow_path", str_or_null(info->workflow_path));
    json_object_set_new(o, "session_id", str_or_null(info->session_id));
    json_object_set_new(o, "status", str_or_null(info->status));
    json_object_set_new(o, "reason", str_or_null(info->reason));
    json_object_set_new(o, "input", str_or_null(info->input));
    json_object_set_new(o, "trace_id", str_or_null(info->trace_id));
    json_object_set_new(o, "root_span_id", str_or_null(info->root_span_id));
    json_object_set_new(o, "resumed_from_trace", str_or_null(info->resumed_from_trace));
    json_object_set_new(o, "origin",
                        info->origin_kind != NULL
                            ? json_pack("{s:s, s:o, s:o}", "kind", info->origin_kind, "run_id",
                                        str_or_null(info->origin_run_id), "step",
                                        str_or_null(info->origin_step))
                            : json_null());
    set_time(o, "started", info->started_ns);
    set_time(o, "ended", info->ended_ns);
    json_object_set_new(o, "duration_ns",
                        info->ended_ns >= info->started_ns && info->ended_ns != 0
                            ? json_integer((json_int_t)(info->ended_ns - info->started_ns))
                            : json_null());
    json_object_set_new(o, "iterations", json_integer((json_int_t)info->iterations));
    json_object_set_new(o, "step_count", json_integer((json_int_t)info->step_count));
    json_object_set_new(o, "corrections", json_integer((json_int_t)info->corrections));
    json_object_set_new(o, "reward", json_real(info->reward));
    json_object_set_new(o, "input_tokens", json_integer(info->input_tokens));
    json_object_set_new(o, "output_tokens", json_integer(info->output_tokens));
    json_object_set_new(o, "cost_usd", json_real(info->cost_usd));
    json_object_set_new(o, "pinned", json_boolean(info->is_pinned));
    json_object_set_new(o, "trace_sampling", sampling_doc(info->trace_sampling));
    json_object_set_new(o, "loops", json_is_object(loops) ? loops : json_object());
    if (!json_is_object(loops)) {
        json_decref(loops);
    }
    return o;
}

json_t *
weft__doc_replay(const struct weft_replay_report *r)
{
    json_t *o = json_object();

    if (o == NULL) {
        return NULL;
    }
    json_object_set_new(o, "of", str_or_null(r->original_run_id));
    json_object_set_new(o, "identical", json_boolean(r->is_identical));
    json_object_set_new(o, "llm_calls",
                        json_pack("{s:I, s:I}", "replayed", (json_int_t)r->llm_calls, "original",
                                  (json_int_t)r->llm_expected));
    json_object_set_new(o, "tool_calls",
                        json_pack("{s:I, s:I}", "replayed", (json_int_t)r->tool_calls, "original",
                                  (json_int_t)r->tool_expected));
    json_object_set_new(o, "divergence",
                        r->is_identical
                            ? json_null()
                            : json_pack("{s:o, s:o, s:o, s:o, s:o}", "span", str_or_null(r->span),
                                        "step", str_or_null(r->step_id), "what",
                                        str_or_null(r->what), "expected", str_or_null(r->expected),
                                        "got", str_or_null(r->got)));
    return o;
}

const char *
weft__doc_step_status(const struct weft_run_details *d, size_t i)
{
    if (d->step_extras != NULL && d->step_extras[i].skipped_dependency != NULL) {
        return "skipped";
    }
    return d->steps[i].status;
}

static json_t *
step_json(const struct weft_run_details *d, size_t i)
{
    const struct weft_run_step *s = &d->steps[i];
    const struct weft_run_step_extra *x = d->step_extras != NULL ? &d->step_extras[i] : NULL;
    json_t *o = json_object();

    if (o == NULL) {
        return NULL;
    }
    json_object_set_new(o, "id", str_or_null(s->id));
    json_object_set_new(o, "agent", str_or_null(s->agent));
    json_object_set_new(o, "executor", str_or_null(s->executor));
    json_object_set_new(o, "status", str_or_null(weft__doc_step_status(d, i)));
    json_object_set_new(o, "stored_status", str_or_null(s->status));
    json_object_set_new(o, "attempts", json_integer((json_int_t)s->attempts));
    json_object_set_new(o, "reward", s->has_reward ? json_real(s->reward) : json_null());
    json_object_set_new(o, "depends_on", id_list(s->depends_on));
    json_object_set_new(o, "task", str_or_null(s->task));
    json_object_set_new(o, "result", str_or_null(s->result));
    json_object_set_new(o, "requested_by", str_or_null(s->requested_by));
    json_object_set_new(o, "parent", str_or_null(s->parent));
    json_object_set_new(o, "feedback", str_or_null(x != NULL ? x->feedback : NULL));
    json_object_set_new(o, "error_type", str_or_null(x != NULL ? x->error_type : NULL));
    json_object_set_new(o, "error",
                        x != NULL && x->error != NULL
                            ? weft__doc_parsed_or(x->error, str_or_null(x->error))
                            : json_null());
    set_time(o, "started", x != NULL ? x->started_ns : 0);
    set_time(o, "ended", x != NULL ? x->ended_ns : 0);
    json_object_set_new(o, "duration_ns",
                        x != NULL && x->started_ns != 0 && x->ended_ns >= x->started_ns
                            ? json_integer((json_int_t)(x->ended_ns - x->started_ns))
                            : json_null());
    if (x != NULL && x->skipped_dependency != NULL) {
        json_object_set_new(o, "skipped",
                            json_pack("{s:s, s:s}", "dependency", x->skipped_dependency,
                                      "dependency_status", x->skipped_dependency_status));
    } else {
        json_object_set_new(o, "skipped", json_null());
    }
    return o;
}

json_t *
weft__doc_tool_errors(const struct weft_run_details *d)
{
    json_t *list = json_array();

    /* Each step's error keeps {"tool_errors": {kind: n}} (runtime/steps/agent.c); the run's are
     * their sum by agent and kind, in the order first seen. */
    for (size_t i = 0; list != NULL && d->step_extras != NULL && i < d->step_count; i++) {
        json_t *error =
            d->step_extras[i].error != NULL ? json_loads(d->step_extras[i].error, 0, NULL) : NULL;
        json_t *counts = json_object_get(error, "tool_errors");
        const char *kind = NULL;
        json_t *n = NULL;

        json_object_foreach(counts, kind, n)
        {
            const char *agent = d->steps[i].agent != NULL ? d->steps[i].agent : "";
            json_t *row = NULL;
            size_t k = 0;
            json_t *each = NULL;

            if (!json_is_integer(n)) {
                continue;
            }
            json_array_foreach(list, k, each)
            {
                if (strcmp(json_string_value(json_object_get(each, "agent")), agent) == 0 &&
                    strcmp(json_string_value(json_object_get(each, "kind")), kind) == 0) {
                    row = each;
                    break;
                }
            }
            if (row == NULL) {
                json_array_append_new(list, json_pack("{s:s, s:s, s:I}", "agent", agent, "kind",
                                                      kind, "count", json_integer_value(n)));
            } else {
                json_object_set_new(row, "count",
                                    json_integer(json_integer_value(json_object_get(row, "count")) +
                                                 json_integer_value(n)));
            }
        }
        json_decref(error);
    }
    return list;
}

json_t *
weft__doc_run_details(const struct weft_run_details *d)
{
    json_t *doc = json_object();
    json_t *steps = json_array();
    json_t *corrections = json_array();

    if (doc == NULL || steps == NULL || corrections == NULL) {
        json_decref(doc);
        json_decref(steps);
        json_decref(corrections);
        return NULL;
    }
    json_object_set_new(doc, "schema", json_string(WEFT_DOC_SCHEMA_RUN));
    json_object_set_new(doc, "run", weft__doc_run_info(&d->info));
    for (size_t i = 0; i < d->step_count; i++) {
        json_array_append_new(steps, step_json(d, i));
    }
    for (size_t i = 0; i < d->correction_count; i++) {
        const struct weft_run_correction *c = &d->corrections[i];
        json_t *o = json_object();

        json_object_set_new(o, "seq", json_integer((json_int_t)c->seq));
        json_object_set_new(o, "failed_step", str_or_null(c->failed_step));
        json_object_set_new(o, "error_type", str_or_null(c->error_type));
        json_object_set_new(o, "inserted", weft__doc_parsed_or(c->inserted, json_array()));
        json_object_set_new(o, "depends_before",
                            weft__doc_parsed_or(c->depends_before, json_array()));
        json_object_set_new(o, "depends_after",
                            weft__doc_parsed_or(c->depends_after, json_array()));
        set_time(o, "created", c->created_ns);
        json_array_append_new(corrections, o);
    }
    json_object_set_new(doc, "steps", steps);
    json_object_set_new(doc, "corrections", corrections);
    json_object_set_new(doc, "tool_errors", weft__doc_tool_errors(d));
    return doc;
}

json_t *
weft__doc_traces(const char *db_path, const struct weft_trace_summary *list, size_t count)
{
    json_t *doc = json_object();
    json_t *arr = json_array();

    if (doc == NULL || arr == NULL) {
        json_decref(doc);
        json_decref(arr);
        return NULL;
    }
    json_object_set_new(doc, "schema", json_string(WEFT_DOC_SCHEMA_TRACES));
    json_object_set_new(doc, "db", str_or_null(db_path));
    for (size_t i = 0; i < count; i++) {
        const struct weft_trace_summary *s = &list[i];
        json_t *o = json_object();

        json_object_set_new(o, "trace_id", json_string(s->trace_id));
        json_object_set_new(o, "root_name", str_or_null(s->root_name));
        json_object_set_new(o, "has_root", json_boolean(s->has_root));
        json_object_set_new(o, "service_name", str_or_null(s->service_name));
        set_time(o, "start", s->start_ns);
        set_time(o, "end", s->end_ns);
        json_object_set_new(
            o, "duration_ns",
            json_integer((json_int_t)(s->end_ns > s->start_ns ? s->end_ns - s->start_ns : 0)));
        json_object_set_new(o, "span_count", json_integer((json_int_t)s->span_count));
        json_object_set_new(o, "error_count", json_integer((json_int_t)s->error_count));
        json_array_append_new(arr, o);
    }
    json_object_set_new(doc, "traces", arr);
    return doc;
}

json_t *
weft__doc_value(const struct weft_value *v)
{
    json_t *arr = NULL;

    switch (v->type) {
    case WEFT_VALUE_STRING:
        return str_or_null(v->u.str);
    case WEFT_VALUE_BOOL:
        return json_boolean(v->u.b);
    case WEFT_VALUE_INT:
        return json_integer((json_int_t)v->u.i);
    case WEFT_VALUE_DOUBLE:
        arr = json_real(v->u.d); /* NaN and infinities have no JSON form: null */
        return arr != NULL ? arr : json_null();
    default:
        break;
    }
    arr = json_array();
    for (size_t i = 0; arr != NULL && i < v->len; i++) {
        switch (v->type) {
        case WEFT_VALUE_STRING_ARRAY:
            json_array_append_new(arr, str_or_null(v->u.strs[i]));
            break;
        case WEFT_VALUE_BOOL_ARRAY:
            json_array_append_new(arr, json_boolean(v->u.bools[i]));
            break;
        case WEFT_VALUE_INT_ARRAY:
            json_array_append_new(arr, json_integer((json_int_t)v->u.ints[i]));
            break;
        default: {
            json_t *d = json_real(v->u.doubles[i]);
            json_array_append_new(arr, d != NULL ? d : json_null());
            break;
        }
        }
    }
    return arr;
}

static json_t *
attrs_json(const struct weft_attr *attrs, size_t count)
{
    json_t *o = json_object();

    for (size_t i = 0; o != NULL && i < count; i++) {
        json_t *v = NULL;

        if (attrs[i].key == NULL) {
            continue;
        }
        v = weft__doc_value(&attrs[i].value);
        json_object_set_new(o, attrs[i].key, v != NULL ? v : json_null());
    }
    return o;
}

static const char *
kind_name(weft_span_kind kind)
{
    switch (kind) {
    case WEFT_SPAN_KIND_SERVER:
        return "server";
    case WEFT_SPAN_KIND_CLIENT:
        return "client";
    case WEFT_SPAN_KIND_PRODUCER:
        return "producer";
    case WEFT_SPAN_KIND_CONSUMER:
        return "consumer";
    case WEFT_SPAN_KIND_INTERNAL:
        return "internal";
    default:
        return "unspecified";
    }
}

static const char *
status_name(weft_status_code code)
{
    return code == WEFT_STATUS_ERROR ? "error" : code == WEFT_STATUS_OK ? "ok" : "unset";
}

json_t *
weft__doc_span(const struct weft_span_data *s, size_t depth)
{
    char trace_hex[2 * WEFT_TRACE_ID_SIZE + 1];
    char span_hex[2 * WEFT_SPAN_ID_SIZE + 1];
    char parent_hex[2 * WEFT_SPAN_ID_SIZE + 1];
    const struct weft_value *service = NULL;
    json_t *o = json_object();
    json_t *events = json_array();
    json_t *links = json_array();

    if (o == NULL || events == NULL || links == NULL) {
        json_decref(o);
        json_decref(events);
        json_decref(links);
        return NULL;
    }
    weft_hex_encode(s->trace_id, WEFT_TRACE_ID_SIZE, trace_hex);
    weft_hex_encode(s->span_id, WEFT_SPAN_ID_SIZE, span_hex);
    weft_hex_encode(s->parent_span_id, WEFT_SPAN_ID_SIZE, parent_hex);
    for (size_t i = 0; s->resource != NULL && i < s->resource->attr_count; i++) {
        if (strcmp(s->resource->attrs[i].key, "service.name") == 0) {
            service = &s->resource->attrs[i].value;
        }
    }
    json_object_set_new(o, "trace_id", json_string(trace_hex));
    json_object_set_new(o, "span_id", json_string(span_hex));
    json_object_set_new(o, "parent_span_id", s->has_parent ? json_string(parent_hex) : json_null());
    json_object_set_new(o, "depth", json_integer((json_int_t)depth));
    json_object_set_new(o, "name", str_or_null(s->name));
    json_object_set_new(o, "kind", json_string(kind_name(s->kind)));
    set_time(o, "start", s->start_time_ns);
    set_time(o, "end", s->end_time_ns);
    json_object_set_new(o, "duration_ns",
                        json_integer((json_int_t)(s->end_time_ns > s->start_time_ns
                                                      ? s->end_time_ns - s->start_time_ns
                                                      : 0)));
    json_object_set_new(o, "status", json_string(status_name(s->status_code)));
    json_object_set_new(o, "status_message",
                        s->status_message != NULL && s->status_message[0] != '\0'
                            ? str_or_null(s->status_message)
                            : json_null());
    json_object_set_new(o, "service_name",
                        service != NULL && service->type == WEFT_VALUE_STRING
                            ? str_or_null(service->u.str)
                            : json_null());
    json_object_set_new(o, "attributes", attrs_json(s->attrs, s->attr_count));
    for (size_t i = 0; i < s->event_count; i++) {
        const struct weft_event_data *ev = &s->events[i];
        json_t *e = json_object();

        json_object_set_new(e, "name", str_or_null(ev->name));
        set_time(e, "time", ev->time_ns);
        json_object_set_new(e, "attributes", attrs_json(ev->attrs, ev->attr_count));
        json_array_append_new(events, e);
    }
    for (size_t i = 0; i < s->link_count; i++) {
        const struct weft_link_data *l = &s->links[i];
        char lt[2 * WEFT_TRACE_ID_SIZE + 1];
        char ls[2 * WEFT_SPAN_ID_SIZE + 1];
        json_t *e = json_object();

        weft_hex_encode(l->trace_id, WEFT_TRACE_ID_SIZE, lt);
        weft_hex_encode(l->span_id, WEFT_SPAN_ID_SIZE, ls);
        json_object_set_new(e, "trace_id", json_string(lt));
        json_object_set_new(e, "span_id", json_string(ls));
        json_object_set_new(e, "attributes", attrs_json(l->attrs, l->attr_count));
        json_array_append_new(links, e);
    }
    json_object_set_new(o, "events", events);
    json_object_set_new(o, "links", links);
    json_object_set_new(o, "dropped_attributes", json_integer((json_int_t)s->dropped_attrs));
    json_object_set_new(o, "dropped_events", json_integer((json_int_t)s->dropped_events));
    json_object_set_new(o, "dropped_links", json_integer((json_int_t)s->dropped_links));
    return o;
}

json_t *
weft__doc_skill(const struct weft_skill *s, bool with_solution)
{
    json_t *o = json_object();

    if (o == NULL) {
        return NULL;
    }
    json_object_set_new(o, "id", str_or_null(s->id));
    json_object_set_new(o, "agent", str_or_null(s->agent));
    json_object_set_new(o, "task", str_or_null(s->task));
    if (with_solution) {
        json_object_set_new(o, "solution", str_or_null(s->solution));
    }
    json_object_set_new(o, "reward", json_real(s->reward));
    json_object_set_new(o, "uses", json_integer((json_int_t)s->uses));
    set_time(o, "created", s->created_ns);
    set_time(o, "last_used", s->last_used_ns);
    json_object_set_new(o, "workflow", str_or_null(s->workflow));
    json_object_set_new(o, "run_id", str_or_null(s->run_id));
    json_object_set_new(o, "trace_id", str_or_null(s->trace_id));
    json_object_set_new(o, "span_id", str_or_null(s->span_id));
    return o;
}

json_t *
weft__doc_skills(const struct weft_skill *skills, size_t count)
{
    json_t *doc = json_object();
    json_t *arr = json_array();

    if (doc == NULL || arr == NULL) {
        json_decref(doc);
        json_decref(arr);
        return NULL;
    }
    json_object_set_new(doc, "schema", json_string(WEFT_DOC_SCHEMA_SKILLS));
    for (size_t i = 0; i < count; i++) {
        json_array_append_new(arr, weft__doc_skill(&skills[i], false));
    }
    json_object_set_new(doc, "skills", arr);
    return doc;
}

json_t *
weft__doc_trace(const struct weft_trace *trace,
                const char *run_id,
                const char *earlier,
                size_t offset,
                size_t limit)
{
    json_t *doc = json_object();
    json_t *spans = json_array();
    json_t *others = json_array();
    const struct weft_span_data *first = weft_trace_span(trace, 0);
    size_t total = weft_trace_span_count(trace);
    char trace_hex[WEFT_TRACE_ID_HEX_LEN + 1];
    size_t errors = 0;

    if (doc == NULL || spans == NULL || others == NULL || first == NULL) {
        json_decref(doc);
        json_decref(spans);
        json_decref(others);
        return NULL;
    }
    weft_hex_encode(first->trace_id, WEFT_TRACE_ID_SIZE, trace_hex);
    for (size_t i = 0; i < total; i++) {
        const struct weft_span_data *s = weft_trace_span(trace, i);

        errors += s->status_code == WEFT_STATUS_ERROR;
        if (i >= offset && i - offset < limit) {
            json_array_append_new(spans, weft__doc_span(s, weft_trace_span_depth(trace, i)));
        }
    }
    if (earlier != NULL && earlier[0] != '\0') {
        json_array_append_new(others, json_string(earlier));
    }
    json_object_set_new(doc, "schema", json_string(WEFT_DOC_SCHEMA_TRACE));
    json_object_set_new(doc, "trace_id", json_string(trace_hex));
    json_object_set_new(doc, "run_id", run_id != NULL ? json_string(run_id) : json_null());
    json_object_set_new(doc, "other_traces", others);
    json_object_set_new(doc, "span_count", json_integer((json_int_t)total));
    json_object_set_new(doc, "error_count", json_integer((json_int_t)errors));
    if (offset > 0 || limit < total) {
        json_object_set_new(doc, "offset", json_integer((json_int_t)offset));
    }
    json_object_set_new(doc, "spans", spans);
    return doc;
}
