/* tests/exporters/test_otlp_json.c - the OTLP JSON encoder: exact text for a minimal span,
 * every key and value of a full span read back with jansson, the AnyValue forms, string
 * escaping and UTF-8 repair (the output must always parse), doubles (shortest exact form,
 * NaN and infinities as strings), 64-bit integers as strings, hex ids, grouping, the empty
 * batch, and failure paths (ELIMIT at every cap, out of memory) that leave the buffer as it
 * was. */
#include "support/failalloc.h"
#include "support/weft_test.h"

#include "base/buf.h"
#include "exporters/otlp_encode.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                      */

static struct weft_span_data
minimal_span(void)
{
    struct weft_span_data s;

    memset(&s, 0, sizeof(s));
    for (int i = 0; i < WEFT_TRACE_ID_SIZE; i++) {
        s.trace_id[i] = (uint8_t)(0x01 + i);
    }
    for (int i = 0; i < WEFT_SPAN_ID_SIZE; i++) {
        s.span_id[i] = (uint8_t)(0x11 + i);
    }
    s.name = "s";
    s.start_time_ns = 0x0102030405060708ull;
    s.end_time_ns = 0x0102030405060709ull;
    s.trace_flags = WEFT_TRACE_FLAG_SAMPLED;
    return s;
}

/* Encode @p count spans into a fresh buffer; the caller cleans it up. */
static void
encode(const struct weft_span_data *const *spans, size_t count, struct weft__buf *buf)
{
    weft__buf_init(buf, 0);
    assert_weft_ok(weft__otlp_encode_json(spans, count, buf));
    assert_int_equal(strlen(buf->data), buf->len); /* NUL-terminated, no NUL inside */
}

/* Encode one span and parse the output; fails the test when it is not JSON. */
static json_t *
encode_parse(const struct weft_span_data *s)
{
    struct weft__buf buf;
    json_error_t jerr;
    json_t *root = NULL;

    encode(&s, 1, &buf);
    root = json_loadb(buf.data, buf.len, 0, &jerr);
    if (root == NULL) {
        fail_msg("output is not JSON (%s at %d): %s", jerr.text, jerr.position, buf.data);
    }
    weft__buf_cleanup(&buf);
    return root;
}

/* Walk "a.0.b" (object keys, array indexes); fails when a step is missing. */
static json_t *
at(json_t *root, const char *path)
{
    json_t *v = root;
    char part[64];

    while (*path != '\0') {
        size_t n = strcspn(path, ".");

        assert_true(n < sizeof(part));
        memcpy(part, path, n);
        part[n] = '\0';
        path += n + (path[n] == '.' ? 1 : 0);
        v = json_is_array(v) ? json_array_get(v, (size_t)strtoul(part, NULL, 10))
                             : json_object_get(v, part);
        if (v == NULL) {
            fail_msg("no `%s` in the output", part);
        }
    }
    return v;
}

static const char *
str_at(json_t *root, const char *path)
{
    json_t *v = at(root, path);

    if (!json_is_string(v)) {
        fail_msg("%s is not a string", path);
    }
    return json_string_value(v);
}

static json_int_t
int_at(json_t *root, const char *path)
{
    json_t *v = at(root, path);

    if (!json_is_integer(v)) {
        fail_msg("%s is not an integer number", path);
    }
    return json_integer_value(v);
}

/* The text of the first span's first attribute value, e.g. {"intValue":"5"}. */
static char *
value_text(struct weft_attr attr)
{
    struct weft_span_data s = minimal_span();
    const struct weft_span_data *v = &s;
    struct weft__buf buf;
    const char *start = NULL;
    const char *end = NULL;
    char *out = NULL;

    s.attrs = &attr;
    s.attr_count = 1;
    encode(&v, 1, &buf);
    start = strstr(buf.data, "\"value\":");
    end = strstr(buf.data, "}],\"flags\"");
    assert_non_null(start);
    assert_non_null(end);
    start += strlen("\"value\":");
    out = calloc(1, (size_t)(end - start) + 1);
    assert_non_null(out);
    memcpy(out, start, (size_t)(end - start));
    weft__buf_cleanup(&buf);
    return out;
}

