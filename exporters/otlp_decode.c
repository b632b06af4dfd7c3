/* exporters/otlp_decode.c - the protobuf decoder of OTLP ExportTraceServiceRequest bodies
 * (opentelemetry-proto collector/trace/v1, trace/v1, common/v1, resource/v1; field numbers from
 * REFERENCE.md), and the batch both decoders fill (otlp_decode.h).
 *
 * Why hand-written: Debian ships no protobuf-c schema for OTLP, so protobuf-c would add a code
 * generator and generated sources to the build; and it would decode into its own structs
 * (one allocation per message, KeyValue and AnyValue) that would then be copied again into
 * struct weft_span_data. Here the wire is read once, straight into span views on a bump arena:
 * the ingest target is 200,000 spans/s into the store on two cores, and decoding must be a
 * small part of that (bench/ingest_bench.c measures both).
 *
 * Shape: a reader (struct rd) over one length-delimited slice; one function per message. The
 * repeated fields of a span (attributes, events, links) are counted in a first cheap pass over
 * the span's tags, so that each gets one exactly-sized array; a second pass decodes everything
 * (the hot path of ingest: a span used to be walked four times). Strings are copied into the arena
 * (exporters expect NUL-terminated text). Unknown fields of any valid wire type are skipped, as
 * protobuf requires; a known field with another wire type, a truncated item, a group or a
 * nesting deeper than WEFT__OTLP_MAX_VALUE_DEPTH make the whole request malformed.
 * Invariants: d->err is sticky; once set, functions return false without reading further.
 */
#include "otlp_decode.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/utf8.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WT_VARINT 0u
#define WT_I64    1u
#define WT_LEN    2u
#define WT_I32    5u

/* W3C flags live in the low byte; bit 8 says bit 9 is meaningful; bit 9 is "remote". */
#define FLAG_HAS_IS_REMOTE 0x100u
#define FLAG_IS_REMOTE     0x200u

/* ------------------------------------------------------------------------------------------ */
/* The batch                                                                                   */

void
weft__otlp_batch_init(struct weft__otlp_batch *batch, size_t max_bytes)
{
    memset(batch, 0, sizeof(*batch));
    weft__arena_init(&batch->arena);
    batch->max_bytes = max_bytes;
    batch->limits.attrs = UINT32_MAX;
    batch->limits.events = UINT32_MAX;
    batch->limits.links = UINT32_MAX;
    batch->limits.event_attrs = UINT32_MAX;
    batch->limits.link_attrs = UINT32_MAX;
}

void
weft__otlp_batch_cleanup(struct weft__otlp_batch *batch)
{
    size_t max = batch->max_bytes;
    struct weft__otlp_limits limits = batch->limits;

    weft__arena_cleanup(&batch->arena);
    weft__free(batch->spans);
    weft__otlp_batch_init(batch, max);
    batch->limits = limits;
}

static bool
over_cap(const struct weft__otlp_batch *batch, size_t more)
{
    size_t used = batch->arena.bytes + batch->cap * sizeof(*batch->spans) + batch->json_bytes;

    return used > batch->max_bytes || more > batch->max_bytes - used;
}

/* ------------------------------------------------------------------------------------------ */
/* The jansson trees' budget                                                                   */

/* The decoded size is what a request costs, not its wire size: 16 KiB of gzip inflate to
 * 16 MiB of "{}," whose jansson tree took 1.3 GB. So jansson's allocations on a decoding
 * thread count against the batch's cap, through hooks that call malloc and free (other
 * threads and other users of jansson see no difference: no budget is set on their thread). */
static _Thread_local struct weft__otlp_batch *json_budget;

/* What malloc keeps beside each block (glibc: a size word, 16-byte alignment). */
#define MALLOC_OVERHEAD 16

static void *
counted_malloc(size_t size)
{
    struct weft__otlp_batch *b = json_budget;

    if (b != NULL) {
        if (over_cap(b, size + MALLOC_OVERHEAD)) {
            b->is_json_over = true;
            return NULL;
        }
        b->json_bytes += size + MALLOC_OVERHEAD;
    }
    return malloc(size);
}

static void
counted_free(void *p)
{
    free(p);
}

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static void
install_hooks(void)
{
    json_set_alloc_funcs(counted_malloc, counted_free);
}

void
weft__otlp_decode_global_init(void)
{
    pthread_once(&hooks_once, install_hooks);
}

bool
weft__otlp_batch_charge(struct weft__otlp_batch *batch, size_t size, weft_err *err)
{
    if (over_cap(batch, size)) {
        *err = WEFT_ELIMIT;
        return false;
    }
    batch->json_bytes += size;
    return true;
}

size_t
weft__otlp_batch_json_begin(struct weft__otlp_batch *batch)
{
    weft__otlp_decode_global_init();
    json_budget = batch;
    return batch->json_bytes;
}

void
weft__otlp_batch_json_end(struct weft__otlp_batch *batch, size_t mark)
{
    json_budget = NULL;
    batch->json_bytes = mark;
}

/* ------------------------------------------------------------------------------------------ */
/* Span limits and names                                                                       */

static uint32_t
env_limit(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    char *end = NULL;
    unsigned long n = 0;

    if ((v == NULL || v[0] == '\0') && fallback != NULL) {
        v = getenv(fallback);
    }
    if (v == NULL || v[0] < '0' || v[0] > '9') {
        return WEFT__OTLP_DEFAULT_LIMIT;
    }
    errno = 0;
    n = strtoul(v, &end, 10);
    if (errno != 0 || *end != '\0') {
        return WEFT__OTLP_DEFAULT_LIMIT;
    }
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n; /* 0 keeps none, as in the SDK */
}

void
weft__otlp_limits_from_env(struct weft__otlp_limits *out)
{
    out->attrs = env_limit("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT");
    out->events = env_limit("OTEL_SPAN_EVENT_COUNT_LIMIT", NULL);
    out->links = env_limit("OTEL_SPAN_LINK_COUNT_LIMIT", NULL);
    out->event_attrs = env_limit("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT");
    out->link_attrs = env_limit("OTEL_LINK_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT");
}

