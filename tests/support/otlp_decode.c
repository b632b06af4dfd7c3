/* tests/support/otlp_decode.c - a schema-table protobuf decoder for ExportTraceServiceRequest
 * that builds the OTLP JSON shape with jansson, and a builder of partial-success responses.
 *
 * Deliberately unlike the encoder: the schema is data (one table per message, written from
 * REFERENCE.md and tests/support/otlp_trace.proto) walked by one generic loop, and every
 * read is bounds-checked against the end of the enclosing message, so a length that
 * overruns its parent is caught where it occurs.
 */
#include "otlp_decode.h"
#include "base/buf.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define MAX_DEPTH 32

enum wire { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

enum kind {
    K_STRING,    /* string -> JSON string */
    K_ID,        /* bytes of a fixed size -> lowercase hex */
    K_BYTES,     /* bytes -> base64 */
    K_MESSAGE,   /* embedded message -> object */
    K_FIXED64,   /* fixed64 -> decimal string */
    K_FIXED32,   /* fixed32 -> number */
    K_UINT32,    /* uint32 varint -> number */
    K_ENUM,      /* int32 enum varint -> number */
    K_BOOL,      /* bool varint -> true/false */
    K_INT64,     /* int64 varint -> decimal string */
    K_DOUBLE,    /* double -> number, or "NaN", "Infinity", "-Infinity" */
    K_OPT_DOUBLE /* a double with presence (optional or in a oneof): 0 is not a default */
};

struct msg_desc;

struct field_desc {
    unsigned number;
    const char *json_name;
    enum kind kind;
    bool is_repeated;
    const struct msg_desc *sub; /* K_MESSAGE */
    size_t id_len;              /* K_ID */
};

struct msg_desc {
    const char *name;
    bool is_oneof; /* every field belongs to one oneof (AnyValue) */
    size_t field_count;
    const struct field_desc *fields;
};

#define MSG(var, name, is_oneof, fields) \
    static const struct msg_desc var = {name, is_oneof, sizeof(fields) / sizeof(fields[0]), fields}

static const struct msg_desc any_value_desc;
static const struct msg_desc key_value_desc;

static const struct field_desc array_value_fields[] = {
    {1, "values", K_MESSAGE, true, &any_value_desc, 0},
};
MSG(array_value_desc, "ArrayValue", false, array_value_fields);

static const struct field_desc kvlist_fields[] = {
    {1, "values", K_MESSAGE, true, &key_value_desc, 0},
};
MSG(kvlist_desc, "KeyValueList", false, kvlist_fields);

static const struct field_desc any_value_fields[] = {
    {1, "stringValue", K_STRING, false, NULL, 0},
    {2, "boolValue", K_BOOL, false, NULL, 0},
    {3, "intValue", K_INT64, false, NULL, 0},
    {4, "doubleValue", K_DOUBLE, false, NULL, 0},
    {5, "arrayValue", K_MESSAGE, false, &array_value_desc, 0},
    {6, "kvlistValue", K_MESSAGE, false, &kvlist_desc, 0},
    {7, "bytesValue", K_BYTES, false, NULL, 0},
};
MSG(any_value_desc, "AnyValue", true, any_value_fields);

static const struct field_desc key_value_fields[] = {
    {1, "key", K_STRING, false, NULL, 0},
    {2, "value", K_MESSAGE, false, &any_value_desc, 0},
};
MSG(key_value_desc, "KeyValue", false, key_value_fields);

static const struct field_desc resource_fields[] = {
    {1, "attributes", K_MESSAGE, true, &key_value_desc, 0},
    {2, "droppedAttributesCount", K_UINT32, false, NULL, 0},
};
MSG(resource_desc, "Resource", false, resource_fields);

static const struct field_desc scope_fields[] = {
    {1, "name", K_STRING, false, NULL, 0},
    {2, "version", K_STRING, false, NULL, 0},
    {3, "attributes", K_MESSAGE, true, &key_value_desc, 0},
    {4, "droppedAttributesCount", K_UINT32, false, NULL, 0},
};
MSG(scope_desc, "InstrumentationScope", false, scope_fields);

static const struct field_desc event_fields[] = {
    {1, "timeUnixNano", K_FIXED64, false, NULL, 0},
    {2, "name", K_STRING, false, NULL, 0},
    {3, "attributes", K_MESSAGE, true, &key_value_desc, 0},
    {4, "droppedAttributesCount", K_UINT32, false, NULL, 0},
};
MSG(event_desc, "Span.Event", false, event_fields);

static const struct field_desc link_fields[] = {
    {1, "traceId", K_ID, false, NULL, 16},
    {2, "spanId", K_ID, false, NULL, 8},
    {3, "traceState", K_STRING, false, NULL, 0},
    {4, "attributes", K_MESSAGE, true, &key_value_desc, 0},
    {5, "droppedAttributesCount", K_UINT32, false, NULL, 0},
    {6, "flags", K_FIXED32, false, NULL, 0},
};
MSG(link_desc, "Span.Link", false, link_fields);

static const struct field_desc status_fields[] = {
    {2, "message", K_STRING, false, NULL, 0},
    {3, "code", K_ENUM, false, NULL, 0},
};
MSG(status_desc, "Status", false, status_fields);

static const struct field_desc span_fields[] = {
    {1, "traceId", K_ID, false, NULL, 16},
    {2, "spanId", K_ID, false, NULL, 8},
    {3, "traceState", K_STRING, false, NULL, 0},
    {4, "parentSpanId", K_ID, false, NULL, 8},
    {5, "name", K_STRING, false, NULL, 0},
    {6, "kind", K_ENUM, false, NULL, 0},
    {7, "startTimeUnixNano", K_FIXED64, false, NULL, 0},
    {8, "endTimeUnixNano", K_FIXED64, false, NULL, 0},
    {9, "attributes", K_MESSAGE, true, &key_value_desc, 0},
    {10, "droppedAttributesCount", K_UINT32, false, NULL, 0},
    {11, "events", K_MESSAGE, true, &event_desc, 0},
    {12, "droppedEventsCount", K_UINT32, false, NULL, 0},
    {13, "links", K_MESSAGE, true, &link_desc, 0},
    {14, "droppedLinksCount", K_UINT32, false, NULL, 0},
    {15, "status", K_MESSAGE, false, &status_desc, 0},
    {16, "flags", K_FIXED32, false, NULL, 0},
};
MSG(span_desc, "Span", false, span_fields);

static const struct field_desc scope_spans_fields[] = {
    {1, "scope", K_MESSAGE, false, &scope_desc, 0},
    {2, "spans", K_MESSAGE, true, &span_desc, 0},
    {3, "schemaUrl", K_STRING, false, NULL, 0},
};
MSG(scope_spans_desc, "ScopeSpans", false, scope_spans_fields);

static const struct field_desc resource_spans_fields[] = {
    {1, "resource", K_MESSAGE, false, &resource_desc, 0},
    {2, "scopeSpans", K_MESSAGE, true, &scope_spans_desc, 0},
    {3, "schemaUrl", K_STRING, false, NULL, 0},
};
MSG(resource_spans_desc, "ResourceSpans", false, resource_spans_fields);

static const struct field_desc request_fields[] = {
    {1, "resourceSpans", K_MESSAGE, true, &resource_spans_desc, 0},
};
MSG(request_desc, "ExportTraceServiceRequest", false, request_fields);

/* metrics/v1 and collector/metrics/v1 (REFERENCE.md). Repeated fixed64 and double fields
 * are packed. */
static const struct field_desc exemplar_fields[] = {
    {2, "timeUnixNano", K_FIXED64, false, NULL, 0},
    {3, "asDouble", K_OPT_DOUBLE, false, NULL, 0},
    {4, "spanId", K_ID, false, NULL, 8},
    {5, "traceId", K_ID, false, NULL, 16},
    {7, "filteredAttributes", K_MESSAGE, true, &key_value_desc, 0},
};
MSG(exemplar_desc, "Exemplar", false, exemplar_fields);

static const struct field_desc number_point_fields[] = {
    {2, "startTimeUnixNano", K_FIXED64, false, NULL, 0},
    {3, "timeUnixNano", K_FIXED64, false, NULL, 0},
    {4, "asDouble", K_OPT_DOUBLE, false, NULL, 0},
    {5, "exemplars", K_MESSAGE, true, &exemplar_desc, 0},
    {7, "attributes", K_MESSAGE, true, &key_value_desc, 0},
    {8, "flags", K_UINT32, false, NULL, 0},
};
MSG(number_point_desc, "NumberDataPoint", false, number_point_fields);

static const struct field_desc histogram_point_fields[] = {
    {2, "startTimeUnixNano", K_FIXED64, false, NULL, 0},
    {3, "timeUnixNano", K_FIXED64, false, NULL, 0},
    {4, "count", K_FIXED64, false, NULL, 0},
    {5, "sum", K_OPT_DOUBLE, false, NULL, 0},
    {6, "bucketCounts", K_FIXED64, true, NULL, 0},
    {7, "explicitBounds", K_DOUBLE, true, NULL, 0},
    {8, "exemplars", K_MESSAGE, true, &exemplar_desc, 0},
    {9, "attributes", K_MESSAGE, true, &key_value_desc, 0},
    {10, "flags", K_UINT32, false, NULL, 0},
    {11, "min", K_OPT_DOUBLE, false, NULL, 0},
    {12, "max", K_OPT_DOUBLE, false, NULL, 0},
};
MSG(histogram_point_desc, "HistogramDataPoint", false, histogram_point_fields);

static const struct field_desc gauge_fields[] = {
    {1, "dataPoints", K_MESSAGE, true, &number_point_desc, 0},
};
MSG(gauge_desc, "Gauge", false, gauge_fields);

static const struct field_desc sum_fields[] = {
    {1, "dataPoints", K_MESSAGE, true, &number_point_desc, 0},
    {2, "aggregationTemporality", K_ENUM, false, NULL, 0},
    {3, "isMonotonic", K_BOOL, false, NULL, 0},
};
MSG(sum_desc, "Sum", false, sum_fields);

static const struct field_desc histogram_fields[] = {
    {1, "dataPoints", K_MESSAGE, true, &histogram_point_desc, 0},
    {2, "aggregationTemporality", K_ENUM, false, NULL, 0},
};
MSG(histogram_desc, "Histogram", false, histogram_fields);

static const struct field_desc metric_fields[] = {
    {1, "name", K_STRING, false, NULL, 0},
    {2, "description", K_STRING, false, NULL, 0},
    {3, "unit", K_STRING, false, NULL, 0},
    {5, "gauge", K_MESSAGE, false, &gauge_desc, 0},
    {7, "sum", K_MESSAGE, false, &sum_desc, 0},
    {9, "histogram", K_MESSAGE, false, &histogram_desc, 0},
};
MSG(metric_desc, "Metric", false, metric_fields);

static const struct field_desc scope_metrics_fields[] = {
    {1, "scope", K_MESSAGE, false, &scope_desc, 0},
    {2, "metrics", K_MESSAGE, true, &metric_desc, 0},
    {3, "schemaUrl", K_STRING, false, NULL, 0},
};
MSG(scope_metrics_desc, "ScopeMetrics", false, scope_metrics_fields);

static const struct field_desc resource_metrics_fields[] = {
    {1, "resource", K_MESSAGE, false, &resource_desc, 0},
    {2, "scopeMetrics", K_MESSAGE, true, &scope_metrics_desc, 0},
    {3, "schemaUrl", K_STRING, false, NULL, 0},
};
MSG(resource_metrics_desc, "ResourceMetrics", false, resource_metrics_fields);

static const struct field_desc metrics_request_fields[] = {
    {1, "resourceMetrics", K_MESSAGE, true, &resource_metrics_desc, 0},
};
MSG(metrics_request_desc, "ExportMetricsServiceRequest", false, metrics_request_fields);

/* ------------------------------------------------------------------------------------------ */

struct reader {
    const uint8_t *p;
    size_t pos;
    unsigned flags;
    int depth;
    struct weft_test_otlp_error *err;
};

static bool fail(struct reader *r, size_t offset, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool
fail(struct reader *r, size_t offset, const char *fmt, ...)
{
    va_list ap;
    int n = 0;

    if (r->err == NULL) {
        return false;
    }
    r->err->offset = offset;
    va_start(ap, fmt);
    n = vsnprintf(r->err->text, sizeof(r->err->text), fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof(r->err->text)) {
        snprintf(r->err->text + n, sizeof(r->err->text) - (size_t)n, " at offset %zu", offset);
    }
    return false;
}

static bool
read_varint(struct reader *r, size_t end, uint64_t *out, const char *what)
{
    size_t start = r->pos;
    uint64_t v = 0;

    for (unsigned i = 0;; i++) {
        uint8_t b = 0;

        if (r->pos >= end) {
            return fail(r, start, "truncated varint (%s)", what);
        }
        b = r->p[r->pos++];
        if (i == 9 && b > 1) {
            return fail(r, start, "varint over 64 bits (%s)", what);
        }
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            if ((r->flags & WEFT_TEST_OTLP_CANONICAL) && b == 0 && i > 0) {
                return fail(r, start, "non-minimal varint (%s)", what);
            }
            break;
        }
    }
    *out = v;
    return true;
}

static bool
read_fixed(struct reader *r, size_t end, size_t bytes, uint64_t *out, const char *what)
{
    uint64_t v = 0;

    if (end - r->pos < bytes) {
        return fail(r, r->pos, "truncated fixed%zu (%s): %zu bytes left", bytes * 8, what,
                    end - r->pos);
    }
    for (size_t i = 0; i < bytes; i++) {
        v |= (uint64_t)r->p[r->pos + i] << (8 * i);
    }
    r->pos += bytes;
    *out = v;
    return true;
}

/* Read a length prefix; *len_out is checked against what is left of the enclosing message. */
static bool
read_len(struct reader *r, size_t end, size_t *len_out, const char *what)
{
    size_t start = r->pos;
    uint64_t n = 0;

    if (!read_varint(r, end, &n, what)) {
        return false;
    }
    if (n > end - r->pos) {
        return fail(r, start, "length %" PRIu64 " (%s) exceeds the %zu bytes left", n, what,
                    end - r->pos);
    }
    *len_out = (size_t)n;
    return true;
}

static bool
skip_field(struct reader *r, size_t end, unsigned wire, size_t tag_at)
{
    uint64_t v = 0;
    size_t n = 0;

    switch (wire) {
    case WIRE_VARINT:
        return read_varint(r, end, &v, "unknown field");
    case WIRE_I64:
        return read_fixed(r, end, 8, &v, "unknown field");
    case WIRE_I32:
        return read_fixed(r, end, 4, &v, "unknown field");
    case WIRE_LEN:
        if (!read_len(r, end, &n, "unknown field")) {
            return false;
        }
        r->pos += n;
        return true;
    default:
        return fail(r, tag_at, "bad wire type %u", wire);
    }
}

static unsigned
wire_of(enum kind kind)
{
    switch (kind) {
    case K_FIXED64:
    case K_DOUBLE:
    case K_OPT_DOUBLE:
        return WIRE_I64;
    case K_FIXED32:
        return WIRE_I32;
    case K_UINT32:
    case K_ENUM:
    case K_BOOL:
    case K_INT64:
        return WIRE_VARINT;
    default:
        return WIRE_LEN;
    }
}

static json_t *
hex_string(const uint8_t *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    char text[2 * 16 + 1];

    for (size_t i = 0; i < n; i++) {
        text[2 * i] = digits[p[i] >> 4];
        text[2 * i + 1] = digits[p[i] & 0xF];
    }
    return json_stringn(text, 2 * n);
}

static json_t *
base64_string(const uint8_t *p, size_t n)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    struct weft__buf b;
    json_t *out = NULL;

