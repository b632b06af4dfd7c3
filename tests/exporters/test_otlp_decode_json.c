/* tests/exporters/test_otlp_decode_json.c - the streaming OTLP JSON decoder
 * (exporters/otlp_decode_json.c).
 *
 * Differential: generated spans are encoded by weft's JSON and protobuf encoders and decoded by
 * the JSON and the protobuf decoders; the two batches must be equal field by field. What span
 * views cannot carry (kvlist, bytes, mixed arrays) is written by hand in both encodings. Then
 * one test per rule of the decoder: names, enums, numbers, escapes, ids, wrong types, nesting,
 * truncation, whitespace, duplicates, the cap and out of memory.
 */
#include "base/buf.h"
#include "exporters/otlp_decode.h"
#include "exporters/otlp_encode.h"
#include "support/failalloc.h"
#include "support/weft_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP ((size_t)64 << 20)

/* ------------------------------------------------------------------------------------------ */
/* Comparing batches                                                                           */

static void
assert_same_str(const char *a, const char *b)
{
    if (a == NULL || b == NULL) {
        /* absent and empty encode alike in protobuf */
        assert_string_equal(a != NULL ? a : "", b != NULL ? b : "");
        return;
    }
    assert_string_equal(a, b);
}

static void
assert_same_double(double a, double b)
{
    if (isnan(a) || isnan(b)) {
        assert_true(isnan(a) && isnan(b));
        return;
    }
    assert_memory_equal(&a, &b, sizeof(a)); /* -0.0 too */
}

static void
assert_same_value(const struct weft_value *a, const struct weft_value *b)
{
    assert_int_equal(a->type, b->type);
    switch (a->type) {
    case WEFT_VALUE_STRING:
        assert_int_equal(a->len, b->len);
        assert_memory_equal(a->u.str, b->u.str, a->len + 1);
        return;
    case WEFT_VALUE_BOOL:
        assert_int_equal(a->u.b, b->u.b);
        return;
    case WEFT_VALUE_INT:
        assert_int_equal(a->u.i, b->u.i);
        return;
    case WEFT_VALUE_DOUBLE:
        assert_same_double(a->u.d, b->u.d);
        return;
    default:
        break;
    }
    assert_int_equal(a->len, b->len);
    for (size_t i = 0; i < a->len; i++) {
        if (a->type == WEFT_VALUE_STRING_ARRAY) {
            assert_same_str(a->u.strs[i], b->u.strs[i]);
        } else if (a->type == WEFT_VALUE_BOOL_ARRAY) {
            assert_int_equal(a->u.bools[i], b->u.bools[i]);
        } else if (a->type == WEFT_VALUE_INT_ARRAY) {
            assert_int_equal(a->u.ints[i], b->u.ints[i]);
        } else {
            assert_same_double(a->u.doubles[i], b->u.doubles[i]);
        }
    }
}

static void
assert_same_attrs(const struct weft_attr *a, size_t na, const struct weft_attr *b, size_t nb)
{
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        assert_string_equal(a[i].key, b[i].key);
        assert_same_value(&a[i].value, &b[i].value);
    }
}

static void
assert_same_span(const struct weft_span_data *x, const struct weft_span_data *y)
{
    assert_memory_equal(x->trace_id, y->trace_id, WEFT_TRACE_ID_SIZE);
    assert_memory_equal(x->span_id, y->span_id, WEFT_SPAN_ID_SIZE);
    assert_int_equal(x->has_parent, y->has_parent);
    assert_memory_equal(x->parent_span_id, y->parent_span_id, WEFT_SPAN_ID_SIZE);
    assert_int_equal(x->parent_is_remote, y->parent_is_remote);
    assert_int_equal(x->trace_flags, y->trace_flags);
    assert_same_str(x->name, y->name);
    assert_same_str(x->trace_state, y->trace_state);
    assert_int_equal(x->kind, y->kind);
    assert_int_equal(x->start_time_ns, y->start_time_ns);
    assert_int_equal(x->end_time_ns, y->end_time_ns);
    assert_int_equal(x->status_code, y->status_code);
    assert_same_str(x->status_message, y->status_message);
    assert_int_equal(x->dropped_attrs, y->dropped_attrs);
    assert_int_equal(x->dropped_events, y->dropped_events);
    assert_int_equal(x->dropped_links, y->dropped_links);
    assert_same_attrs(x->attrs, x->attr_count, y->attrs, y->attr_count);
    assert_int_equal(x->event_count, y->event_count);
    for (size_t i = 0; i < x->event_count; i++) {
        assert_same_str(x->events[i].name, y->events[i].name);
        assert_int_equal(x->events[i].time_ns, y->events[i].time_ns);
        assert_int_equal(x->events[i].dropped_attrs, y->events[i].dropped_attrs);
        assert_same_attrs(x->events[i].attrs, x->events[i].attr_count, y->events[i].attrs,
                          y->events[i].attr_count);
    }
    assert_int_equal(x->link_count, y->link_count);
    for (size_t i = 0; i < x->link_count; i++) {
        const struct weft_link_data *l = &x->links[i];
        const struct weft_link_data *m = &y->links[i];

        assert_memory_equal(l->trace_id, m->trace_id, WEFT_TRACE_ID_SIZE);
        assert_memory_equal(l->span_id, m->span_id, WEFT_SPAN_ID_SIZE);
        assert_same_str(l->trace_state, m->trace_state);
        assert_int_equal(l->trace_flags, m->trace_flags);
        assert_int_equal(l->is_remote, m->is_remote);
        assert_int_equal(l->dropped_attrs, m->dropped_attrs);
        assert_same_attrs(l->attrs, l->attr_count, m->attrs, m->attr_count);
    }
    assert_same_attrs(x->resource->attrs, x->resource->attr_count, y->resource->attrs,
                      y->resource->attr_count);
    assert_int_equal(x->resource->dropped_attrs, y->resource->dropped_attrs);
    assert_same_str(x->resource->schema_url, y->resource->schema_url);
    assert_same_str(x->scope->name, y->scope->name);
    assert_same_str(x->scope->version, y->scope->version);
    assert_same_str(x->scope->schema_url, y->scope->schema_url);
    assert_same_attrs(x->scope->attrs, x->scope->attr_count, y->scope->attrs, y->scope->attr_count);
}

static void
assert_same_batch(const struct weft__otlp_batch *a, const struct weft__otlp_batch *b)
{
    assert_int_equal(a->count, b->count);
    assert_int_equal(a->rejected, b->rejected);
    assert_int_equal(a->names_escaped, b->names_escaped);
    for (size_t i = 0; i < a->count; i++) {
        assert_same_span(a->spans[i], b->spans[i]);
    }
}

static weft_err
decode_json(const char *body, struct weft__otlp_batch *batch, char *why, size_t why_len)
{
    weft__otlp_batch_init(batch, CAP);
    return weft__otlp_decode_json(body, strlen(body), batch, why, why_len);
}

/* ------------------------------------------------------------------------------------------ */
/* Differential: generated spans through both encoders and both decoders                      */

#define GEN_SPANS 40