static void
assert_value_text(struct weft_attr attr, const char *expected)
{
    char *text = value_text(attr);

    assert_string_equal(text, expected);
    free(text);
}

/* ------------------------------------------------------------------------------------------ */
/* Shape                                                                                        */

static void
test_encode_json_minimal_span_is_exact_text(void **state)
{
    struct weft_span_data s = minimal_span();
    const struct weft_span_data *v = &s;
    struct weft__buf buf;

    (void)state;
    encode(&v, 1, &buf);
    /* No resource, no scope, no parent, kind unspecified, no attributes: all omitted. */
    assert_string_equal(buf.data, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{"
                                  "\"traceId\":\"0102030405060708090a0b0c0d0e0f10\","
                                  "\"spanId\":\"1112131415161718\","
                                  "\"name\":\"s\","
                                  "\"startTimeUnixNano\":\"72623859790382856\","
                                  "\"endTimeUnixNano\":\"72623859790382857\","
                                  "\"flags\":257}]}]}]}");
    assert_int_equal(buf.data[buf.len - 1], '}'); /* no trailing newline */
    weft__buf_cleanup(&buf);
}

static void
test_encode_json_full_span_has_every_key_and_value(void **state)
{
    struct weft_attr res_attrs[1] = {weft_attr_str("service.name", "svc")};
    struct weft_resource res = {res_attrs, 1, 2, "https://x/res"};
    struct weft_attr scope_attrs[1] = {weft_attr_int("scope.n", 1)};
    struct weft_scope scope = {"weft.agent", "0.1.0", "https://x/scope", scope_attrs, 1};
    struct weft_attr attrs[1] = {weft_attr_str("gen_ai.operation.name", "chat")};
    struct weft_attr ev_attrs[1] = {weft_attr_bool("ok", true)};
    struct weft_event_data ev = {1700000000500000000ull, "gen_ai.evaluation.result", ev_attrs, 1,
                                 6};
    struct weft_attr link_attrs[1] = {weft_attr_double("w", 0.5)};
    struct weft_link_data link;
    struct weft_span_data s = minimal_span();
    json_t *root = NULL;
    json_t *span = NULL;

    (void)state;
    memset(&link, 0, sizeof(link));
    memset(link.trace_id, 0xAB, WEFT_TRACE_ID_SIZE);
    memset(link.span_id, 0xCD, WEFT_SPAN_ID_SIZE);
    link.trace_state = "a=1";
    link.trace_flags = 1;
    link.attrs = link_attrs;
    link.attr_count = 1;
    link.dropped_attrs = 7;
    s.trace_state = "k=v";
    memset(s.parent_span_id, 0xEF, WEFT_SPAN_ID_SIZE);
    s.has_parent = true;
    s.parent_is_remote = true;
    s.name = "chat gpt-4o";
    s.kind = WEFT_SPAN_KIND_CLIENT;
    s.start_time_ns = 1700000000000000000ull;
    s.end_time_ns = 1700000001500000000ull;
    s.attrs = attrs;
    s.attr_count = 1;
    s.dropped_attrs = 3;
    s.events = &ev;
    s.event_count = 1;
    s.dropped_events = 4;
    s.links = &link;
    s.link_count = 1;
    s.dropped_links = 5;
    s.status_code = WEFT_STATUS_ERROR;
    s.status_message = "boom";
    s.resource = &res;
    s.scope = &scope;
    root = encode_parse(&s);

    assert_int_equal(json_object_size(root), 1);
    assert_string_equal(str_at(root, "resourceSpans.0.resource.attributes.0.key"), "service.name");
    assert_string_equal(str_at(root, "resourceSpans.0.resource.attributes.0.value.stringValue"),
                        "svc");
    assert_int_equal(int_at(root, "resourceSpans.0.resource.droppedAttributesCount"), 2);
    assert_string_equal(str_at(root, "resourceSpans.0.schemaUrl"), "https://x/res");
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.scope.name"), "weft.agent");
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.scope.version"), "0.1.0");
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.scope.attributes.0.key"),
                        "scope.n");
    assert_string_equal(
        str_at(root, "resourceSpans.0.scopeSpans.0.scope.attributes.0.value.intValue"), "1");
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.schemaUrl"), "https://x/scope");

    span = at(root, "resourceSpans.0.scopeSpans.0.spans.0");
    assert_int_equal(json_object_size(span), 16); /* every Span field is present */
    assert_string_equal(str_at(span, "traceId"), "0102030405060708090a0b0c0d0e0f10");
    assert_string_equal(str_at(span, "spanId"), "1112131415161718");
    assert_string_equal(str_at(span, "traceState"), "k=v");
    assert_string_equal(str_at(span, "parentSpanId"), "efefefefefefefef");
    assert_string_equal(str_at(span, "name"), "chat gpt-4o");
    assert_int_equal(int_at(span, "kind"), 3);
    assert_string_equal(str_at(span, "startTimeUnixNano"), "1700000000000000000");
    assert_string_equal(str_at(span, "endTimeUnixNano"), "1700000001500000000");
    assert_string_equal(str_at(span, "attributes.0.key"), "gen_ai.operation.name");
    assert_string_equal(str_at(span, "attributes.0.value.stringValue"), "chat");
    assert_int_equal(int_at(span, "droppedAttributesCount"), 3);
    assert_string_equal(str_at(span, "events.0.timeUnixNano"), "1700000000500000000");
    assert_string_equal(str_at(span, "events.0.name"), "gen_ai.evaluation.result");
    assert_string_equal(str_at(span, "events.0.attributes.0.key"), "ok");
    assert_true(json_is_true(at(span, "events.0.attributes.0.value.boolValue")));
    assert_int_equal(int_at(span, "events.0.droppedAttributesCount"), 6);
    assert_int_equal(int_at(span, "droppedEventsCount"), 4);
    assert_string_equal(str_at(span, "links.0.traceId"), "abababababababababababababababab");
    assert_string_equal(str_at(span, "links.0.spanId"), "cdcdcdcdcdcdcdcd");
    assert_string_equal(str_at(span, "links.0.traceState"), "a=1");
    assert_string_equal(str_at(span, "links.0.attributes.0.key"), "w");
    assert_true(json_real_value(at(span, "links.0.attributes.0.value.doubleValue")) == 0.5);
    assert_int_equal(int_at(span, "links.0.droppedAttributesCount"), 7);
    assert_int_equal(int_at(span, "links.0.flags"), 0x101); /* sampled, known not remote */
    assert_int_equal(int_at(span, "droppedLinksCount"), 5);
    assert_string_equal(str_at(span, "status.message"), "boom");
    assert_int_equal(int_at(span, "status.code"), 2);
    assert_int_equal(int_at(span, "flags"), 0x301); /* sampled, parent known remote */
    json_decref(root);
}

