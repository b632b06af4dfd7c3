/* exporters/otlp_decode_json.c - the OTLP JSON decoder of ExportTraceServiceRequest bodies
 * (otlp_decode.h), on jansson.
 *
 * The mapping is proto3 JSON with OTLP's exceptions (REFERENCE.md): trace and span ids are hex
 * (either case is accepted), enums are integers (their proto names are accepted too), 64-bit
 * integers are decimal strings or JSON numbers, doubles may be "NaN", "Infinity" or
 * "-Infinity". Members are looked up by their lowerCamelCase name, then by the proto field
 * name, as proto3 JSON parsers must. Unknown members are ignored; a known member of the wrong
 * JSON type (a string where an object belongs) makes the request malformed, while an id that
 * is not valid hex only rejects its span, as in the protobuf decoder.
 *
 * Strings may hold "\u0000" (JSON_ALLOW_NUL: OTLP string values are any UTF-8); a key holding
 * one is dropped like an empty key; in a span's or an event's name it becomes U+FFFD. jansson
 * builds the whole tree first: its allocations count against the batch's cap as they are made
 * (weft__otlp_batch_json_begin), since a tree takes 10 to 100 times its text (an empty
 * attribute "{}," is 3 bytes and a few hundred in jansson), so the cap is of decoded bytes.
 * Invariants: d->err is sticky, as in otlp_decode.c.
 */
#include "otlp_decode.h"

#include "base/mem.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLAG_HAS_IS_REMOTE 0x100u
#define FLAG_IS_REMOTE     0x200u

struct jdec {
    struct weft__otlp_batch *b;
    weft_err err;
    char *why;
    size_t why_len;
};

static bool
fail(struct jdec *d, const char *what)
{
    if (d->err == WEFT_OK) {
        d->err = WEFT_EPARSE;
        if (d->why != NULL && d->why_len > 0) {
            snprintf(d->why, d->why_len, "malformed OTLP JSON: %s", what);
        }
    }
    return false;
}

/* A member by its JSON name, else its proto name; NULL when absent or null. */
static json_t *
member(const json_t *obj, const char *json_name, const char *proto_name)
{
    json_t *v = json_object_get(obj, json_name);

    if (v == NULL && proto_name != NULL) {
        v = json_object_get(obj, proto_name);
    }
    return json_is_null(v) ? NULL : v;
}

/* An unsigned 64-bit integer from a number or a decimal string. */
static bool
json_u64(struct jdec *d, const json_t *v, const char *what, uint64_t *out)
{
    const char *s = NULL;
    char *end = NULL;
    unsigned long long n = 0;

    *out = 0;
    if (v == NULL) {
        return true;
    }
    if (json_is_integer(v)) {
        *out = (uint64_t)json_integer_value(v);
        return true;
    }
    if (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) < 18446744073709551616.0) {
        *out = (uint64_t)json_real_value(v);
        return true;
    }
    s = json_string_value(v);
    if (s == NULL || s[0] < '0' || s[0] > '9') {
        return fail(d, what);
    }
    errno = 0;
    n = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return fail(d, what);
    }
    *out = (uint64_t)n;
    return true;
}

/* A signed 64-bit integer (intValue) from a number or a decimal string. */
static bool
json_i64(struct jdec *d, const json_t *v, int64_t *out)
{
    const char *s = json_string_value(v);
    char *end = NULL;
    long long n = 0;

    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return true;
    }
    if (json_is_real(v) && fabs(json_real_value(v)) < 9.2e18) {
        *out = (int64_t)json_real_value(v);
        return true;
    }
    if (s == NULL || s[0] == '\0') {
        return fail(d, "intValue is neither a number nor a decimal string");
    }
    errno = 0;
    n = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return fail(d, "intValue is neither a number nor a decimal string");
    }
    *out = (int64_t)n;
    return true;
}

static bool
json_f64(struct jdec *d, const json_t *v, double *out)
{
    const char *s = json_string_value(v);
    char *end = NULL;

    if (json_is_number(v)) {
        *out = json_number_value(v);
        return true;
    }
    if (s != NULL && strcmp(s, "NaN") == 0) {
        *out = NAN;
    } else if (s != NULL && strcmp(s, "Infinity") == 0) {
        *out = INFINITY;
    } else if (s != NULL && strcmp(s, "-Infinity") == 0) {
        *out = -INFINITY;
    } else if (s != NULL && s[0] != '\0') {
        *out = strtod(s, &end);
        return *end == '\0' || fail(d, "doubleValue is not a number");
    } else {
        return fail(d, "doubleValue is not a number");
    }
    return true;
}