struct gen {
    uint64_t seed;
    struct weft_resource resources[2];
    struct weft_scope scopes[3];
    struct weft_attr res_attrs[2][3];
    struct weft_attr scope_attrs[3][2];
    struct weft_span_data spans[GEN_SPANS];
    const struct weft_span_data *views[GEN_SPANS];
    struct weft_attr attrs[GEN_SPANS][12];
    struct weft_event_data events[GEN_SPANS][3];
    struct weft_attr event_attrs[GEN_SPANS][3][2];
    struct weft_link_data links[GEN_SPANS][2];
    struct weft_attr link_attrs[GEN_SPANS][2][2];
    char names[GEN_SPANS][48];
};

static const char *const texts[] = {
    "plain",
    "",
    "quote \" backslash \\ slash /",
    "tab\tnewline\ncr\rbell\x07 unit\x1f del\x7f",
    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
    "gen_ai.request.model",
    "https://api.example.com/v1/chat/completions?q=1&r=2",
};
static const char *const str_items[] = {"a", "", "b\"c", "\xe2\x82\xac"};
static const bool bool_items[] = {true, false, true};
static const int64_t int_items[] = {0, -1, INT64_MAX, INT64_MIN, 42};
static const double double_items[] = {0.5, -0.0, 1e300, 4.9406564584124654e-324, 0.1};
static double special_doubles[3];

static uint64_t
next(struct gen *g)
{
    g->seed = g->seed * 6364136223846793005ull + 1442695040888963407ull;
    return g->seed >> 17;
}

static struct weft_value
gen_value(struct gen *g)
{
    struct weft_value v;

    memset(&v, 0, sizeof(v));
    switch (next(g) % 9) {
    case 0:
        v.type = WEFT_VALUE_STRING;
        v.u.str = texts[next(g) % (sizeof(texts) / sizeof(texts[0]))];
        v.len = strlen(v.u.str);
        break;
    case 1:
        v.type = WEFT_VALUE_BOOL;
        v.u.b = next(g) % 2 == 0;
        break;
    case 2:
        v.type = WEFT_VALUE_INT;
        v.u.i = int_items[next(g) % 5];
        break;
    case 3:
        v.type = WEFT_VALUE_DOUBLE;
        v.u.d = next(g) % 2 == 0 ? double_items[next(g) % 5] : special_doubles[next(g) % 3];
        break;
    case 4:
        v.type = WEFT_VALUE_STRING_ARRAY;
        v.u.strs = str_items;
        v.len = next(g) % 5;
        break;
    case 5:
        v.type = WEFT_VALUE_BOOL_ARRAY;
        v.u.bools = bool_items;
        v.len = 1 + next(g) % 3;
        break;
    case 6:
        v.type = WEFT_VALUE_INT_ARRAY;
        v.u.ints = int_items;
        v.len = 1 + next(g) % 5;
        break;
    case 7:
        v.type = WEFT_VALUE_DOUBLE_ARRAY;
        v.u.doubles = next(g) % 2 == 0 ? double_items : special_doubles;
        v.len = 1 + next(g) % 3;
        break;
    default:
        v.type = WEFT_VALUE_STRING;
        v.u.str = "x";
        v.len = 1;
        break;
    }
    return v;
}

static void
gen_attrs(struct gen *g, struct weft_attr *out, size_t n, const char *prefix)
{
    static char keys[64][32];
    static size_t used;

    for (size_t i = 0; i < n; i++) {
        char *key = keys[used++ % 64];

        snprintf(key, sizeof(keys[0]), "%s.%zu", prefix, i);
        out[i].key = key;
        out[i].value = gen_value(g);
    }
}

static void
gen_ids(struct gen *g, uint8_t *id, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        id[i] = (uint8_t)next(g);
    }
    id[len - 1] |= 1; /* never all zero */
}

static void
gen_init(struct gen *g, uint64_t seed)
{
    memset(g, 0, sizeof(*g));
    g->seed = seed;
    special_doubles[0] = NAN;
    special_doubles[1] = INFINITY;
    special_doubles[2] = -INFINITY;
    for (size_t r = 0; r < 2; r++) {
        gen_attrs(g, g->res_attrs[r], 1 + r * 2, "res");
        g->resources[r].attrs = g->res_attrs[r];
        g->resources[r].attr_count = 1 + r * 2;
        g->resources[r].schema_url = r == 1 ? "https://opentelemetry.io/schemas/1.26.0" : NULL;
    }
    for (size_t s = 0; s < 3; s++) {
        gen_attrs(g, g->scope_attrs[s], s, "scope");
        g->scopes[s].name = s == 0 ? "weft" : texts[s];
        g->scopes[s].version = s == 2 ? NULL : "1.2.3";
        g->scopes[s].attrs = g->scope_attrs[s];
        g->scopes[s].attr_count = s;
    }
    for (size_t i = 0; i < GEN_SPANS; i++) {
        struct weft_span_data *s = &g->spans[i];
        size_t ne = next(g) % 4;
        size_t nl = next(g) % 3;

        gen_ids(g, s->trace_id, WEFT_TRACE_ID_SIZE);
        gen_ids(g, s->span_id, WEFT_SPAN_ID_SIZE);
        s->has_parent = next(g) % 3 != 0;
        if (s->has_parent) {
            gen_ids(g, s->parent_span_id, WEFT_SPAN_ID_SIZE);
            s->parent_is_remote = next(g) % 2 == 0;
        }
        s->trace_flags = (uint8_t)(next(g) % 2);
        snprintf(g->names[i], sizeof(g->names[i]), "%s %zu", texts[next(g) % 7], i);
        s->name = g->names[i];
        s->trace_state = next(g) % 3 == 0 ? "vendor=a,other=b" : NULL;
        s->kind = (weft_span_kind)(next(g) % 6);
        s->start_time_ns = 1700000000000000000ull + next(g) % 1000000000ull;
        s->end_time_ns = s->start_time_ns + next(g) % 5000000000ull;
        s->status_code = (weft_status_code)(next(g) % 3);
        s->status_message = s->status_code == WEFT_STATUS_ERROR ? texts[next(g) % 7] : NULL;
        s->dropped_attrs = (uint32_t)(next(g) % 3);
        s->dropped_events = (uint32_t)(next(g) % 2);
        s->dropped_links = (uint32_t)(next(g) % 2);
        s->attr_count = next(g) % 13;
        gen_attrs(g, g->attrs[i], s->attr_count, "a");
        s->attrs = g->attrs[i];
        for (size_t e = 0; e < ne; e++) {
            struct weft_event_data *ev = &g->events[i][e];

            ev->name = texts[next(g) % 7];
            ev->time_ns = s->start_time_ns + e;
            ev->attr_count = next(g) % 3;
            gen_attrs(g, g->event_attrs[i][e], ev->attr_count, "ev");
            ev->attrs = g->event_attrs[i][e];
            ev->dropped_attrs = (uint32_t)(next(g) % 2);
        }
        s->events = g->events[i];
        s->event_count = ne;
        for (size_t l = 0; l < nl; l++) {
            struct weft_link_data *ln = &g->links[i][l];

            gen_ids(g, ln->trace_id, WEFT_TRACE_ID_SIZE);
            gen_ids(g, ln->span_id, WEFT_SPAN_ID_SIZE);
            ln->trace_state = l == 1 ? "k=v" : NULL;
            ln->trace_flags = (uint8_t)(next(g) % 2);
            ln->is_remote = next(g) % 2 == 0;
            ln->attr_count = next(g) % 3;
            gen_attrs(g, g->link_attrs[i][l], ln->attr_count, "ln");
            ln->attrs = g->link_attrs[i][l];
            ln->dropped_attrs = (uint32_t)(next(g) % 2);
        }
        s->links = g->links[i];
        s->link_count = nl;
        s->resource = &g->resources[i % 2];
        s->scope = &g->scopes[i % 3];
        g->views[i] = s;
    }
}