static void
test_encode_json_defaults_are_omitted(void **state)
{
    struct weft_resource empty_res = {NULL, 0, 0, NULL};
    struct weft_scope empty_scope = {"", NULL, NULL, NULL, 0};
    struct weft_event_data ev = {0, NULL, NULL, 0, 0};
    struct weft_span_data s = minimal_span();
    json_t *root = NULL;
    json_t *span = NULL;

    (void)state;
    s.name = "";
    s.start_time_ns = 0;
    s.end_time_ns = 0;
    s.trace_state = "";
    s.status_message = "";
    s.resource = &empty_res;
    s.scope = &empty_scope;
    s.events = &ev;
    s.event_count = 1;
    root = encode_parse(&s);
    assert_null(json_object_get(at(root, "resourceSpans.0"), "resource"));
    assert_null(json_object_get(at(root, "resourceSpans.0"), "schemaUrl"));
    assert_null(json_object_get(at(root, "resourceSpans.0.scopeSpans.0"), "scope"));
    span = at(root, "resourceSpans.0.scopeSpans.0.spans.0");
    /* ids, one all-default event ({}), flags: nothing else */
    assert_int_equal(json_object_size(span), 4);
    assert_int_equal(json_object_size(at(span, "events.0")), 0);
    assert_int_equal(int_at(span, "flags"), 0x101);
    json_decref(root);
}

static void
test_encode_json_empty_batch_is_empty_request(void **state)
{
    struct weft__buf buf;

    (void)state;
    encode(NULL, 0, &buf);
    assert_string_equal(buf.data, "{}");
    weft__buf_cleanup(&buf);
}