/* Keep the first @p limit of @p *count items, adding the rest to @p *dropped. */
static void
clip(struct weft__otlp_batch *batch, size_t *count, uint32_t *dropped, uint32_t limit)
{
    size_t excess = 0;

    if (*count <= limit) {
        return;
    }
    excess = *count - limit;
    *count = limit;
    *dropped = excess > UINT32_MAX - *dropped ? UINT32_MAX : *dropped + (uint32_t)excess;
    batch->dropped_by_limits += excess;
}

/* The span limits on @p span, whose arrays live in the batch's arena (hence writable). */
static void
apply_limits(struct weft__otlp_batch *batch, struct weft_span_data *span)
{
    const struct weft__otlp_limits *l = &batch->limits;

    clip(batch, &span->attr_count, &span->dropped_attrs, l->attrs);
    clip(batch, &span->event_count, &span->dropped_events, l->events);
    clip(batch, &span->link_count, &span->dropped_links, l->links);
    for (size_t i = 0; i < span->event_count; i++) {
        struct weft_event_data *ev = (struct weft_event_data *)&span->events[i];
        clip(batch, &ev->attr_count, &ev->dropped_attrs, l->event_attrs);
    }
    for (size_t i = 0; i < span->link_count; i++) {
        struct weft_link_data *ln = (struct weft_link_data *)&span->links[i];
        clip(batch, &ln->attr_count, &ln->dropped_attrs, l->link_attrs);
    }
}

char *
weft__otlp_batch_name(struct weft__otlp_batch *batch, const char *s, size_t len, weft_err *err)
{
    size_t nuls = len > 0 ? (size_t)(memchr(s, '\0', len) != NULL) : 0;
    char *copy = NULL;
    size_t j = 0;

    if (nuls == 0) {
        return weft__otlp_batch_str(batch, s, len, err);
    }
    nuls = 0;
    for (size_t i = 0; i < len; i++) {
        nuls += s[i] == '\0';
    }
    /* Each NUL (1 byte) becomes U+FFFD (3 bytes). */
    copy = weft__otlp_batch_alloc(batch, len + 2 * nuls + 1, err);
    if (copy == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\0') {
            memcpy(copy + j, "\xef\xbf\xbd", 3);
            j += 3;
        } else {
            copy[j++] = s[i];
        }
    }
    copy[j] = '\0';
    batch->names_escaped++;
    return copy;
}

void *
weft__otlp_batch_alloc(struct weft__otlp_batch *batch, size_t size, weft_err *err)
{
    void *p = NULL;

    if (over_cap(batch, size)) {
        *err = WEFT_ELIMIT;
        return NULL;
    }
    p = weft__arena_alloc(&batch->arena, size == 0 ? 1 : size);
    if (p == NULL) {
        *err = WEFT_ENOMEM;
    }
    return p;
}

char *
weft__otlp_batch_str(struct weft__otlp_batch *batch, const char *s, size_t len, weft_err *err)
{
    char *copy = weft__otlp_batch_alloc(batch, len + 1, err);

    if (copy != NULL && len > 0) {
        memcpy(copy, s, len);
    }
    return copy;
}

static bool
is_zero(const uint8_t *id, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (id[i] != 0) {
            return false;
        }
    }
    return true;
}

bool
weft__otlp_link_ids_ok(const struct weft_link_data *link, bool has_trace_id, bool has_span_id)
{
    return has_trace_id && has_span_id && !is_zero(link->trace_id, WEFT_TRACE_ID_SIZE) &&
           !is_zero(link->span_id, WEFT_SPAN_ID_SIZE);
}

static void
reject(struct weft__otlp_batch *batch, const char *why)
{
    if (batch->rejected++ == 0) {
        snprintf(batch->reject_reason, sizeof(batch->reject_reason), "%s", why);
    }
}

weft_err
weft__otlp_batch_add(struct weft__otlp_batch *batch,
                     struct weft_span_data *span,
                     bool has_trace_id,
                     bool has_span_id,
                     bool is_parent_ok)
{
    if (!has_trace_id || is_zero(span->trace_id, WEFT_TRACE_ID_SIZE)) {
        reject(batch, "a span has no valid trace id (16 bytes, not all zero)");
        return WEFT_OK;
    }
    if (!has_span_id || is_zero(span->span_id, WEFT_SPAN_ID_SIZE)) {
        reject(batch, "a span has no valid span id (8 bytes, not all zero)");
        return WEFT_OK;
    }
    if (!is_parent_ok) {
        reject(batch, "a span's parent span id is neither empty nor 8 bytes");
        return WEFT_OK;
    }
    apply_limits(batch, span);
    if (batch->count == batch->cap) {
        size_t cap = batch->cap == 0 ? 64 : batch->cap * 2;
        const struct weft_span_data **grown = NULL;

        if (over_cap(batch, (cap - batch->cap) * sizeof(*batch->spans))) {
            return WEFT_ELIMIT;
        }
        grown = weft__realloc(batch->spans, cap * sizeof(*batch->spans));
        if (grown == NULL) {
            return WEFT_ENOMEM;
        }
        batch->spans = grown;
        batch->cap = cap;
    }
    batch->spans[batch->count++] = span;
    return WEFT_OK;
}

static weft_err
batch_json_value(struct weft__otlp_batch *batch, json_t *j, struct weft_value *out)
{
    char *text = NULL;
    weft_err err = WEFT_OK;

    if (j == NULL) {
        return WEFT_ENOMEM;
    }
    text = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    json_decref(j);
    if (text == NULL) {
        return WEFT_ENOMEM;
    }
    out->type = WEFT_VALUE_STRING;
    out->len = strlen(text);
    out->u.str = weft__otlp_batch_str(batch, text, out->len, &err);
    free(text);
    return err;
}

/* Write the base64 (RFC 4648, padded) text of @p len bytes to @p out (room for
 * base64_len(len) bytes); @return its length. */