static void
test_decode_json_equals_protobuf_for_generated_spans(void **state)
{
    static struct gen g;

    (void)state;
    for (uint64_t seed = 1; seed <= 25; seed++) {
        struct weft__buf json;
        struct weft__buf proto;
        struct weft__otlp_batch a;
        struct weft__otlp_batch b;

        gen_init(&g, seed);
        weft__buf_init(&json, 0);
        weft__buf_init(&proto, 0);
        assert_weft_ok(weft__otlp_encode_json(g.views, GEN_SPANS, &json));
        assert_weft_ok(weft__otlp_encode_proto(g.views, GEN_SPANS, &proto));
        weft__otlp_batch_init(&a, CAP);
        weft__otlp_batch_init(&b, CAP);
        assert_weft_ok(weft__otlp_decode_json(json.data, json.len, &a, NULL, 0));
        assert_weft_ok(
            weft__otlp_decode_proto((const uint8_t *)proto.data, proto.len, &b, NULL, 0));
        assert_int_equal(a.count, GEN_SPANS);
        assert_same_batch(&a, &b);
        weft__otlp_batch_cleanup(&a);
        weft__otlp_batch_cleanup(&b);
        weft__buf_cleanup(&json);
        weft__buf_cleanup(&proto);
    }
}

/* --- hand-built protobuf for what span views cannot hold -------------------------------- */

static void
pb_varint(struct weft__buf *b, uint64_t v)
{
    do {
        uint8_t byte = (uint8_t)(v & 0x7f);

        v >>= 7;
        assert_weft_ok(weft__buf_append_byte(b, (uint8_t)(byte | (v != 0 ? 0x80 : 0))));
    } while (v != 0);
}

static void
pb_bytes(struct weft__buf *b, uint32_t field, const void *data, size_t len)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, len);
    assert_weft_ok(weft__buf_append(b, data, len));
}

/* Append @p inner as field @p field and empty it. */
static void
pb_msg(struct weft__buf *b, uint32_t field, struct weft__buf *inner)
{
    pb_bytes(b, field, inner->data != NULL ? inner->data : "", inner->len);
    weft__buf_reset(inner);
}

static void
pb_uint(struct weft__buf *b, uint32_t field, uint64_t v)
{
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, v);
}

static void
pb_double(struct weft__buf *b, uint32_t field, double x)
{
    uint8_t raw[8];
    uint64_t v = 0;

    memcpy(&v, &x, sizeof(v));
    for (int i = 0; i < 8; i++) {
        raw[i] = (uint8_t)(v >> (8 * i));
    }
    pb_varint(b, (uint64_t)field << 3 | 1);
    assert_weft_ok(weft__buf_append(b, raw, 8));
}

/* KeyValue {key, value: @p any} as field @p field of @p b; @p any is emptied. */
static void
pb_kv(struct weft__buf *b, uint32_t field, const char *key, struct weft__buf *any)
{
    struct weft__buf kv;

    weft__buf_init(&kv, 0);
    pb_bytes(&kv, 1, key, strlen(key));
    pb_msg(&kv, 2, any);
    pb_msg(b, field, &kv);
    weft__buf_cleanup(&kv);
}

