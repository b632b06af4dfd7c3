/* tests/exporters/test_store_json.c - the span store's JSON columns (exporters/store_json.c)
 * are written byte for byte as they were when jansson built and dumped them.
 *
 * store_json.c writes the attributes, events and links columns with a small hand-written
 * writer because building a jansson tree per span cost about 40% of OTLP ingest (issue 17,
 * bench/ingest_bench.c). Readers and users' SQL (json_extract) rely on the exact bytes, so
 * this file keeps the jansson code the store used before, unchanged apart from its names, as
 * the reference, and compares the two on hand-picked edge cases and on thousands of random
 * spans: every value kind, control characters, invalid UTF-8, non-finite and extreme doubles,
 * empty arrays, repeated keys (also ones that only collide once invalid bytes are replaced),
 * events and links with every optional member. A few committed strings pin the format itself,
 * in case a jansson upgrade changes the reference.
 */
#include "support/weft_test.h"

#include "base/buf.h"
#include "base/utf8.h"
#include "store/store.h"
#include "tracing/ids.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the reference: store_json.c's writer before issue 17 -------------------------------- */

static const char *const ref_type_names[] = {
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
ref_text(const char *s, size_t len)
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
ref_set(json_t *obj, const char *key, json_t *value)
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
ref_double_json(double d)
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
ref_tagged(weft_value_type type, json_t *value)
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
    if (json_object_set_new(obj, "type", json_string(ref_type_names[type])) != 0 ||
        json_object_set_new(obj, "value", value) != 0) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

static json_t *
ref_value_json(const struct weft_value *v)
{
    json_t *arr = NULL;
    bool needs_tag = false;

    switch (v->type) {
    case WEFT_VALUE_STRING:
        return ref_text(v->u.str, v->len);
    case WEFT_VALUE_BOOL:
        return json_boolean(v->u.b);
    case WEFT_VALUE_INT:
        return json_integer((json_int_t)v->u.i);
    case WEFT_VALUE_DOUBLE:
        if (isfinite(v->u.d)) {
            return json_real(v->u.d);
        }
        return ref_tagged(v->type, ref_double_json(v->u.d));
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
            item = ref_text(v->u.strs[i], strlen(v->u.strs[i]));
            break;
        case WEFT_VALUE_BOOL_ARRAY:
            item = json_boolean(v->u.bools[i]);
            break;
        case WEFT_VALUE_INT_ARRAY:
            item = json_integer((json_int_t)v->u.ints[i]);
            break;
        default:
            needs_tag = needs_tag || !isfinite(v->u.doubles[i]);
            item = ref_double_json(v->u.doubles[i]);
            break;
        }
        if (item == NULL || json_array_append_new(arr, item) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return needs_tag ? ref_tagged(v->type, arr) : arr;
}

static json_t *
ref_attrs_json(const struct weft_attr *attrs, size_t count)
{
    json_t *obj = json_object();

    if (obj == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < count; i++) {
        if (attrs[i].key == NULL ||
            ref_set(obj, attrs[i].key, ref_value_json(&attrs[i].value)) != 0) {
            json_decref(obj);
            return NULL;
        }
    }
    return obj;
}

static json_t *
ref_events_json(const struct weft_span_data *span)
{
    json_t *arr = json_array();

    if (arr == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < span->event_count; i++) {
        const struct weft_event_data *ev = &span->events[i];
        json_t *obj = json_object();

        if (obj == NULL || json_array_append_new(arr, obj) != 0 ||
            ref_set(obj, "name", ref_text(ev->name, ev->name != NULL ? strlen(ev->name) : 0)) !=
                0 ||
            ref_set(obj, "time_ns", json_integer((json_int_t)ev->time_ns)) != 0 ||
            ref_set(obj, "attributes", ref_attrs_json(ev->attrs, ev->attr_count)) != 0 ||
            (ev->dropped_attrs != 0 &&
             ref_set(obj, "dropped_attributes_count", json_integer(ev->dropped_attrs)) != 0)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static json_t *
ref_links_json(const struct weft_span_data *span)
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
            ref_set(obj, "trace_id", json_string(trace_hex)) != 0 ||
            ref_set(obj, "span_id", json_string(span_hex)) != 0 ||
            (link->trace_state != NULL &&
             ref_set(obj, "trace_state", ref_text(link->trace_state, strlen(link->trace_state))) !=
                 0) ||
            ref_set(obj, "flags", json_integer(link->trace_flags)) != 0 ||
            ref_set(obj, "is_remote", json_boolean(link->is_remote)) != 0 ||
            ref_set(obj, "attributes", ref_attrs_json(link->attrs, link->attr_count)) != 0 ||
            (link->dropped_attrs != 0 &&
             ref_set(obj, "dropped_attributes_count", json_integer(link->dropped_attrs)) != 0)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static int
ref_dump_to_buf(const char *data, size_t size, void *user_data)
{
    return weft__buf_append(user_data, data, size) == WEFT_OK ? 0 : -1;
}

/* Serialise @p j (consumed) into @p out. */
static weft_err
ref_dump_json(json_t *j, struct weft__buf *out)
{
    int rc = 0;

    weft__buf_reset(out);
    if (j == NULL) {
        return WEFT_ENOMEM;
    }
    rc = json_dump_callback(j, ref_dump_to_buf, out, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(j);
    if (rc != 0) {
        return WEFT_ENOMEM;
    }
    return weft__buf_reserve(out, 0);
}

/* ---- comparing --------------------------------------------------------------------------- */

static void
expect_equal(const char *column,
             weft_err err,
             weft_err ref_err,
             struct weft__buf *got,
             struct weft__buf *want)
{
    if (err != ref_err) {
        fail_msg("%s: writer returned %d, jansson path %d", column, (int)err, (int)ref_err);
    }
    if (err != WEFT_OK) {
        return;
    }
    if (got->len != want->len || memcmp(got->data, want->data, got->len) != 0) {
        fail_msg("%s differs:\n  writer:  %s\n  jansson: %s", column, got->data, want->data);
    }
}

/* Write @p span's three columns both ways (into buffers capped at @p max, 0 for none) and
 * compare results and bytes. */
static void
expect_same_capped(const struct weft_span_data *span, size_t max)
{
    struct weft__buf got;
    struct weft__buf want;
    weft_err err = WEFT_OK;
    weft_err ref_err = WEFT_OK;

    weft__buf_init(&got, max);
    weft__buf_init(&want, max);
    err = weft__store_attrs_text(span->attrs, span->attr_count, NULL, &got);
    ref_err = ref_dump_json(ref_attrs_json(span->attrs, span->attr_count), &want);
    expect_equal("attributes", err, ref_err, &got, &want);
    err = weft__store_events_text(span, &got);
    ref_err = ref_dump_json(ref_events_json(span), &want);
    expect_equal("events", err, ref_err, &got, &want);
    err = weft__store_links_text(span, &got);
    ref_err = ref_dump_json(ref_links_json(span), &want);
    expect_equal("links", err, ref_err, &got, &want);
    weft__buf_cleanup(&got);
    weft__buf_cleanup(&want);
}

static void
expect_same(const struct weft_span_data *span)
{
    expect_same_capped(span, 0);
}

static void
expect_attrs_text(const struct weft_attr *attrs, size_t n, const char *text)
{
    struct weft__buf got;

    weft__buf_init(&got, 0);
    assert_weft_ok(weft__store_attrs_text(attrs, n, NULL, &got));
    assert_string_equal(got.data, text);
    weft__buf_cleanup(&got);
}

static struct weft_attr
attr_value(const char *key, weft_value_type type, size_t len, const void *items)
{
    struct weft_attr a;

    memset(&a, 0, sizeof(a));
    a.key = key;
    a.value.type = type;
    a.value.len = len;
    a.value.u.strs = items; /* the union's array members share one representation */
    return a;
}

/* ---- hand-picked cases ------------------------------------------------------------------- */

static const char *const tricky_texts[] = {
    "",
    "plain ascii",
    "quote \" backslash \\ slash / done",
    "\b\f\n\r\t",
    "\x01\x02\x03\x04\x05\x06\x07\x0b\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a"
    "\x1b\x1c\x1d\x1e\x1f\x7f",
    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbd",
    "lone continuation \x80 and \xbf",
    "overlong \xc0\x80 \xc1\xbf \xe0\x80\x80 \xf0\x80\x80\x80",
    "surrogate \xed\xa0\x80 \xed\xbf\xbf",
    "past U+10FFFF \xf4\x90\x80\x80 \xf5\x80 \xff\xfe",
    "truncated \xe2\x82",
    "truncated at the end \xf0\x9f\x98",
    "\xe2\x82\xe2\x82\xac\xc3",
};

static const double tricky_doubles[] = {
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.1,
    0.5,
    1.5,
    100.0,
    1e15,
    1e16,
    1e17,
    1e21,
    1e22,
    1e-5,
    1e-7,
    123.456,
    1e300,
    1e-300,
    5e-324,
    DBL_MAX,
    -DBL_MAX,
    DBL_MIN,
    2.5e-308,
    0.00123,
    1.0 / 3,
    2.0 / 3,
    9007199254740993.0,
    123456789012345678.0,
    4.35,
    0.30000000000000004,
};

static void
test_store_json_every_text_escape_and_repair_matches_jansson(void **state)
{
    size_t n = sizeof(tricky_texts) / sizeof(tricky_texts[0]);
    struct weft_attr attrs[32];
    struct weft_span_data span;
    char nul_text[] = "before\0after\0";

    (void)state;
    memset(&span, 0, sizeof(span));
    for (size_t i = 0; i < n; i++) {
        attrs[i] =
            weft_attr_str(tricky_texts[i][0] != '\0' ? tricky_texts[i] : "empty", tricky_texts[i]);
    }
    /* NUL bytes inside a string value with a length. */
    attrs[n] = weft_attr_strn("nul", nul_text, sizeof(nul_text) - 1);
    attrs[n + 1] = attr_value("strings", WEFT_VALUE_STRING_ARRAY, n, tricky_texts);
    span.attrs = attrs;
    span.attr_count = n + 2;
    expect_same(&span);
    /* Every byte value alone, as a value and inside a key. */
    for (unsigned c = 1; c < 256; c++) {
        char text[4] = {'k', (char)c, 'v', '\0'};
        struct weft_attr one = weft_attr_str(text, text);

        span.attrs = &one;
        span.attr_count = 1;
        expect_same(&span);
    }
}

static void
test_store_json_every_number_kind_matches_jansson(void **state)
{
    size_t n = sizeof(tricky_doubles) / sizeof(tricky_doubles[0]);
    static const int64_t ints[] = {0, 1, -1, 42, INT64_MAX, INT64_MIN, INT64_MIN + 1, 1000000};
    static const bool bools[] = {true, false, true};
    double with_nan[] = {1.5, NAN, -INFINITY, INFINITY};
    struct weft_attr attrs[64];
    struct weft_span_data span;
    size_t k = 0;

    (void)state;
    memset(&span, 0, sizeof(span));
    for (size_t i = 0; i < n; i++) {
        attrs[k++] = weft_attr_double("d", tricky_doubles[i]); /* repeated key: last wins */
        span.attrs = &attrs[k - 1];
        span.attr_count = 1;
        expect_same(&span);
    }
    attrs[k++] = weft_attr_double("nan", NAN);
    attrs[k++] = weft_attr_double("inf", INFINITY);
    attrs[k++] = weft_attr_double("-inf", -INFINITY);
    attrs[k++] = weft_attr_int("max", INT64_MAX);
    attrs[k++] = weft_attr_int("min", INT64_MIN);
    attrs[k++] = weft_attr_bool("t", true);
    attrs[k++] = weft_attr_bool("f", false);
    attrs[k++] = attr_value("doubles", WEFT_VALUE_DOUBLE_ARRAY, n, tricky_doubles);
    attrs[k++] = attr_value("doubles_nan", WEFT_VALUE_DOUBLE_ARRAY, 4, with_nan);
    attrs[k++] = attr_value("ints", WEFT_VALUE_INT_ARRAY, sizeof(ints) / sizeof(ints[0]), ints);
    attrs[k++] = attr_value("bools", WEFT_VALUE_BOOL_ARRAY, 3, bools);
    for (int t = WEFT_VALUE_STRING_ARRAY; t <= WEFT_VALUE_DOUBLE_ARRAY; t++) {
        attrs[k++] = attr_value("empty", (weft_value_type)t, 0, NULL);
        attrs[k++] = attr_value(t == WEFT_VALUE_STRING_ARRAY ? "e_s"
                                : t == WEFT_VALUE_BOOL_ARRAY ? "e_b"
                                : t == WEFT_VALUE_INT_ARRAY  ? "e_i"
                                                             : "e_d",
                                (weft_value_type)t, 0, NULL);
    }
    attrs[k++] = attr_value("unknown type", (weft_value_type)99, 0, NULL);
    span.attrs = attrs;
    span.attr_count = k;
    expect_same(&span);
}

static void
test_store_json_events_and_links_match_jansson(void **state)
{
    struct weft_attr ev_attrs[] = {weft_attr_str("k", "v"), weft_attr_int("n", 3),
                                   weft_attr_str("k", "again")};
    struct weft_event_data events[] = {
        {1700000000000000000ull, "weft.retry", ev_attrs, 3, 0},
        {UINT64_MAX, NULL, NULL, 0, 7}, /* no name, a time past INT64_MAX */
        {0, "bad \xff name \"q\"\n", ev_attrs, 1, 0},
    };
    struct weft_link_data links[3];
    struct weft_span_data span;

    (void)state;
    memset(&span, 0, sizeof(span));
    memset(links, 0, sizeof(links));
    for (size_t i = 0; i < 3; i++) {
        memset(links[i].trace_id, 0xa0 + (int)i, WEFT_TRACE_ID_SIZE);
        memset(links[i].span_id, 0x0b + (int)i, WEFT_SPAN_ID_SIZE);
    }
    links[0].trace_state = "vendor=a,other=b";
    links[0].trace_flags = 1;
    links[0].is_remote = true;
    links[0].attrs = ev_attrs;
    links[0].attr_count = 2;
    links[0].dropped_attrs = 4;
    links[1].trace_flags = 255;
    links[2].trace_state = "bad \xc0 state";
    links[2].attrs = ev_attrs;
    links[2].attr_count = 3;
    span.events = events;
    span.event_count = 3;
    span.links = links;
    span.link_count = 3;
    expect_same(&span);
    span.event_count = 0;
    span.link_count = 0;
    expect_same(&span);
}

static void
test_store_json_repeated_keys_keep_first_place_and_last_value(void **state)
{
    struct weft_attr attrs[] = {
        weft_attr_str("a", "1"),     weft_attr_int("b", 2),
        weft_attr_str("a", "3"),     weft_attr_str("x\xff", "4"),
        weft_attr_str("x\xfe", "5"), weft_attr_str("x\xef\xbf\xbd", "6"),
        weft_attr_str("y\xc3", "7"), weft_attr_str("y\xe2\x82", "8"),
    };
    struct weft_span_data span;

    (void)state;
    memset(&span, 0, sizeof(span));
    span.attrs = attrs;
    span.attr_count = sizeof(attrs) / sizeof(attrs[0]);
    expect_same(&span);
    /* Two invalid bytes and U+FFFD itself are one key once written; so are two different
     * truncated sequences. */
    expect_attrs_text(attrs, span.attr_count,
                      "{\"a\":\"3\",\"b\":2,\"x\xef\xbf\xbd\":\"6\",\"y\xef\xbf\xbd\":\"8\"}");
}

static void
test_store_json_many_attributes_use_the_heap_table(void **state)
{
    static char keys[300][16];
    static struct weft_attr attrs[300];
    struct weft_span_data span;

    (void)state;
    memset(&span, 0, sizeof(span));
    for (size_t i = 0; i < 300; i++) {
        snprintf(keys[i], sizeof(keys[i]), "key.%zu", i % 170); /* 130 repeats */
        attrs[i] = weft_attr_int(keys[i], (int64_t)i);
    }
    span.attrs = attrs;
    span.attr_count = 300;
    expect_same(&span);
}

static void
test_store_json_format_is_pinned(void **state)
{
    static const char *const strs[] = {"a", "b\"c"};
    static const double doubles[] = {0.5, 1e21, 1e-7};
    struct weft_attr attrs[] = {
        weft_attr_str("s", "t\n\x01\xff"),
        weft_attr_bool("b", true),
        weft_attr_int("i", -42),
        weft_attr_double("d", 100.0),
        weft_attr_double("pi", 3.14159),
        weft_attr_double("nan", NAN),
        attr_value("sa", WEFT_VALUE_STRING_ARRAY, 2, strs),
        attr_value("da", WEFT_VALUE_DOUBLE_ARRAY, 3, doubles),
        attr_value("empty", WEFT_VALUE_INT_ARRAY, 0, NULL),
    };
    struct weft_event_data ev = {5, "e", attrs + 1, 1, 2};
    struct weft_link_data link;
    struct weft_span_data span;
    struct weft__buf got;

    (void)state;
    expect_attrs_text(attrs, sizeof(attrs) / sizeof(attrs[0]),
                      "{\"s\":\"t\\n\\u0001\xef\xbf\xbd\",\"b\":true,\"i\":-42,\"d\":100.0,"
                      "\"pi\":3.1415899999999999,\"nan\":{\"type\":\"double\",\"value\":\"NaN\"},"
                      "\"sa\":[\"a\",\"b\\\"c\"],\"da\":[0.5,1e21,9.9999999999999995e-8],"
                      "\"empty\":{\"type\":\"int_array\",\"value\":[]}}");
    memset(&span, 0, sizeof(span));
    memset(&link, 0, sizeof(link));
    link.trace_id[15] = 1;
    link.span_id[7] = 2;
    link.trace_state = "k=v";
    link.trace_flags = 1;
    span.events = &ev;
    span.event_count = 1;
    span.links = &link;
    span.link_count = 1;
    weft__buf_init(&got, 0);
    assert_weft_ok(weft__store_events_text(&span, &got));
    assert_string_equal(got.data, "[{\"name\":\"e\",\"time_ns\":5,\"attributes\":{\"b\":true},"
                                  "\"dropped_attributes_count\":2}]");
    assert_weft_ok(weft__store_links_text(&span, &got));
    assert_string_equal(got.data, "[{\"trace_id\":\"00000000000000000000000000000001\","
                                  "\"span_id\":\"0000000000000002\",\"trace_state\":\"k=v\","
                                  "\"flags\":1,\"is_remote\":false,\"attributes\":{}}]");
    weft__buf_cleanup(&got);
}

static void
test_store_json_null_key_and_cap_fail_as_before(void **state)
{
    struct weft_attr attrs[] = {weft_attr_str("a", "1"), weft_attr_str("b", "2")};
    struct weft_span_data span;

    (void)state;
    memset(&span, 0, sizeof(span));
    attrs[1].key = NULL;
    span.attrs = attrs;
    span.attr_count = 2;
    expect_same(&span); /* both fail with WEFT_ENOMEM */
    attrs[1].key = "b";
    for (size_t max = 1; max < 20; max++) {
        expect_same_capped(&span, max); /* past the cap: WEFT_ENOMEM both ways */
    }
}

/* ---- random spans ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t
rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static size_t
pick(size_t n)
{
    return (size_t)(rng() % n);
}

/* Storage for one random span, reset before each. */
static char text_pool[1 << 16];
static size_t text_used;

/* Random text of up to @p max pieces; @p allow_nul lets NUL bytes in (string values carry a
 * length). */
static const char *
random_text(size_t max, bool allow_nul, size_t *len)
{
    static const char *const pieces[] = {
        "a",
        "Z",
        "0",
        " ",
        "key",
        ".",
        "\"",
        "\\",
        "/",
        "\n",
        "\t",
        "\x01",
        "\x1f",
        "\x7f",
        "\xc3\xa9",
        "\xe2\x82\xac",
        "\xf0\x9f\x98\x80",
        "\xef\xbf\xbd",
        "\x80",
        "\xff",
        "\xc0\x80",
        "\xed\xa0\x80",
        "\xe2\x82",
        "\xf4\x90\x80\x80",
        "\xf0\x9f",
        "\xc3",
    };
    size_t n = pick(max + 1);
    char *start = text_pool + text_used;
    size_t at = 0;

    for (size_t i = 0; i < n; i++) {
        const char *p = pieces[pick(sizeof(pieces) / sizeof(pieces[0]))];

        if (allow_nul && pick(20) == 0) {
            p = "\0";
            start[at++] = '\0';
            continue;
        }
        memcpy(start + at, p, strlen(p));
        at += strlen(p);
    }
    start[at] = '\0';
    text_used += at + 1;
    *len = at;
    return start;
}

static double
random_double(void)
{
    uint64_t bits = rng();
    double d = 0;

    switch (pick(4)) {
    case 0:
        return tricky_doubles[pick(sizeof(tricky_doubles) / sizeof(tricky_doubles[0]))];
    case 1:
        return pick(3) == 0 ? NAN : pick(2) == 0 ? INFINITY : -INFINITY;
    case 2:
        return (double)(int64_t)(rng() % 2000001) / 1000.0 - 1000.0;
    default:
        memcpy(&d, &bits, sizeof(d)); /* any bit pattern: subnormals, NaN payloads */
        return d;
    }
}

static void *
pool_alloc(size_t size)
{
    void *p = text_pool + ((text_used + 15) & ~(size_t)15);

    text_used = ((text_used + 15) & ~(size_t)15) + size;
    assert_true(text_used < sizeof(text_pool));
    return p;
}

static void
random_array(struct weft_value *v)
{
    size_t n = pick(4);

    v->type = (weft_value_type)(WEFT_VALUE_STRING_ARRAY + pick(4));
    v->len = n;
    if (v->type == WEFT_VALUE_STRING_ARRAY) {
        const char **items = pool_alloc(n * sizeof(*items) + 1);

        for (size_t i = 0; i < n; i++) {
            size_t len = 0;

            items[i] = random_text(4, false, &len);
        }
        v->u.strs = items;
    } else if (v->type == WEFT_VALUE_BOOL_ARRAY) {
        bool *items = pool_alloc(n + 1);

        for (size_t i = 0; i < n; i++) {
            items[i] = pick(2) == 0;
        }
        v->u.bools = items;
    } else if (v->type == WEFT_VALUE_INT_ARRAY) {
        int64_t *items = pool_alloc(n * sizeof(*items) + 1);

        for (size_t i = 0; i < n; i++) {
            items[i] = (int64_t)rng() >> pick(64);
        }
        v->u.ints = items;
    } else {
        double *items = pool_alloc(n * sizeof(*items) + 1);

        for (size_t i = 0; i < n; i++) {
            items[i] = random_double();
        }
        v->u.doubles = items;
    }
}

static const struct weft_attr *
random_attrs(size_t max, size_t *count)
{
    static const char *const common_keys[] = {
        "gen_ai.operation.name", "k", "k\xff", "k\xfe", "k\xef\xbf\xbd", "weft.step.id"};
    size_t n = pick(max + 1);
    struct weft_attr *attrs = pool_alloc(n * sizeof(*attrs) + 1);

    for (size_t i = 0; i < n; i++) {
        struct weft_value *v = &attrs[i].value;
        size_t len = 0;

        memset(&attrs[i], 0, sizeof(attrs[i]));
        attrs[i].key = pick(2) == 0 ? common_keys[pick(6)] : random_text(3, false, &len);
        switch (pick(5)) {
        case 0:
            v->type = WEFT_VALUE_STRING;
            v->u.str = random_text(8, true, &v->len);
            break;
        case 1:
            v->type = WEFT_VALUE_BOOL;
            v->u.b = pick(2) == 0;
            break;
        case 2:
            v->type = WEFT_VALUE_INT;
            v->u.i = (int64_t)rng() >> pick(64);
            break;
        case 3:
            v->type = WEFT_VALUE_DOUBLE;
            v->u.d = random_double();
            break;
        default:
            random_array(v);
            break;
        }
    }
    *count = n;
    return attrs;
}

static void
random_span(struct weft_span_data *span)
{
    struct weft_event_data *events = NULL;
    struct weft_link_data *links = NULL;
    size_t len = 0;

    text_used = 0;
    memset(span, 0, sizeof(*span));
    span->attrs = random_attrs(12, &span->attr_count);
    span->event_count = pick(3);
    events = pool_alloc(span->event_count * sizeof(*events) + 1);
    for (size_t i = 0; i < span->event_count; i++) {
        events[i].name = pick(5) == 0 ? NULL : random_text(4, false, &len);
        events[i].time_ns = rng();
        events[i].attrs = random_attrs(3, &events[i].attr_count);
        events[i].dropped_attrs = pick(2) == 0 ? 0 : (uint32_t)rng();
    }
    span->events = events;
    span->link_count = pick(3);
    links = pool_alloc(span->link_count * sizeof(*links) + 1);
    for (size_t i = 0; i < span->link_count; i++) {
        uint64_t bits = rng();

        memset(&links[i], 0, sizeof(links[i]));
        memcpy(links[i].trace_id, &bits, sizeof(bits));
        memcpy(links[i].span_id, &bits, sizeof(bits));
        links[i].trace_state = pick(2) == 0 ? NULL : random_text(4, false, &len);
        links[i].trace_flags = (uint8_t)rng();
        links[i].is_remote = pick(2) == 0;
        links[i].attrs = random_attrs(3, &links[i].attr_count);
        links[i].dropped_attrs = pick(2) == 0 ? 0 : (uint32_t)pick(1000);
    }
    span->links = links;
}

static void
test_store_json_random_spans_match_jansson(void **state)
{
    struct weft_span_data span;

    (void)state;
    for (int i = 0; i < 20000; i++) {
        random_span(&span);
        expect_same(&span);
    }
}

/* Column @p k of span @p i in @p texts equals what the single-column writer gives. */
static void
expect_batch_column(const struct weft__store_texts *texts,
                    size_t i,
                    size_t k,
                    const struct weft_span_data *span)
{
    struct weft__buf one;
    size_t len = 0;
    const char *text = weft__store_texts_column(texts, 3 * i + k, &len);

    weft__buf_init(&one, 0);
    assert_weft_ok(k == 0   ? weft__store_attrs_text(span->attrs, span->attr_count, NULL, &one)
                   : k == 1 ? weft__store_events_text(span, &one)
                            : weft__store_links_text(span, &one));
    assert_int_equal(len, one.len);
    assert_memory_equal(text, one.data, len);
    assert_int_equal(text[len], '\0');
    weft__buf_cleanup(&one);
}

/* The batch texts the ingest builds before taking the store's lock are the very columns the
 * writer builds one span at a time. */
static void
test_store_json_batch_texts_match_the_column_writers(void **state)
{
    static const struct weft_attr fixed_attrs[] = {
        {"gen_ai.operation.name", {WEFT_VALUE_STRING, 4, {.str = "chat"}}},
        {"n", {WEFT_VALUE_INT, 0, {.i = -7}}}};
    struct weft_span_data fixed;
    struct weft_span_data span;
    struct weft__store_texts texts;

    (void)state;
    memset(&fixed, 0, sizeof(fixed));
    fixed.attrs = fixed_attrs;
    fixed.attr_count = 2;
    for (int n = 0; n < 2000; n++) {
        const struct weft_span_data *batch[3] = {&span, &fixed, &span};

        random_span(&span);
        assert_weft_ok(weft__store_texts_build(&texts, batch, 3, 0));
        assert_int_equal(texts.count, 3);
        for (size_t i = 0; i < 3; i++) {
            for (size_t k = 0; k < 3; k++) {
                expect_batch_column(&texts, i, k, batch[i]);
            }
        }
        weft__store_texts_cleanup(&texts);
    }
}

/* A NULL key fails the batch as it fails the column; so does a batch past its cap. */
static void
test_store_json_batch_texts_fail_as_the_columns_do(void **state)
{
    static const struct weft_attr bad[] = {{NULL, {WEFT_VALUE_BOOL, 0, {.b = true}}}};
    static const struct weft_attr good[] = {{"k", {WEFT_VALUE_STRING, 5, {.str = "value"}}}};
    struct weft_span_data spans[2];
    const struct weft_span_data *batch[2] = {&spans[0], &spans[1]};
    struct weft__store_texts texts;

    (void)state;
    memset(spans, 0, sizeof(spans));
    spans[0].attrs = good;
    spans[0].attr_count = 1;
    spans[1].attrs = bad;
    spans[1].attr_count = 1;
    assert_int_equal(weft__store_texts_build(&texts, batch, 2, 0), WEFT_ENOMEM);
    weft__store_texts_cleanup(&texts);
    /* {"k":"value"}, [] and [] with their NUL bytes: 20 bytes. */
    assert_weft_ok(weft__store_texts_build(&texts, batch, 1, 0));
    assert_int_equal(texts.text.len, 20);
    weft__store_texts_cleanup(&texts);
    assert_weft_ok(weft__store_texts_build(&texts, batch, 1, 20));
    weft__store_texts_cleanup(&texts);
    assert_int_equal(weft__store_texts_build(&texts, batch, 1, 19), WEFT_ENOMEM);
    weft__store_texts_cleanup(&texts);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_json_every_text_escape_and_repair_matches_jansson),
        cmocka_unit_test(test_store_json_every_number_kind_matches_jansson),
        cmocka_unit_test(test_store_json_events_and_links_match_jansson),
        cmocka_unit_test(test_store_json_repeated_keys_keep_first_place_and_last_value),
        cmocka_unit_test(test_store_json_many_attributes_use_the_heap_table),
        cmocka_unit_test(test_store_json_format_is_pinned),
        cmocka_unit_test(test_store_json_null_key_and_cap_fail_as_before),
        cmocka_unit_test(test_store_json_random_spans_match_jansson),
        cmocka_unit_test(test_store_json_batch_texts_match_the_column_writers),
        cmocka_unit_test(test_store_json_batch_texts_fail_as_the_columns_do),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