static void
test_encode_json_groups_by_resource_then_scope_in_first_seen_order(void **state)
{
    struct weft_resource r1 = {NULL, 0, 1, "r1"};
    struct weft_resource r2 = {NULL, 0, 2, "r2"};
    struct weft_scope s1 = {"s1", NULL, NULL, NULL, 0};
    struct weft_scope s2 = {"s2", NULL, NULL, NULL, 0};
    struct weft_span_data spans[5];
    const struct weft_span_data *views[5];
    const char *names[5] = {"a", "b", "c", "d", "e"};
    const struct weft_resource *res[5] = {&r1, &r2, &r1, &r1, &r2};
    const struct weft_scope *scopes[5] = {&s1, &s1, &s2, &s1, &s1};
    struct weft__buf buf;
    json_t *root = NULL;

    (void)state;
    for (size_t i = 0; i < 5; i++) {
        spans[i] = minimal_span();
        spans[i].name = names[i];
        spans[i].resource = res[i];
        spans[i].scope = scopes[i];
        views[i] = &spans[i];
    }
    encode(views, 5, &buf);
    root = json_loadb(buf.data, buf.len, 0, NULL);
    assert_non_null(root);
    assert_int_equal(json_array_size(at(root, "resourceSpans")), 2);
    assert_string_equal(str_at(root, "resourceSpans.0.schemaUrl"), "r1");
    assert_int_equal(json_array_size(at(root, "resourceSpans.0.scopeSpans")), 2);
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.scope.name"), "s1");
    assert_int_equal(json_array_size(at(root, "resourceSpans.0.scopeSpans.0.spans")), 2);
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.spans.0.name"), "a");
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.spans.1.name"), "d");
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.1.scope.name"), "s2");
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.1.spans.0.name"), "c");
    assert_string_equal(str_at(root, "resourceSpans.1.schemaUrl"), "r2");
    assert_int_equal(int_at(root, "resourceSpans.1.resource.droppedAttributesCount"), 2);
    assert_int_equal(json_array_size(at(root, "resourceSpans.1.scopeSpans")), 1);
    assert_string_equal(str_at(root, "resourceSpans.1.scopeSpans.0.spans.0.name"), "b");
    assert_string_equal(str_at(root, "resourceSpans.1.scopeSpans.0.spans.1.name"), "e");
    json_decref(root);
    weft__buf_cleanup(&buf);
}

static void
test_encode_json_ids_are_lowercase_hex(void **state)
{
    struct weft_span_data s = minimal_span();
    json_t *root = NULL;

    (void)state;
    for (int i = 0; i < WEFT_TRACE_ID_SIZE; i++) {
        s.trace_id[i] = (uint8_t)(0xF0 + i);
    }
    memcpy(s.span_id, "\x00\x0A\xBC\xDE\xFF\x10\x9A\x01", WEFT_SPAN_ID_SIZE);
    memcpy(s.parent_span_id, "\xAB\xCD\xEF\x00\x00\x00\x00\x01", WEFT_SPAN_ID_SIZE);
    s.has_parent = true;
    root = encode_parse(&s);
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.spans.0.traceId"),
                        "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.spans.0.spanId"),
                        "000abcdeff109a01");
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.spans.0.parentSpanId"),
                        "abcdef0000000001");
    json_decref(root);
}

/* ------------------------------------------------------------------------------------------ */
/* Values                                                                                       */