/* The request around one span's attributes (field 9 entries in @p attrs). */
static void
pb_request(struct weft__buf *req, struct weft__buf *attrs)
{
    static const uint8_t trace[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const uint8_t span[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    struct weft__buf s;
    struct weft__buf ss;
    struct weft__buf rs;

    weft__buf_init(&s, 0);
    weft__buf_init(&ss, 0);
    weft__buf_init(&rs, 0);
    pb_bytes(&s, 1, trace, 16);
    pb_bytes(&s, 2, span, 8);
    pb_bytes(&s, 5, "values", 6);
    assert_weft_ok(weft__buf_append(&s, attrs->data, attrs->len));
    pb_msg(&ss, 2, &s);
    pb_msg(&rs, 2, &ss);
    weft__buf_init(req, 0);
    pb_msg(req, 1, &rs);
    weft__buf_cleanup(&s);
    weft__buf_cleanup(&ss);
    weft__buf_cleanup(&rs);
}

#define SPAN_HEAD                                                                               \
    "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":"                            \
    "\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0101010101010101\",\"name\":\"values\"," \
    "\"attributes\":["
#define SPAN_TAIL "]}]}]}]}"

/* kvlist (nested, with an array inside), bytes, a mixed array, a nested array and NaN: the
 * JSON decoder stores the same text as the protobuf decoder. */
static void
test_decode_json_equals_protobuf_for_kvlist_bytes_and_mixed_arrays(void **state)
{
    static const char json[] =
        SPAN_HEAD "{\"key\":\"map\",\"value\":{\"kvlistValue\":{\"values\":["
                  "{\"key\":\"x\",\"value\":{\"intValue\":\"-7\"}},"
                  "{\"key\":\"y\",\"value\":{\"arrayValue\":{\"values\":[{\"stringValue\":"
                  "\"s\\\"\\u0001\"},{\"boolValue\":true},{\"doubleValue\":0.1}]}}},"
                  "{\"key\":\"z\",\"value\":{\"kvlistValue\":{\"values\":[{\"key\":\"d\","
                  "\"value\":{\"doubleValue\":\"NaN\"}},{\"key\":\"e\",\"value\":{"
                  "\"doubleValue\":1e22}},{\"key\":\"f\",\"value\":{\"doubleValue\":2}}]}}}]}}},"
                  "{\"key\":\"blob\",\"value\":{\"bytesValue\":\"3q2+7w==\"}},"
                  "{\"key\":\"mixed\",\"value\":{\"arrayValue\":{\"values\":[{\"intValue\":1},"
                  "{\"stringValue\":\"two\"},{\"doubleValue\":\"-Infinity\"}]}}},"
                  "{\"key\":\"nested\",\"value\":{\"arrayValue\":{\"values\":[{\"arrayValue\":"
                  "{\"values\":[{\"intValue\":\"3\"}]}}]}}},"
                  "{\"key\":\"nan\",\"value\":{\"arrayValue\":{\"values\":[{\"doubleValue\":"
                  "\"NaN\"},{\"doubleValue\":\"Infinity\"},{\"doubleValue\":-0.0}]}}}" SPAN_TAIL;
    static const uint8_t raw[] = {0xde, 0xad, 0xbe, 0xef};
    struct weft__buf attrs;
    struct weft__buf any;
    struct weft__buf list;
    struct weft__buf inner;
    struct weft__buf item;
    struct weft__buf req;
    struct weft__otlp_batch a;
    struct weft__otlp_batch b;
    const struct weft_span_data *s = NULL;

    (void)state;
    weft__buf_init(&attrs, 0);
    weft__buf_init(&any, 0);
    weft__buf_init(&list, 0);
    weft__buf_init(&inner, 0);
    weft__buf_init(&item, 0);
    /* map */
    pb_uint(&any, 3, (uint64_t)-7);
    pb_kv(&list, 1, "x", &any);
    pb_bytes(&item, 1, "s\"\x01", 3);
    pb_msg(&inner, 1, &item);
    pb_uint(&item, 2, 1);
    pb_msg(&inner, 1, &item);
    pb_double(&item, 4, 0.1);
    pb_msg(&inner, 1, &item);
    pb_msg(&any, 5, &inner);
    pb_kv(&list, 1, "y", &any);
    pb_double(&any, 4, NAN);
    pb_kv(&inner, 1, "d", &any);
    pb_double(&any, 4, 1e22);
    pb_kv(&inner, 1, "e", &any);
    pb_double(&any, 4, 2);
    pb_kv(&inner, 1, "f", &any);
    pb_msg(&any, 6, &inner);
    pb_kv(&list, 1, "z", &any);
    pb_msg(&any, 6, &list);
    pb_kv(&attrs, 9, "map", &any);
    /* blob */
    pb_bytes(&any, 7, raw, sizeof(raw));
    pb_kv(&attrs, 9, "blob", &any);
    /* mixed */
    pb_uint(&item, 3, 1);
    pb_msg(&list, 1, &item);
    pb_bytes(&item, 1, "two", 3);
    pb_msg(&list, 1, &item);
    pb_double(&item, 4, -INFINITY);
    pb_msg(&list, 1, &item);
    pb_msg(&any, 5, &list);
    pb_kv(&attrs, 9, "mixed", &any);
    /* nested */
    pb_uint(&item, 3, 3);
    pb_msg(&inner, 1, &item);
    pb_msg(&item, 5, &inner);
    pb_msg(&list, 1, &item);
    pb_msg(&any, 5, &list);
    pb_kv(&attrs, 9, "nested", &any);
    /* nan */
    pb_double(&item, 4, NAN);
    pb_msg(&list, 1, &item);
    pb_double(&item, 4, INFINITY);
    pb_msg(&list, 1, &item);
    pb_double(&item, 4, -0.0);
    pb_msg(&list, 1, &item);
    pb_msg(&any, 5, &list);
    pb_kv(&attrs, 9, "nan", &any);
    pb_request(&req, &attrs);

    assert_weft_ok(decode_json(json, &a, NULL, 0));
    weft__otlp_batch_init(&b, CAP);
    assert_weft_ok(weft__otlp_decode_proto((const uint8_t *)req.data, req.len, &b, NULL, 0));
    assert_same_batch(&a, &b);
    s = a.spans[0];
    assert_string_equal(weft_span_data_attr(s, "map")->u.str,
                        "{\"x\":-7,\"y\":[\"s\\\"\\u0001\",true,0.10000000000000001],"
                        "\"z\":{\"d\":\"NaN\",\"e\":1e22,\"f\":2.0}}");
    assert_string_equal(weft_span_data_attr(s, "blob")->u.str, "3q2+7w==");
    assert_string_equal(weft_span_data_attr(s, "mixed")->u.str, "[1,\"two\",\"-Infinity\"]");
    assert_string_equal(weft_span_data_attr(s, "nested")->u.str, "[[3]]");
    assert_int_equal(weft_span_data_attr(s, "nan")->type, WEFT_VALUE_DOUBLE_ARRAY);
    weft__otlp_batch_cleanup(&a);
    weft__otlp_batch_cleanup(&b);
    weft__buf_cleanup(&attrs);
    weft__buf_cleanup(&any);
    weft__buf_cleanup(&list);
    weft__buf_cleanup(&inner);
    weft__buf_cleanup(&item);
    weft__buf_cleanup(&req);
}

/* ------------------------------------------------------------------------------------------ */
/* The rules, one by one                                                                        */

static const struct weft_value *
attr_of(const char *body, struct weft__otlp_batch *batch, const char *key)
{
    assert_weft_ok(decode_json(body, batch, NULL, 0));
    assert_int_equal(batch->count, 1);
    return weft_span_data_attr(batch->spans[0], key);
}

/* Proto field names are accepted; when a member comes under both names the lowerCamelCase one
 * wins wherever it is, even when null. */
static void
test_decode_json_proto_names_and_precedence(void **state)
{
    static const char body[] =
        "{\"resource_spans\":[{\"scope_spans\":[{\"spans\":[{\"trace_id\":"
        "\"0102030405060708090a0b0c0d0e0f10\",\"span_id\":\"0101010101010101\","
        "\"start_time_unix_nano\":\"5\",\"startTimeUnixNano\":\"7\","
        "\"endTimeUnixNano\":null,\"end_time_unix_nano\":\"9\","
        "\"trace_state\":\"proto\",\"dropped_links_count\":3}]}],"
        "\"scopeSpans\":[{\"spans\":[{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\","
        "\"spanId\":\"0202020202020202\",\"name\":\"camel\"}]}]}],"
        "\"resourceSpans\":null}";
    static const char camel_last[] =
        "{\"resource_spans\":[],\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":"
        "\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0101010101010101\"}]}]}]}";
    struct weft__otlp_batch batch;

    (void)state;
    /* resourceSpans is null: resource_spans is not read at all. */
    assert_weft_ok(decode_json(body, &batch, NULL, 0));
    assert_int_equal(batch.count, 0);
    weft__otlp_batch_cleanup(&batch);
    assert_weft_ok(decode_json(body + 0, &batch, NULL, 0));
    weft__otlp_batch_cleanup(&batch);
    assert_weft_ok(decode_json(camel_last, &batch, NULL, 0));
    assert_int_equal(batch.count, 1);
    weft__otlp_batch_cleanup(&batch);
    {
        /* Without the null resourceSpans: scopeSpans wins over scope_spans (read first). */
        char copy[sizeof(body)];
        char *cut = NULL;

        memcpy(copy, body, sizeof(body));
        cut = strstr(copy, ",\"resourceSpans\":null");
        memcpy(cut, "}", 2);
        assert_weft_ok(decode_json(copy, &batch, NULL, 0));
        assert_int_equal(batch.count, 1);
        assert_string_equal(batch.spans[0]->name, "camel");
        weft__otlp_batch_cleanup(&batch);
        /* And within the proto-named span: startTimeUnixNano (7) over start_time_unix_nano;
         * a null endTimeUnixNano hides end_time_unix_nano. */
        memcpy(strstr(copy, "\"scopeSpans\""), "\"xcopeSpans\"", 12);
        assert_weft_ok(decode_json(copy, &batch, NULL, 0));
        assert_int_equal(batch.count, 1);
        assert_int_equal(batch.spans[0]->start_time_ns, 7);
        assert_int_equal(batch.spans[0]->end_time_ns, 0);
        assert_string_equal(batch.spans[0]->trace_state, "proto");
        assert_int_equal(batch.spans[0]->dropped_links, 3);
        weft__otlp_batch_cleanup(&batch);
    }
}

static void
test_decode_json_enums_as_names_or_integers(void **state)
{
    static const char body[] =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":["
        "{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0101010101010101\","
        "\"kind\":\"SPAN_KIND_CONSUMER\",\"status\":{\"code\":\"STATUS_CODE_ERROR\"}},"
        "{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0202020202020202\","
        "\"kind\":3,\"status\":{\"code\":1,\"message\":\"m\"}},"
        "{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0303030303030303\","
        "\"kind\":99,\"status\":{\"code\":-1}}]}]}]}";
    static const char bad[] =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"kind\":\"SERVER\"}]}]}]}";
    struct weft__otlp_batch batch;
    char why[160];

    (void)state;
    assert_weft_ok(decode_json(body, &batch, NULL, 0));
    assert_int_equal(batch.count, 3);
    assert_int_equal(batch.spans[0]->kind, WEFT_SPAN_KIND_CONSUMER);
    assert_int_equal(batch.spans[0]->status_code, WEFT_STATUS_ERROR);
    assert_int_equal(batch.spans[1]->kind, WEFT_SPAN_KIND_CLIENT);
    assert_int_equal(batch.spans[1]->status_code, WEFT_STATUS_OK);
    assert_string_equal(batch.spans[1]->status_message, "m");
    assert_int_equal(batch.spans[2]->kind, WEFT_SPAN_KIND_UNSPECIFIED); /* out of range */
    assert_int_equal(batch.spans[2]->status_code, WEFT_STATUS_UNSET);
    weft__otlp_batch_cleanup(&batch);
    assert_int_equal(decode_json(bad, &batch, why, sizeof(why)), WEFT_EPARSE);
    assert_non_null(strstr(why, "enum"));
    weft__otlp_batch_cleanup(&batch);
}

/* 64-bit integers as strings or numbers; doubles as numbers or "NaN"/"Infinity"/"-Infinity". */
static void
test_decode_json_numbers_and_strings(void **state)
{
    static const char body[] =
        SPAN_HEAD "{\"key\":\"i1\",\"value\":{\"intValue\":\"-9223372036854775808\"}},"
                  "{\"key\":\"i2\",\"value\":{\"intValue\":9223372036854775807}},"
                  "{\"key\":\"i3\",\"value\":{\"intValue\":12.9}},"
                  "{\"key\":\"i4\",\"value\":{\"intValue\":\"+5\"}},"
                  "{\"key\":\"d1\",\"value\":{\"doubleValue\":\"NaN\"}},"
                  "{\"key\":\"d2\",\"value\":{\"doubleValue\":\"Infinity\"}},"
                  "{\"key\":\"d3\",\"value\":{\"doubleValue\":\"-Infinity\"}},"
                  "{\"key\":\"d4\",\"value\":{\"doubleValue\":\"2.5e-3\"}},"
                  "{\"key\":\"d5\",\"value\":{\"doubleValue\":7}},"
                  "{\"key\":\"d6\",\"value\":{\"doubleValue\":-1.5E+2}}" SPAN_TAIL;
    static const char times[] =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":"
        "\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0101010101010101\","
        "\"startTimeUnixNano\":\"18446744073709551615\",\"endTimeUnixNano\":1.7e18,"
        "\"droppedAttributesCount\":\"4\",\"flags\":769}]}]}]}";
    static const char *const bad[] = {
        SPAN_HEAD "{\"key\":\"i\",\"value\":{\"intValue\":\"12x\"}}" SPAN_TAIL,
        SPAN_HEAD "{\"key\":\"i\",\"value\":{\"intValue\":\"9223372036854775808\"}}" SPAN_TAIL,
        SPAN_HEAD "{\"key\":\"d\",\"value\":{\"doubleValue\":\"nan!\"}}" SPAN_TAIL,
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"startTimeUnixNano\":"
        "\"18446744073709551616\"}]}]}]}",
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"startTimeUnixNano\":-1.5}]}]}]}",
        /* JSON numbers past int64 are malformed JSON, as jansson read them */
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"startTimeUnixNano\":"
        "18446744073709551615}]}]}]}",
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"startTimeUnixNano\":1e400}]}]}]}",
    };
    struct weft__otlp_batch batch;
    const struct weft_span_data *s = NULL;

    (void)state;
    assert_int_equal(attr_of(body, &batch, "i1")->u.i, INT64_MIN);
    s = batch.spans[0];
    assert_int_equal(weft_span_data_attr(s, "i2")->u.i, INT64_MAX);
    assert_int_equal(weft_span_data_attr(s, "i3")->u.i, 12);
    assert_int_equal(weft_span_data_attr(s, "i4")->u.i, 5);
    assert_true(isnan(weft_span_data_attr(s, "d1")->u.d));
    assert_true(isinf(weft_span_data_attr(s, "d2")->u.d) && weft_span_data_attr(s, "d2")->u.d > 0);
    assert_true(isinf(weft_span_data_attr(s, "d3")->u.d) && weft_span_data_attr(s, "d3")->u.d < 0);
    assert_true(weft_span_data_attr(s, "d4")->u.d == 2.5e-3);
    assert_int_equal(weft_span_data_attr(s, "d5")->type, WEFT_VALUE_DOUBLE);
    assert_true(weft_span_data_attr(s, "d5")->u.d == 7.0);
    assert_true(weft_span_data_attr(s, "d6")->u.d == -150.0);
    weft__otlp_batch_cleanup(&batch);
    assert_weft_ok(decode_json(times, &batch, NULL, 0));
    assert_int_equal(batch.spans[0]->start_time_ns, UINT64_MAX);
    assert_int_equal(batch.spans[0]->end_time_ns, 1700000000000000000ull);
    assert_int_equal(batch.spans[0]->dropped_attrs, 4);
    assert_int_equal(batch.spans[0]->trace_flags, 1);
    weft__otlp_batch_cleanup(&batch);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(decode_json(bad[i], &batch, NULL, 0), WEFT_EPARSE);
        weft__otlp_batch_cleanup(&batch);
    }
}

/* Escapes, surrogate pairs, U+0000 in names and keys, and text that is not JSON's. */
static void
test_decode_json_escapes_surrogates_and_nul(void **state)
{
    static const char body[] =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":"
        "\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0101010101010101\",\"n\\u0061me\":"
        "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u20AC\\ud83d\\ude00\\u0000!\","
        "\"events\":[{\"name\":\"\\u0000\"}],"
        "\"attributes\":[{\"key\":\"a\\u0000b\",\"value\":{\"intValue\":1}},"
        "{\"key\":\"\",\"value\":{\"intValue\":2}},{\"key\":\"k\"},"
        "{\"key\":\"s\",\"value\":{\"stringValue\":\"x\\u0000y\"}},"
        "{\"key\":\"raw\",\"value\":{\"stringValue\":\"caf\xc3\xa9 \xf0\x9f\x98\x80\"}}]}]}]}]}";
    static const char *const bad[] = {
        "{\"a\":\"\\ud800\"}",          /* a lone high surrogate */
        "{\"a\":\"\\udc00\"}",          /* a lone low surrogate */
        "{\"a\":\"\\ud800\\u0041\"}",   /* a high surrogate and no low one */
        "{\"a\":\"\\x\"}",              /* an unknown escape */
        "{\"a\":\"\\u12\"}",            /* a short \u */
        "{\"a\":\"tab\there\"}",        /* a raw control character */
        "{\"a\\u0000\":1}",             /* NUL in an object key */
        "{\"a\":\"\xc3\"}",             /* a cut UTF-8 sequence */
        "{\"a\":\"\xc0\x80\"}",         /* an overlong form */
        "{\"a\":\"\xed\xa0\x80\"}",     /* an encoded surrogate */
        "{\"a\":\"\xf4\x90\x80\x80\"}", /* past U+10FFFF */
        "\xef\xbb\xbf{}",               /* a byte order mark */
    };
    struct weft__otlp_batch batch;
    const struct weft_span_data *s = NULL;

    (void)state;
    assert_weft_ok(decode_json(body, &batch, NULL, 0));
    assert_int_equal(batch.count, 1);
    s = batch.spans[0];
    assert_string_equal(s->name, "\"\\/\b\f\n\r\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
                                 "\xef\xbf\xbd!");
    assert_string_equal(s->events[0].name, "\xef\xbf\xbd");
    assert_int_equal(batch.names_escaped, 2);
    assert_int_equal(s->attr_count, 2);
    assert_int_equal(s->dropped_attrs, 3); /* a NUL key, an empty key, no value */
    assert_int_equal(weft_span_data_attr(s, "s")->len, 3);
    assert_memory_equal(weft_span_data_attr(s, "s")->u.str, "x\0y", 4);
    assert_string_equal(weft_span_data_attr(s, "raw")->u.str, "caf\xc3\xa9 \xf0\x9f\x98\x80");
    weft__otlp_batch_cleanup(&batch);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(decode_json(bad[i], &batch, NULL, 0), WEFT_EPARSE);
        weft__otlp_batch_cleanup(&batch);
    }
}