static bool
json_u32(struct jdec *d, const json_t *v, const char *what, uint32_t *out)
{
    uint64_t n = 0;

    if (!json_u64(d, v, what, &n)) {
        return false;
    }
    *out = (uint32_t)n;
    return true;
}

/* An enum: an integer, or one of @p names (its proto name). */
static bool
json_enum(struct jdec *d, const json_t *v, const char *const *names, size_t count, int *out)
{
    const char *s = json_string_value(v);

    *out = 0;
    if (v == NULL) {
        return true;
    }
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);

        *out = n >= 0 && (size_t)n < count ? (int)n : 0;
        return true;
    }
    for (size_t i = 0; s != NULL && i < count; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (int)i;
            return true;
        }
    }
    return fail(d, "an enum is neither an integer nor a known name");
}

static int
hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* An id member: 1 valid, 0 absent or empty, -1 not hex of the right size. */
static int
json_id(const json_t *v, uint8_t *out, size_t size)
{
    const char *s = json_string_value(v);
    size_t len = s != NULL ? json_string_length(v) : 0;

    memset(out, 0, size);
    if (v == NULL || (s != NULL && len == 0)) {
        return 0;
    }
    if (s == NULL || len != 2 * size) {
        return -1;
    }
    for (size_t i = 0; i < size; i++) {
        int hi = hex_digit(s[2 * i]);
        int lo = hex_digit(s[2 * i + 1]);

        if (hi < 0 || lo < 0) {
            memset(out, 0, size);
            return -1;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 1;
}

static bool
json_str(struct jdec *d, const json_t *v, const char *what, const char **out)
{
    if (v == NULL) {
        return true;
    }
    if (!json_is_string(v)) {
        return fail(d, what);
    }
    *out = weft__otlp_batch_str(d->b, json_string_value(v), json_string_length(v), &d->err);
    return *out != NULL;
}

/* A span's or an event's name: NUL bytes ("\u0000") escaped (weft__otlp_batch_name). */
static bool
json_name(struct jdec *d, const json_t *v, const char *what, const char **out)
{
    if (v == NULL) {
        return true;
    }
    if (!json_is_string(v)) {
        return fail(d, what);
    }
    *out = weft__otlp_batch_name(d->b, json_string_value(v), json_string_length(v), &d->err);
    return *out != NULL;
}

static bool
want_array(struct jdec *d, const json_t *v, const char *what)
{
    return v == NULL || json_is_array(v) || fail(d, what);
}

static bool
want_object(struct jdec *d, const json_t *v, const char *what)
{
    return v == NULL || json_is_object(v) || fail(d, what);
}

/* ------------------------------------------------------------------------------------------ */
/* AnyValue                                                                                    */

static json_t *plain_json(struct jdec *d, const json_t *any, int depth);

static json_t *
plain_list(struct jdec *d, const json_t *list, bool is_kvlist, int depth)
{
    const json_t *values = member(list, "values", NULL);
    json_t *out = is_kvlist ? json_object() : json_array();
    size_t i = 0;
    json_t *item = NULL;

    if (!json_is_object(list) || !want_array(d, values, "values is not an array")) {
        json_decref(out);
        fail(d, "an arrayValue or kvlistValue is not an object");
        return NULL;
    }
    json_array_foreach(values, i, item)
    {
        json_t *plain = NULL;
        const json_t *key = is_kvlist ? member(item, "key", NULL) : NULL;

        if (out == NULL) {
            break;
        }
        plain = plain_json(d, is_kvlist ? member(item, "value", NULL) : item, depth + 1);
        if (plain == NULL) {
            json_decref(out);
            return NULL;
        }
        if (is_kvlist && key != NULL && !json_is_string(key)) {
            json_decref(plain);
            json_decref(out);
            fail(d, "a kvlistValue entry's key is not a string");
            return NULL;
        }
        /* No key: proto3's default, the empty string, as the protobuf decoder reads it. */
        if ((is_kvlist ? json_object_set_new(out, key != NULL ? json_string_value(key) : "", plain)
                       : json_array_append_new(out, plain)) != 0) {
            json_decref(out);
            d->err = WEFT_ENOMEM;
            return NULL;
        }
    }
    if (out == NULL) {
        d->err = d->err != WEFT_OK ? d->err : WEFT_ENOMEM;
    }
    return out;
}

/* An AnyValue as plain JSON; json null when unset. */
static json_t *
plain_json(struct jdec *d, const json_t *any, int depth)
{
    const json_t *v = NULL;
    int64_t i = 0;
    double x = 0;

    if (depth > WEFT__OTLP_MAX_VALUE_DEPTH) {
        fail(d, "attribute value nested too deeply");
        return NULL;
    }
    if (any == NULL) {
        return json_null();
    }
    if (!json_is_object(any)) {
        fail(d, "an AnyValue is not an object");
        return NULL;
    }
    if ((v = member(any, "stringValue", "string_value")) != NULL) {
        return json_is_string(v) ? json_copy((json_t *)v) : (fail(d, "stringValue"), NULL);
    }
    if ((v = member(any, "boolValue", "bool_value")) != NULL) {
        return json_is_boolean(v) ? json_copy((json_t *)v) : (fail(d, "boolValue"), NULL);
    }
    if ((v = member(any, "intValue", "int_value")) != NULL) {
        return json_i64(d, v, &i) ? json_integer((json_int_t)i) : NULL;
    }
    if ((v = member(any, "doubleValue", "double_value")) != NULL) {
        return !json_f64(d, v, &x) ? NULL
               : isnan(x)          ? json_string("NaN")
               : isinf(x) && x > 0 ? json_string("Infinity")
               : isinf(x)          ? json_string("-Infinity")
                                   : json_real(x);
    }
    if ((v = member(any, "arrayValue", "array_value")) != NULL) {
        return plain_list(d, v, false, depth);
    }
    if ((v = member(any, "kvlistValue", "kvlist_value")) != NULL) {
        return plain_list(d, v, true, depth);
    }
    if ((v = member(any, "bytesValue", "bytes_value")) != NULL) {
        return json_is_string(v) ? json_copy((json_t *)v) : (fail(d, "bytesValue"), NULL);
    }
    return json_null();
}

/* The scalar kind of an AnyValue: 1 string, 2 bool, 3 int, 4 double, 0 anything else. */
static int
scalar_kind(const json_t *any)
{
    if (!json_is_object(any)) {
        return 0;
    }
    if (member(any, "stringValue", "string_value") != NULL) {
        return 1;
    }
    if (member(any, "boolValue", "bool_value") != NULL) {
        return 2;
    }
    if (member(any, "intValue", "int_value") != NULL) {
        return 3;
    }
    return member(any, "doubleValue", "double_value") != NULL ? 4 : 0;
}

static bool decode_scalar(struct jdec *d, const json_t *any, int kind, struct weft_value *out);

static bool
decode_array(struct jdec *d, const json_t *list, struct weft_value *out)
{
    const json_t *values = json_is_object(list) ? member(list, "values", NULL) : NULL;
    static const weft_value_type types[] = {0, WEFT_VALUE_STRING_ARRAY, WEFT_VALUE_BOOL_ARRAY,
                                            WEFT_VALUE_INT_ARRAY, WEFT_VALUE_DOUBLE_ARRAY};
    static const size_t sizes[] = {0, sizeof(char *), sizeof(bool), sizeof(int64_t),
                                   sizeof(double)};
    size_t n = json_array_size(values);
    int kind = n == 0 ? 1 : scalar_kind(json_array_get(values, 0));
    void *items = NULL;

    for (size_t i = 1; i < n && kind != 0; i++) {
        kind = scalar_kind(json_array_get(values, i)) == kind ? kind : 0;
    }
    if (kind == 0) {
        json_t *j = plain_list(d, list, false, 1);

        return j != NULL && (d->err = weft__otlp_batch_json_value(d->b, j, out)) == WEFT_OK;
    }
    if (!want_array(d, values, "values is not an array")) {
        return false;
    }
    items = n > 0 ? weft__otlp_batch_alloc(d->b, n * sizes[kind], &d->err) : NULL;
    if (n > 0 && items == NULL) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        struct weft_value v;

        if (!decode_scalar(d, json_array_get(values, i), kind, &v)) {
            return false;
        }
        if (kind == 1) {
            ((const char **)items)[i] = v.u.str;
        } else if (kind == 2) {
            ((bool *)items)[i] = v.u.b;
        } else if (kind == 3) {
            ((int64_t *)items)[i] = v.u.i;
        } else {
            ((double *)items)[i] = v.u.d;
        }
    }
    out->type = types[kind];
    out->len = n;
    out->u.strs = items;
    return true;
}

static bool
decode_scalar(struct jdec *d, const json_t *any, int kind, struct weft_value *out)
{
    const json_t *v = NULL;

    switch (kind) {
    case 1:
        v = member(any, "stringValue", "string_value");
        out->type = WEFT_VALUE_STRING;
        out->len = json_string_length(v);
        return json_str(d, v, "stringValue is not a string", &out->u.str);
    case 2:
        v = member(any, "boolValue", "bool_value");
        out->type = WEFT_VALUE_BOOL;
        out->u.b = json_is_true(v);
        return json_is_boolean(v) || fail(d, "boolValue is not a boolean");
    case 3:
        out->type = WEFT_VALUE_INT;
        return json_i64(d, member(any, "intValue", "int_value"), &out->u.i);
    default:
        out->type = WEFT_VALUE_DOUBLE;
        return json_f64(d, member(any, "doubleValue", "double_value"), &out->u.d);
    }
}

/* An AnyValue into @p out; *is_set false when it holds nothing. */
static bool
decode_any(struct jdec *d, const json_t *any, struct weft_value *out, bool *is_set)
{
    int kind = scalar_kind(any);
    const json_t *v = NULL;
    json_t *plain = NULL;

    *is_set = true;
    if (any == NULL) {
        *is_set = false;
        return true;
    }
    if (!json_is_object(any)) {
        return fail(d, "an AnyValue is not an object");
    }
    if (kind != 0) {
        return decode_scalar(d, any, kind, out);
    }
    if ((v = member(any, "arrayValue", "array_value")) != NULL) {
        return decode_array(d, v, out);
    }
    v = member(any, "bytesValue", "bytes_value");
    if (v == NULL && member(any, "kvlistValue", "kvlist_value") == NULL) {
        *is_set = false;
        return true;
    }
    /* bytesValue is base64 already in JSON: kept as its text. */
    if (v != NULL) {
        out->type = WEFT_VALUE_STRING;
        out->len = json_string_length(v);
        return json_str(d, v, "bytesValue is not a string", &out->u.str);
    }
    plain = plain_json(d, any, 0);
    return plain != NULL && (d->err = weft__otlp_batch_json_value(d->b, plain, out)) == WEFT_OK;
}

static bool
decode_attrs(struct jdec *d,
             const json_t *arr,
             const struct weft_attr **out,
             size_t *count,
             uint32_t *dropped)
{
    size_t n = json_array_size(arr);
    struct weft_attr *attrs = NULL;
    size_t i = 0;
    json_t *kv = NULL;

    *count = 0;
    if (!want_array(d, arr, "attributes is not an array")) {
        return false;
    }
    attrs = n > 0 ? weft__otlp_batch_alloc(d->b, n * sizeof(*attrs), &d->err) : NULL;
    if (n > 0 && attrs == NULL) {
        return false;
    }
    json_array_foreach(arr, i, kv)
    {
        const json_t *key = json_is_object(kv) ? member(kv, "key", NULL) : NULL;
        struct weft_attr *a = &attrs[*count];
        bool is_set = false;

        if (!json_is_object(kv) || (key != NULL && !json_is_string(key))) {
            return fail(d, "an attribute is not a {key, value} object");
        }
        if (!decode_any(d, member(kv, "value", NULL), &a->value, &is_set)) {
            return false;
        }
        /* A key holding a NUL byte ("\u0000") would read as another key as a C string. */
        if (!is_set || json_string_length(key) == 0 ||
            strlen(json_string_value(key)) != json_string_length(key)) {
            (*dropped)++;
            continue;
        }
        if (!json_str(d, key, "key", &a->key)) {
            return false;
        }
        (*count)++;
    }
    *out = attrs;
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* Span                                                                                        */

static bool
decode_event(struct jdec *d, const json_t *j, struct weft_event_data *ev)
{
    uint32_t dropped = 0;

    ev->name = "";
    if (!want_object(d, j, "an event is not an object") ||
        !json_u64(d, member(j, "timeUnixNano", "time_unix_nano"), "timeUnixNano", &ev->time_ns) ||
        !json_name(d, member(j, "name", NULL), "event name", &ev->name) ||
        !decode_attrs(d, member(j, "attributes", NULL), &ev->attrs, &ev->attr_count,
                      &ev->dropped_attrs) ||
        !json_u32(d, member(j, "droppedAttributesCount", "dropped_attributes_count"),
                  "droppedAttributesCount", &dropped)) {
        return false;
    }
    ev->dropped_attrs += dropped;
    return true;
}

static bool
decode_link(struct jdec *d, const json_t *j, struct weft_link_data *link, bool *is_kept)
{
    uint32_t flags = 0;
    uint32_t dropped = 0;
    int has_trace = 0;
    int has_span = 0;

    if (!want_object(d, j, "a link is not an object")) {
        return false;
    }
    has_trace = json_id(member(j, "traceId", "trace_id"), link->trace_id, WEFT_TRACE_ID_SIZE);
    has_span = json_id(member(j, "spanId", "span_id"), link->span_id, WEFT_SPAN_ID_SIZE);
    if (!json_str(d, member(j, "traceState", "trace_state"), "traceState", &link->trace_state) ||
        !decode_attrs(d, member(j, "attributes", NULL), &link->attrs, &link->attr_count,
                      &link->dropped_attrs) ||
        !json_u32(d, member(j, "droppedAttributesCount", "dropped_attributes_count"),
                  "droppedAttributesCount", &dropped) ||
        !json_u32(d, member(j, "flags", NULL), "flags", &flags)) {
        return false;
    }
    link->dropped_attrs += dropped;
    link->trace_flags = (uint8_t)(flags & 0xff);
    link->is_remote = (flags & FLAG_HAS_IS_REMOTE) != 0 && (flags & FLAG_IS_REMOTE) != 0;
    *is_kept = weft__otlp_link_ids_ok(link, has_trace == 1, has_span == 1);
    return true;
}

static bool
decode_events_links(struct jdec *d, const json_t *j, struct weft_span_data *span)
{
    const json_t *events = member(j, "events", NULL);
    const json_t *links = member(j, "links", NULL);
    struct weft_event_data *ev = NULL;
    struct weft_link_data *ln = NULL;
    size_t ne = json_array_size(events);
    size_t nl = json_array_size(links);

    if (!want_array(d, events, "events is not an array") ||
        !want_array(d, links, "links is not an array")) {
        return false;
    }
    ev = ne > 0 ? weft__otlp_batch_alloc(d->b, ne * sizeof(*ev), &d->err) : NULL;
    ln = nl > 0 ? weft__otlp_batch_alloc(d->b, nl * sizeof(*ln), &d->err) : NULL;
    if ((ne > 0 && ev == NULL) || (nl > 0 && ln == NULL)) {
        return false;
    }
    for (size_t i = 0; i < ne; i++) {
        if (!decode_event(d, json_array_get(events, i), &ev[span->event_count++])) {
            return false;
        }
    }
    for (size_t i = 0; i < nl; i++) {
        bool is_kept = false;

        if (!decode_link(d, json_array_get(links, i), &ln[span->link_count], &is_kept)) {
            return false;
        }
        if (is_kept) {
            span->link_count++;
        } else {
            memset(&ln[span->link_count], 0, sizeof(*ln));
            span->dropped_links++;
        }
    }
    span->events = ev;
    span->links = ln;
    return true;
}

static bool
decode_status(struct jdec *d, const json_t *j, struct weft_span_data *span)
{
    static const char *const codes[] = {"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"};
    int code = 0;

    if (j == NULL) {
        return true;
    }
    if (!want_object(d, j, "status is not an object") ||
        !json_enum(d, member(j, "code", NULL), codes, 3, &code) ||
        !json_str(d, member(j, "message", NULL), "status message", &span->status_message)) {
        return false;
    }
    span->status_code = (weft_status_code)code;
    return true;
}

/* Scalars of a span; @p ids receives the id states (see json_id). */
static bool
span_scalars(struct jdec *d, const json_t *j, struct weft_span_data *span, int ids[3])
{
    static const char *const kinds[] = {"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL",
                                        "SPAN_KIND_SERVER",      "SPAN_KIND_CLIENT",
                                        "SPAN_KIND_PRODUCER",    "SPAN_KIND_CONSUMER"};
    uint32_t flags = 0;
    uint32_t dropped[3] = {0, 0, 0};
    int kind = 0;

    ids[0] = json_id(member(j, "traceId", "trace_id"), span->trace_id, WEFT_TRACE_ID_SIZE);
    ids[1] = json_id(member(j, "spanId", "span_id"), span->span_id, WEFT_SPAN_ID_SIZE);
    ids[2] = json_id(member(j, "parentSpanId", "parent_span_id"), span->parent_span_id,
                     WEFT_SPAN_ID_SIZE);
    if (!json_str(d, member(j, "traceState", "trace_state"), "traceState", &span->trace_state) ||
        !json_name(d, member(j, "name", NULL), "name is not a string", &span->name) ||
        !json_enum(d, member(j, "kind", NULL), kinds, 6, &kind) ||
        !json_u64(d, member(j, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano",
                  &span->start_time_ns) ||
        !json_u64(d, member(j, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano",
                  &span->end_time_ns) ||
        !json_u32(d, member(j, "droppedAttributesCount", "dropped_attributes_count"),
                  "droppedAttributesCount", &dropped[0]) ||
        !json_u32(d, member(j, "droppedEventsCount", "dropped_events_count"), "droppedEventsCount",
                  &dropped[1]) ||
        !json_u32(d, member(j, "droppedLinksCount", "dropped_links_count"), "droppedLinksCount",
                  &dropped[2]) ||
        !json_u32(d, member(j, "flags", NULL), "flags", &flags)) {
        return false;
    }
    span->kind = (weft_span_kind)kind;
    span->dropped_attrs += dropped[0];
    span->dropped_events += dropped[1];
    span->dropped_links += dropped[2];
    span->trace_flags = (uint8_t)(flags & 0xff);
    span->parent_is_remote = (flags & FLAG_HAS_IS_REMOTE) != 0 && (flags & FLAG_IS_REMOTE) != 0;
    return true;
}

static bool
decode_span(struct jdec *d,
            const json_t *j,
            const struct weft_resource *resource,
            const struct weft_scope *scope)
{
    struct weft_span_data *span = NULL;
    int ids[3] = {0, 0, 0};
    weft_err err = WEFT_OK;

    if (!want_object(d, j, "a span is not an object")) {
        return false;
    }
    span = weft__otlp_batch_alloc(d->b, sizeof(*span), &d->err);
    if (span == NULL) {
        return false;
    }
    span->name = "";
    span->resource = resource;
    span->scope = scope;
    if (!span_scalars(d, j, span, ids) ||
        !decode_attrs(d, member(j, "attributes", NULL), &span->attrs, &span->attr_count,
                      &span->dropped_attrs) ||
        !decode_events_links(d, j, span) || !decode_status(d, member(j, "status", NULL), span)) {
        return false;
    }
    span->has_parent = ids[2] == 1;
    if (!span->has_parent) {
        span->parent_is_remote = false;
    }
    err = weft__otlp_batch_add(d->b, span, ids[0] == 1, ids[1] == 1, ids[2] >= 0);
    if (err != WEFT_OK) {
        d->err = err;
    }
    return err == WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Envelopes                                                                                   */

static bool
decode_scope_spans(struct jdec *d, const json_t *j, const struct weft_resource *resource)
{
    struct weft_scope *scope = NULL;
    const json_t *sc = NULL;
    const json_t *spans = NULL;
    uint32_t dropped = 0;

    if (!want_object(d, j, "a scopeSpans entry is not an object")) {
        return false;
    }
    sc = member(j, "scope", NULL);
    spans = member(j, "spans", NULL);
    scope = weft__otlp_batch_alloc(d->b, sizeof(*scope), &d->err);
    if (scope == NULL || !want_object(d, sc, "scope is not an object") ||
        !want_array(d, spans, "spans is not an array") ||
        !json_str(d, member(j, "schemaUrl", "schema_url"), "schemaUrl", &scope->schema_url)) {
        return false;
    }
    if (sc != NULL &&
        (!json_str(d, member(sc, "name", NULL), "scope name", &scope->name) ||
         !json_str(d, member(sc, "version", NULL), "scope version", &scope->version) ||
         !decode_attrs(d, member(sc, "attributes", NULL), &scope->attrs, &scope->attr_count,
                       &dropped))) {
        return false;
    }
    for (size_t i = 0; i < json_array_size(spans); i++) {
        if (!decode_span(d, json_array_get(spans, i), resource, scope)) {
            return false;
        }
    }
    return true;
}

static bool
decode_resource_spans(struct jdec *d, const json_t *j)
{
    struct weft_resource *res = NULL;
    const json_t *r = NULL;
    const json_t *scopes = NULL;
    uint32_t dropped = 0;

    if (!want_object(d, j, "a resourceSpans entry is not an object")) {
        return false;
    }
    r = member(j, "resource", NULL);
    scopes = member(j, "scopeSpans", "scope_spans");
    res = weft__otlp_batch_alloc(d->b, sizeof(*res), &d->err);
    if (res == NULL || !want_object(d, r, "resource is not an object") ||
        !want_array(d, scopes, "scopeSpans is not an array") ||
        !json_str(d, member(j, "schemaUrl", "schema_url"), "schemaUrl", &res->schema_url)) {
        return false;
    }
    if (r != NULL && (!decode_attrs(d, member(r, "attributes", NULL), &res->attrs, &res->attr_count,
                                    &res->dropped_attrs) ||
                      !json_u32(d, member(r, "droppedAttributesCount", "dropped_attributes_count"),
                                "droppedAttributesCount", &dropped))) {
        return false;
    }
    res->dropped_attrs += dropped;
    for (size_t i = 0; i < json_array_size(scopes); i++) {
        if (!decode_scope_spans(d, json_array_get(scopes, i), res)) {
            return false;
        }
    }
    return true;
}

weft_err
weft__otlp_decode_json(
    const char *data, size_t len, struct weft__otlp_batch *batch, char *why, size_t why_len)
{
    struct jdec d = {batch, WEFT_OK, why, why_len};
    json_error_t jerr;
    json_t *root = NULL;
    const json_t *rs = NULL;
    size_t mark = 0;

    if (batch == NULL || (data == NULL && len > 0)) {
        return WEFT_EINVAL;
    }
    if (why != NULL && why_len > 0) {
        why[0] = '\0';
    }
    /* The tree is counted against the batch's cap as jansson builds it (and the trees of
     * kvlist values after it): past the cap, the parse fails as out of memory, and is 413. */
    mark = weft__otlp_batch_json_begin(batch);
    root =
        json_loadb(data != NULL ? data : "", len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (root == NULL && batch->is_json_over) {
        weft__otlp_batch_json_end(batch, mark);
        if (why != NULL && why_len > 0) {
            snprintf(why, why_len, "the decoded request would exceed %zu bytes", batch->max_bytes);
        }
        return WEFT_ELIMIT;
    }
    if (root == NULL) {
        weft__otlp_batch_json_end(batch, mark);
        if (why != NULL && why_len > 0) {
            snprintf(why, why_len, "malformed JSON at line %d, column %d: %s", jerr.line,
                     jerr.column, jerr.text);
        }
        return WEFT_EPARSE;
    }
    if (!json_is_object(root)) {
        fail(&d, "the request is not a JSON object");
    } else {
        rs = member(root, "resourceSpans", "resource_spans");
        if (want_array(&d, rs, "resourceSpans is not an array")) {
            for (size_t i = 0; i < json_array_size(rs) && d.err == WEFT_OK; i++) {
                decode_resource_spans(&d, json_array_get(rs, i));
            }
        }
    }
    json_decref(root);
    weft__otlp_batch_json_end(batch, mark);
    if (d.err != WEFT_OK && batch->is_json_over) {
        d.err = WEFT_ELIMIT;
    }
    if (d.err == WEFT_ELIMIT && why != NULL && why_len > 0) {
        snprintf(why, why_len, "the decoded request would exceed %zu bytes", batch->max_bytes);
    }
    return d.err;
}
