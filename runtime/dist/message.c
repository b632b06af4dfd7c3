/* runtime/dist/message.c - task and result messages as JSON (message.h). */
#include "runtime/dist/message.h"

#include "base/mem.h"
#include "base/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Encoding                                                                                    */

static void
set_str(json_t *o, const char *key, const char *value)
{
    if (value != NULL) {
        json_object_set_new(o, key, json_string(value));
    }
}

static void
set_u64(json_t *o, const char *key, uint64_t value)
{
    json_object_set_new(o, key, json_integer((json_int_t)value));
}

static weft_err
dump(json_t *o, char **out, size_t *len)
{
    char *text = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;

    json_decref(o);
    if (text == NULL) {
        return WEFT_ENOMEM;
    }
    *len = strlen(text);
    if (*len > WEFT__MSG_MAX) {
        free(text);
        return WEFT_ELIMIT;
    }
    *out = text;
    return WEFT_OK;
}

/* "span_attrs" of @p m: within the bounds the decoder checks (message.h), so a worker never
 * refuses what an orchestrator sent for them: keys that are empty, too long or not UTF-8, strings
 * that are not UTF-8 or hold a NUL byte, values of other types (arrays), non-finite numbers and
 * what would pass the total are left out, long strings cut at a character boundary. NULL: none
 * to send, or out of memory (*is_oom). */