static void
test_encode_json_every_attribute_type_has_its_any_value_form(void **state)
{
    static const char *const strs[] = {"x", ""};
    static const bool bools[] = {true, false};
    static const int64_t ints[] = {1, -2};
    static const double doubles[] = {0.25, -1.0};
    struct weft_attr a = {.key = "k"};

    (void)state;
    assert_value_text(weft_attr_str("k", "v"), "{\"stringValue\":\"v\"}");
    assert_value_text(weft_attr_str("k", ""), "{\"stringValue\":\"\"}");
    assert_value_text(weft_attr_bool("k", true), "{\"boolValue\":true}");
    assert_value_text(weft_attr_bool("k", false), "{\"boolValue\":false}");
    assert_value_text(weft_attr_int("k", 0), "{\"intValue\":\"0\"}");
    assert_value_text(weft_attr_double("k", 1.5), "{\"doubleValue\":1.5}");
    a.value.type = WEFT_VALUE_STRING_ARRAY;
    a.value.len = 2;
    a.value.u.strs = strs;
    assert_value_text(a, "{\"arrayValue\":{\"values\":[{\"stringValue\":\"x\"},"
                         "{\"stringValue\":\"\"}]}}");
    a.value.type = WEFT_VALUE_BOOL_ARRAY;
    a.value.u.bools = bools;
    assert_value_text(a, "{\"arrayValue\":{\"values\":[{\"boolValue\":true},"
                         "{\"boolValue\":false}]}}");
    a.value.type = WEFT_VALUE_INT_ARRAY;
    a.value.u.ints = ints;
    assert_value_text(a, "{\"arrayValue\":{\"values\":[{\"intValue\":\"1\"},"
                         "{\"intValue\":\"-2\"}]}}");
    a.value.type = WEFT_VALUE_DOUBLE_ARRAY;
    a.value.u.doubles = doubles;
    assert_value_text(a, "{\"arrayValue\":{\"values\":[{\"doubleValue\":0.25},"
                         "{\"doubleValue\":-1.0}]}}");
    a.value.len = 0;
    assert_value_text(a, "{\"arrayValue\":{}}");
}

static void
test_encode_json_int64_values_are_decimal_strings(void **state)
{
    struct weft_span_data s = minimal_span();
    json_t *root = NULL;

    (void)state;
    assert_value_text(weft_attr_int("k", INT64_MIN), "{\"intValue\":\"-9223372036854775808\"}");
    assert_value_text(weft_attr_int("k", INT64_MAX), "{\"intValue\":\"9223372036854775807\"}");
    assert_value_text(weft_attr_int("k", -1), "{\"intValue\":\"-1\"}");
    s.start_time_ns = UINT64_MAX;
    s.end_time_ns = 1;
    root = encode_parse(&s);
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.spans.0.startTimeUnixNano"),
                        "18446744073709551615");
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.spans.0.endTimeUnixNano"), "1");
    json_decref(root);
}

static void
test_encode_json_doubles_are_shortest_exact_numbers(void **state)
{
    const double values[] = {0.1,    0.1 + 0.2, 1.0 / 3.0, DBL_MAX,       DBL_MIN,
                             5e-324, -2.5e-7,   1e21,      123456789.125, 2.0};

    (void)state;
    assert_value_text(weft_attr_double("k", 0.1), "{\"doubleValue\":0.1}");
    assert_value_text(weft_attr_double("k", 1.0), "{\"doubleValue\":1.0}");
    assert_value_text(weft_attr_double("k", -0.0), "{\"doubleValue\":-0.0}");
    assert_value_text(weft_attr_double("k", 1e300), "{\"doubleValue\":1e+300}");
    assert_value_text(weft_attr_double("k", 0.1 + 0.2), "{\"doubleValue\":0.30000000000000004}");
    /* Every value reads back bit for bit, as a real (not an integer) number. */
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        char *text = value_text(weft_attr_double("k", values[i]));
        json_t *v = json_loads(text, 0, NULL);

        assert_non_null(v);
        if (!json_is_real(json_object_get(v, "doubleValue")) ||
            json_real_value(json_object_get(v, "doubleValue")) != values[i]) {
            fail_msg("%.17g encoded as %s", values[i], text);
        }
        json_decref(v);
        free(text);
    }
}

static void
test_encode_json_nan_and_infinities_are_strings(void **state)
{
    (void)state;
    assert_value_text(weft_attr_double("k", NAN), "{\"doubleValue\":\"NaN\"}");
    assert_value_text(weft_attr_double("k", INFINITY), "{\"doubleValue\":\"Infinity\"}");
    assert_value_text(weft_attr_double("k", -INFINITY), "{\"doubleValue\":\"-Infinity\"}");
}

