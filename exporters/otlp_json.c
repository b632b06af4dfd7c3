/* exporters/otlp_json.c - OTLP JSON encoding of span batches: one ExportTraceServiceRequest
 * object, no trailing newline (the file exporter adds it).
 *
 * The mapping is proto3 JSON with the OTLP exceptions (REFERENCE.md): lowerCamelCase keys,
 * trace and span ids as lowercase hex, enums (kind, status code) as integers, 64-bit integers
 * (intValue, *UnixNano) as decimal strings, uint32 counts and flags as numbers, doubles as
 * numbers except NaN and the infinities, which are the strings "NaN", "Infinity" and
 * "-Infinity". Fields are written in field-number order and omitted when they hold the proto3
 * default, exactly as otlp_proto.c omits them, so a protobuf request decoded to JSON equals
 * this output (the tests check that).
 *
 * Hand-written rather than built as a jansson tree: a tree costs one allocation per key and
 * value (about forty per span) plus a dump pass, and jansson refuses strings that are not
 * UTF-8 instead of repairing them. Here every byte is appended once to the caller's buffer.
 * Strings are escaped (quote, backslash, control characters) and invalid UTF-8 is replaced by
 * U+FFFD, one per maximal invalid subpart (weft__utf8_seq(), shared with otlp_proto.c),
 * so the output is always valid JSON. Doubles use the shortest of %.15g, %.16g and %.17g that
 * reads back exactly, with ".0" added to integral values so every reader sees a real number;
 * the decimal point is forced to '.' whatever LC_NUMERIC says.
 *
 * Errors are sticky in struct js: after the first failure appends are skipped, and the entry
 * point restores the caller's length.
 */
#include "base/buf.h"
#include "base/mem.h"
#include "base/utf8.h"
#include "otlp_encode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* W3C flags live in the low byte; bit 8 says bit 9 is meaningful; bit 9 is "remote". */
#define FLAG_HAS_IS_REMOTE 0x100u
#define FLAG_IS_REMOTE     0x200u

/* Markers for the grouping pass live on the stack up to this many spans (the default batch). */
#define STACK_MARKS 512

struct js {
    struct weft__buf *buf;
    weft_err err; /* sticky: the first failure; later appends are skipped */
};

static void
put(struct js *j, const char *s, size_t n)
{
    weft_err err = WEFT_OK;

    if (j->err != WEFT_OK || n == 0) {
        return;
    }
    err = weft__buf_append(j->buf, s, n);
    if (err != WEFT_OK) {
        j->err = err;
    }
}

static void
put_lit(struct js *j, const char *s)
{
    put(j, s, strlen(s));
}

/* Start member @p name of an object; @p first tracks whether a comma is needed. */
static void
key(struct js *j, bool *first, const char *name)
{
    if (!*first) {
        put(j, ",", 1);
    }
    *first = false;
    put(j, "\"", 1);
    put_lit(j, name);
    put(j, "\":", 2);
}

static const char hex_digits[] = "0123456789abcdef";

/* A JSON string: escapes quote, backslash and control characters, keeps valid UTF-8 as is
 * and replaces invalid sequences by U+FFFD. Runs of plain bytes are appended in one piece. */