static size_t
base64_len(size_t len)
{
    return (len + 2) / 3 * 4;
}

static size_t
base64_encode(const uint8_t *data, size_t len, char *out)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;

    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16;

        v |= i + 1 < len ? (uint32_t)data[i + 1] << 8 : 0;
        v |= i + 2 < len ? (uint32_t)data[i + 2] : 0;
        out[o++] = digits[(v >> 18) & 63];
        out[o++] = digits[(v >> 12) & 63];
        out[o++] = i + 1 < len ? digits[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? digits[v & 63] : '=';
    }
    return o;
}

static json_t *
base64_json(const uint8_t *data, size_t len)
{
    char *text = weft__malloc(base64_len(len) + 1);
    json_t *j = NULL;

    if (text == NULL) {
        return NULL;
    }
    j = json_stringn(text, base64_encode(data, len, text));
    weft__free(text);
    return j;
}

static json_t *
text_json(const char *s, size_t len)
{
    struct weft__buf clean;
    json_t *j = json_stringn(len > 0 ? s : "", len);

    if (j != NULL || len == 0) {
        return j;
    }
    weft__buf_init(&clean, 0);
    if (weft__utf8_sanitize(s, len, WEFT__UTF8_REPLACEMENT, &clean) == WEFT_OK) {
        j = json_stringn(clean.data != NULL ? clean.data : "", clean.len);
    }
    weft__buf_cleanup(&clean);
    return j;
}

/* ------------------------------------------------------------------------------------------ */
/* The wire reader                                                                              */

struct rd {
    const uint8_t *p;
    size_t len;
    size_t pos;
};

struct dec {
    struct weft__otlp_batch *b;
    weft_err err;
    char *why;
    size_t why_len;
};

static bool
fail(struct dec *d, const char *what)
{
    if (d->err == WEFT_OK) {
        d->err = WEFT_EPARSE;
        if (d->why != NULL && d->why_len > 0) {
            snprintf(d->why, d->why_len, "malformed protobuf: %s", what);
        }
    }
    return false;
}

static bool
fail_err(struct dec *d, weft_err err)
{
    if (d->err == WEFT_OK) {
        d->err = err;
    }
    return false;
}

static inline bool
rd_varint(struct rd *r, uint64_t *out)
{
    uint64_t v = 0;

    for (unsigned shift = 0; shift < 64; shift += 7) {
        uint8_t byte = 0;

        if (r->pos >= r->len) {
            return false;
        }
        byte = r->p[r->pos++];
        v |= (uint64_t)(byte & 0x7f) << shift;
        if ((byte & 0x80) == 0) {
            *out = v;
            return true;
        }
    }
    return false; /* more than ten bytes */
}

static inline bool
rd_fixed(struct rd *r, size_t bytes, uint64_t *out)
{
    uint64_t v = 0;

    if (r->len - r->pos < bytes) {
        return false;
    }
    for (size_t i = 0; i < bytes; i++) {
        v |= (uint64_t)r->p[r->pos + i] << (8 * i);
    }
    r->pos += bytes;
    *out = v;
    return true;
}

static inline bool
rd_sub(struct rd *r, struct rd *sub)
{
    uint64_t n = 0;

    if (!rd_varint(r, &n) || n > r->len - r->pos) {
        return false;
    }
    sub->p = r->p + r->pos;
    sub->len = (size_t)n;
    sub->pos = 0;
    r->pos += (size_t)n;
    return true;
}