static json_t *
span_attrs_json(const struct weft__task_msg *m, bool *is_oom)
{
    json_t *o = NULL;
    size_t total = 0;

    for (size_t i = 0; m->span_attrs != NULL && i < m->span_attr_count; i++) {
        const struct weft_attr *a = &m->span_attrs[i];
        const struct weft_value *v = &a->value;
        size_t key_len = a->key != NULL ? strlen(a->key) : 0;
        size_t bytes = key_len;
        json_t *value = NULL;

        if (key_len == 0 || key_len > WEFT__MSG_ATTR_KEY_MAX ||
            !weft__utf8_valid(a->key, key_len)) {
            continue;
        }
        if (o == NULL && (o = json_object()) == NULL) {
            *is_oom = true;
            return NULL;
        }
        if (json_object_get(o, a->key) == NULL &&
            json_object_size(o) == WEFT__TASK_SPAN_ATTRS_MAX) {
            continue;
        }
        switch (v->type) {
        case WEFT_VALUE_STRING: {
            size_t len = v->u.str != NULL ? v->len : 0;
            /* A NUL byte would come back as \u0000, which the decoder refuses. */
            if (!weft__utf8_valid(v->u.str, len) || (len > 0 && memchr(v->u.str, 0, len) != NULL)) {
                continue;
            }
            len = weft__utf8_cut(v->u.str, len, WEFT__MSG_ATTR_VALUE_MAX);
            bytes += len;
            value = json_stringn(len > 0 ? v->u.str : "", len);
            break;
        }
        case WEFT_VALUE_BOOL:
            value = json_boolean(v->u.b);
            break;
        case WEFT_VALUE_INT:
            value = json_integer((json_int_t)v->u.i);
            break;
        case WEFT_VALUE_DOUBLE:
            value = json_real(v->u.d); /* NULL for NaN and infinities: left out */
            if (value == NULL) {
                continue;
            }
            break;
        default:
            continue;
        }
        if (value == NULL) {
            *is_oom = true;
            break;
        }
        if (total + bytes > WEFT__MSG_ATTRS_MAX) {
            json_decref(value);
            continue;
        }
        total += bytes;
        if (json_object_set_new(o, a->key, value) != 0) {
            *is_oom = true;
            break;
        }
    }
    if (*is_oom || (o != NULL && json_object_size(o) == 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

weft_err
weft__task_msg_encode(const struct weft__task_msg *m, char **out, size_t *len)
{
    bool is_oom = false;
    json_t *attrs = span_attrs_json(m, &is_oom);
    json_t *o = is_oom ? NULL : json_object();

    *out = NULL;
    if (o == NULL) {
        json_decref(attrs);
        return WEFT_ENOMEM;
    }
    set_str(o, "type", WEFT__MSG_TASK);
    set_str(o, "run_id", m->run_id);
    set_str(o, "task_id", m->task_id);
    set_u64(o, "seq", m->seq);
    set_u64(o, "attempt", m->attempt);
    set_str(o, "step_id", m->step_id);
    set_str(o, "kind", m->kind);
    set_str(o, "agent", m->agent);
    set_str(o, "task", m->task);
    json_object_set_new(o, "context", m->context != NULL ? json_incref(m->context) : json_object());
    if (m->spec != NULL) {
        json_object_set(o, "spec", m->spec);
    }
    set_str(o, "workflow_path", m->workflow_path);
    if (m->workflow != NULL) {
        json_object_set(o, "workflow", m->workflow);
    }
    if (m->cursors != NULL) {
        json_object_set(o, "cursors", m->cursors);
    }
    json_object_set_new(o, "capture_content", json_boolean(m->capture_content));
    set_u64(o, "timeout_ms", m->timeout_ms);
    set_u64(o, "sent_ns", m->sent_ns);
    if (attrs != NULL) {
        json_object_set_new(o, "span_attrs", attrs);
    }
    return dump(o, out, len);
}

weft_err
weft__result_msg_encode(const struct weft__result_msg *m, char **out, size_t *len)
{
    json_t *o = json_object();
    json_t *usage = json_object();

    *out = NULL;
    if (o == NULL || usage == NULL) {
        json_decref(o);
        json_decref(usage);
        return WEFT_ENOMEM;
    }
    set_str(o, "type", WEFT__MSG_RESULT);
    set_str(o, "run_id", m->run_id);
    set_str(o, "task_id", m->task_id);
    set_u64(o, "seq", m->seq);
    set_u64(o, "attempt", m->attempt);
    set_str(o, "status", m->is_success ? "success" : "failed");
    set_str(o, "output", m->output);
    set_str(o, "error", m->error);
    set_str(o, "error_type", m->error_type);
    if (m->details != NULL) {
        json_object_set(o, "details", m->details);
    }
    set_str(o, "worker", m->worker);
    json_object_set_new(o, "delivery_count", json_integer(m->delivery_count));
    set_u64(o, "received_ns", m->received_ns);
    set_u64(o, "started_ns", m->started_ns);
    set_u64(o, "ended_ns", m->ended_ns);
    json_object_set_new(usage, "input_tokens", json_integer(m->input_tokens));
    json_object_set_new(usage, "output_tokens", json_integer(m->output_tokens));
    json_object_set_new(usage, "cost_usd", json_real(m->cost_usd));
    set_u64(usage, "llm_calls", m->llm_calls);
    set_u64(usage, "tool_calls", m->tool_calls);
    json_object_set_new(o, "usage", usage);
    set_u64(o, "agent_attempts", m->agent_attempts);
    if (m->cursors != NULL) {
        json_object_set(o, "cursors", m->cursors);
    }
    if (m->requests != NULL) {
        json_object_set(o, "requests", m->requests);
    }
    return dump(o, out, len);
}

/* ------------------------------------------------------------------------------------------ */
/* Decoding                                                                                    */

struct reader {
    const json_t *root;
    const char *what; /* "task message" */
    char *err;
    size_t err_len;
    bool is_bad;
    bool is_oom;
};

static void
bad(struct reader *r, const char *key, const char *expected)
{
    if (!r->is_bad) {
        snprintf(r->err, r->err_len, "%s: field \"%s\": expected %s", r->what, key, expected);
    }
    r->is_bad = true;
}

/* A string field copied (NULL when absent and optional). */
static char *
get_str(struct reader *r, const char *key, bool is_required)
{
    const json_t *v = json_object_get(r->root, key);
    char *copy = NULL;

    if (v == NULL || json_is_null(v)) {
        if (is_required) {
            bad(r, key, "a string (missing)");
        }
        return NULL;
    }
    if (!json_is_string(v)) {
        bad(r, key, "a string");
        return NULL;
    }
    copy = weft__strdup(json_string_value(v));
    r->is_oom = r->is_oom || copy == NULL;
    return copy;
}

static uint64_t
get_uint(struct reader *r, const char *key, bool is_required, uint64_t min)
{
    const json_t *v = json_object_get(r->root, key);

    if (v == NULL && !is_required) {
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < min) {
        bad(r, key, min > 0 ? "a positive integer" : "a non-negative integer");
        return 0;
    }
    return (uint64_t)json_integer_value(v);
}

/* A JSON value of @p type (an object, ...) with a new reference; NULL when absent. */
static json_t *
get_json(struct reader *r, const char *key, json_type type, const char *expected)
{
    json_t *v = json_object_get(r->root, key);

    if (v == NULL || json_is_null(v)) {
        return NULL;
    }
    if (json_typeof(v) != type) {
        bad(r, key, expected);
        return NULL;
    }
    return json_incref(v);
}

static void
get_uuid(struct reader *r, const char *key, char out[WEFT_UUID_LEN + 1])
{
    const char *v = json_string_value(json_object_get(r->root, key));

    if (!weft__uuid_is_valid(v)) {
        bad(r, key, "a UUID");
        out[0] = '\0';
        return;
    }
    memcpy(out, v, WEFT_UUID_LEN + 1);
}

/* Parse @p body as a JSON object of @p type. */
static json_t *
parse(const void *body, size_t len, const char *type, struct reader *r)
{
    json_error_t jerr;
    json_t *root = NULL;
    const char *t = NULL;

    if (len > WEFT__MSG_MAX) {
        snprintf(r->err, r->err_len, "%s: %zu bytes, more than the %u allowed", r->what, len,
                 WEFT__MSG_MAX);
        return NULL;
    }
    if (!weft__utf8_valid(body, len)) {
        snprintf(r->err, r->err_len, "%s: not UTF-8 text", r->what);
        return NULL;
    }
    root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        snprintf(r->err, r->err_len, "%s: invalid JSON at line %d column %d: %s", r->what,
                 jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    t = json_string_value(json_object_get(root, "type"));
    if (!json_is_object(root) || t == NULL || strcmp(t, type) != 0) {
        snprintf(r->err, r->err_len, "%s: field \"type\": expected \"%s\"", r->what, type);
        json_decref(root);
        return NULL;
    }
    r->root = root;
    return root;
}

static weft_err
finish(struct reader *r, json_t *root)
{
    json_decref(root);
    return r->is_oom ? WEFT_ENOMEM : r->is_bad ? WEFT_EPARSE : WEFT_OK;
}

/* "span_attrs": {key: string, boolean, integer or number}, within the bounds of message.h, into
 * m->span_attrs (pointing into the kept object). Absent or null: none. */
static void
get_span_attrs(struct reader *r, struct weft__task_msg *m)
{
    json_t *o = json_object_get(r->root, "span_attrs");
    const char *key = NULL;
    json_t *v = NULL;
    size_t total = 0;
    size_t n = 0;
    char what[160];

    if (o == NULL || json_is_null(o)) {
        return;
    }
    if (!json_is_object(o)) {
        bad(r, "span_attrs", "an object {key: string, boolean or number}");
        return;
    }
    if (json_object_size(o) > WEFT__TASK_SPAN_ATTRS_MAX) {
        snprintf(what, sizeof(what), "at most %d attributes (%zu given)", WEFT__TASK_SPAN_ATTRS_MAX,
                 json_object_size(o));
        bad(r, "span_attrs", what);
        return;
    }
    json_object_foreach(o, key, v)
    {
        struct weft_attr *a = &m->span_attr_store[n];
        size_t key_len = strlen(key);

        /* Keys are not quoted back: they come from the message and may hold anything. */
        if (key_len == 0 || key_len > WEFT__MSG_ATTR_KEY_MAX) {
            snprintf(what, sizeof(what), "keys of 1 to %u bytes (attribute %zu has %zu)",
                     WEFT__MSG_ATTR_KEY_MAX, n + 1, key_len);
            bad(r, "span_attrs", what);
            return;
        }
        total += key_len;
        if (json_is_string(v)) {
            size_t len = json_string_length(v);
            if (len > WEFT__MSG_ATTR_VALUE_MAX) {
                snprintf(what, sizeof(what),
                         "string values of at most %u bytes (attribute %zu has %zu)",
                         WEFT__MSG_ATTR_VALUE_MAX, n + 1, len);
                bad(r, "span_attrs", what);
                return;
            }
            total += len;
            *a = weft_attr_strn(key, json_string_value(v), len);
        } else if (json_is_boolean(v)) {
            *a = weft_attr_bool(key, json_is_true(v));
        } else if (json_is_integer(v)) {
            *a = weft_attr_int(key, (int64_t)json_integer_value(v));
        } else if (json_is_real(v)) {
            *a = weft_attr_double(key, json_real_value(v));
        } else {
            snprintf(what, sizeof(what),
                     "values that are a string, a boolean or a number (attribute %zu is not)",
                     n + 1);
            bad(r, "span_attrs", what);
            return;
        }
        if (total > WEFT__MSG_ATTRS_MAX) {
            snprintf(what, sizeof(what), "at most %u bytes of keys and string values in all",
                     WEFT__MSG_ATTRS_MAX);
            bad(r, "span_attrs", what);
            return;
        }
        n++;
    }
    m->span_attr_doc = json_incref(o);
    m->span_attrs = m->span_attr_store;
    m->span_attr_count = n;
}

static bool
is_known_kind(const char *kind)
{
    static const char *const kinds[] = {"agent",     "command", "file_writer",
                                        "http_call", "noop",    NULL};
    for (size_t i = 0; kind != NULL && kinds[i] != NULL; i++) {
        if (strcmp(kind, kinds[i]) == 0) {
            return true;
        }
    }
    return false;
}

weft_err
weft__task_msg_decode(
    const void *body, size_t len, struct weft__task_msg *m, char *err, size_t err_len)
{
    struct reader r = {NULL, "task message", err, err_len, false, false};
    json_t *root = NULL;
    weft_err e = WEFT_OK;

    memset(m, 0, sizeof(*m));
    root = parse(body, len, WEFT__MSG_TASK, &r);
    if (root == NULL) {
        return WEFT_EPARSE;
    }
    m->run_id = get_str(&r, "run_id", true);
    get_uuid(&r, "task_id", m->task_id);
    m->seq = get_uint(&r, "seq", true, 1);
    m->attempt = (unsigned)get_uint(&r, "attempt", true, 1);
    m->step_id = get_str(&r, "step_id", true);
    m->kind = get_str(&r, "kind", true);
    if (m->kind != NULL && !is_known_kind(m->kind)) {
        bad(&r, "kind", "agent, command, file_writer, http_call or noop");
    }
    m->agent = get_str(&r, "agent", true);
    m->task = get_str(&r, "task", true);
    m->context = get_json(&r, "context", JSON_OBJECT, "an object");
    m->spec = get_json(&r, "spec", JSON_OBJECT, "an object");
    m->workflow_path = get_str(&r, "workflow_path", false);
    m->workflow = get_json(&r, "workflow", JSON_OBJECT, "an object (the workflow document)");
    if (m->kind != NULL && strcmp(m->kind, "noop") != 0 &&
        (m->workflow == NULL || m->workflow_path == NULL) && !r.is_bad) {
        bad(&r, m->workflow == NULL ? "workflow" : "workflow_path", "a value (missing)");
    }
    m->cursors = get_json(&r, "cursors", JSON_OBJECT, "an object");
    {
        const json_t *cc = json_object_get(root, "capture_content");
        if (cc != NULL && !json_is_boolean(cc)) {
            bad(&r, "capture_content", "true or false");
        }
        m->capture_content = json_is_true(cc);
    }
    m->timeout_ms = (uint32_t)get_uint(&r, "timeout_ms", false, 0);
    m->sent_ns = get_uint(&r, "sent_ns", false, 0);
    get_span_attrs(&r, m);
    e = finish(&r, root);
    if (e != WEFT_OK) {
        weft__task_msg_cleanup(m);
    }
    return e;
}

weft_err
weft__result_msg_decode(
    const void *body, size_t len, struct weft__result_msg *m, char *err, size_t err_len)
{
    struct reader r = {NULL, "result message", err, err_len, false, false};
    json_t *root = NULL;
    const json_t *usage = NULL;
    char *status = NULL;
    weft_err e = WEFT_OK;

    memset(m, 0, sizeof(*m));
    root = parse(body, len, WEFT__MSG_RESULT, &r);
    if (root == NULL) {
        return WEFT_EPARSE;
    }
    m->run_id = get_str(&r, "run_id", true);
    get_uuid(&r, "task_id", m->task_id);
    m->seq = get_uint(&r, "seq", true, 1);
    m->attempt = (unsigned)get_uint(&r, "attempt", true, 1);
    status = get_str(&r, "status", true);
    if (status != NULL && strcmp(status, "success") != 0 && strcmp(status, "failed") != 0) {
        bad(&r, "status", "\"success\" or \"failed\"");
    }
    m->is_success = status != NULL && strcmp(status, "success") == 0;
    weft__free(status);
    m->output = get_str(&r, "output", false);
    m->error = get_str(&r, "error", false);
    m->error_type = get_str(&r, "error_type", false);
    m->details = get_json(&r, "details", JSON_OBJECT, "an object");
    m->worker = get_str(&r, "worker", false);
    m->delivery_count = (int64_t)get_uint(&r, "delivery_count", false, 0);
    m->received_ns = get_uint(&r, "received_ns", false, 0);
    m->started_ns = get_uint(&r, "started_ns", false, 0);
    m->ended_ns = get_uint(&r, "ended_ns", false, 0);
    usage = json_object_get(root, "usage");
    if (usage != NULL) {
        const json_t *cost = json_object_get(usage, "cost_usd");
        m->input_tokens = json_integer_value(json_object_get(usage, "input_tokens"));
        m->output_tokens = json_integer_value(json_object_get(usage, "output_tokens"));
        m->cost_usd = json_is_number(cost) ? json_number_value(cost) : 0.0;
        m->llm_calls = (uint64_t)json_integer_value(json_object_get(usage, "llm_calls"));
        m->tool_calls = (uint64_t)json_integer_value(json_object_get(usage, "tool_calls"));
        if (!json_is_object(usage) || m->input_tokens < 0 || m->output_tokens < 0 ||
            m->cost_usd < 0) {
            bad(&r, "usage", "{\"input_tokens\", \"output_tokens\", \"cost_usd\"} >= 0");
        }
    }
    m->agent_attempts = (unsigned)get_uint(&r, "agent_attempts", false, 0);
    m->cursors = get_json(&r, "cursors", JSON_OBJECT, "an object");
    m->requests = get_json(&r, "requests", JSON_ARRAY, "an array");
    e = finish(&r, root);
    if (e != WEFT_OK) {
        weft__result_msg_cleanup(m);
    }
    return e;
}

void
weft__task_msg_cleanup(struct weft__task_msg *m)
{
    weft__free(m->run_id);
    weft__free(m->step_id);
    weft__free(m->kind);
    weft__free(m->agent);
    weft__free(m->task);
    json_decref(m->context);
    json_decref(m->spec);
    weft__free(m->workflow_path);
    json_decref(m->workflow);
    json_decref(m->cursors);
    json_decref(m->span_attr_doc);
    memset(m, 0, sizeof(*m));
}

void
weft__result_msg_cleanup(struct weft__result_msg *m)
{
    weft__free(m->run_id);
    weft__free(m->output);
    weft__free(m->error);
    weft__free(m->error_type);
    json_decref(m->details);
    weft__free(m->worker);
    json_decref(m->cursors);
    json_decref(m->requests);
    memset(m, 0, sizeof(*m));
}