static void
put_string(struct js *j, const char *str, size_t len)
{
    const uint8_t *s = (const uint8_t *)str;
    size_t run = 0;
    size_t i = 0;
    size_t n = 0;
    bool is_valid = true;
    char esc[6] = {'\\', 'u', '0', '0', '0', '0'};

    if (str == NULL) {
        len = 0;
    }
    put(j, "\"", 1);
    while (i < len) {
        uint8_t c = s[i];

        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        if (c >= 0x80) {
            n = weft__utf8_seq(s + i, len - i, &is_valid);
            if (is_valid) {
                i += n;
                continue;
            }
            put(j, str + run, i - run);
            put(j, "\xEF\xBF\xBD", 3);
            i += n;
            run = i;
            continue;
        }
        put(j, str + run, i - run);
        switch (c) {
        case '"':
            put(j, "\\\"", 2);
            break;
        case '\\':
            put(j, "\\\\", 2);
            break;
        case '\n':
            put(j, "\\n", 2);
            break;
        case '\r':
            put(j, "\\r", 2);
            break;
        case '\t':
            put(j, "\\t", 2);
            break;
        case '\b':
            put(j, "\\b", 2);
            break;
        case '\f':
            put(j, "\\f", 2);
            break;
        default:
            esc[4] = hex_digits[c >> 4];
            esc[5] = hex_digits[c & 0xF];
            put(j, esc, sizeof(esc));
            break;
        }
        i++;
        run = i;
    }
    put(j, str + run, i - run);
    put(j, "\"", 1);
}

/* Decimal digits of @p v into @p out (at least 20 bytes); returns their count. */
static size_t
format_u64(char *out, uint64_t v)
{
    char tmp[20];
    size_t n = 0;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++) {
        out[i] = tmp[n - 1 - i];
    }
    return n;
}

/* A number (uint32 counts and flags). */
static void
put_u64(struct js *j, uint64_t v)
{
    char tmp[20];

    put(j, tmp, format_u64(tmp, v));
}

/* An int32 enum as a number. */
static void
put_enum(struct js *j, int v)
{
    if (v < 0) {
        put(j, "-", 1);
        put_u64(j, (uint64_t)0 - (uint64_t)(int64_t)v);
        return;
    }
    put_u64(j, (uint64_t)v);
}

/* A fixed64 or uint64 as a decimal string. */
static void
put_u64_string(struct js *j, uint64_t v)
{
    char tmp[22];
    size_t n = 0;

    tmp[0] = '"';
    n = 1 + format_u64(tmp + 1, v);
    tmp[n++] = '"';
    put(j, tmp, n);
}

/* An int64 as a decimal string. */
static void
put_i64_string(struct js *j, int64_t v)
{
    char tmp[23];
    size_t n = 0;

    tmp[n++] = '"';
    if (v < 0) {
        tmp[n++] = '-';
        n += format_u64(tmp + n, (uint64_t)0 - (uint64_t)v);
    } else {
        n += format_u64(tmp + n, (uint64_t)v);
    }
    tmp[n++] = '"';
    put(j, tmp, n);
}

static void
put_double(struct js *j, double d)
{
    char tmp[40];
    bool is_real = false;
    int n = 0;

    if (isnan(d)) {
        put_lit(j, "\"NaN\"");
        return;
    }
    if (isinf(d)) {
        put_lit(j, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        return;
    }
    /* The shortest precision that reads back exactly (17 always does). */
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(tmp, sizeof(tmp) - 2, "%.*g", prec, d);
        if (n < 0 || (size_t)n >= sizeof(tmp) - 2) {
            j->err = j->err == WEFT_OK ? WEFT_EINVAL : j->err;
            return;
        }
        if (strtod(tmp, NULL) == d) {
            break;
        }
    }
    /* Whatever the locale made of the decimal point, JSON wants '.'. */
    for (int i = 0; i < n; i++) {
        char c = tmp[i];

        if (c == 'e') {
            is_real = true;
        } else if ((c < '0' || c > '9') && c != '-' && c != '+') {
            tmp[i] = '.';
            is_real = true;
        }
    }
    if (!is_real) {
        tmp[n++] = '.';
        tmp[n++] = '0';
    }
    put(j, tmp, (size_t)n);
}

static void
put_id(struct js *j, const uint8_t *id, size_t len)
{
    char tmp[2 * WEFT_TRACE_ID_SIZE + 2];
    size_t n = 0;

    tmp[n++] = '"';
    for (size_t i = 0; i < len; i++) {
        tmp[n++] = hex_digits[id[i] >> 4];
        tmp[n++] = hex_digits[id[i] & 0xF];
    }
    tmp[n++] = '"';
    put(j, tmp, n);
}