/* The next tag: false at the end of the slice; a malformed tag fails @p d. */
static inline bool
rd_tag(struct dec *d, struct rd *r, uint32_t *field, uint32_t *wt)
{
    uint64_t tag = 0;

    if (d->err != WEFT_OK || r->pos >= r->len) {
        return false;
    }
    if (!rd_varint(r, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) {
        return fail(d, "bad field tag");
    }
    *field = (uint32_t)(tag >> 3);
    *wt = (uint32_t)(tag & 7);
    return true;
}

static bool
rd_skip(struct dec *d, struct rd *r, uint32_t wt)
{
    uint64_t v = 0;
    struct rd sub;

    switch (wt) {
    case WT_VARINT:
        return rd_varint(r, &v) || fail(d, "truncated varint");
    case WT_I64:
        return rd_fixed(r, 8, &v) || fail(d, "truncated fixed64");
    case WT_I32:
        return rd_fixed(r, 4, &v) || fail(d, "truncated fixed32");
    case WT_LEN:
        return rd_sub(r, &sub) || fail(d, "truncated length-delimited field");
    default:
        return fail(d, "unsupported wire type (group)");
    }
}

/* Read a field of a known number: its wire type must be @p want. */
static bool
want(struct dec *d, uint32_t wt, uint32_t expected)
{
    return wt == expected || fail(d, "known field with the wrong wire type");
}

static bool
read_varint(struct dec *d, struct rd *r, uint32_t wt, uint64_t *out)
{
    return want(d, wt, WT_VARINT) && (rd_varint(r, out) || fail(d, "truncated varint"));
}

static bool
read_fixed(struct dec *d, struct rd *r, uint32_t wt, uint64_t *out)
{
    size_t bytes = wt == WT_I32 ? 4 : 8;

    return (wt == WT_I32 || want(d, wt, WT_I64)) &&
           (rd_fixed(r, bytes, out) || fail(d, "truncated fixed field"));
}

static bool
read_sub(struct dec *d, struct rd *r, uint32_t wt, struct rd *sub)
{
    return want(d, wt, WT_LEN) && (rd_sub(r, sub) || fail(d, "truncated length-delimited field"));
}

/* A protobuf string field must be UTF-8; one that is not has each invalid sequence replaced
 * by U+FFFD in the batch, as weft's encoder (otlp_proto.c) does when it sends the span on:
 * raw bytes kept here reached the store and came back different from every re-export (the
 * ingest fuzz harness's round trip). @p sub is left as it was when the text is valid. */
static bool
utf8_repaired(struct dec *d, struct rd *sub)
{
    size_t out_len = 0;
    size_t n = 0;
    bool is_valid = true;
    uint8_t *copy = NULL;
    uint8_t *p = NULL;

    if (weft__utf8_valid((const char *)sub->p, sub->len)) {
        return true;
    }
    for (size_t i = 0; i < sub->len; i += n) {
        n = weft__utf8_seq(sub->p + i, sub->len - i, &is_valid);
        out_len += is_valid ? n : 3;
    }
    copy = weft__otlp_batch_alloc(d->b, out_len + 1, &d->err);
    if (copy == NULL) {
        return false;
    }
    p = copy;
    for (size_t i = 0; i < sub->len; i += n) {
        n = weft__utf8_seq(sub->p + i, sub->len - i, &is_valid);
        if (is_valid) {
            memcpy(p, sub->p + i, n);
            p += n;
        } else {
            memcpy(p, "\xef\xbf\xbd", 3);
            p += 3;
        }
    }
    sub->p = copy;
    sub->len = out_len;
    return true;
}

static bool
read_str(struct dec *d, struct rd *r, uint32_t wt, const char **out, size_t *len)
{
    struct rd sub;
    char *s = NULL;

    if (!read_sub(d, r, wt, &sub) || !utf8_repaired(d, &sub)) {
        return false;
    }
    s = weft__otlp_batch_str(d->b, (const char *)sub.p, sub.len, &d->err);
    if (s == NULL) {
        return false;
    }
    *out = s;
    if (len != NULL) {
        *len = sub.len;
    }
    return true;
}

/* A span's or an event's name: NUL bytes escaped (weft__otlp_batch_name). */
static bool
read_name(struct dec *d, struct rd *r, uint32_t wt, const char **out)
{
    struct rd sub;
    char *s = NULL;

    if (!read_sub(d, r, wt, &sub) || !utf8_repaired(d, &sub)) {
        return false;
    }
    s = weft__otlp_batch_name(d->b, (const char *)sub.p, sub.len, &d->err);
    *out = s != NULL ? s : *out;
    return s != NULL;
}

/* Count the fields numbered fields[0..nf) of @p m into counts[] (a pass over the tags only). */
static bool
count_fields(struct dec *d, struct rd m, const uint32_t *fields, size_t *counts, size_t nf)
{
    uint32_t f = 0;
    uint32_t wt = 0;

    memset(counts, 0, nf * sizeof(*counts));
    while (rd_tag(d, &m, &f, &wt)) {
        for (size_t i = 0; i < nf; i++) {
            counts[i] += f == fields[i];
        }
        if (!rd_skip(d, &m, wt)) {
            return false;
        }
    }
    return d->err == WEFT_OK;
}

static void *
alloc_array(struct dec *d, size_t count, size_t size)
{
    if (count == 0) {
        return NULL;
    }
    if (count > SIZE_MAX / size) {
        fail_err(d, WEFT_ELIMIT);
        return NULL;
    }
    return weft__otlp_batch_alloc(d->b, count * size, &d->err);
}

/* ------------------------------------------------------------------------------------------ */
/* AnyValue and KeyValue                                                                       */

static json_t *any_json(struct dec *d, struct rd m, int depth);

/* A KeyValueList's or ArrayValue's values as JSON: an object of keys or an array. */
static json_t *
list_json(struct dec *d, struct rd m, bool is_kvlist, int depth)
{
    json_t *out = is_kvlist ? json_object() : json_array();
    uint32_t f = 0;
    uint32_t wt = 0;

    while (out != NULL && rd_tag(d, &m, &f, &wt)) {
        struct rd sub;
        json_t *item = NULL;

        if (f != 1) {
            rd_skip(d, &m, wt);
            continue;
        }
        if (!read_sub(d, &m, wt, &sub)) {
            break;
        }
        if (!is_kvlist) {
            item = any_json(d, sub, depth + 1);
            if (item == NULL || json_array_append_new(out, item) != 0) {
                break;
            }
            continue;
        }
        {
            struct rd kv = sub;
            const uint8_t *key = NULL;
            size_t key_len = 0;
            json_t *value = NULL;

            while (rd_tag(d, &kv, &f, &wt)) {
                struct rd part;

                if (f == 1 && read_sub(d, &kv, wt, &part)) {
                    key = part.p;
                    key_len = part.len;
                } else if (f == 2 && read_sub(d, &kv, wt, &part)) {
                    json_decref(value);
                    value = any_json(d, part, depth + 1);
                } else if (f != 1 && f != 2) {
                    rd_skip(d, &kv, wt);
                }
            }
            /* No key: proto3's default, the empty string. */
            item = text_json(key != NULL ? (const char *)key : "", key_len);
            if (item == NULL && d->err == WEFT_OK) {
                d->err = WEFT_ENOMEM;
            }
            if (d->err == WEFT_OK && item != NULL && value != NULL) {
                json_object_set_new(out, json_string_value(item), value);
                value = NULL;
            }
            json_decref(item);
            json_decref(value);
        }
    }
    if (d->err != WEFT_OK || out == NULL) {
        json_decref(out);
        if (d->err == WEFT_OK) {
            fail_err(d, WEFT_ENOMEM);
        }
        return NULL;
    }
    return out;
}

static json_t *
double_json(double v)
{
    if (isnan(v)) {
        return json_string("NaN");
    }
    if (isinf(v)) {
        return json_string(v > 0 ? "Infinity" : "-Infinity");
    }
    return json_real(v);
}

/* An AnyValue as plain JSON (for values struct weft_value cannot hold); null when unset. */
static json_t *
any_json(struct dec *d, struct rd m, int depth)
{
    json_t *out = json_null();
    uint32_t f = 0;
    uint32_t wt = 0;
    uint64_t v = 0;
    struct rd sub;

    if (depth > WEFT__OTLP_MAX_VALUE_DEPTH) {
        fail(d, "attribute value nested too deeply");
        return NULL;
    }
    while (rd_tag(d, &m, &f, &wt)) {
        json_t *next = NULL;

        if (f == 1 || f == 7) {
            if (read_sub(d, &m, wt, &sub)) {
                next =
                    f == 1 ? text_json((const char *)sub.p, sub.len) : base64_json(sub.p, sub.len);
            }
        } else if (f == 2 || f == 3) {
            if (read_varint(d, &m, wt, &v)) {
                next = f == 2 ? json_boolean(v != 0) : json_integer((json_int_t)(int64_t)v);
            }
        } else if (f == 4) {
            if (read_fixed(d, &m, wt, &v)) {
                double x = 0;

                memcpy(&x, &v, sizeof(x));
                next = double_json(x);
            }
        } else if (f == 5 || f == 6) {
            if (read_sub(d, &m, wt, &sub)) {
                next = list_json(d, sub, f == 6, depth);
            }
        } else {
            rd_skip(d, &m, wt);
            continue;
        }
        if (next == NULL) {
            break;
        }
        json_decref(out);
        out = next; /* oneof: the last member wins */
    }
    if (d->err != WEFT_OK) {
        json_decref(out);
        return NULL;
    }
    if (out == NULL) {
        fail_err(d, WEFT_ENOMEM);
    }
    return out;
}

/* The oneof member an AnyValue sets (its last one), 0 when none; false when malformed. */
static bool
any_member(struct dec *d, struct rd m, uint32_t *member)
{
    uint32_t f = 0;
    uint32_t wt = 0;

    *member = 0;
    while (rd_tag(d, &m, &f, &wt)) {
        if (f >= 1 && f <= 7) {
            *member = f;
        }
        if (!rd_skip(d, &m, wt)) {
            return false;
        }
    }
    return d->err == WEFT_OK;
}

static bool decode_any(struct dec *d, struct rd m, struct weft_value *out, bool *is_set);

/* An ArrayValue of one scalar type becomes a weft array; anything else becomes JSON text. */
/* A kvlist, or an array of mixed or nested values, as a string of JSON. Its jansson tree is
 * counted against the batch's cap while it lives (16 MiB of empty kvlist entries would
 * otherwise build a tree of gigabytes). */
static bool
value_as_json(struct dec *d, struct rd m, bool is_kvlist, struct weft_value *out)
{
    size_t mark = weft__otlp_batch_json_begin(d->b);
    json_t *j = list_json(d, m, is_kvlist, 1);
    bool ok = j != NULL && (d->err = batch_json_value(d->b, j, out)) == WEFT_OK;

    weft__otlp_batch_json_end(d->b, mark);
    if (!ok && d->b->is_json_over) {
        d->err = WEFT_ELIMIT;
    }
    return ok;
}

static bool
decode_array(struct dec *d, struct rd m, struct weft_value *out)
{
    struct rd scan = m;
    uint32_t f = 0;
    uint32_t wt = 0;
    uint32_t common = 0;
    size_t n = 0;
    bool is_uniform = true;
    void *items = NULL;
    size_t sizes[] = {0, sizeof(char *), sizeof(bool), sizeof(int64_t), sizeof(double)};
    const weft_value_type types[] = {0, WEFT_VALUE_STRING_ARRAY, WEFT_VALUE_BOOL_ARRAY,
                                     WEFT_VALUE_INT_ARRAY, WEFT_VALUE_DOUBLE_ARRAY};

    while (rd_tag(d, &scan, &f, &wt)) {
        struct rd sub;
        uint32_t member = 0;

        if (f != 1) {
            rd_skip(d, &scan, wt);
            continue;
        }
        if (!read_sub(d, &scan, wt, &sub) || !any_member(d, sub, &member)) {
            return false;
        }
        is_uniform = is_uniform && member >= 1 && member <= 4 && (n == 0 || member == common);
        common = member;
        n++;
    }
    if (d->err != WEFT_OK) {
        return false;
    }
    if (!is_uniform) {
        return value_as_json(d, m, false, out);
    }
    if (n == 0) {
        common = 1; /* an empty array: no element says its type */
    }
    items = alloc_array(d, n, sizes[common]);
    if (n > 0 && items == NULL) {
        return false;
    }
    out->type = types[common];
    out->len = 0;
    while (rd_tag(d, &m, &f, &wt)) {
        struct rd sub;
        struct weft_value v;
        bool is_set = false;

        if (f != 1) {
            rd_skip(d, &m, wt);
            continue;
        }
        if (!read_sub(d, &m, wt, &sub) || !decode_any(d, sub, &v, &is_set)) {
            return false;
        }
        if (common == 1) {
            ((const char **)items)[out->len++] = v.u.str;
        } else if (common == 2) {
            ((bool *)items)[out->len++] = v.u.b;
        } else if (common == 3) {
            ((int64_t *)items)[out->len++] = v.u.i;
        } else {
            ((double *)items)[out->len++] = v.u.d;
        }
    }
    out->u.strs = items; /* the union's pointer members share storage */
    return d->err == WEFT_OK;
}

static bool
decode_any(struct dec *d, struct rd m, struct weft_value *out, bool *is_set)
{
    uint32_t f = 0;
    uint32_t wt = 0;
    uint64_t v = 0;
    struct rd sub;

    *is_set = false;
    while (rd_tag(d, &m, &f, &wt)) {
        bool ok = true;

        switch (f) {
        case 1:
            out->type = WEFT_VALUE_STRING;
            ok = read_str(d, &m, wt, &out->u.str, &out->len);
            break;
        case 2:
            out->type = WEFT_VALUE_BOOL;
            ok = read_varint(d, &m, wt, &v);
            out->u.b = v != 0;
            break;
        case 3:
            out->type = WEFT_VALUE_INT;
            ok = read_varint(d, &m, wt, &v);
            out->u.i = (int64_t)v;
            break;
        case 4:
            out->type = WEFT_VALUE_DOUBLE;
            ok = read_fixed(d, &m, wt, &v);
            memcpy(&out->u.d, &v, sizeof(double));
            break;
        case 5:
            ok = read_sub(d, &m, wt, &sub) && decode_array(d, sub, out);
            break;
        case 6:
            ok = read_sub(d, &m, wt, &sub) && value_as_json(d, sub, true, out);
            break;
        case 7:
            if (read_sub(d, &m, wt, &sub)) {
                char *text = alloc_array(d, base64_len(sub.len) + 1, 1);

                ok = text != NULL;
                if (ok) {
                    out->type = WEFT_VALUE_STRING;
                    out->len = base64_encode(sub.p, sub.len, text);
                    out->u.str = text;
                }
            }
            break;
        default:
            ok = rd_skip(d, &m, wt);
            continue;
        }
        if (!ok) {
            return false;
        }
        *is_set = true;
    }
    return d->err == WEFT_OK;
}

/* One KeyValue into @p out; *is_kept is false for an empty key, a key holding a NUL byte, or
 * an unset value. */
static bool
decode_kv(struct dec *d, struct rd m, struct weft_attr *out, bool *is_kept)
{
    uint32_t f = 0;
    uint32_t wt = 0;
    size_t key_len = 0;
    bool has_value = false;
    struct rd sub;

    memset(out, 0, sizeof(*out));
    while (rd_tag(d, &m, &f, &wt)) {
        if (f == 1) {
            if (!read_str(d, &m, wt, &out->key, &key_len)) {
                return false;
            }
        } else if (f == 2) {
            if (!read_sub(d, &m, wt, &sub) || !decode_any(d, sub, &out->value, &has_value)) {
                return false;
            }
        } else if (!rd_skip(d, &m, wt)) {
            return false;
        }
    }
    /* A key must be non-empty text: one that starts with (or holds) a NUL byte would read as
     * another key, or as none, once it is a C string. */
    *is_kept =
        d->err == WEFT_OK && key_len > 0 && memchr(out->key, '\0', key_len) == NULL && has_value;
    return d->err == WEFT_OK;
}

/* The @p n attributes (field @p field) of message @p m, decoded into one array. */
static bool
decode_attrs_n(struct dec *d,
               struct rd m,
               uint32_t field,
               size_t n,
               const struct weft_attr **out,
               size_t *count,
               uint32_t *dropped)
{
    uint32_t f = 0;
    uint32_t wt = 0;
    struct weft_attr *attrs = NULL;

    attrs = alloc_array(d, n, sizeof(*attrs));
    if (n > 0 && attrs == NULL) {
        return false;
    }
    *count = 0;
    while (rd_tag(d, &m, &f, &wt)) {
        struct rd sub;
        bool is_kept = false;

        if (f != field) {
            rd_skip(d, &m, wt);
            continue;
        }
        if (!read_sub(d, &m, wt, &sub) || !decode_kv(d, sub, &attrs[*count], &is_kept)) {
            return false;
        }
        if (is_kept) {
            (*count)++;
        } else {
            (*dropped)++;
        }
    }
    *out = attrs;
    return d->err == WEFT_OK;
}

/* The attributes (field @p field) of message @p m: counted, then decoded. */
static bool
decode_attrs(struct dec *d,
             struct rd m,
             uint32_t field,
             const struct weft_attr **out,
             size_t *count,
             uint32_t *dropped)
{
    size_t n = 0;

    return count_fields(d, m, &field, &n, 1) && decode_attrs_n(d, m, field, n, out, count, dropped);
}

/* ------------------------------------------------------------------------------------------ */
/* Span, events, links, status                                                                 */

static bool
read_id(struct dec *d, struct rd *r, uint32_t wt, uint8_t *id, size_t size, int *state)
{
    struct rd sub;

    if (!read_sub(d, r, wt, &sub)) {
        return false;
    }
    /* state: 0 absent or empty, 1 valid size, -1 wrong size */
    *state = sub.len == 0 ? 0 : sub.len == size ? 1 : -1;
    memset(id, 0, size);
    if (*state == 1) {
        memcpy(id, sub.p, size);
    }
    return true;
}

static bool
decode_event(struct dec *d, struct rd m, struct weft_event_data *ev)
{
    uint32_t f = 0;
    uint32_t wt = 0;
    uint64_t v = 0;

    ev->name = "";
    if (!decode_attrs(d, m, 3, &ev->attrs, &ev->attr_count, &ev->dropped_attrs)) {
        return false;
    }
    while (rd_tag(d, &m, &f, &wt)) {
        bool ok = true;

        if (f == 1) {
            ok = read_fixed(d, &m, wt, &ev->time_ns);
        } else if (f == 2) {
            ok = read_name(d, &m, wt, &ev->name);
        } else if (f == 4) {
            ok = read_varint(d, &m, wt, &v);
            ev->dropped_attrs += (uint32_t)v;
        } else {
            ok = rd_skip(d, &m, wt);
        }
        if (!ok) {
            return false;
        }
    }
    return d->err == WEFT_OK;
}

/* A link; *is_kept is false when its ids are unusable (dropped and counted by the caller). */
static bool
decode_link(struct dec *d, struct rd m, struct weft_link_data *link, bool *is_kept)
{
    uint32_t f = 0;
    uint32_t wt = 0;
    uint64_t v = 0;
    int trace_state = 0;
    int span_state = 0;

    if (!decode_attrs(d, m, 4, &link->attrs, &link->attr_count, &link->dropped_attrs)) {
        return false;
    }
    while (rd_tag(d, &m, &f, &wt)) {
        bool ok = true;

        if (f == 1) {
            ok = read_id(d, &m, wt, link->trace_id, WEFT_TRACE_ID_SIZE, &trace_state);
        } else if (f == 2) {
            ok = read_id(d, &m, wt, link->span_id, WEFT_SPAN_ID_SIZE, &span_state);
        } else if (f == 3) {
            ok = read_str(d, &m, wt, &link->trace_state, NULL);
        } else if (f == 5) {
            ok = read_varint(d, &m, wt, &v);
            link->dropped_attrs += (uint32_t)v;
        } else if (f == 6) {
            ok = read_fixed(d, &m, wt, &v);
            link->trace_flags = (uint8_t)(v & 0xff);
            link->is_remote = (v & FLAG_HAS_IS_REMOTE) != 0 && (v & FLAG_IS_REMOTE) != 0;
        } else {
            ok = rd_skip(d, &m, wt);
        }
        if (!ok) {
            return false;
        }
    }
    *is_kept = weft__otlp_link_ids_ok(link, trace_state == 1, span_state == 1);
    return d->err == WEFT_OK;
}

static bool
decode_status(struct dec *d, struct rd m, struct weft_span_data *span)
{
    uint32_t f = 0;
    uint32_t wt = 0;
    uint64_t v = 0;

    while (rd_tag(d, &m, &f, &wt)) {
        bool ok = true;

        if (f == 2) {
            ok = read_str(d, &m, wt, &span->status_message, NULL);
        } else if (f == 3) {
            ok = read_varint(d, &m, wt, &v);
            span->status_code = v <= WEFT_STATUS_ERROR ? (weft_status_code)v : WEFT_STATUS_UNSET;
        } else {
            ok = rd_skip(d, &m, wt);
        }
        if (!ok) {
            return false;
        }
    }
    return d->err == WEFT_OK;
}

/* The repeated members of a span (attributes, events, links): arrays sized by a first pass
 * over the span's tags, filled in order by the second. */
struct span_parts {
    struct weft_attr *attrs;
    struct weft_event_data *events;
    struct weft_link_data *links;
};

static bool
span_parts_alloc(struct dec *d, const size_t counts[3], struct span_parts *p)
{
    p->attrs = alloc_array(d, counts[0], sizeof(*p->attrs));
    p->events = alloc_array(d, counts[1], sizeof(*p->events));
    p->links = alloc_array(d, counts[2], sizeof(*p->links));
    return d->err == WEFT_OK;
}

/* One attribute (field 9), event (11) or link (13) of @p span into its slot of @p p. An
 * attribute or link that is not kept is counted as dropped and its slot reused. */
static bool
span_repeated(struct dec *d,
              struct rd *m,
              uint32_t f,
              uint32_t wt,
              struct weft_span_data *span,
              struct span_parts *p)
{
    struct rd sub;
    bool is_kept = false;

    if (!read_sub(d, m, wt, &sub)) {
        return false;
    }
    if (f == 9) {
        if (!decode_kv(d, sub, &p->attrs[span->attr_count], &is_kept)) {
            return false;
        }
        if (is_kept) {
            span->attr_count++;
        } else {
            span->dropped_attrs++;
        }
        return true;
    }
    if (f == 11) {
        return decode_event(d, sub, &p->events[span->event_count++]);
    }
    if (!decode_link(d, sub, &p->links[span->link_count], &is_kept)) {
        return false;
    }
    if (is_kept) {
        span->link_count++;
    } else {
        memset(&p->links[span->link_count], 0, sizeof(*p->links));
        span->dropped_links++;
    }
    return true;
}

/* The scalar fields of a span. */
static bool
span_field(
    struct dec *d, struct rd *m, uint32_t f, uint32_t wt, struct weft_span_data *span, int ids[3])
{
    uint64_t v = 0;
    struct rd sub;

    switch (f) {
    case 1:
        return read_id(d, m, wt, span->trace_id, WEFT_TRACE_ID_SIZE, &ids[0]);
    case 2:
        return read_id(d, m, wt, span->span_id, WEFT_SPAN_ID_SIZE, &ids[1]);
    case 3:
        return read_str(d, m, wt, &span->trace_state, NULL);
    case 4:
        return read_id(d, m, wt, span->parent_span_id, WEFT_SPAN_ID_SIZE, &ids[2]);
    case 5:
        return read_name(d, m, wt, &span->name);
    case 6:
        if (!read_varint(d, m, wt, &v)) {
            return false;
        }
        span->kind = v <= WEFT_SPAN_KIND_CONSUMER ? (weft_span_kind)v : WEFT_SPAN_KIND_UNSPECIFIED;
        return true;
    case 7:
        return read_fixed(d, m, wt, &span->start_time_ns);
    case 8:
        return read_fixed(d, m, wt, &span->end_time_ns);
    case 10:
    case 12:
    case 14:
        if (!read_varint(d, m, wt, &v)) {
            return false;
        }
        *(f == 10   ? &span->dropped_attrs
          : f == 12 ? &span->dropped_events
                    : &span->dropped_links) += (uint32_t)v;
        return true;
    case 15:
        return read_sub(d, m, wt, &sub) && decode_status(d, sub, span);
    case 16:
        if (!read_fixed(d, m, wt, &v)) {
            return false;
        }
        span->trace_flags = (uint8_t)(v & 0xff);
        span->parent_is_remote = (v & FLAG_HAS_IS_REMOTE) != 0 && (v & FLAG_IS_REMOTE) != 0;
        return true;
    default:
        return rd_skip(d, m, wt);
    }
}

static bool
decode_span(struct dec *d,
            struct rd m,
            const struct weft_resource *resource,
            const struct weft_scope *scope)
{
    struct weft_span_data *span = weft__otlp_batch_alloc(d->b, sizeof(*span), &d->err);
    uint32_t f = 0;
    uint32_t wt = 0;
    int ids[3] = {0, 0, 0}; /* trace, span, parent: 0 absent, 1 valid, -1 wrong size */
    static const uint32_t repeated[3] = {9, 11, 13}; /* attributes, events, links */
    size_t counts[3];
    struct span_parts parts;
    weft_err err = WEFT_OK;

    if (span == NULL) {
        return false;
    }
    span->name = "";
    span->resource = resource;
    span->scope = scope;
    /* Two walks over the span's tags: one counts the repeated members, one decodes
     * everything. */
    if (!count_fields(d, m, repeated, counts, 3) || !span_parts_alloc(d, counts, &parts)) {
        return false;
    }
    while (rd_tag(d, &m, &f, &wt)) {
        bool ok = f == 9 || f == 11 || f == 13 ? span_repeated(d, &m, f, wt, span, &parts)
                                               : span_field(d, &m, f, wt, span, ids);

        if (!ok) {
            return false;
        }
    }
    if (d->err != WEFT_OK) {
        return false;
    }
    span->attrs = parts.attrs;
    span->events = parts.events;
    span->links = parts.links;
    span->has_parent = ids[2] == 1 && !is_zero(span->parent_span_id, WEFT_SPAN_ID_SIZE);
    if (!span->has_parent) {
        span->parent_is_remote = false;
    }
    err = weft__otlp_batch_add(d->b, span, ids[0] == 1, ids[1] == 1, ids[2] >= 0);
    return err == WEFT_OK || fail_err(d, err);
}

/* ------------------------------------------------------------------------------------------ */
/* Envelopes                                                                                   */

static bool
decode_scope(struct dec *d, struct rd m, struct weft_scope *scope)
{
    uint32_t f = 0;
    uint32_t wt = 0;
    uint32_t dropped = 0;

    if (!decode_attrs(d, m, 3, &scope->attrs, &scope->attr_count, &dropped)) {
        return false;
    }
    while (rd_tag(d, &m, &f, &wt)) {
        bool ok = true;

        if (f == 1) {
            ok = read_str(d, &m, wt, &scope->name, NULL);
        } else if (f == 2) {
            ok = read_str(d, &m, wt, &scope->version, NULL);
        } else {
            ok = (f != 3 || want(d, wt, WT_LEN)) && rd_skip(d, &m, wt);
        }
        if (!ok) {
            return false;
        }
    }
    return d->err == WEFT_OK;
}

static bool
decode_scope_spans(struct dec *d, struct rd m, const struct weft_resource *resource)
{
    struct weft_scope *scope = weft__otlp_batch_alloc(d->b, sizeof(*scope), &d->err);
    struct rd scan = m;
    uint32_t f = 0;
    uint32_t wt = 0;
    struct rd sub;

    if (scope == NULL) {
        return false;
    }
    /* The scope first, wherever it is in the message: spans point to it. */
    while (rd_tag(d, &scan, &f, &wt)) {
        bool ok = true;

        if (f == 1) {
            ok = read_sub(d, &scan, wt, &sub) && decode_scope(d, sub, scope);
        } else if (f == 3) {
            ok = read_str(d, &scan, wt, &scope->schema_url, NULL);
        } else {
            ok = (f != 2 || want(d, wt, WT_LEN)) && rd_skip(d, &scan, wt);
        }
        if (!ok) {
            return false;
        }
    }
    while (rd_tag(d, &m, &f, &wt)) {
        if (f == 2) {
            if (!read_sub(d, &m, wt, &sub) || !decode_span(d, sub, resource, scope)) {
                return false;
            }
        } else if (!rd_skip(d, &m, wt)) {
            return false;
        }
    }
    return d->err == WEFT_OK;
}

static bool
decode_resource(struct dec *d, struct rd m, struct weft_resource *res)
{
    uint32_t f = 0;
    uint32_t wt = 0;
    uint64_t v = 0;

    if (!decode_attrs(d, m, 1, &res->attrs, &res->attr_count, &res->dropped_attrs)) {
        return false;
    }
    while (rd_tag(d, &m, &f, &wt)) {
        bool ok = true;

        if (f == 2) {
            ok = read_varint(d, &m, wt, &v);
            res->dropped_attrs += (uint32_t)v;
        } else {
            ok = (f != 1 || want(d, wt, WT_LEN)) && rd_skip(d, &m, wt);
        }
        if (!ok) {
            return false;
        }
    }
    return d->err == WEFT_OK;
}

static bool
decode_resource_spans(struct dec *d, struct rd m)
{
    struct weft_resource *res = weft__otlp_batch_alloc(d->b, sizeof(*res), &d->err);
    struct rd scan = m;
    uint32_t f = 0;
    uint32_t wt = 0;
    struct rd sub;

    if (res == NULL) {
        return false;
    }
    while (rd_tag(d, &scan, &f, &wt)) {
        bool ok = true;

        if (f == 1) {
            ok = read_sub(d, &scan, wt, &sub) && decode_resource(d, sub, res);
        } else if (f == 3) {
            ok = read_str(d, &scan, wt, &res->schema_url, NULL);
        } else {
            ok = (f != 2 || want(d, wt, WT_LEN)) && rd_skip(d, &scan, wt);
        }
        if (!ok) {
            return false;
        }
    }
    while (rd_tag(d, &m, &f, &wt)) {
        if (f == 2) {
            if (!read_sub(d, &m, wt, &sub) || !decode_scope_spans(d, sub, res)) {
                return false;
            }
        } else if (!rd_skip(d, &m, wt)) {
            return false;
        }
    }
    return d->err == WEFT_OK;
}

weft_err
weft__otlp_decode_proto(
    const uint8_t *data, size_t len, struct weft__otlp_batch *batch, char *why, size_t why_len)
{
    struct dec d = {batch, WEFT_OK, why, why_len};
    struct rd m = {data, len, 0};
    uint32_t f = 0;
    uint32_t wt = 0;
    struct rd sub;

    if (batch == NULL || (data == NULL && len > 0)) {
        return WEFT_EINVAL;
    }
    if (why != NULL && why_len > 0) {
        why[0] = '\0';
    }
    while (rd_tag(&d, &m, &f, &wt)) {
        if (f == 1) {
            if (!read_sub(&d, &m, wt, &sub) || !decode_resource_spans(&d, sub)) {
                break;
            }
        } else if (!rd_skip(&d, &m, wt)) {
            break;
        }
    }
    if (d.err == WEFT_ELIMIT && why != NULL && why_len > 0) {
        snprintf(why, why_len, "the decoded request would exceed %zu bytes", batch->max_bytes);
    }
    return d.err;
}