    weft__buf_init(&b, 0);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        char quad[4];

        if (i + 1 < n) {
            v |= (uint32_t)p[i + 1] << 8;
        }
        if (i + 2 < n) {
            v |= p[i + 2];
        }
        quad[0] = alphabet[(v >> 18) & 63];
        quad[1] = alphabet[(v >> 12) & 63];
        quad[2] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
        quad[3] = i + 2 < n ? alphabet[v & 63] : '=';
        if (weft__buf_append(&b, quad, 4) != WEFT_OK) {
            weft__buf_cleanup(&b);
            return NULL;
        }
    }
    out = json_stringn(b.data != NULL ? b.data : "", b.len);
    weft__buf_cleanup(&b);
    return out;
}

static json_t *
decimal_string(bool is_signed, uint64_t v)
{
    char text[24];

    if (is_signed) {
        snprintf(text, sizeof(text), "%" PRId64, (int64_t)v);
    } else {
        snprintf(text, sizeof(text), "%" PRIu64, v);
    }
    return json_string(text);
}

static json_t *decode_message(struct reader *r, const struct msg_desc *m, size_t end);

/* Decode one value of field @p f (its tag already read); *is_default says whether it holds
 * the proto3 default (an empty message counts as one). */
static json_t *
decode_value(struct reader *r,
             const struct msg_desc *m,
             const struct field_desc *f,
             size_t end,
             bool *is_default)
{
    size_t at = r->pos;
    size_t n = 0;
    uint64_t v = 0;
    double d = 0;
    json_t *out = NULL;
    char what[96];

    snprintf(what, sizeof(what), "%s.%s (field %u)", m->name, f->json_name, f->number);
    switch (f->kind) {
    case K_STRING:
    case K_ID:
    case K_BYTES:
        if (!read_len(r, end, &n, what)) {
            return NULL;
        }
        *is_default = n == 0;
        if (f->kind == K_ID && n != f->id_len) {
            fail(r, at, "%s: %zu bytes, expected %zu", what, n, f->id_len);
            return NULL;
        }
        if (f->kind == K_ID) {
            out = hex_string(r->p + r->pos, n);
        } else if (f->kind == K_BYTES) {
            out = base64_string(r->p + r->pos, n);
        } else {
            out = json_stringn((const char *)r->p + r->pos, n);
            if (out == NULL) {
                fail(r, r->pos, "%s: string is not valid UTF-8", what);
                return NULL;
            }
        }
        r->pos += n;
        break;
    case K_MESSAGE:
        if (!read_len(r, end, &n, what)) {
            return NULL;
        }
        if (r->depth >= MAX_DEPTH) {
            fail(r, at, "%s: nested deeper than %d", what, MAX_DEPTH);
            return NULL;
        }
        r->depth++;
        out = decode_message(r, f->sub, r->pos + n);
        r->depth--;
        if (out == NULL) {
            return NULL;
        }
        *is_default = json_object_size(out) == 0;
        break;
    case K_FIXED64:
    case K_FIXED32:
        if (!read_fixed(r, end, f->kind == K_FIXED64 ? 8 : 4, &v, what)) {
            return NULL;
        }
        *is_default = v == 0;
        out = f->kind == K_FIXED64 ? decimal_string(false, v) : json_integer((json_int_t)v);
        break;
    case K_DOUBLE:
    case K_OPT_DOUBLE:
        if (!read_fixed(r, end, 8, &v, what)) {
            return NULL;
        }
        *is_default = v == 0 && f->kind == K_DOUBLE;
        memcpy(&d, &v, sizeof(d));
        if (d != d) {
            out = json_string("NaN");
        } else if (d > 1.7976931348623157e308) {
            out = json_string("Infinity");
        } else if (d < -1.7976931348623157e308) {
            out = json_string("-Infinity");
        } else {
            out = json_real(d);
        }
        break;
    default: /* varints */
        if (!read_varint(r, end, &v, what)) {
            return NULL;
        }
        *is_default = v == 0;
        if (f->kind == K_UINT32 && v > UINT32_MAX) {
            fail(r, at, "%s: %" PRIu64 " does not fit a uint32", what, v);
            return NULL;
        }
        if (f->kind == K_ENUM && v > INT32_MAX && v < (uint64_t)INT32_MIN) {
            fail(r, at, "%s: %" PRIu64 " does not fit an int32 enum", what, v);
            return NULL;
        }
        if (f->kind == K_BOOL && v > 1) {
            fail(r, at, "%s: bool %" PRIu64 " is neither 0 nor 1", what, v);
            return NULL;
        }
        if (f->kind == K_BOOL) {
            out = json_boolean(v == 1);
        } else if (f->kind == K_INT64) {
            out = decimal_string(true, v);
        } else if (f->kind == K_ENUM) {
            out = json_integer((int32_t)(uint32_t)v);
        } else {
            out = json_integer((json_int_t)v);
        }
        break;
    }
    if (out == NULL) {
        fail(r, at, "%s: out of memory", what);
    }
    return out;
}

