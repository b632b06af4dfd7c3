/* exporters/store_json.c - the JSON columns of the span store (attributes, events, links):
 * spans to JSON for the writer, JSON back to spans for the reader, and the few span facts both
 * sides and the renderer agree on (service name, whether a parent is real).
 *
 * Encoding: attributes is a JSON object whose JSON types carry the attribute types (string,
 * true/false, integer, real written with a decimal point, homogeneous arrays). The few values
 * plain JSON cannot type (NaN and infinities, empty arrays) are written as
 * {"type": "<type>", "value": ...}; attribute values are never objects otherwise. events and
 * links are JSON arrays of objects using the same attribute encoding. Text is always valid
 * UTF-8: invalid bytes are replaced (U+FFFD) rather than refused, so one bad attribute never
 * loses a batch.
 */
#include "store.h"

#include "base/buf.h"
#include "base/utf8.h"
#include "tracing/ids.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* JSON columns: writing                                                                       */

static const char *const type_names[] = {
    [WEFT_VALUE_STRING] = "string",
    [WEFT_VALUE_BOOL] = "bool",
    [WEFT_VALUE_INT] = "int",
    [WEFT_VALUE_DOUBLE] = "double",
    [WEFT_VALUE_STRING_ARRAY] = "string_array",
    [WEFT_VALUE_BOOL_ARRAY] = "bool_array",
    [WEFT_VALUE_INT_ARRAY] = "int_array",
    [WEFT_VALUE_DOUBLE_ARRAY] = "double_array",
};

/* A JSON string for @p len bytes of @p s; invalid UTF-8 is replaced rather than refused, so
 * one bad byte in a tool's output cannot lose the span. NULL only on ENOMEM. */
static json_t *
json_text(const char *s, size_t len)
{
    struct weft__buf clean;
    json_t *j = NULL;

    j = json_stringn(s != NULL ? s : "", s != NULL ? len : 0);
    if (j != NULL) {
        return j;
    }
    weft__buf_init(&clean, 0);
    if (weft__utf8_sanitize(s, len, WEFT__UTF8_REPLACEMENT, &clean) == WEFT_OK) {
        j = json_stringn(clean.data != NULL ? clean.data : "", clean.len);
    }
    weft__buf_cleanup(&clean);
    return j;
}

/* Set @p key to @p value in @p obj, replacing invalid UTF-8 in the key as in values (jansson
 * refuses such keys). Steals @p value, also on failure. @return 0 or -1 (ENOMEM). */
static int
json_set(json_t *obj, const char *key, json_t *value)
{
    struct weft__buf clean;
    size_t len = strlen(key);
    int rc = -1;

    if (value == NULL) {
        return -1;
    }
    if (weft__utf8_valid(key, len)) {
        return json_object_set_new(obj, key, value);
    }
    weft__buf_init(&clean, 0);
    if (weft__utf8_sanitize(key, len, WEFT__UTF8_REPLACEMENT, &clean) == WEFT_OK) {
        rc = json_object_set_new(obj, clean.data != NULL ? clean.data : "", value);
    } else {
        json_decref(value);
    }
    weft__buf_cleanup(&clean);
    return rc;
}

/* Scalars and arrays plain JSON can type; NULL on ENOMEM. */
static json_t *
double_json(double d)
{
    if (isnan(d)) {
        return json_string("NaN");
    }
    if (isinf(d)) {
        return json_string(d > 0 ? "Infinity" : "-Infinity");
    }
    return json_real(d);
}