/* A bad id rejects its span only; the others are kept. */
static void
test_decode_json_bad_id_rejects_only_its_span(void **state)
{
    static const char *const spans[][3] = {
        /* trace id, span id, parent span id (JSON values) */
        {"\"0102030405060708090A0B0C0D0E0F10\"", "\"0101010101010101\"", "\"\""},
        {"\"0102030405060708090a0b0c0d0e0f1g\"", "\"0101010101010101\"", "null"},
        {"\"0102030405060708090a0b0c0d0e0f10\"", "\"01010101\"", "null"},
        {"\"0102030405060708090a0b0c0d0e0f10\"", "42", "null"},
        {"\"0102030405060708090a0b0c0d0e0f10\"", "\"0202020202020202\"", "{\"not\":\"hex\"}"},
        {"\"00000000000000000000000000000000\"", "\"0303030303030303\"", "null"},
        {"\"0102030405060708090a0b0c0d0e0f10\"", "\"0404040404040404\"", "\"0101010101010101\""},
    };
    struct weft__otlp_batch batch;
    struct weft__buf body;

    (void)state;
    weft__buf_init(&body, 0);
    assert_weft_ok(
        weft__buf_append_str(&body, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":["));
    for (size_t i = 0; i < sizeof(spans) / sizeof(spans[0]); i++) {
        assert_weft_ok(weft__buf_printf(&body,
                                        "%s{\"traceId\":%s,\"spanId\":%s,\"parentSpanId\":%s,"
                                        "\"name\":\"x\"}",
                                        i > 0 ? "," : "", spans[i][0], spans[i][1], spans[i][2]));
    }
    assert_weft_ok(weft__buf_append_str(&body, "]}]}]}"));
    assert_weft_ok(decode_json(body.data, &batch, NULL, 0));
    assert_int_equal(batch.count, 2);
    assert_int_equal(batch.rejected, 5);
    assert_int_equal(batch.spans[0]->trace_id[10], 0x0b); /* upper case hex */
    assert_false(batch.spans[0]->has_parent);
    assert_true(batch.spans[1]->has_parent);
    assert_non_null(strstr(batch.reject_reason, "trace id"));
    weft__otlp_batch_cleanup(&batch);
    weft__buf_cleanup(&body);
}