static void
test_encode_json_escapes_quotes_backslashes_and_control_characters(void **state)
{
    const char raw[] = "q\"b\\n\n\r\t\b\f\x01\x1f\x7f/\xc3\xa9\xf0\x9f\x98\x80";
    struct weft_attr a = weft_attr_str("k\"ey", raw);
    struct weft_span_data s = minimal_span();
    char *text = NULL;
    json_t *root = NULL;

    (void)state;
    text = value_text(a);
    assert_string_equal(text, "{\"stringValue\":\"q\\\"b\\\\n\\n\\r\\t\\b\\f\\u0001\\u001f\x7f/"
                              "\xc3\xa9\xf0\x9f\x98\x80\"}");
    free(text);
    /* jansson reads back the original bytes, key included */
    s.attrs = &a;
    s.attr_count = 1;
    root = encode_parse(&s);
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.spans.0.attributes.0.key"),
                        "k\"ey");
    assert_string_equal(
        str_at(root, "resourceSpans.0.scopeSpans.0.spans.0.attributes.0.value.stringValue"), raw);
    json_decref(root);
}

static void
test_encode_json_embedded_nul_is_escaped(void **state)
{
    struct weft_attr a = weft_attr_str("k", "a\0b");

    (void)state;
    a.value.len = 3; /* the value's length counts, not strlen */
    assert_value_text(a, "{\"stringValue\":\"a\\u0000b\"}");
}

static void
test_encode_json_invalid_utf8_becomes_replacement_characters(void **state)
{
    struct weft_attr a = weft_attr_str("k", "");
    struct weft_span_data s = minimal_span();
    json_t *root = NULL;

    (void)state;
    /* FF: one subpart; E2 82 then 'c': one; ED A0 80 (a surrogate): three; overlong C0 AF:
     * two; F0 9F 98 cut at the end: one. */
    a.value.u.str = "a\xff"
                    "b\xe2\x82"
                    "c\xed\xa0\x80"
                    "d\xc0\xaf"
                    "e\xf0\x9f\x98";
    a.value.len = strlen(a.value.u.str);
    assert_value_text(a, "{\"stringValue\":\"a\xef\xbf\xbd"
                         "b\xef\xbf\xbd"
                         "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                         "d\xef\xbf\xbd\xef\xbf\xbd"
                         "e\xef\xbf\xbd\"}");
    /* jansson rejects invalid UTF-8, so parsing proves the whole document is clean, names
     * and keys included. */
    s.name = "\x80name";
    s.attrs = &a;
    s.attr_count = 1;
    a.key = "key\xfe";
    root = encode_parse(&s);
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.spans.0.name"),
                        "\xef\xbf\xbdname");
    assert_string_equal(str_at(root, "resourceSpans.0.scopeSpans.0.spans.0.attributes.0.key"),
                        "key\xef\xbf\xbd");
    json_decref(root);
}

/* ------------------------------------------------------------------------------------------ */
/* Failures                                                                                     */

static void
test_encode_json_null_arguments_are_einval(void **state)
{
    struct weft_span_data s = minimal_span();
    const struct weft_span_data *views[2] = {&s, NULL};
    struct weft__buf buf;

    (void)state;
    weft__buf_init(&buf, 0);
    assert_weft_err(weft__otlp_encode_json(views, 1, NULL), WEFT_EINVAL);
    assert_weft_err(weft__otlp_encode_json(NULL, 1, &buf), WEFT_EINVAL);
    assert_weft_err(weft__otlp_encode_json(views, 2, &buf), WEFT_EINVAL);
    assert_int_equal(buf.len, 0);
    weft__buf_cleanup(&buf);
}

static void
test_encode_json_unknown_value_type_is_einval_and_restores_length(void **state)
{
    struct weft_attr a = weft_attr_int("k", 1);
    struct weft_span_data s = minimal_span();
    const struct weft_span_data *v = &s;
    struct weft__buf buf;

    (void)state;
    a.value.type = (weft_value_type)-1;
    s.attrs = &a;
    s.attr_count = 1;
    weft__buf_init(&buf, 0);
    assert_weft_ok(weft__buf_append(&buf, "abc", 3));
    assert_weft_err(weft__otlp_encode_json(&v, 1, &buf), WEFT_EINVAL);
    assert_int_equal(buf.len, 3);
    assert_string_equal(buf.data, "abc");
    weft__buf_cleanup(&buf);
}