/* A packed repeated fixed64 or double field: its values are appended to the member's array. */
static bool
decode_packed64(
    struct reader *r, const struct msg_desc *m, const struct field_desc *f, size_t end, json_t *obj)
{
    json_t *list = json_object_get(obj, f->json_name);
    char what[96];
    size_t n = 0;
    size_t stop = 0;

    snprintf(what, sizeof(what), "%s.%s (field %u)", m->name, f->json_name, f->number);
    if (!read_len(r, end, &n, what)) {
        return false;
    }
    if (n % 8 != 0) {
        return fail(r, r->pos, "%s: packed length %zu is not a multiple of 8", what, n);
    }
    if (list == NULL) {
        list = json_array();
        json_object_set_new(obj, f->json_name, list);
    }
    stop = r->pos + n;
    while (r->pos < stop) {
        bool is_default = false;
        json_t *value = decode_value(r, m, f, stop, &is_default);

        if (value == NULL) {
            return false;
        }
        json_array_append_new(list, value);
    }
    return true;
}

static const struct field_desc *
find_field(const struct msg_desc *m, uint64_t number)
{
    for (size_t i = 0; i < m->field_count; i++) {
        if (m->fields[i].number == number) {
            return &m->fields[i];
        }
    }
    return NULL;
}

static json_t *
decode_message(struct reader *r, const struct msg_desc *m, size_t end)
{
    json_t *obj = json_object();

    if (obj == NULL) {
        fail(r, r->pos, "out of memory");
        return NULL;
    }
    while (r->pos < end) {
        size_t tag_at = r->pos;
        uint64_t tag = 0;
        unsigned wire = 0;
        const struct field_desc *f = NULL;
        json_t *value = NULL;
        json_t *list = NULL;
        bool is_default = false;

        if (!read_varint(r, end, &tag, "tag")) {
            goto fail;
        }
        wire = (unsigned)(tag & 7);
        if (tag >> 3 == 0 || tag >> 3 > 536870911u) {
            fail(r, tag_at, "%s: invalid field number %" PRIu64, m->name, tag >> 3);
            goto fail;
        }
        if (wire != WIRE_VARINT && wire != WIRE_I64 && wire != WIRE_LEN && wire != WIRE_I32) {
            fail(r, tag_at, "%s: bad wire type %u (field %" PRIu64 ")", m->name, wire, tag >> 3);
            goto fail;
        }
        f = find_field(m, tag >> 3);
        if (f == NULL) {
            if (!skip_field(r, end, wire, tag_at)) {
                goto fail;
            }
            continue;
        }
        if (f->is_repeated && wire == WIRE_LEN && wire_of(f->kind) == WIRE_I64) {
            if (!decode_packed64(r, m, f, end, obj)) {
                goto fail;
            }
            continue;
        }
        if (wire != wire_of(f->kind)) {
            fail(r, tag_at, "%s.%s (field %u): wire type %u, expected %u", m->name, f->json_name,
                 f->number, wire, wire_of(f->kind));
            goto fail;
        }
        value = decode_value(r, m, f, end, &is_default);
        if (value == NULL) {
            goto fail;
        }
        if (f->is_repeated) {
            list = json_object_get(obj, f->json_name);
            if (list == NULL) {
                list = json_array();
                json_object_set_new(obj, f->json_name, list);
            }
            json_array_append_new(list, value);
            continue;
        }
        if ((r->flags & WEFT_TEST_OTLP_CANONICAL) && is_default && !m->is_oneof) {
            json_decref(value);
            fail(r, tag_at, "%s.%s (field %u): default value written", m->name, f->json_name,
                 f->number);
            goto fail;
        }
        if (json_object_get(obj, f->json_name) != NULL) {
            json_decref(value);
            fail(r, tag_at, "%s.%s (field %u): singular field written twice", m->name, f->json_name,
                 f->number);
            goto fail;
        }
        if (m->is_oneof && json_object_size(obj) > 0) {
            json_decref(value);
            fail(r, tag_at, "%s.%s (field %u): second member of the oneof", m->name, f->json_name,
                 f->number);
            goto fail;
        }
        json_object_set_new(obj, f->json_name, value);
    }
    return obj;
fail:
    json_decref(obj);
    return NULL;
}