/* A known member of the wrong JSON type makes the request malformed, and says which. */
static void
test_decode_json_wrong_types_name_the_member(void **state)
{
    static const struct {
        const char *body;
        const char *what;
    } cases[] = {
        {"{\"resourceSpans\":{}}", "resourceSpans is not an array"},
        {"{\"resourceSpans\":[5]}", "resourceSpans entry is not an object"},
        {"{\"resourceSpans\":[{\"resource\":[]}]}", "resource is not an object"},
        {"{\"resourceSpans\":[{\"scopeSpans\":\"x\"}]}", "scopeSpans is not an array"},
        {"{\"resource_spans\":[{\"scope_spans\":{}}]}", "scopeSpans is not an array"},
        {"{\"resourceSpans\":[{\"schemaUrl\":1}]}", "schemaUrl"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"scope\":true}]}]}", "scope is not an object"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"scope\":{\"name\":1}}]}]}", "scope name"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":{}}]}]}", "spans is not an array"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[[]]}]}]}", "span is not an object"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"name\":{}}]}]}]}", "name"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"startTimeUnixNano\":true}]}]}]}",
         "startTimeUnixNano"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"flags\":\"x\"}]}]}]}", "flags"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"attributes\":{}}]}]}]}",
         "attributes is not an array"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"attributes\":[{\"key\":1}]}]}]}]}",
         "attribute is not a {key, value} object"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"attributes\":[{\"key\":\"k\","
         "\"value\":[]}]}]}]}]}",
         "AnyValue is not an object"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"attributes\":[{\"key\":\"k\","
         "\"value\":{\"boolValue\":\"yes\"}}]}]}]}]}",
         "boolValue"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"attributes\":[{\"key\":\"k\","
         "\"value\":{\"arrayValue\":{\"values\":7}}}]}]}]}]}",
         "values is not an array"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"attributes\":[{\"key\":\"k\","
         "\"value\":{\"kvlistValue\":[]}}]}]}]}]}",
         "arrayValue or kvlistValue is not an object"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"events\":{}}]}]}]}",
         "events is not an array"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"events\":[1]}]}]}]}",
         "event is not an object"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"events\":[{\"name\":2}]}]}]}]}",
         "event name"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"links\":[null]}]}]}]}",
         "link is not an object"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"links\":[{\"traceState\":[]}]}]}]}]}",
         "traceState"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"status\":\"OK\"}]}]}]}",
         "status is not an object"},
        {"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"status\":{\"message\":1}}]}]}]}",
         "status message"},
        {"[]", "not a JSON object"},
    };
    struct weft__otlp_batch batch;
    char why[192];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(decode_json(cases[i].body, &batch, why, sizeof(why)), WEFT_EPARSE);
        if (strstr(why, cases[i].what) == NULL) {
            fail_msg("%s: \"%s\" does not name \"%s\"", cases[i].body, why, cases[i].what);
        }
        weft__otlp_batch_cleanup(&batch);
    }
}