static void
test_encode_json_elimit_at_every_cap_restores_length(void **state)
{
    struct weft_attr attrs[3] = {weft_attr_str("k", "v\n\xff"), weft_attr_double("d", 0.1),
                                 weft_attr_int("i", -7)};
    struct weft_span_data s = minimal_span();
    const struct weft_span_data *v = &s;
    struct weft__buf full;
    struct weft__buf buf;

    (void)state;
    s.attrs = attrs;
    s.attr_count = 3;
    s.status_code = WEFT_STATUS_ERROR;
    encode(&v, 1, &full);
    for (size_t max = 3; max < 3 + full.len; max++) {
        weft__buf_init(&buf, max);
        assert_weft_ok(weft__buf_append(&buf, "abc", 3));
        assert_weft_err(weft__otlp_encode_json(&v, 1, &buf), WEFT_ELIMIT);
        assert_int_equal(buf.len, 3);
        assert_string_equal(buf.data, "abc");
        weft__buf_cleanup(&buf);
    }
    weft__buf_init(&buf, 3 + full.len);
    assert_weft_ok(weft__buf_append(&buf, "abc", 3));
    assert_weft_ok(weft__otlp_encode_json(&v, 1, &buf));
    assert_string_equal(buf.data + 3, full.data);
    weft__buf_cleanup(&buf);
    weft__buf_cleanup(&full);
}

static void
test_encode_json_out_of_memory_fails_cleanly_at_every_allocation(void **state)
{
    enum { N = 600 }; /* beyond the on-stack marks: the marks are allocated too */
    struct weft_span_data *spans = calloc(N, sizeof(*spans));
    const struct weft_span_data **views = calloc(N, sizeof(*views));
    struct weft__buf buf;
    weft_err err = WEFT_ENOMEM;
    long budget = 0;
    json_t *root = NULL;

    (void)state;
    assert_true(spans != NULL && views != NULL);
    for (size_t i = 0; i < N; i++) {
        spans[i] = minimal_span();
        views[i] = &spans[i];
    }
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (budget = 0; budget < 100; budget++) {
        weft__buf_init(&buf, 0);
        failalloc_budget = budget;
        err = weft__otlp_encode_json(views, N, &buf);
        failalloc_budget = -1;
        if (err == WEFT_OK) {
            break;
        }
        assert_weft_err(err, WEFT_ENOMEM);
        assert_int_equal(buf.len, 0);
        weft__buf_cleanup(&buf);
    }
    weft_set_allocator(NULL, NULL, NULL);
    assert_weft_ok(err);
    assert_true(budget > 2);
    root = json_loadb(buf.data, buf.len, 0, NULL);
    assert_non_null(root);
    assert_int_equal(json_array_size(at(root, "resourceSpans.0.scopeSpans.0.spans")), N);
    json_decref(root);
    weft__buf_cleanup(&buf);
    free(spans);
    free(views);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_json_minimal_span_is_exact_text),
        cmocka_unit_test(test_encode_json_full_span_has_every_key_and_value),
        cmocka_unit_test(test_encode_json_defaults_are_omitted),
        cmocka_unit_test(test_encode_json_empty_batch_is_empty_request),
        cmocka_unit_test(test_encode_json_groups_by_resource_then_scope_in_first_seen_order),
        cmocka_unit_test(test_encode_json_ids_are_lowercase_hex),
        cmocka_unit_test(test_encode_json_every_attribute_type_has_its_any_value_form),
        cmocka_unit_test(test_encode_json_int64_values_are_decimal_strings),
        cmocka_unit_test(test_encode_json_doubles_are_shortest_exact_numbers),
        cmocka_unit_test(test_encode_json_nan_and_infinities_are_strings),
        cmocka_unit_test(test_encode_json_escapes_quotes_backslashes_and_control_characters),
        cmocka_unit_test(test_encode_json_embedded_nul_is_escaped),
        cmocka_unit_test(test_encode_json_invalid_utf8_becomes_replacement_characters),
        cmocka_unit_test(test_encode_json_null_arguments_are_einval),
        cmocka_unit_test(test_encode_json_unknown_value_type_is_einval_and_restores_length),
        cmocka_unit_test(test_encode_json_elimit_at_every_cap_restores_length),
        cmocka_unit_test(test_encode_json_out_of_memory_fails_cleanly_at_every_allocation),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