static json_t *
decode_request(const struct msg_desc *desc,
               const void *data,
               size_t len,
               unsigned flags,
               struct weft_test_otlp_error *err)
{
    struct reader r = {data, 0, flags, 0, err};

    if (err != NULL) {
        err->offset = 0;
        err->text[0] = '\0';
    }
    if (data == NULL && len > 0) {
        fail(&r, 0, "NULL data");
        return NULL;
    }
    if (len == 0) {
        return json_object();
    }
    return decode_message(&r, desc, len);
}

json_t *
weft_test_otlp_decode_request(const void *data,
                              size_t len,
                              unsigned flags,
                              struct weft_test_otlp_error *err)
{
    return decode_request(&request_desc, data, len, flags, err);
}

json_t *
weft_test_otlp_decode_metrics_request(const void *data,
                                      size_t len,
                                      unsigned flags,
                                      struct weft_test_otlp_error *err)
{
    return decode_request(&metrics_request_desc, data, len, flags, err);
}

/* ------------------------------------------------------------------------------------------ */

static size_t
write_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;

    do {
        p[n] = (uint8_t)(v & 0x7F);
        v >>= 7;
        if (v != 0) {
            p[n] |= 0x80;
        }
        n++;
    } while (v != 0);
    return n;
}

weft_err
weft_test_otlp_response_proto(int64_t rejected, const char *message, struct weft__buf *out)
{
    size_t msg_len = message == NULL ? 0 : strlen(message);
    uint8_t head[32];
    size_t inner_len = 0;
    size_t n = 0;
    size_t entry_len = 0;
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    if (rejected == 0 && msg_len == 0) {
        return WEFT_OK;
    }
    /* ExportTracePartialSuccess: rejected_spans = 1 (int64 varint), error_message = 2. */
    if (rejected != 0) {
        inner_len += 1 + write_varint(head, (uint64_t)rejected);
    }
    if (msg_len > 0) {
        inner_len += 1 + write_varint(head, msg_len) + msg_len;
    }
    /* ExportTraceServiceResponse: partial_success = 1. */
    head[n++] = 0x0A;
    n += write_varint(head + n, inner_len);
    if (rejected != 0) {
        head[n++] = 0x08;
        n += write_varint(head + n, (uint64_t)rejected);
    }
    if (msg_len > 0) {
        head[n++] = 0x12;
        n += write_varint(head + n, msg_len);
    }
    entry_len = out->len;
    err = weft__buf_append(out, head, n);
    if (err == WEFT_OK) {
        err = weft__buf_append(out, message, msg_len);
    }
    if (err != WEFT_OK) {
        out->len = entry_len;
        if (out->data != NULL) {
            out->data[entry_len] = '\0';
        }
    }
    return err;
}