/* Unknown members hold anything, nested as deep as jansson allowed (2048); deeper is
 * malformed, without recursion on the input's depth. */
static void
test_decode_json_deep_unknown_members_are_bounded(void **state)
{
    static const size_t depths[] = {2046, 2047, 100000};
    struct weft__otlp_batch batch;

    (void)state;
    for (size_t k = 0; k < sizeof(depths) / sizeof(depths[0]); k++) {
        struct weft__buf body;
        size_t n = depths[k];

        weft__buf_init(&body, 0);
        assert_weft_ok(weft__buf_append_str(&body, "{\"x\":"));
        for (size_t i = 0; i < n; i++) {
            assert_weft_ok(weft__buf_append_str(&body, i % 2 == 0 ? "[" : "{\"k\":"));
        }
        assert_weft_ok(weft__buf_append_str(&body, "null"));
        for (size_t i = n; i > 0; i--) {
            assert_weft_ok(weft__buf_append_str(&body, (i - 1) % 2 == 0 ? "]" : "}"));
        }
        assert_weft_ok(weft__buf_append_str(&body, ",\"resourceSpans\":[]}"));
        weft__otlp_batch_init(&batch, CAP);
        /* The request object is depth 1: 2047 more are allowed. */
        assert_int_equal(weft__otlp_decode_json(body.data, body.len, &batch, NULL, 0),
                         n <= 2047 ? WEFT_OK : WEFT_EPARSE);
        weft__otlp_batch_cleanup(&batch);
        weft__buf_cleanup(&body);
    }
}

/* Attribute values nest at most WEFT__OTLP_MAX_VALUE_DEPTH deep. */
static void
test_decode_json_deep_values_are_refused(void **state)
{
    struct weft__otlp_batch batch;
    char why[160];

    (void)state;
    for (int n = 30; n <= 34; n++) {
        struct weft__buf body;

        weft__buf_init(&body, 0);
        assert_weft_ok(weft__buf_append_str(&body, SPAN_HEAD "{\"key\":\"k\",\"value\":"));
        for (int i = 0; i < n; i++) {
            assert_weft_ok(weft__buf_append_str(&body, "{\"kvlistValue\":{\"values\":[{"
                                                       "\"key\":\"a\",\"value\":"));
        }
        assert_weft_ok(weft__buf_append_str(&body, "{\"intValue\":1}"));
        for (int i = 0; i < n; i++) {
            assert_weft_ok(weft__buf_append_str(&body, "}]}}"));
        }
        assert_weft_ok(weft__buf_append_str(&body, "}" SPAN_TAIL));
        weft__otlp_batch_init(&batch, CAP);
        if (n <= WEFT__OTLP_MAX_VALUE_DEPTH) {
            assert_weft_ok(weft__otlp_decode_json(body.data, body.len, &batch, why, sizeof(why)));
        } else {
            assert_int_equal(weft__otlp_decode_json(body.data, body.len, &batch, why, sizeof(why)),
                             WEFT_EPARSE);
            assert_non_null(strstr(why, "nested too deeply"));
        }
        weft__otlp_batch_cleanup(&batch);
        weft__buf_cleanup(&body);
    }
}

static const char sample[] =
    "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{"
    "\"stringValue\":\"svc\"}}],\"droppedAttributesCount\":1},\"scopeSpans\":[{\"scope\":{"
    "\"name\":\"s\",\"version\":\"1\"},\"spans\":[{\"traceId\":"
    "\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0101010101010101\",\"parentSpanId\":"
    "\"0202020202020202\",\"name\":\"n\\u00e9\",\"kind\":2,\"startTimeUnixNano\":\"1\","
    "\"endTimeUnixNano\":\"2\",\"attributes\":[{\"key\":\"a\",\"value\":{\"arrayValue\":{"
    "\"values\":[{\"intValue\":\"1\"},{\"intValue\":2}]}}},{\"key\":\"m\",\"value\":{"
    "\"kvlistValue\":{\"values\":[{\"key\":\"x\",\"value\":{\"doubleValue\":1.5}}]}}},{\"key\":"
    "\"t\",\"value\":{\"boolValue\":true}}],\"events\":[{\"timeUnixNano\":\"3\",\"name\":\"e\","
    "\"attributes\":[]}],\"links\":[{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\","
    "\"spanId\":\"0303030303030303\",\"flags\":768}],\"status\":{\"code\":2,\"message\":\"m\"},"
    "\"unknown\":{\"deep\":[1,2.5,\"x\",null,true,false,{}]}}]}]}]}";

/* Every proper prefix of a valid body is malformed, and decodes nothing usable. */
static void
test_decode_json_truncated_at_every_offset(void **state)
{
    struct weft__otlp_batch batch;
    size_t len = strlen(sample);

    (void)state;
    assert_weft_ok(decode_json(sample, &batch, NULL, 0));
    weft__otlp_batch_cleanup(&batch);
    for (size_t cut = 0; cut < len; cut++) {
        char *copy = malloc(cut + 1); /* exactly the bytes: ASan sees any read past them */

        assert_non_null(copy);
        memcpy(copy, sample, cut);
        weft__otlp_batch_init(&batch, CAP);
        assert_int_equal(weft__otlp_decode_json(copy, cut, &batch, NULL, 0), WEFT_EPARSE);
        weft__otlp_batch_cleanup(&batch);
        free(copy);
    }
}

/* Whitespace between any two tokens, and after the body, changes nothing. */
static void
test_decode_json_whitespace_everywhere(void **state)
{
    static const char ws[] = " \t\r\n";
    struct weft__otlp_batch a;
    struct weft__otlp_batch b;
    struct weft__buf spaced;
    bool is_in_string = false;

    (void)state;
    weft__buf_init(&spaced, 0);
    for (const char *p = sample; *p != '\0'; p++) {
        bool is_token_edge = !is_in_string && strchr("{}[],:", *p) != NULL;

        if (is_token_edge) {
            assert_weft_ok(weft__buf_append(&spaced, ws, 4));
        }
        assert_weft_ok(weft__buf_append(&spaced, p, 1));
        if (is_token_edge) {
            assert_weft_ok(weft__buf_append(&spaced, ws, 4));
        }
        if (*p == '"' && p[-1] != '\\') {
            is_in_string = !is_in_string;
        }
    }
    assert_weft_ok(decode_json(sample, &a, NULL, 0));
    weft__otlp_batch_init(&b, CAP);
    assert_weft_ok(weft__otlp_decode_json(spaced.data, spaced.len, &b, NULL, 0));
    assert_same_batch(&a, &b);
    assert_string_equal(weft_span_data_attr(b.spans[0], "m")->u.str, "{\"x\":1.5}");
    weft__otlp_batch_cleanup(&a);
    weft__otlp_batch_cleanup(&b);
    weft__buf_cleanup(&spaced);
}

/* jansson's JSON_REJECT_DUPLICATES: a key twice in any object is malformed, known or not, in
 * any spelling; trailing bytes after the body are malformed. */