static json_t *
tagged(weft_value_type type, json_t *value)
{
    json_t *obj = NULL;

    if (value == NULL) {
        return NULL;
    }
    obj = json_object();
    if (obj == NULL) {
        json_decref(value);
        return NULL;
    }
    if (json_object_set_new(obj, "type", json_string(type_names[type])) != 0 ||
        json_object_set_new(obj, "value", value) != 0) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

static json_t *
value_json(const struct weft_value *v)
{
    json_t *arr = NULL;
    bool needs_tag = false;

    switch (v->type) {
    case WEFT_VALUE_STRING:
        return json_text(v->u.str, v->len);
    case WEFT_VALUE_BOOL:
        return json_boolean(v->u.b);
    case WEFT_VALUE_INT:
        return json_integer((json_int_t)v->u.i);
    case WEFT_VALUE_DOUBLE:
        if (isfinite(v->u.d)) {
            return json_real(v->u.d);
        }
        return tagged(v->type, double_json(v->u.d));
    case WEFT_VALUE_STRING_ARRAY:
    case WEFT_VALUE_BOOL_ARRAY:
    case WEFT_VALUE_INT_ARRAY:
    case WEFT_VALUE_DOUBLE_ARRAY:
        break;
    default:
        return json_null();
    }
    arr = json_array();
    if (arr == NULL) {
        return NULL;
    }
    /* An empty array has no element to carry its type. */
    needs_tag = v->len == 0;
    for (size_t i = 0; i < v->len; i++) {
        json_t *item = NULL;

        switch (v->type) {
        case WEFT_VALUE_STRING_ARRAY:
            item = json_text(v->u.strs[i], strlen(v->u.strs[i]));
            break;
        case WEFT_VALUE_BOOL_ARRAY:
            item = json_boolean(v->u.bools[i]);
            break;
        case WEFT_VALUE_INT_ARRAY:
            item = json_integer((json_int_t)v->u.ints[i]);
            break;
        default:
            needs_tag = needs_tag || !isfinite(v->u.doubles[i]);
            item = double_json(v->u.doubles[i]);
            break;
        }
        if (item == NULL || json_array_append_new(arr, item) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return needs_tag ? tagged(v->type, arr) : arr;
}

json_t *
weft__store_attrs_json(const struct weft_attr *attrs, size_t count)
{
    json_t *obj = json_object();

    if (obj == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < count; i++) {
        if (attrs[i].key == NULL || json_set(obj, attrs[i].key, value_json(&attrs[i].value)) != 0) {
            json_decref(obj);
            return NULL;
        }
    }
    return obj;
}

json_t *
weft__store_events_json(const struct weft_span_data *span)
{
    json_t *arr = json_array();

    if (arr == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < span->event_count; i++) {
        const struct weft_event_data *ev = &span->events[i];
        json_t *obj = json_object();

        if (obj == NULL || json_array_append_new(arr, obj) != 0 ||
            json_set(obj, "name", json_text(ev->name, ev->name != NULL ? strlen(ev->name) : 0)) !=
                0 ||
            json_set(obj, "time_ns", json_integer((json_int_t)ev->time_ns)) != 0 ||
            json_set(obj, "attributes", weft__store_attrs_json(ev->attrs, ev->attr_count)) != 0 ||
            (ev->dropped_attrs != 0 &&
             json_set(obj, "dropped_attributes_count", json_integer(ev->dropped_attrs)) != 0)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

json_t *
weft__store_links_json(const struct weft_span_data *span)
{
    json_t *arr = json_array();

    if (arr == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < span->link_count; i++) {
        const struct weft_link_data *link = &span->links[i];
        char trace_hex[2 * WEFT_TRACE_ID_SIZE + 1];
        char span_hex[2 * WEFT_SPAN_ID_SIZE + 1];
        json_t *obj = json_object();

        weft_hex_encode(link->trace_id, WEFT_TRACE_ID_SIZE, trace_hex);
        weft_hex_encode(link->span_id, WEFT_SPAN_ID_SIZE, span_hex);
        if (obj == NULL || json_array_append_new(arr, obj) != 0 ||
            json_set(obj, "trace_id", json_string(trace_hex)) != 0 ||
            json_set(obj, "span_id", json_string(span_hex)) != 0 ||
            (link->trace_state != NULL &&
             json_set(obj, "trace_state",
                      json_text(link->trace_state, strlen(link->trace_state))) != 0) ||
            json_set(obj, "flags", json_integer(link->trace_flags)) != 0 ||
            json_set(obj, "is_remote", json_boolean(link->is_remote)) != 0 ||
            json_set(obj, "attributes", weft__store_attrs_json(link->attrs, link->attr_count)) !=
                0 ||
            (link->dropped_attrs != 0 &&
             json_set(obj, "dropped_attributes_count", json_integer(link->dropped_attrs)) != 0)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static int
dump_to_buf(const char *data, size_t size, void *user_data)
{
    return weft__buf_append(user_data, data, size) == WEFT_OK ? 0 : -1;
}

/* Serialise @p j (consumed) into @p out. */
weft_err
weft__store_dump_json(json_t *j, struct weft__buf *out)
{
    int rc = 0;

    weft__buf_reset(out);
    if (j == NULL) {
        return WEFT_ENOMEM;
    }
    rc = json_dump_callback(j, dump_to_buf, out, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(j);
    if (rc != 0) {
        return WEFT_ENOMEM;
    }
    return weft__buf_reserve(out, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* JSON columns: reading                                                                       */

static bool
type_from_name(const char *name, weft_value_type *out)
{
    for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++) {
        if (strcmp(type_names[i], name) == 0) {
            *out = (weft_value_type)i;
            return true;
        }
    }
    return false;
}

static bool
double_from_json(const json_t *j, double *out)
{
    const char *s = NULL;

    if (json_is_number(j)) {
        *out = json_number_value(j);
        return true;
    }
    s = json_string_value(j);
    if (s == NULL) {
        return false;
    }
    if (strcmp(s, "NaN") == 0) {
        *out = NAN;
    } else if (strcmp(s, "Infinity") == 0) {
        *out = INFINITY;
    } else if (strcmp(s, "-Infinity") == 0) {
        *out = -INFINITY;
    } else {
        return false;
    }
    return true;
}

/* Element type of a plain JSON array: the first element decides, and integers mixed into
 * reals read as doubles. */
static bool
array_type(const json_t *arr, weft_value_type *out)
{
    size_t i = 0;
    json_t *item = NULL;
    weft_value_type type = WEFT_VALUE_STRING_ARRAY;

    if (json_array_size(arr) == 0) {
        *out = WEFT_VALUE_STRING_ARRAY;
        return true;
    }
    item = json_array_get(arr, 0);
    if (json_is_string(item)) {
        type = WEFT_VALUE_STRING_ARRAY;
    } else if (json_is_boolean(item)) {
        type = WEFT_VALUE_BOOL_ARRAY;
    } else if (json_is_integer(item)) {
        type = WEFT_VALUE_INT_ARRAY;
    } else if (json_is_real(item)) {
        type = WEFT_VALUE_DOUBLE_ARRAY;
    } else {
        return false;
    }
    json_array_foreach(arr, i, item)
    {
        bool ok = false;

        switch (type) {
        case WEFT_VALUE_STRING_ARRAY:
            ok = json_is_string(item);
            break;
        case WEFT_VALUE_BOOL_ARRAY:
            ok = json_is_boolean(item);
            break;
        case WEFT_VALUE_INT_ARRAY:
            ok = json_is_integer(item);
            if (!ok && json_is_real(item)) {
                type = WEFT_VALUE_DOUBLE_ARRAY;
                ok = true;
            }
            break;
        default:
            ok = json_is_number(item);
            break;
        }
        if (!ok) {
            return false;
        }
    }
    *out = type;
    return true;
}

/* Convert an array @p arr of elements of @p type into @p out. @return 0, 1 (malformed:
 * skip the attribute) or -1 (ENOMEM). */
static int
array_value(struct weft__arena *arena,
            const json_t *arr,
            weft_value_type type,
            struct weft_value *out)
{
    size_t n = json_array_size(arr);
    size_t elem = 0;
    void *items = NULL;

    switch (type) {
    case WEFT_VALUE_STRING_ARRAY:
        elem = sizeof(char *);
        break;
    case WEFT_VALUE_BOOL_ARRAY:
        elem = sizeof(bool);
        break;
    case WEFT_VALUE_INT_ARRAY:
        elem = sizeof(int64_t);
        break;
    case WEFT_VALUE_DOUBLE_ARRAY:
        elem = sizeof(double);
        break;
    default:
        return 1;
    }
    if (n > SIZE_MAX / elem) {
        return 1;
    }
    items = weft__arena_alloc(arena, n * elem);
    if (items == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *item = json_array_get(arr, i);

        switch (type) {
        case WEFT_VALUE_STRING_ARRAY: {
            const char *s = json_string_value(item);
            char *copy = NULL;

            if (s == NULL) {
                return 1;
            }
            copy = weft__arena_strndup(arena, s, strlen(s));
            if (copy == NULL) {
                return -1;
            }
            ((char **)items)[i] = copy;
            break;
        }
        case WEFT_VALUE_BOOL_ARRAY:
            if (!json_is_boolean(item)) {
                return 1;
            }
            ((bool *)items)[i] = json_is_true(item);
            break;
        case WEFT_VALUE_INT_ARRAY:
            if (!json_is_integer(item)) {
                return 1;
            }
            ((int64_t *)items)[i] = (int64_t)json_integer_value(item);
            break;
        default:
            if (!double_from_json(item, &((double *)items)[i])) {
                return 1;
            }
            break;
        }
    }
    out->type = type;
    out->len = n;
    out->u.ints = items; /* the union's array members share one representation */
    switch (type) {
    case WEFT_VALUE_STRING_ARRAY:
        out->u.strs = (const char *const *)items;
        break;
    case WEFT_VALUE_BOOL_ARRAY:
        out->u.bools = items;
        break;
    case WEFT_VALUE_DOUBLE_ARRAY:
        out->u.doubles = items;
        break;
    default:
        break;
    }
    return 0;
}

/* @return 0, 1 (not a value weft writes: skip it) or -1 (ENOMEM). */
static int
json_value(struct weft__arena *arena, const json_t *j, struct weft_value *out)
{
    weft_value_type type = WEFT_VALUE_STRING;

    memset(out, 0, sizeof(*out));
    switch (json_typeof(j)) {
    case JSON_STRING: {
        size_t len = json_string_length(j);
        char *copy = weft__arena_strndup(arena, json_string_value(j), len);

        if (copy == NULL) {
            return -1;
        }
        out->type = WEFT_VALUE_STRING;
        out->u.str = copy;
        out->len = len;
        return 0;
    }
    case JSON_TRUE:
    case JSON_FALSE:
        out->type = WEFT_VALUE_BOOL;
        out->u.b = json_is_true(j);
        return 0;
    case JSON_INTEGER:
        out->type = WEFT_VALUE_INT;
        out->u.i = (int64_t)json_integer_value(j);
        return 0;
    case JSON_REAL:
        out->type = WEFT_VALUE_DOUBLE;
        out->u.d = json_real_value(j);
        return 0;
    case JSON_ARRAY:
        if (!array_type(j, &type)) {
            return 1;
        }
        return array_value(arena, j, type, out);
    case JSON_OBJECT: {
        const json_t *value = json_object_get(j, "value");
        const char *name = json_string_value(json_object_get(j, "type"));

        if (name == NULL || value == NULL || !type_from_name(name, &type)) {
            return 1;
        }
        if (type == WEFT_VALUE_DOUBLE) {
            out->type = WEFT_VALUE_DOUBLE;
            return double_from_json(value, &out->u.d) ? 0 : 1;
        }
        if (type < WEFT_VALUE_STRING_ARRAY || !json_is_array(value)) {
            return json_value(arena, value, out);
        }
        return array_value(arena, value, type, out);
    }
    default:
        return 1;
    }
}

/* Attributes from a JSON object; values weft would not write are skipped and counted in
 * *dropped. @return WEFT_OK, WEFT_ENOMEM. */
weft_err
weft__store_read_attrs(struct weft__arena *arena,
                       const json_t *obj,
                       const struct weft_attr **out,
                       size_t *count,
                       uint32_t *dropped)
{
    struct weft_attr *attrs = NULL;
    const char *key = NULL;
    json_t *value = NULL;
    size_t n = 0;

    *out = NULL;
    *count = 0;
    if (!json_is_object(obj) || json_object_size(obj) == 0) {
        return WEFT_OK;
    }
    attrs = weft__arena_alloc(arena, json_object_size(obj) * sizeof(*attrs));
    if (attrs == NULL) {
        return WEFT_ENOMEM;
    }
    json_object_foreach((json_t *)(uintptr_t)obj, key, value)
    {
        int rc = json_value(arena, value, &attrs[n].value);

        if (rc < 0) {
            return WEFT_ENOMEM;
        }
        if (rc > 0 || key[0] == '\0') {
            (*dropped)++;
            continue;
        }
        attrs[n].key = weft__arena_strdup(arena, key);
        if (attrs[n].key == NULL) {
            return WEFT_ENOMEM;
        }
        n++;
    }
    *out = attrs;
    *count = n;
    return WEFT_OK;
}

static uint32_t
json_u32(const json_t *j)
{
    json_int_t v = json_integer_value(j);

    return v < 0 ? 0 : v > (json_int_t)UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

weft_err
weft__store_read_events(struct weft__arena *arena, const json_t *arr, struct weft_span_data *span)
{
    struct weft_event_data *events = NULL;
    size_t n = 0;

    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        return WEFT_OK;
    }
    events = weft__arena_alloc(arena, json_array_size(arr) * sizeof(*events));
    if (events == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *obj = json_array_get(arr, i);
        struct weft_event_data *ev = &events[n];
        const char *name = json_string_value(json_object_get(obj, "name"));
        json_int_t t = json_integer_value(json_object_get(obj, "time_ns"));

        if (name == NULL) {
            span->dropped_events++;
            continue;
        }
        ev->name = weft__arena_strdup(arena, name);
        ev->time_ns = t < 0 ? 0 : (uint64_t)t;
        ev->dropped_attrs = json_u32(json_object_get(obj, "dropped_attributes_count"));
        if (ev->name == NULL ||
            weft__store_read_attrs(arena, json_object_get(obj, "attributes"), &ev->attrs,
                                   &ev->attr_count, &ev->dropped_attrs) != WEFT_OK) {
            return WEFT_ENOMEM;
        }
        n++;
    }
    span->events = events;
    span->event_count = n;
    return WEFT_OK;
}

weft_err
weft__store_read_links(struct weft__arena *arena, const json_t *arr, struct weft_span_data *span)
{
    struct weft_link_data *links = NULL;
    size_t n = 0;

    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        return WEFT_OK;
    }
    links = weft__arena_alloc(arena, json_array_size(arr) * sizeof(*links));
    if (links == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *obj = json_array_get(arr, i);
        struct weft_link_data *link = &links[n];
        const char *trace_hex = json_string_value(json_object_get(obj, "trace_id"));
        const char *span_hex = json_string_value(json_object_get(obj, "span_id"));
        const char *state = json_string_value(json_object_get(obj, "trace_state"));

        if (trace_hex == NULL || span_hex == NULL ||
            weft__hex_decode_id(trace_hex, strlen(trace_hex), link->trace_id, WEFT_TRACE_ID_SIZE) !=
                WEFT_OK ||
            weft__hex_decode_id(span_hex, strlen(span_hex), link->span_id, WEFT_SPAN_ID_SIZE) !=
                WEFT_OK) {
            span->dropped_links++;
            continue;
        }
        link->trace_flags = (uint8_t)json_integer_value(json_object_get(obj, "flags"));
        link->is_remote = json_is_true(json_object_get(obj, "is_remote"));
        link->dropped_attrs = json_u32(json_object_get(obj, "dropped_attributes_count"));
        if (state != NULL) {
            link->trace_state = weft__arena_strdup(arena, state);
            if (link->trace_state == NULL) {
                return WEFT_ENOMEM;
            }
        }
        if (weft__store_read_attrs(arena, json_object_get(obj, "attributes"), &link->attrs,
                                   &link->attr_count, &link->dropped_attrs) != WEFT_OK) {
            return WEFT_ENOMEM;
        }
        n++;
    }
    span->links = links;
    span->link_count = n;
    return WEFT_OK;
}

const char *
weft__store_service_name(const struct weft_span_data *span)
{
    if (span->resource == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < span->resource->attr_count; i++) {
        const struct weft_attr *a = &span->resource->attrs[i];

        if (a->key != NULL && strcmp(a->key, "service.name") == 0 &&
            a->value.type == WEFT_VALUE_STRING) {
            return a->value.u.str;
        }
    }
    return NULL;
}

bool
weft__store_has_parent(const struct weft_span_data *span)
{
    if (!span->has_parent) {
        return false;
    }
    for (size_t i = 0; i < WEFT_SPAN_ID_SIZE; i++) {
        if (span->parent_span_id[i] != 0) {
            return true;
        }
    }
    return false;
}