/* Member @p name holding the string @p s, omitted when NULL or empty (a proto3 default). */
static void
opt_cstr(struct js *j, bool *first, const char *name, const char *s)
{
    if (s != NULL && s[0] != '\0') {
        key(j, first, name);
        put_string(j, s, strlen(s));
    }
}

/* Member @p name holding a uint32 count, omitted when zero. */
static void
opt_count(struct js *j, bool *first, const char *name, uint32_t v)
{
    if (v != 0) {
        key(j, first, name);
        put_u64(j, v);
    }
}

/* Member @p name holding a fixed64 time, omitted when zero. */
static void
opt_time(struct js *j, bool *first, const char *name, uint64_t v)
{
    if (v != 0) {
        key(j, first, name);
        put_u64_string(j, v);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Messages                                                                                     */

/* A NULL array pointer with a non-zero length is read as an empty array. */
static size_t
array_count(const struct weft_value *v)
{
    const void *p = NULL;

    switch (v->type) {
    case WEFT_VALUE_STRING_ARRAY:
        p = v->u.strs;
        break;
    case WEFT_VALUE_BOOL_ARRAY:
        p = v->u.bools;
        break;
    case WEFT_VALUE_INT_ARRAY:
        p = v->u.ints;
        break;
    default:
        p = v->u.doubles;
        break;
    }
    return p == NULL ? 0 : v->len;
}

/* An AnyValue holding element @p i of array @p v. */
static void
js_array_element(struct js *j, const struct weft_value *v, size_t i)
{
    const char *s = NULL;

    switch (v->type) {
    case WEFT_VALUE_STRING_ARRAY:
        s = v->u.strs[i];
        put_lit(j, "{\"stringValue\":");
        put_string(j, s, s == NULL ? 0 : strlen(s));
        break;
    case WEFT_VALUE_BOOL_ARRAY:
        put_lit(j, v->u.bools[i] ? "{\"boolValue\":true" : "{\"boolValue\":false");
        break;
    case WEFT_VALUE_INT_ARRAY:
        put_lit(j, "{\"intValue\":");
        put_i64_string(j, v->u.ints[i]);
        break;
    default: /* WEFT_VALUE_DOUBLE_ARRAY: the caller checked the type */
        put_lit(j, "{\"doubleValue\":");
        put_double(j, v->u.doubles[i]);
        break;
    }
    put(j, "}", 1);
}

static void
js_any_value(struct js *j, const struct weft_value *v)
{
    size_t count = 0;

    switch (v->type) {
    case WEFT_VALUE_STRING:
        put_lit(j, "{\"stringValue\":");
        put_string(j, v->u.str, v->len);
        break;
    case WEFT_VALUE_BOOL:
        put_lit(j, v->u.b ? "{\"boolValue\":true" : "{\"boolValue\":false");
        break;
    case WEFT_VALUE_INT:
        put_lit(j, "{\"intValue\":");
        put_i64_string(j, v->u.i);
        break;
    case WEFT_VALUE_DOUBLE:
        put_lit(j, "{\"doubleValue\":");
        put_double(j, v->u.d);
        break;
    case WEFT_VALUE_STRING_ARRAY:
    case WEFT_VALUE_BOOL_ARRAY:
    case WEFT_VALUE_INT_ARRAY:
    case WEFT_VALUE_DOUBLE_ARRAY:
        count = array_count(v);
        put_lit(j, "{\"arrayValue\":{");
        if (count > 0) {
            put_lit(j, "\"values\":[");
            for (size_t i = 0; i < count; i++) {
                if (i > 0) {
                    put(j, ",", 1);
                }
                js_array_element(j, v, i);
            }
            put(j, "]", 1);
        }
        put(j, "}", 1);
        break;
    default:
        if (j->err == WEFT_OK) {
            j->err = WEFT_EINVAL;
        }
        return;
    }
    put(j, "}", 1);
}

/* Member @p name: a list of KeyValue, omitted when empty. */
static void
js_attrs(struct js *j, bool *first, const char *name, const struct weft_attr *attrs, size_t count)
{
    if (attrs == NULL || count == 0) {
        return;
    }
    key(j, first, name);
    put(j, "[", 1);
    for (size_t i = 0; i < count; i++) {
        bool kv_first = true;

        if (i > 0) {
            put(j, ",", 1);
        }
        put(j, "{", 1);
        opt_cstr(j, &kv_first, "key", attrs[i].key);
        key(j, &kv_first, "value");
        js_any_value(j, &attrs[i].value);
        put(j, "}", 1);
    }
    put(j, "]", 1);
}

static void
js_resource(struct js *j, bool *first, const struct weft_resource *res)
{
    bool res_first = true;
    size_t attr_count = 0;

    if (res == NULL) {
        return;
    }
    attr_count = res->attrs == NULL ? 0 : res->attr_count;
    if (attr_count == 0 && res->dropped_attrs == 0) {
        return;
    }
    key(j, first, "resource");
    put(j, "{", 1);
    js_attrs(j, &res_first, "attributes", res->attrs, attr_count);
    opt_count(j, &res_first, "droppedAttributesCount", res->dropped_attrs);
    put(j, "}", 1);
}

static void
js_scope(struct js *j, bool *first, const struct weft_scope *scope)
{
    bool scope_first = true;
    size_t attr_count = 0;

    if (scope == NULL) {
        return;
    }
    attr_count = scope->attrs == NULL ? 0 : scope->attr_count;
    if ((scope->name == NULL || scope->name[0] == '\0') &&
        (scope->version == NULL || scope->version[0] == '\0') && attr_count == 0) {
        return;
    }
    key(j, first, "scope");
    put(j, "{", 1);
    opt_cstr(j, &scope_first, "name", scope->name);
    opt_cstr(j, &scope_first, "version", scope->version);
    js_attrs(j, &scope_first, "attributes", scope->attrs, attr_count);
    put(j, "}", 1);
}

static void
js_event(struct js *j, const struct weft_event_data *ev)
{
    bool first = true;

    put(j, "{", 1);
    opt_time(j, &first, "timeUnixNano", ev->time_ns);
    opt_cstr(j, &first, "name", ev->name);
    js_attrs(j, &first, "attributes", ev->attrs, ev->attr_count);
    opt_count(j, &first, "droppedAttributesCount", ev->dropped_attrs);
    put(j, "}", 1);
}

static void
js_link(struct js *j, const struct weft_link_data *link)
{
    bool first = true;
    uint32_t flags =
        link->trace_flags | FLAG_HAS_IS_REMOTE | (link->is_remote ? FLAG_IS_REMOTE : 0);

    put(j, "{", 1);
    key(j, &first, "traceId");
    put_id(j, link->trace_id, WEFT_TRACE_ID_SIZE);
    key(j, &first, "spanId");
    put_id(j, link->span_id, WEFT_SPAN_ID_SIZE);
    opt_cstr(j, &first, "traceState", link->trace_state);
    js_attrs(j, &first, "attributes", link->attrs, link->attr_count);
    opt_count(j, &first, "droppedAttributesCount", link->dropped_attrs);
    key(j, &first, "flags");
    put_u64(j, flags);
    put(j, "}", 1);
}

static void
js_span(struct js *j, const struct weft_span_data *s)
{
    bool first = true;
    bool has_message = s->status_message != NULL && s->status_message[0] != '\0';
    uint32_t flags =
        s->trace_flags | FLAG_HAS_IS_REMOTE | (s->parent_is_remote ? FLAG_IS_REMOTE : 0);

    put(j, "{", 1);
    key(j, &first, "traceId");
    put_id(j, s->trace_id, WEFT_TRACE_ID_SIZE);
    key(j, &first, "spanId");
    put_id(j, s->span_id, WEFT_SPAN_ID_SIZE);
    opt_cstr(j, &first, "traceState", s->trace_state);
    if (s->has_parent) {
        key(j, &first, "parentSpanId");
        put_id(j, s->parent_span_id, WEFT_SPAN_ID_SIZE);
    }
    opt_cstr(j, &first, "name", s->name);
    if (s->kind != WEFT_SPAN_KIND_UNSPECIFIED) {
        key(j, &first, "kind");
        put_enum(j, (int)s->kind);
    }
    opt_time(j, &first, "startTimeUnixNano", s->start_time_ns);
    opt_time(j, &first, "endTimeUnixNano", s->end_time_ns);
    js_attrs(j, &first, "attributes", s->attrs, s->attr_count);
    opt_count(j, &first, "droppedAttributesCount", s->dropped_attrs);
    if (s->events != NULL && s->event_count > 0) {
        key(j, &first, "events");
        put(j, "[", 1);
        for (size_t i = 0; i < s->event_count; i++) {
            if (i > 0) {
                put(j, ",", 1);
            }
            js_event(j, &s->events[i]);
        }
        put(j, "]", 1);
    }
    opt_count(j, &first, "droppedEventsCount", s->dropped_events);
    if (s->links != NULL && s->link_count > 0) {
        key(j, &first, "links");
        put(j, "[", 1);
        for (size_t i = 0; i < s->link_count; i++) {
            if (i > 0) {
                put(j, ",", 1);
            }
            js_link(j, &s->links[i]);
        }
        put(j, "]", 1);
    }
    opt_count(j, &first, "droppedLinksCount", s->dropped_links);
    if (s->status_code != WEFT_STATUS_UNSET || has_message) {
        bool status_first = true;

        key(j, &first, "status");
        put(j, "{", 1);
        opt_cstr(j, &status_first, "message", s->status_message);
        if (s->status_code != WEFT_STATUS_UNSET) {
            key(j, &status_first, "code");
            put_enum(j, (int)s->status_code);
        }
        put(j, "}", 1);
    }
    key(j, &first, "flags");
    put_u64(j, flags);
    put(j, "}", 1);
}

/* One ResourceSpans object: as pb_resource_spans() in otlp_proto.c. */
static void
js_resource_spans(struct js *j,
                  const struct weft_span_data *const *spans,
                  size_t count,
                  size_t first_span,
                  unsigned char *done)
{
    const struct weft_resource *res = spans[first_span]->resource;
    bool first = true;
    bool first_scope = true;

    put(j, "{", 1);
    js_resource(j, &first, res);
    key(j, &first, "scopeSpans");
    put(j, "[", 1);
    for (size_t i = first_span; i < count && j->err == WEFT_OK; i++) {
        const struct weft_scope *scope = spans[i]->scope;
        bool ss_first = true;
        bool first_in_scope = true;

        if (done[i] || spans[i]->resource != res) {
            continue;
        }
        if (!first_scope) {
            put(j, ",", 1);
        }
        first_scope = false;
        put(j, "{", 1);
        js_scope(j, &ss_first, scope);
        key(j, &ss_first, "spans");
        put(j, "[", 1);
        for (size_t k = i; k < count && j->err == WEFT_OK; k++) {
            if (!done[k] && spans[k]->resource == res && spans[k]->scope == scope) {
                if (!first_in_scope) {
                    put(j, ",", 1);
                }
                first_in_scope = false;
                js_span(j, spans[k]);
                done[k] = 1;
            }
        }
        put(j, "]", 1);
        if (scope != NULL) {
            opt_cstr(j, &ss_first, "schemaUrl", scope->schema_url);
        }
        put(j, "}", 1);
    }
    put(j, "]", 1);
    if (res != NULL) {
        opt_cstr(j, &first, "schemaUrl", res->schema_url);
    }
    put(j, "}", 1);
}

weft_err
weft__otlp_encode_json(const struct weft_span_data *const *spans,
                       size_t count,
                       struct weft__buf *out)
{
    struct js j = {out, WEFT_OK};
    unsigned char stack_done[STACK_MARKS];
    unsigned char *done = stack_done;
    size_t entry_len = 0;
    bool first = true;

    if (out == NULL || (spans == NULL && count > 0)) {
        return WEFT_EINVAL;
    }
    for (size_t i = 0; i < count; i++) {
        if (spans[i] == NULL) {
            return WEFT_EINVAL;
        }
    }
    entry_len = out->len;
    if (count > STACK_MARKS) {
        done = weft__malloc(count);
        if (done == NULL) {
            return WEFT_ENOMEM;
        }
    }
    if (count > 0) {
        memset(done, 0, count);
    }
    put(&j, "{", 1);
    for (size_t i = 0; i < count && j.err == WEFT_OK; i++) {
        if (done[i]) {
            continue;
        }
        if (first) {
            put_lit(&j, "\"resourceSpans\":[");
            first = false;
        } else {
            put(&j, ",", 1);
        }
        js_resource_spans(&j, spans, count, i, done);
    }
    if (!first) {
        put(&j, "]", 1);
    }
    put(&j, "}", 1);
    if (done != stack_done) {
        weft__free(done);
    }
    weft__buf_truncate(out, j.err == WEFT_OK ? out->len : entry_len);
    return j.err;
}

/* ------------------------------------------------------------------------------------------ */
/* ExportMetricsServiceRequest                                                                  */

/* As struct pb_metrics in otlp_proto.c: a Metric opens at its first series. */
struct js_metrics {
    struct js *j;
    struct weft_instrument_view view;
    bool is_open;
    bool is_first_metric;
    bool is_first_point;
    size_t points;
};

static void
js_metric_close(struct js_metrics *m)
{
    if (!m->is_open) {
        return;
    }
    put(m->j, "]", 1); /* dataPoints */
    if (m->view.kind != WEFT_INSTRUMENT_GAUGE) {
        put_lit(m->j, ",\"aggregationTemporality\":2");
    }
    if (m->view.kind == WEFT_INSTRUMENT_COUNTER) {
        put_lit(m->j, ",\"isMonotonic\":true");
    }
    put_lit(m->j, "}}");
    m->is_open = false;
}

static void
js_histogram_point(struct js *j,
                   const struct weft_instrument_view *in,
                   const struct weft_series_view *s)
{
    bool first = true;
    bool first_ex = true;

    put(j, "{", 1);
    opt_time(j, &first, "startTimeUnixNano", in->start_time_ns);
    opt_time(j, &first, "timeUnixNano", in->time_ns);
    if (s->count != 0) {
        key(j, &first, "count");
        put_u64_string(j, s->count);
        key(j, &first, "sum");
        put_double(j, s->sum);
    }
    key(j, &first, "bucketCounts");
    put(j, "[", 1);
    for (size_t i = 0; i <= in->bound_count; i++) {
        if (i > 0) {
            put(j, ",", 1);
        }
        put_u64_string(j, s->bucket_counts[i]);
    }
    put(j, "]", 1);
    if (in->bound_count > 0) {
        key(j, &first, "explicitBounds");
        put(j, "[", 1);
        for (size_t i = 0; i < in->bound_count; i++) {
            if (i > 0) {
                put(j, ",", 1);
            }
            put_double(j, in->bounds[i]);
        }
        put(j, "]", 1);
    }
    for (size_t i = 0; s->exemplars != NULL && i <= in->bound_count; i++) {
        const struct weft_exemplar *x = &s->exemplars[i];
        bool ex_first = true;

        if (x->time_ns == 0) {
            continue;
        }
        if (first_ex) {
            key(j, &first, "exemplars");
            put(j, "[", 1);
        } else {
            put(j, ",", 1);
        }
        first_ex = false;
        put(j, "{", 1);
        opt_time(j, &ex_first, "timeUnixNano", x->time_ns);
        key(j, &ex_first, "asDouble");
        put_double(j, x->value);
        key(j, &ex_first, "spanId");
        put_id(j, x->span_id, WEFT_SPAN_ID_SIZE);
        key(j, &ex_first, "traceId");
        put_id(j, x->trace_id, WEFT_TRACE_ID_SIZE);
        put(j, "}", 1);
    }
    if (!first_ex) {
        put(j, "]", 1);
    }
    js_attrs(j, &first, "attributes", s->attrs, s->attr_count);
    if (s->count != 0) {
        key(j, &first, "min");
        put_double(j, s->min);
        key(j, &first, "max");
        put_double(j, s->max);
    }
    put(j, "}", 1);
}

static bool
js_metrics_visit(const struct weft_instrument_view *in,
                 const struct weft_series_view *s,
                 void *user_data)
{
    struct js_metrics *m = user_data;
    struct js *j = m->j;
    bool first = true;

    if (s == NULL) {
        js_metric_close(m);
        m->view = *in;
        return j->err == WEFT_OK;
    }
    if (!m->is_open) {
        if (!m->is_first_metric) {
            put(j, ",", 1);
        }
        m->is_first_metric = false;
        put(j, "{", 1);
        opt_cstr(j, &first, "name", in->name);
        opt_cstr(j, &first, "description", in->description);
        opt_cstr(j, &first, "unit", in->unit);
        key(j, &first,
            in->kind == WEFT_INSTRUMENT_HISTOGRAM ? "histogram"
            : in->kind == WEFT_INSTRUMENT_GAUGE   ? "gauge"
                                                  : "sum");
        put_lit(j, "{\"dataPoints\":[");
        m->is_open = true;
        m->is_first_point = true;
    }
    if (!m->is_first_point) {
        put(j, ",", 1);
    }
    m->is_first_point = false;
    m->points++;
    if (in->kind == WEFT_INSTRUMENT_HISTOGRAM) {
        js_histogram_point(j, in, s);
        return j->err == WEFT_OK;
    }
    first = true;
    put(j, "{", 1);
    if (in->kind != WEFT_INSTRUMENT_GAUGE) {
        opt_time(j, &first, "startTimeUnixNano", in->start_time_ns);
    }
    opt_time(j, &first, "timeUnixNano", in->time_ns);
    key(j, &first, "asDouble");
    put_double(j, s->value);
    js_attrs(j, &first, "attributes", s->attrs, s->attr_count);
    put(j, "}", 1);
    return j->err == WEFT_OK;
}

weft_err
weft__otlp_metrics_encode_json(struct weft_meter *meter, struct weft__buf *out, size_t *points)
{
    struct js j = {out, WEFT_OK};
    struct js_metrics m;
    struct weft_resource res;
    struct weft_scope scope;
    size_t entry_len = 0;
    bool first = true;
    bool sm_first = true;
    weft_err err = WEFT_OK;

    if (meter == NULL || out == NULL || points == NULL) {
        return WEFT_EINVAL;
    }
    memset(&m, 0, sizeof(m));
    m.j = &j;
    m.is_first_metric = true;
    weft__otlp_metrics_envelope(meter, &res, &scope);
    entry_len = out->len;
    put_lit(&j, "{\"resourceMetrics\":[{");
    js_resource(&j, &first, &res);
    key(&j, &first, "scopeMetrics");
    put_lit(&j, "[{");
    js_scope(&j, &sm_first, &scope);
    key(&j, &sm_first, "metrics");
    put(&j, "[", 1);
    err = weft_meter_collect(meter, js_metrics_visit, &m);
    js_metric_close(&m);
    put_lit(&j, "]}]}]}");
    if (j.err == WEFT_OK && err != WEFT_OK) {
        j.err = err;
    }
    weft__buf_truncate(out, j.err == WEFT_OK ? out->len : entry_len);
    *points = j.err == WEFT_OK ? m.points : 0;
    return j.err;
}