static void
test_decode_json_duplicates_and_trailing_bytes(void **state)
{
    static const char *const bad[] = {
        "{\"resourceSpans\":[],\"resourceSpans\":[]}",
        "{\"resourceSpans\":[],\"resource\\u0053pans\":[]}",
        "{\"x\":1,\"y\":{\"a\":1,\"a\":2}}",
        "{\"x\":1,\"x\":1}",
        "{\"resourceSpans\":[]} x",
        "{\"resourceSpans\":[]}{}",
        "{\"resourceSpans\":[],}",
        "",
        "   ",
        "5",
    };
    static const char good[] = " {\"resourceSpans\":[],\"resource_spans\":[],\"x\":{\"a\":1,"
                               "\"b\":{\"a\":1}},\"y\":{\"a\":2}} \n";
    struct weft__otlp_batch batch;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(decode_json(bad[i], &batch, NULL, 0), WEFT_EPARSE);
        weft__otlp_batch_cleanup(&batch);
    }
    assert_weft_ok(decode_json(good, &batch, NULL, 0));
    weft__otlp_batch_cleanup(&batch);
}

/* How kvlist values are written: a repeated key keeps its first place and its last value; a
 * key is cut at a NUL; an entry that is not an object, or without a value, is "":null. */
static void
test_decode_json_kvlist_text(void **state)
{
    static const char body[] =
        SPAN_HEAD "{\"key\":\"m\",\"value\":{\"kvlistValue\":{\"values\":["
                  "{\"key\":\"a\",\"value\":{\"intValue\":1}},"
                  "{\"value\":{\"stringValue\":\"\\u001f\\u007f/\"},\"key\":\"b\"},"
                  "{\"key\":\"a\",\"value\":{\"intValue\":3}},"
                  "{\"key\":\"c\\u0000d\",\"value\":{\"boolValue\":false}},"
                  "{\"key\":\"c\"},7,"
                  "{\"key\":\"e\",\"value\":{\"doubleValue\":100}}]}}}" SPAN_TAIL;
    struct weft__otlp_batch batch;

    (void)state;
    assert_string_equal(attr_of(body, &batch, "m")->u.str,
                        "{\"a\":3,\"b\":\"\\u001F\x7f/\",\"c\":null,\"\":null,\"e\":100.0}");
    weft__otlp_batch_cleanup(&batch);
}

/* The AnyValue oneof, as the previous decoder resolved it: by precedence, not by position. */
static void
test_decode_json_anyvalue_precedence(void **state)
{
    static const char body[] = SPAN_HEAD
        "{\"key\":\"s\",\"value\":{\"boolValue\":\"not checked\",\"stringValue\":\"a\"}},"
        "{\"key\":\"b\",\"value\":{\"kvlistValue\":{\"values\":[]},\"bytesValue\":\"AA==\"}},"
        "{\"key\":\"e\",\"value\":{\"arrayValue\":\"not an object\"}},"
        "{\"key\":\"n\",\"value\":{\"kvlistValue\":{\"values\":[{\"key\":\"k\",\"value\":"
        "{\"kvlistValue\":{\"values\":[]},\"bytesValue\":\"AA==\"}}]}}},"
        "{\"key\":\"z\",\"value\":{\"stringValue\":null,\"intValue\":\"4\"}}" SPAN_TAIL;
    struct weft__otlp_batch batch;
    const struct weft_span_data *s = NULL;

    (void)state;
    assert_string_equal(attr_of(body, &batch, "s")->u.str, "a");
    s = batch.spans[0];
    /* bytes before kvlist at the top, kvlist before bytes when nested */
    assert_string_equal(weft_span_data_attr(s, "b")->u.str, "AA==");
    assert_string_equal(weft_span_data_attr(s, "n")->u.str, "{\"k\":{}}");
    assert_int_equal(weft_span_data_attr(s, "e")->type, WEFT_VALUE_STRING_ARRAY);
    assert_int_equal(weft_span_data_attr(s, "e")->len, 0);
    assert_int_equal(weft_span_data_attr(s, "z")->u.i, 4);
    weft__otlp_batch_cleanup(&batch);
}

/* Past the cap the request is refused with WEFT_ELIMIT (413), as before. */
static void
test_decode_json_cap_is_elimit(void **state)
{
    struct weft__otlp_batch batch;
    char why[160];

    (void)state;
    weft__otlp_batch_init(&batch, 64 * 1024);
    assert_int_equal(weft__otlp_decode_json(sample, strlen(sample), &batch, why, sizeof(why)),
                     WEFT_OK);
    weft__otlp_batch_cleanup(&batch);
    /* The arena takes 16 KiB blocks: any cap below one refuses the request. */
    for (size_t cap = 0; cap < 16 * 1024; cap += 1000) {
        weft__otlp_batch_init(&batch, cap);
        assert_int_equal(weft__otlp_decode_json(sample, strlen(sample), &batch, why, sizeof(why)),
                         WEFT_ELIMIT);
        assert_non_null(strstr(why, "would exceed"));
        weft__otlp_batch_cleanup(&batch);
    }
}

/* Every allocation may fail: the decoder fails cleanly with WEFT_ENOMEM (ASan: no leak). */
static void
test_decode_json_out_of_memory(void **state)
{
    struct weft__otlp_batch batch;
    weft_err err = WEFT_OK;

    (void)state;
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0;; budget++) {
        failalloc_budget = budget;
        weft__otlp_batch_init(&batch, CAP);
        err = weft__otlp_decode_json(sample, strlen(sample), &batch, NULL, 0);
        weft__otlp_batch_cleanup(&batch);
        if (err == WEFT_OK) {
            break;
        }
        assert_int_equal(err, WEFT_ENOMEM);
    }
    failalloc_budget = -1;
    weft_set_allocator(NULL, NULL, NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_json_equals_protobuf_for_generated_spans),
        cmocka_unit_test(test_decode_json_equals_protobuf_for_kvlist_bytes_and_mixed_arrays),
        cmocka_unit_test(test_decode_json_proto_names_and_precedence),
        cmocka_unit_test(test_decode_json_enums_as_names_or_integers),
        cmocka_unit_test(test_decode_json_numbers_and_strings),
        cmocka_unit_test(test_decode_json_escapes_surrogates_and_nul),
        cmocka_unit_test(test_decode_json_bad_id_rejects_only_its_span),
        cmocka_unit_test(test_decode_json_wrong_types_name_the_member),
        cmocka_unit_test(test_decode_json_deep_unknown_members_are_bounded),
        cmocka_unit_test(test_decode_json_deep_values_are_refused),
        cmocka_unit_test(test_decode_json_truncated_at_every_offset),
        cmocka_unit_test(test_decode_json_whitespace_everywhere),
        cmocka_unit_test(test_decode_json_duplicates_and_trailing_bytes),
        cmocka_unit_test(test_decode_json_kvlist_text),
        cmocka_unit_test(test_decode_json_anyvalue_precedence),
        cmocka_unit_test(test_decode_json_cap_is_elimit),
        cmocka_unit_test(test_decode_json_out_of_memory),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
