/* tests/exporters/test_otlp_proto.c - the OTLP protobuf encoder and the partial-success
 * response parser.
 *
 * Three independent references check the encoder: hand-computed bytes for small spans (one
 * message at a time: minimal span, envelopes, each attribute type, event, link, status), the
 * schema-table decoder of tests/support/otlp_decode.c (round trip against the JSON encoder,
 * grouping, canonical form), and protoc itself with tests/support/otlp_trace.proto (decode
 * our bytes to text; encode a text request and compare bytes). protoc is required: the test
 * fails when it is missing (scripts/deps.sh test installs protobuf-compiler).
 */
#include "support/failalloc.h"
#include "support/otlp_decode.h"
#include "support/weft_test.h"

#include "base/buf.h"
#include "exporters/otlp_encode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROTOC_REQUEST  "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"
#define PROTOC_RESPONSE "opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse"

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                      */

/* Bytes of a hex string (spaces ignored) into @p out; returns the count. */
static size_t
unhex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = 0;
    int half = -1;

    for (const char *p = hex; *p != '\0'; p++) {
        int v = 0;

        if (*p == ' ') {
            continue;
        }
        if (*p >= '0' && *p <= '9') {
            v = *p - '0';
        } else if (*p >= 'a' && *p <= 'f') {
            v = *p - 'a' + 10;
        } else {
            fail_msg("bad hex digit '%c' in expectation", *p);
        }
        if (half < 0) {
            half = v;
            continue;
        }
        assert_true(n < cap);
        out[n++] = (uint8_t)(half << 4 | v);
        half = -1;
    }
    assert_int_equal(half, -1);
    return n;
}

static void
print_hex(char *out, size_t cap, const uint8_t *p, size_t n)
{
    size_t o = 0;

    for (size_t i = 0; i < n && o + 4 < cap; i++) {
        o += (size_t)snprintf(out + o, cap - o, "%02x ", p[i]);
    }
    out[o] = '\0';
}

static void
assert_bytes(const struct weft__buf *got, const uint8_t *want, size_t want_len)
{
    if (got->len != want_len || memcmp(got->data, want, want_len) != 0) {
        static char a[16384];
        static char b[16384];

        print_hex(a, sizeof(a), want, want_len);
        print_hex(b, sizeof(b), (const uint8_t *)got->data, got->len);
        fail_msg("bytes differ\nwant (%zu): %s\ngot  (%zu): %s", want_len, a, got->len, b);
    }
}

static void
assert_hex(const struct weft__buf *got, const char *hex)
{
    static uint8_t want[8192];

    assert_bytes(got, want, unhex(hex, want, sizeof(want)));
}

/* tag + varint length + body, as a test-side reference for envelopes. */
static size_t
wrap(uint8_t tag, const uint8_t *body, size_t len, uint8_t *out)
{
    size_t n = 0;
    size_t v = len;

    out[n++] = tag;
    do {
        out[n++] = (uint8_t)((v & 0x7F) | (v >= 0x80 ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
    memmove(out + n, body, len);
    return n + len;
}

/* The bytes of a request holding one span (no resource, no scope) whose body is @p span_hex:
 * request.resource_spans(0a) { scope_spans(12) { spans(12) { body } } }. */
static size_t
one_span_request(const char *span_hex, uint8_t *out)
{
    static uint8_t a[8192];
    static uint8_t b[8192];
    size_t n = unhex(span_hex, a, sizeof(a));

    n = wrap(0x12, a, n, b);
    n = wrap(0x12, b, n, a);
    return wrap(0x0a, a, n, out);
}

static void
assert_one_span_request(const struct weft__buf *got, const char *span_hex)
{
    static uint8_t want[8192];

    assert_bytes(got, want, one_span_request(span_hex, want));
}

static void
encode(const struct weft_span_data *const *spans, size_t count, struct weft__buf *buf)
{
    weft__buf_init(buf, 0);
    assert_weft_ok(weft__otlp_encode_proto(spans, count, buf));
}

static void
encode1(const struct weft_span_data *span, struct weft__buf *buf)
{
    encode(&span, 1, buf);
}

/* Decode @p buf with the independent decoder in canonical mode; fails the test on error. */
static json_t *
decode(const struct weft__buf *buf)
{
    struct weft_test_otlp_error err;
    json_t *root =
        weft_test_otlp_decode_request(buf->data, buf->len, WEFT_TEST_OTLP_CANONICAL, &err);

    if (root == NULL) {
        fail_msg("decoder: %s", err.text);
    }
    return root;
}

static const char *
jstr(json_t *root, const char *path)
{
    json_t *v = root;
    char part[64];

    /* "a.0.b" walks objects by key and arrays by index */
    while (*path != '\0') {
        size_t n = strcspn(path, ".");

        assert_true(n < sizeof(part));
        memcpy(part, path, n);
        part[n] = '\0';
        path += n + (path[n] == '.' ? 1 : 0);
        if (json_is_array(v)) {
            v = json_array_get(v, (size_t)strtoul(part, NULL, 10));
        } else {
            v = json_object_get(v, part);
        }
        if (v == NULL) {
            fail_msg("no %s in the decoded request", part);
        }
    }
    assert_true(json_is_string(v));
    return json_string_value(v);
}

/* ------------------------------------------------------------------------------------------ */
/* Fixtures                                                                                     */

/* Trace id 01..10, span id 11..18, name "s", start 0x0102030405060708, end one ns later,
 * sampled, no parent, no resource, no scope. */
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

/* The minimal span's body, split around where attributes, events, links, status go. */
#define MIN_IDS                                              \
    "0a 10 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 " \
    "12 08 11 12 13 14 15 16 17 18 "
#define MIN_NAME       "2a 01 73 "
#define MIN_TIMES      "39 08 07 06 05 04 03 02 01 41 09 07 06 05 04 03 02 01 "
#define MIN_NAME_TIMES MIN_NAME MIN_TIMES
#define MIN_FLAGS      "85 01 01 01 00 00"

static const char *const str_array[] = {"x", ""};
static const bool bool_array[] = {true, false};
static const int64_t int_array[] = {1, -2};
static const double double_array[] = {0.0};

/* Everything the encoder knows, used by the round-trip and protoc tests. */
struct rich {
    struct weft_attr res_attrs[2];
    struct weft_resource res;
    struct weft_attr res2_attrs[1];
    struct weft_resource res2;
    struct weft_attr scope_attrs[1];
    struct weft_scope scope;
    struct weft_scope scope2;
    struct weft_attr span_attrs[16];
    struct weft_attr event_attrs[2];
    struct weft_event_data events[2];
    struct weft_attr link_attrs[1];
    struct weft_link_data links[2];
    struct weft_span_data spans[4];
    const struct weft_span_data *views[4];
};

/* A string attribute of @p len bytes; @p value need not be NUL-terminated. */
static struct weft_attr
attr_strn(const char *key, const char *value, size_t len)
{
    struct weft_attr a = {.key = key};

    a.value.type = WEFT_VALUE_STRING;
    a.value.u.str = value;
    a.value.len = len;
    return a;
}

static struct weft_attr
attr_array(const char *key, weft_value_type type, const void *p, size_t len)
{
    struct weft_attr a = {.key = key};

    a.value.type = type;
    a.value.len = len;
    switch (type) {
    case WEFT_VALUE_STRING_ARRAY:
        a.value.u.strs = p;
        break;
    case WEFT_VALUE_BOOL_ARRAY:
        a.value.u.bools = p;
        break;
    case WEFT_VALUE_INT_ARRAY:
        a.value.u.ints = p;
        break;
    default:
        a.value.u.doubles = p;
        break;
    }
    return a;
}

static void
rich_init(struct rich *r)
{
    struct weft_span_data *s = NULL;

    memset(r, 0, sizeof(*r));
    r->res_attrs[0] = weft_attr_str("service.name", "svc");
    r->res_attrs[1] = weft_attr_int("host.cpus", 8);
    r->res = (struct weft_resource){r->res_attrs, 2, 1, "https://opentelemetry.io/schemas/1.26.0"};
    r->res2_attrs[0] = weft_attr_str("service.name", "other");
    r->res2 = (struct weft_resource){r->res2_attrs, 1, 0, NULL};
    r->scope_attrs[0] = weft_attr_bool("scope.flag", true);
    r->scope = (struct weft_scope){"weft.agent", "0.1.0", "https://x/scope", r->scope_attrs, 1};
    r->scope2 = (struct weft_scope){"weft.tools", NULL, NULL, NULL, 0};

    r->span_attrs[0] = weft_attr_str("gen_ai.operation.name", "chat");
    r->span_attrs[1] = weft_attr_bool("t", true);
    r->span_attrs[2] = weft_attr_bool("f", false);
    r->span_attrs[3] = weft_attr_int("min", INT64_MIN);
    r->span_attrs[4] = weft_attr_int("max", INT64_MAX);
    r->span_attrs[5] = weft_attr_int("zero", 0);
    r->span_attrs[6] = weft_attr_double("d", 1.5);
    r->span_attrs[7] = weft_attr_double("nan", NAN);
    r->span_attrs[8] = weft_attr_double("inf", INFINITY);
    r->span_attrs[9] = weft_attr_double("ninf", -INFINITY);
    r->span_attrs[10] = weft_attr_str("esc", "q\"b\\n\n\t\x01 \xc3\xa9 \xf0\x9f\x98\x80");
    r->span_attrs[11] = attr_strn("bad",
                                  "a\xff"
                                  "b\xe2\x82"
                                  "c\xed\xa0\x80"
                                  "d\xf0\x9f\x98",
                                  13);
    r->span_attrs[12] = attr_array("sa", WEFT_VALUE_STRING_ARRAY, str_array, 2);
    r->span_attrs[13] = attr_array("ba", WEFT_VALUE_BOOL_ARRAY, bool_array, 2);
    r->span_attrs[14] = attr_array("ia", WEFT_VALUE_INT_ARRAY, int_array, 2);
    r->span_attrs[15] = attr_array("da", WEFT_VALUE_DOUBLE_ARRAY, double_array, 1);

    r->event_attrs[0] = weft_attr_str("gen_ai.evaluation.name", "relevance");
    r->event_attrs[1] = weft_attr_double("gen_ai.evaluation.score.value", 0.1);
    r->events[0] = (struct weft_event_data){1700000000500000000ull, "gen_ai.evaluation.result",
                                            r->event_attrs, 2, 4};
    r->events[1] = (struct weft_event_data){0, NULL, NULL, 0, 0}; /* an all-default event */

    r->link_attrs[0] = weft_attr_str("link.kind", "follows");
    memset(r->links[0].trace_id, 0xab, WEFT_TRACE_ID_SIZE);
    memset(r->links[0].span_id, 0xcd, WEFT_SPAN_ID_SIZE);
    r->links[0].trace_state = "a=1";
    r->links[0].trace_flags = 1;
    r->links[0].is_remote = true;
    r->links[0].attrs = r->link_attrs;
    r->links[0].attr_count = 1;
    r->links[0].dropped_attrs = 2;
    memset(r->links[1].trace_id, 0x01, WEFT_TRACE_ID_SIZE);
    memset(r->links[1].span_id, 0x02, WEFT_SPAN_ID_SIZE);

    s = &r->spans[0];
    *s = minimal_span();
    s->trace_state = "k=v";
    memset(s->parent_span_id, 0x41, WEFT_SPAN_ID_SIZE);
    s->has_parent = true;
    s->parent_is_remote = true;
    s->name = "chat gpt-4o";
    s->kind = WEFT_SPAN_KIND_CLIENT;
    s->start_time_ns = 1700000000000000000ull;
    s->end_time_ns = 1700000001500000000ull;
    s->attrs = r->span_attrs;
    s->attr_count = 16;
    s->dropped_attrs = 3;
    s->events = r->events;
    s->event_count = 2;
    s->dropped_events = 5;
    s->links = r->links;
    s->link_count = 2;
    s->dropped_links = 6;
    s->status_code = WEFT_STATUS_ERROR;
    s->status_message = "boom";
    s->resource = &r->res;
    s->scope = &r->scope;

    s = &r->spans[1];
    *s = minimal_span();
    s->span_id[7] = 0x99;
    s->name = "invoke_agent planner";
    s->kind = WEFT_SPAN_KIND_INTERNAL;
    s->status_code = WEFT_STATUS_OK;
    s->resource = &r->res;
    s->scope = &r->scope2;

    s = &r->spans[2];
    *s = minimal_span();
    s->span_id[7] = 0x98;
    s->name = "execute_tool search";
    s->status_message = "unset code, message kept";
    s->resource = &r->res2;
    s->scope = &r->scope;

    s = &r->spans[3];
    *s = minimal_span();
    s->span_id[7] = 0x97;
    s->name = "plan planner";
    s->trace_flags = 0;
    s->resource = &r->res;
    s->scope = &r->scope;

    for (size_t i = 0; i < 4; i++) {
        r->views[i] = &r->spans[i];
    }
}

/* ------------------------------------------------------------------------------------------ */
/* protoc                                                                                       */

static void
require_protoc(void)
{
    if (system("protoc --version >/dev/null 2>&1") != 0) {
        fail_msg("protoc is not on PATH: install protobuf-compiler (scripts/deps.sh test); "
                 "these tests must not be skipped");
    }
}

static char *
slurp(FILE *f, size_t *len)
{
    size_t cap = 4096;
    size_t n = 0;
    char *data = malloc(cap);

    assert_non_null(data);
    for (;;) {
        size_t got = fread(data + n, 1, cap - n - 1, f);

        n += got;
        if (got == 0) {
            break;
        }
        if (cap - n - 1 == 0) {
            cap *= 2;
            data = realloc(data, cap);
            assert_non_null(data);
        }
    }
    data[n] = '\0';
    *len = n;
    return data;
}

/* Run `protoc <mode> -I tests/support otlp_trace.proto` with @p in on stdin; returns its
 * stdout (free() it) and fails the test when protoc does not exit 0. */
static char *
run_protoc(const char *mode, const void *in, size_t in_len, size_t *out_len)
{
    char in_path[1024];
    char err_path[1024];
    char cmd[4096];
    int fd = -1;
    int err_fd = -1;
    FILE *p = NULL;
    char *out = NULL;
    int status = 0;

    require_protoc();
    /* Scratch files live in the build tree, not in /tmp. */
    snprintf(in_path, sizeof(in_path), "%s/otlp-protoc-in-XXXXXX", WEFT_BINARY_DIR);
    snprintf(err_path, sizeof(err_path), "%s/otlp-protoc-err-XXXXXX", WEFT_BINARY_DIR);
    fd = mkstemp(in_path);
    err_fd = mkstemp(err_path);
    assert_true(fd >= 0 && err_fd >= 0);
    close(err_fd);
    assert_int_equal(write(fd, in, in_len), (ssize_t)in_len);
    close(fd);
    snprintf(cmd, sizeof(cmd), "protoc %s -I '%s/tests/support' otlp_trace.proto < '%s' 2> '%s'",
             mode, WEFT_SOURCE_DIR, in_path, err_path);
    p = popen(cmd, "r");
    assert_non_null(p);
    out = slurp(p, out_len);
    status = pclose(p);
    unlink(in_path);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        FILE *ef = fopen(err_path, "r");
        size_t n = 0;
        char *err = ef != NULL ? slurp(ef, &n) : NULL;

        unlink(err_path);
        fail_msg("`%s` failed (status %d): %s", cmd, status, err != NULL ? err : "");
    }
    unlink(err_path);
    return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Byte-exact encoding                                                                          */

static void
test_encode_proto_minimal_span_is_byte_exact(void **state)
{
    struct weft_span_data s = minimal_span();
    struct weft__buf buf;

    (void)state;
    encode1(&s, &buf);
    /* Span: trace_id(0a), span_id(12), name(2a), start(39) and end(41) fixed64 little-endian,
     * flags(85 01) fixed32 = 0x01 sampled | 0x100 has-is-remote; 55 bytes in all. */
    assert_hex(&buf, "0a 3b 12 39 12 37 " MIN_IDS MIN_NAME_TIMES MIN_FLAGS);
    assert_int_equal(buf.data[buf.len], '\0');
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_resource_scope_and_schema_urls_are_byte_exact(void **state)
{
    struct weft_attr res_attrs[1] = {weft_attr_str("service.name", "svc")};
    struct weft_resource res = {res_attrs, 1, 0, "r"};
    struct weft_scope scope = {"lib", "1.0", "s", NULL, 0};
    struct weft_span_data s = minimal_span();
    struct weft__buf buf;

    (void)state;
    s.resource = &res;
    s.scope = &scope;
    encode1(&s, &buf);
    assert_hex(&buf, "0a 66 "
                     /* ResourceSpans.resource: Resource.attributes KeyValue */
                     "0a 17 0a 15 0a 0c 73 65 72 76 69 63 65 2e 6e 61 6d 65 12 05 0a 03 73 76 63 "
                     /* ResourceSpans.scope_spans */
                     "12 48 "
                     /* ScopeSpans.scope: name "lib", version "1.0" */
                     "0a 0a 0a 03 6c 69 62 12 03 31 2e 30 "
                     "12 37 " MIN_IDS MIN_NAME_TIMES MIN_FLAGS " "
                     /* ScopeSpans.schema_url "s", then ResourceSpans.schema_url "r" */
                     "1a 01 73 "
                     "1a 01 72");
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_every_attribute_type_is_byte_exact(void **state)
{
    struct weft_attr attrs[] = {
        weft_attr_str("k", "v"),
        weft_attr_bool("b", true),
        weft_attr_bool("f", false),
        weft_attr_int("i", -1),
        weft_attr_int("n", 300),
        weft_attr_double("d", 1.5),
        weft_attr_str("e", ""),
        attr_array("sa", WEFT_VALUE_STRING_ARRAY, str_array, 2),
        attr_array("ba", WEFT_VALUE_BOOL_ARRAY, bool_array, 2),
        attr_array("ia", WEFT_VALUE_INT_ARRAY, int_array, 2),
        attr_array("da", WEFT_VALUE_DOUBLE_ARRAY, double_array, 1),
        attr_array("ea", WEFT_VALUE_INT_ARRAY, NULL, 0),
    };
    struct weft_span_data s = minimal_span();
    struct weft__buf buf;

    (void)state;
    s.attrs = attrs;
    s.attr_count = sizeof(attrs) / sizeof(attrs[0]);
    encode1(&s, &buf);
    /* Span.attributes is field 9 (4a); KeyValue key(0a) value(12); AnyValue string(0a)
     * bool(10) int(18, two's complement in ten bytes when negative) double(21, IEEE 754
     * little-endian) array(2a) holding ArrayValue.values(0a). Oneof members are written
     * even when they hold the default (false, "", 0.0). */
    assert_one_span_request(&buf, MIN_IDS MIN_NAME_TIMES
                            "4a 08 0a 01 6b 12 03 0a 01 76 "
                            "4a 07 0a 01 62 12 02 10 01 "
                            "4a 07 0a 01 66 12 02 10 00 "
                            "4a 10 0a 01 69 12 0b 18 ff ff ff ff ff ff ff ff ff 01 "
                            "4a 08 0a 01 6e 12 03 18 ac 02 "
                            "4a 0e 0a 01 64 12 09 21 00 00 00 00 00 00 f8 3f "
                            "4a 07 0a 01 65 12 02 0a 00 "
                            "4a 11 0a 02 73 61 12 0b 2a 09 0a 03 0a 01 78 0a 02 0a 00 "
                            "4a 10 0a 02 62 61 12 0a 2a 08 0a 02 10 01 0a 02 10 00 "
                            "4a 19 0a 02 69 61 12 13 2a 11 0a 02 18 01 "
                            "0a 0b 18 fe ff ff ff ff ff ff ff ff 01 "
                            "4a 13 0a 02 64 61 12 0d 2a 0b 0a 09 21 00 00 00 00 00 00 00 00 "
                            "4a 08 0a 02 65 61 12 02 2a 00 " MIN_FLAGS);
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_event_is_byte_exact(void **state)
{
    struct weft_attr attrs[1] = {weft_attr_str("k", "v")};
    struct weft_event_data ev = {5, "e", attrs, 1, 2};
    struct weft_span_data s = minimal_span();
    struct weft__buf buf;

    (void)state;
    s.events = &ev;
    s.event_count = 1;
    s.dropped_events = 3;
    encode1(&s, &buf);
    /* Span.events(5a): time(09) fixed64, name(12), attributes(1a), dropped(20); then
     * Span.dropped_events_count(60). */
    assert_one_span_request(&buf,
                            MIN_IDS MIN_NAME_TIMES "5a 18 09 05 00 00 00 00 00 00 00 12 01 65 "
                                                   "1a 08 0a 01 6b 12 03 0a 01 76 20 02 "
                                                   "60 03 " MIN_FLAGS);
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_link_is_byte_exact(void **state)
{
    struct weft_link_data link;
    struct weft_span_data s = minimal_span();
    struct weft__buf buf;

    (void)state;
    memset(&link, 0, sizeof(link));
    for (int i = 0; i < WEFT_TRACE_ID_SIZE; i++) {
        link.trace_id[i] = (uint8_t)(0x21 + i);
    }
    for (int i = 0; i < WEFT_SPAN_ID_SIZE; i++) {
        link.span_id[i] = (uint8_t)(0x31 + i);
    }
    link.trace_state = "a=1";
    link.trace_flags = 1;
    link.is_remote = true;
    s.links = &link;
    s.link_count = 1;
    s.dropped_links = 4;
    encode1(&s, &buf);
    /* Span.links(6a): trace_id, span_id, trace_state, flags(35) = 0x01 | 0x100 | 0x200 remote;
     * then Span.dropped_links_count(70). */
    assert_one_span_request(&buf, MIN_IDS MIN_NAME_TIMES
                            "6a 26 0a 10 21 22 23 24 25 26 27 28 29 2a 2b 2c 2d 2e 2f 30 "
                            "12 08 31 32 33 34 35 36 37 38 1a 03 61 3d 31 35 01 03 00 00 "
                            "70 04 " MIN_FLAGS);
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_status_forms_are_byte_exact(void **state)
{
    struct weft_span_data s = minimal_span();
    struct weft__buf buf;

    (void)state;
    /* Status(7a): message(12), code(18). */
    s.status_code = WEFT_STATUS_ERROR;
    s.status_message = "boom";
    encode1(&s, &buf);
    assert_one_span_request(&buf,
                            MIN_IDS MIN_NAME_TIMES "7a 08 12 04 62 6f 6f 6d 18 02 " MIN_FLAGS);
    weft__buf_cleanup(&buf);

    s.status_code = WEFT_STATUS_OK;
    s.status_message = NULL;
    encode1(&s, &buf);
    assert_one_span_request(&buf, MIN_IDS MIN_NAME_TIMES "7a 02 18 01 " MIN_FLAGS);
    weft__buf_cleanup(&buf);

    s.status_code = WEFT_STATUS_UNSET;
    s.status_message = "m";
    encode1(&s, &buf);
    assert_one_span_request(&buf, MIN_IDS MIN_NAME_TIMES "7a 03 12 01 6d " MIN_FLAGS);
    weft__buf_cleanup(&buf);

    /* Unset code and empty message: no Status at all. */
    s.status_message = "";
    encode1(&s, &buf);
    assert_one_span_request(&buf, MIN_IDS MIN_NAME_TIMES MIN_FLAGS);
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_parent_state_kind_and_remote_flag_are_byte_exact(void **state)
{
    struct weft_span_data s = minimal_span();
    struct weft__buf buf;

    (void)state;
    memset(s.parent_span_id, 0x41, WEFT_SPAN_ID_SIZE);
    s.has_parent = true;
    s.parent_is_remote = true;
    s.trace_state = "k=v";
    s.kind = WEFT_SPAN_KIND_CLIENT;
    s.trace_flags = 0x03;
    encode1(&s, &buf);
    /* trace_state(1a) and parent_span_id(22) sit between the ids and the name; kind(30)
     * between the name and the times; flags = 0x03 | 0x100 | 0x200 (parent is remote). */
    assert_one_span_request(&buf, MIN_IDS "1a 03 6b 3d 76 "
                                          "22 08 41 41 41 41 41 41 41 41 " MIN_NAME
                                          "30 03 " MIN_TIMES "85 01 03 03 00 00");
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_dropped_counts_only_when_nonzero(void **state)
{
    struct weft_attr attrs[1] = {weft_attr_int("k", 1)};
    struct weft_span_data s = minimal_span();
    struct weft__buf buf;

    (void)state;
    s.attrs = attrs;
    s.attr_count = 1;
    encode1(&s, &buf);
    /* All three counts zero: none written. */
    assert_one_span_request(&buf, MIN_IDS MIN_NAME_TIMES "4a 07 0a 01 6b 12 02 18 01 " MIN_FLAGS);
    weft__buf_cleanup(&buf);

    s.dropped_attrs = 7;
    s.dropped_events = 300;
    s.dropped_links = 1;
    encode1(&s, &buf);
    /* dropped_attributes_count(50), dropped_events_count(60), dropped_links_count(70). */
    assert_one_span_request(&buf, MIN_IDS MIN_NAME_TIMES "4a 07 0a 01 6b 12 02 18 01 50 07 "
                                                         "60 ac 02 70 01 " MIN_FLAGS);
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_invalid_utf8_becomes_replacement_characters(void **state)
{
    struct weft_span_data s = minimal_span();
    struct weft__buf buf;

    (void)state;
    /* FF: one subpart; E2 82 then 'c': one; ED A0 80 (a surrogate): ED, A0, 80 are three;
     * F0 9F 98 cut at the end: one. Valid multi-byte characters pass through. */
    s.name = "a\xff"
             "b\xe2\x82"
             "c\xed\xa0\x80"
             "d\xf0\x9f\x98";
    encode1(&s, &buf);
    assert_one_span_request(&buf, MIN_IDS "2a 16 61 ef bf bd 62 ef bf bd 63 ef bf bd ef bf bd "
                                          "ef bf bd 64 ef bf bd "
                                          "39 08 07 06 05 04 03 02 01 "
                                          "41 09 07 06 05 04 03 02 01 " MIN_FLAGS);
    weft__buf_cleanup(&buf);

    s.name = "\xc3\xa9\xf0\x9f\x98\x80 ok";
    encode1(&s, &buf);
    assert_one_span_request(&buf, MIN_IDS "2a 09 c3 a9 f0 9f 98 80 20 6f 6b "
                                          "39 08 07 06 05 04 03 02 01 "
                                          "41 09 07 06 05 04 03 02 01 " MIN_FLAGS);
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_long_bodies_get_minimal_multibyte_lengths(void **state)
{
    char name[201];
    char *big = malloc(20001);
    struct weft_attr attrs[1];
    struct weft_span_data s = minimal_span();
    struct weft__buf buf;
    json_t *root = NULL;

    (void)state;
    assert_non_null(big);
    memset(name, 'n', 200);
    name[200] = '\0';
    s.name = name;
    encode1(&s, &buf);
    /* Span body 55 - 3 + 203 = 255 (ff 01); scope_spans body 258 (82 02); resource_spans
     * body 261 (85 02); request 264 bytes. */
    assert_int_equal(buf.len, 264);
    assert_memory_equal(buf.data, "\x0a\x85\x02\x12\x82\x02\x12\xff\x01\x0a\x10", 11);
    weft__buf_cleanup(&buf);

    memset(big, 'v', 20000);
    big[20000] = '\0';
    attrs[0] = weft_attr_str("big", big);
    s.attrs = attrs;
    s.attr_count = 1;
    encode1(&s, &buf);
    root = decode(&buf); /* canonical: rejects a padded length anywhere */
    assert_int_equal(strlen(jstr(root, "resourceSpans.0.scopeSpans.0.spans.0.attributes.0.value."
                                       "stringValue")),
                     20000);
    assert_string_equal(jstr(root, "resourceSpans.0.scopeSpans.0.spans.0.name"), name);
    json_decref(root);
    weft__buf_cleanup(&buf);
    free(big);
}

/* ------------------------------------------------------------------------------------------ */
/* Batches                                                                                      */

static void
test_encode_proto_empty_batch_appends_nothing(void **state)
{
    struct weft__buf buf;

    (void)state;
    weft__buf_init(&buf, 0);
    assert_weft_ok(weft__otlp_encode_proto(NULL, 0, &buf));
    assert_int_equal(buf.len, 0);
    assert_weft_ok(weft__buf_append(&buf, "xy", 2));
    assert_weft_ok(weft__otlp_encode_proto(NULL, 0, &buf));
    assert_int_equal(buf.len, 2);
    assert_string_equal(buf.data, "xy");
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_appends_after_existing_bytes(void **state)
{
    struct weft_span_data s = minimal_span();
    const struct weft_span_data *v = &s;
    struct weft__buf alone;
    struct weft__buf buf;

    (void)state;
    encode1(&s, &alone);
    weft__buf_init(&buf, 0);
    assert_weft_ok(weft__buf_append(&buf, "prefix", 6));
    assert_weft_ok(weft__otlp_encode_proto(&v, 1, &buf));
    assert_int_equal(buf.len, 6 + alone.len);
    assert_memory_equal(buf.data, "prefix", 6);
    assert_memory_equal(buf.data + 6, alone.data, alone.len);
    weft__buf_cleanup(&alone);
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_groups_by_resource_then_scope_in_first_seen_order(void **state)
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
    json_t *rs = NULL;

    (void)state;
    for (size_t i = 0; i < 5; i++) {
        spans[i] = minimal_span();
        spans[i].name = names[i];
        spans[i].resource = res[i];
        spans[i].scope = scopes[i];
        views[i] = &spans[i];
    }
    encode(views, 5, &buf);
    root = decode(&buf);
    rs = json_object_get(root, "resourceSpans");
    assert_int_equal(json_array_size(rs), 2);
    assert_string_equal(jstr(root, "resourceSpans.0.schemaUrl"), "r1");
    assert_int_equal(json_array_size(json_object_get(json_array_get(rs, 0), "scopeSpans")), 2);
    assert_string_equal(jstr(root, "resourceSpans.0.scopeSpans.0.scope.name"), "s1");
    assert_int_equal(
        json_array_size(json_object_get(
            json_array_get(json_object_get(json_array_get(rs, 0), "scopeSpans"), 0), "spans")),
        2);
    assert_string_equal(jstr(root, "resourceSpans.0.scopeSpans.0.spans.0.name"), "a");
    assert_string_equal(jstr(root, "resourceSpans.0.scopeSpans.0.spans.1.name"), "d");
    assert_string_equal(jstr(root, "resourceSpans.0.scopeSpans.1.scope.name"), "s2");
    assert_string_equal(jstr(root, "resourceSpans.0.scopeSpans.1.spans.0.name"), "c");
    assert_string_equal(jstr(root, "resourceSpans.1.schemaUrl"), "r2");
    assert_int_equal(json_array_size(json_object_get(json_array_get(rs, 1), "scopeSpans")), 1);
    assert_string_equal(jstr(root, "resourceSpans.1.scopeSpans.0.scope.name"), "s1");
    assert_string_equal(jstr(root, "resourceSpans.1.scopeSpans.0.spans.0.name"), "b");
    assert_string_equal(jstr(root, "resourceSpans.1.scopeSpans.0.spans.1.name"), "e");
    json_decref(root);
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_large_batch_keeps_every_span_in_order(void **state)
{
    enum { N = 1200 }; /* beyond the on-stack grouping marks */
    struct weft_scope s1 = {"s1", NULL, NULL, NULL, 0};
    struct weft_scope s2 = {"s2", NULL, NULL, NULL, 0};
    struct weft_span_data *spans = calloc(N, sizeof(*spans));
    const struct weft_span_data **views = calloc(N, sizeof(*views));
    char(*names)[16] = calloc(N, 16);
    struct weft__buf buf;
    json_t *root = NULL;
    json_t *ss = NULL;

    (void)state;
    assert_true(spans != NULL && views != NULL && names != NULL);
    for (size_t i = 0; i < N; i++) {
        spans[i] = minimal_span();
        snprintf(names[i], 16, "span-%zu", i);
        spans[i].name = names[i];
        spans[i].scope = i % 3 == 0 ? &s2 : &s1;
        views[i] = &spans[i];
    }
    encode(views, N, &buf);
    root = decode(&buf);
    ss = json_object_get(json_array_get(json_object_get(root, "resourceSpans"), 0), "scopeSpans");
    assert_int_equal(json_array_size(ss), 2);
    /* span-0 is in s2, so s2 comes first; each scope keeps batch order. */
    assert_string_equal(jstr(ss, "0.scope.name"), "s2");
    assert_int_equal(json_array_size(json_object_get(json_array_get(ss, 0), "spans")), N / 3);
    assert_int_equal(json_array_size(json_object_get(json_array_get(ss, 1), "spans")), N - N / 3);
    assert_string_equal(jstr(ss, "0.spans.1.name"), "span-3");
    assert_string_equal(jstr(ss, "1.spans.0.name"), "span-1");
    assert_string_equal(jstr(ss, "1.spans.799.name"), "span-1199");
    json_decref(root);
    weft__buf_cleanup(&buf);
    free(spans);
    free(views);
    free(names);
}

static void
test_encode_proto_null_arguments_are_einval(void **state)
{
    struct weft_span_data s = minimal_span();
    const struct weft_span_data *views[2] = {&s, NULL};
    struct weft__buf buf;

    (void)state;
    weft__buf_init(&buf, 0);
    assert_weft_err(weft__otlp_encode_proto(views, 1, NULL), WEFT_EINVAL);
    assert_weft_err(weft__otlp_encode_proto(NULL, 1, &buf), WEFT_EINVAL);
    assert_weft_err(weft__otlp_encode_proto(views, 2, &buf), WEFT_EINVAL);
    assert_int_equal(buf.len, 0);
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_unknown_value_type_is_einval_and_restores_length(void **state)
{
    struct weft_attr attrs[1] = {weft_attr_int("k", 1)};
    struct weft_span_data s = minimal_span();
    const struct weft_span_data *v = &s;
    struct weft__buf buf;

    (void)state;
    attrs[0].value.type = (weft_value_type)42;
    s.attrs = attrs;
    s.attr_count = 1;
    weft__buf_init(&buf, 0);
    assert_weft_ok(weft__buf_append(&buf, "abc", 3));
    assert_weft_err(weft__otlp_encode_proto(&v, 1, &buf), WEFT_EINVAL);
    assert_int_equal(buf.len, 3);
    assert_string_equal(buf.data, "abc");
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_elimit_at_every_cap_restores_length(void **state)
{
    struct rich r;
    struct weft__buf full;
    struct weft__buf buf;

    (void)state;
    rich_init(&r);
    encode(r.views, 4, &full);
    /* Every cap below prefix + request fails with ELIMIT and leaves the prefix alone; the
     * exact size fits (reservations are exact, so nothing fails early). */
    for (size_t max = 3; max < 3 + full.len; max++) {
        weft__buf_init(&buf, max);
        assert_weft_ok(weft__buf_append(&buf, "abc", 3));
        assert_weft_err(weft__otlp_encode_proto(r.views, 4, &buf), WEFT_ELIMIT);
        assert_int_equal(buf.len, 3);
        assert_string_equal(buf.data, "abc");
        weft__buf_cleanup(&buf);
    }
    weft__buf_init(&buf, 3 + full.len);
    assert_weft_ok(weft__buf_append(&buf, "abc", 3));
    assert_weft_ok(weft__otlp_encode_proto(r.views, 4, &buf));
    assert_int_equal(buf.len, 3 + full.len);
    assert_memory_equal(buf.data + 3, full.data, full.len);
    weft__buf_cleanup(&buf);
    weft__buf_cleanup(&full);
}

/* Encode @p s with the cap at @p max (0: none); returns the error, output in @p buf. */
static weft_err
encode_capped(const struct weft_span_data *s, size_t max, struct weft__buf *buf)
{
    weft__buf_init(buf, max);
    return weft__otlp_encode_proto(&s, 1, buf);
}

static void
test_encode_proto_lengths_near_varint_boundaries_are_exact_under_any_cap(void **state)
{
    char *value = malloc(16600);
    struct weft_attr attrs[1];
    struct weft_span_data s = minimal_span();
    struct weft__buf free_buf;
    struct weft__buf capped;
    json_t *root = NULL;

    (void)state;
    assert_non_null(value);
    memset(value, 'x', 16600);
    attrs[0] = attr_strn("k", value, 0);
    s.attrs = attrs;
    s.attr_count = 1;
    /* Span bodies across 128 bytes and envelope bodies across 16384 bytes: the encoder
     * opens them with placeholders of 2 and 3 bytes when the cap leaves room, and of 1 byte
     * when it does not. Either way the bytes are the same, lengths are minimal, and the
     * exact size fits while one byte less does not. */
    for (size_t len = 0; len < 16600; len += len < 100 || (len > 16200 && len < 16400) ? 1 : 997) {
        attrs[0].value.len = len;
        assert_weft_ok(encode_capped(&s, 0, &free_buf));
        root = decode(&free_buf);
        json_decref(root);
        assert_weft_ok(encode_capped(&s, free_buf.len, &capped));
        assert_bytes(&capped, (const uint8_t *)free_buf.data, free_buf.len);
        weft__buf_cleanup(&capped);
        assert_weft_err(encode_capped(&s, free_buf.len - 1, &capped), WEFT_ELIMIT);
        assert_int_equal(capped.len, 0);
        weft__buf_cleanup(&capped);
        weft__buf_cleanup(&free_buf);
    }
    free(value);
}

static void
test_encode_proto_out_of_memory_fails_cleanly_at_every_allocation(void **state)
{
    enum { N = 600 }; /* beyond the on-stack marks: the marks are allocated too */
    struct weft_span_data *spans = calloc(N, sizeof(*spans));
    const struct weft_span_data **views = calloc(N, sizeof(*views));
    struct weft__buf buf;
    weft_err err = WEFT_ENOMEM;
    long budget = 0;

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
        err = weft__otlp_encode_proto(views, N, &buf);
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
    assert_true(budget > 2); /* the marks and several buffer growths did fail on the way */
    json_decref(decode(&buf));
    weft__buf_cleanup(&buf);
    free(spans);
    free(views);
}

/* ------------------------------------------------------------------------------------------ */
/* Cross-checks: independent decoder, JSON encoder, protoc                                      */

static void
test_encode_proto_round_trip_equals_json_encoder_output(void **state)
{
    struct rich r;
    struct weft__buf proto;
    struct weft__buf text;
    json_error_t jerr;
    json_t *from_proto = NULL;
    json_t *from_json = NULL;

    (void)state;
    rich_init(&r);
    encode(r.views, 4, &proto);
    weft__buf_init(&text, 0);
    assert_weft_ok(weft__otlp_encode_json(r.views, 4, &text));
    from_proto = decode(&proto);
    from_json = json_loadb(text.data, text.len, 0, &jerr);
    if (from_json == NULL) {
        fail_msg("JSON encoder output does not parse: %s", jerr.text);
    }
    if (!json_equal(from_proto, from_json)) {
        char *a = json_dumps(from_proto, JSON_SORT_KEYS);
        char *b = json_dumps(from_json, JSON_SORT_KEYS);

        fail_msg("protobuf and JSON encodings differ\nproto: %s\njson:  %s", a, b);
    }
    /* The comparison covers real content, not two empty objects. */
    assert_string_equal(jstr(from_proto, "resourceSpans.0.scopeSpans.0.spans.0.attributes.7.value."
                                         "doubleValue"),
                        "NaN");
    assert_string_equal(jstr(from_proto, "resourceSpans.0.scopeSpans.0.spans.0.attributes.11.value."
                                         "stringValue"),
                        "a\xef\xbf\xbd"
                        "b\xef\xbf\xbd"
                        "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                        "d\xef\xbf\xbd");
    json_decref(from_proto);
    json_decref(from_json);
    weft__buf_cleanup(&proto);
    weft__buf_cleanup(&text);
}

static void
test_encode_proto_protoc_decodes_every_field(void **state)
{
    struct rich r;
    struct weft__buf buf;
    char *text = NULL;
    size_t len = 0;
    const char *expected[] = {
        "key: \"service.name\"",
        "string_value: \"svc\"",
        "int_value: 8",
        "dropped_attributes_count: 1",
        "schema_url: \"https://opentelemetry.io/schemas/1.26.0\"",
        "name: \"weft.agent\"",
        "version: \"0.1.0\"",
        "bool_value: true",
        "schema_url: \"https://x/scope\"",
        "trace_id: \"\\001\\002\\003\\004\\005\\006\\007\\010\\t\\n\\013\\014\\r\\016\\017\\020\"",
        "span_id: \"\\021\\022\\023\\024\\025\\026\\027\\030\"",
        "trace_state: \"k=v\"",
        "parent_span_id: \"AAAAAAAA\"",
        "name: \"chat gpt-4o\"",
        "kind: SPAN_KIND_CLIENT",
        "start_time_unix_nano: 1700000000000000000",
        "end_time_unix_nano: 1700000001500000000",
        "int_value: -9223372036854775808",
        "int_value: 9223372036854775807",
        "bool_value: false",
        "double_value: 1.5",
        "double_value: nan",
        "double_value: inf",
        "double_value: -inf",
        "dropped_attributes_count: 3",
        "time_unix_nano: 1700000000500000000",
        "name: \"gen_ai.evaluation.result\"",
        "dropped_events_count: 5",
        "trace_state: \"a=1\"",
        "flags: 769",
        "dropped_links_count: 6",
        "message: \"boom\"",
        "code: STATUS_CODE_ERROR",
        "code: STATUS_CODE_OK",
        "kind: SPAN_KIND_INTERNAL",
        "name: \"weft.tools\"",
        "string_value: \"other\"",
        "message: \"unset code, message kept\"",
        "flags: 256",
        "array_value {",
        "values {",
    };

    (void)state;
    rich_init(&r);
    encode(r.views, 4, &buf);
    text = run_protoc("--decode=" PROTOC_REQUEST, buf.data, buf.len, &len);
    for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
        if (strstr(text, expected[i]) == NULL) {
            fail_msg("protoc output lacks `%s`:\n%s", expected[i], text);
        }
    }
    /* Four spans, in two resource envelopes; defaults never show up. */
    {
        size_t spans = 0;
        size_t envelopes = 0;

        for (const char *p = strstr(text, "spans {"); p != NULL; p = strstr(p + 1, "spans {")) {
            spans += p == text || p[-1] != '_'; /* "scope_spans {" / "resource_spans {" */
        }
        for (const char *p = strstr(text, "resource_spans {"); p != NULL;
             p = strstr(p + 1, "resource_spans {")) {
            envelopes++;
        }
        assert_int_equal(spans, 4);
        assert_int_equal(envelopes, 2);
    }
    assert_null(strstr(text, "SPAN_KIND_UNSPECIFIED"));
    assert_null(strstr(text, "STATUS_CODE_UNSET"));
    assert_null(strstr(text, "dropped_attributes_count: 0"));
    free(text);
    weft__buf_cleanup(&buf);
}

static void
test_encode_proto_matches_protoc_encoding_of_the_same_request(void **state)
{
    struct weft_attr res_attrs[1] = {weft_attr_str("service.name", "svc")};
    struct weft_resource res = {res_attrs, 1, 1, "https://x/res"};
    struct weft_scope scope = {"weft.agent", "0.1.0", "https://x/scope", NULL, 0};
    struct weft_attr attrs[6] = {
        weft_attr_str("s", "v"),
        weft_attr_bool("b", false),
        weft_attr_int("i", -42),
        weft_attr_double("d", 1.5),
        attr_array("a", WEFT_VALUE_INT_ARRAY, int_array, 2),
        weft_attr_str("u", "\xc3\xa9"),
    };
    struct weft_attr ev_attrs[1] = {weft_attr_str("k", "v")};
    struct weft_event_data ev = {1700000000500000000ull, "e", ev_attrs, 1, 2};
    struct weft_link_data link;
    struct weft_span_data s = minimal_span();
    struct weft__buf buf;
    struct weft__buf want;
    char *bytes = NULL;
    size_t len = 0;
    const char *request =
        "resource_spans {\n"
        "  resource {\n"
        "    attributes { key: \"service.name\" value { string_value: \"svc\" } }\n"
        "    dropped_attributes_count: 1\n"
        "  }\n"
        "  scope_spans {\n"
        "    scope { name: \"weft.agent\" version: \"0.1.0\" }\n"
        "    spans {\n"
        "      trace_id: \"\\001\\002\\003\\004\\005\\006\\007\\010\\011\\012\\013\\014\\015\\016"
        "\\017\\020\"\n"
        "      span_id: \"\\021\\022\\023\\024\\025\\026\\027\\030\"\n"
        "      trace_state: \"k=v\"\n"
        "      parent_span_id: \"ABCDEFGH\"\n"
        "      name: \"chat gpt-4o\"\n"
        "      kind: SPAN_KIND_CLIENT\n"
        "      start_time_unix_nano: 1700000000000000000\n"
        "      end_time_unix_nano: 1700000001500000000\n"
        "      attributes { key: \"s\" value { string_value: \"v\" } }\n"
        "      attributes { key: \"b\" value { bool_value: false } }\n"
        "      attributes { key: \"i\" value { int_value: -42 } }\n"
        "      attributes { key: \"d\" value { double_value: 1.5 } }\n"
        "      attributes { key: \"a\" value { array_value { values { int_value: 1 } "
        "values { int_value: -2 } } } }\n"
        "      attributes { key: \"u\" value { string_value: \"\\303\\251\" } }\n"
        "      dropped_attributes_count: 3\n"
        "      events {\n"
        "        time_unix_nano: 1700000000500000000 name: \"e\"\n"
        "        attributes { key: \"k\" value { string_value: \"v\" } }\n"
        "        dropped_attributes_count: 2\n"
        "      }\n"
        "      dropped_events_count: 4\n"
        "      links {\n"
        "        trace_id: \"!!!!!!!!!!!!!!!!\" span_id: \"11111111\" trace_state: \"a=1\"\n"
        "        flags: 769\n"
        "      }\n"
        "      dropped_links_count: 5\n"
        "      status { message: \"boom\" code: STATUS_CODE_ERROR }\n"
        "      flags: 769\n"
        "    }\n"
        "    schema_url: \"https://x/scope\"\n"
        "  }\n"
        "  schema_url: \"https://x/res\"\n"
        "}\n";

    (void)state;
    memset(&link, 0, sizeof(link));
    memset(link.trace_id, '!', WEFT_TRACE_ID_SIZE);
    memset(link.span_id, '1', WEFT_SPAN_ID_SIZE);
    link.trace_state = "a=1";
    link.trace_flags = 1;
    link.is_remote = true;
    s.trace_state = "k=v";
    memcpy(s.parent_span_id, "ABCDEFGH", WEFT_SPAN_ID_SIZE);
    s.has_parent = true;
    s.parent_is_remote = true;
    s.name = "chat gpt-4o";
    s.kind = WEFT_SPAN_KIND_CLIENT;
    s.start_time_ns = 1700000000000000000ull;
    s.end_time_ns = 1700000001500000000ull;
    s.attrs = attrs;
    s.attr_count = 6;
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
    encode1(&s, &buf);
    bytes = run_protoc("--encode=" PROTOC_REQUEST, request, strlen(request), &len);
    weft__buf_init(&want, 0);
    assert_weft_ok(weft__buf_append(&want, bytes, len));
    assert_bytes(&buf, (const uint8_t *)want.data, want.len);
    free(bytes);
    weft__buf_cleanup(&want);
    weft__buf_cleanup(&buf);
}

/* ------------------------------------------------------------------------------------------ */
/* The test decoder's own wire checks                                                           */

static void
assert_decode_error(const char *hex, unsigned flags, size_t offset, const char *text)
{
    uint8_t bytes[512];
    size_t n = unhex(hex, bytes, sizeof(bytes));
    struct weft_test_otlp_error err;
    json_t *root = weft_test_otlp_decode_request(bytes, n, flags, &err);

    if (root != NULL) {
        char *dump = json_dumps(root, 0);

        fail_msg("decoded %s as %s, expected an error", hex, dump);
    }
    if (strstr(err.text, text) == NULL) {
        fail_msg("error `%s` lacks `%s`", err.text, text);
    }
    assert_int_equal(err.offset, offset);
}

static void
test_otlp_decode_rejects_bad_wire_type_with_offset(void **state)
{
    (void)state;
    assert_decode_error("0b", 0, 0, "bad wire type 3");
    /* resource_spans as a varint */
    assert_decode_error("08 01", 0, 0, "wire type 0, expected 2");
    /* Span.kind (field 6) as length-delimited, inside the envelopes at offset 6 */
    assert_decode_error("0a 08 12 06 12 04 32 02 00 00", 0, 6, "Span.kind (field 6): wire type 2");
}

static void
test_otlp_decode_rejects_truncated_varint_and_length_with_offset(void **state)
{
    (void)state;
    assert_decode_error("0a 80", 0, 1, "truncated varint");
    assert_decode_error("0a 05 12 00", 0, 1, "length 5");
    /* the inner length (3) overruns its parent (2 bytes), not just the buffer */
    assert_decode_error("0a 02 12 03 00 00 00", 0, 3, "length 3");
    assert_decode_error("0a ff ff ff ff ff ff ff ff ff 7f", 0, 1, "varint over 64 bits");
    /* a fixed64 start time with 3 bytes left */
    assert_decode_error("0a 08 12 06 12 04 39 01 02 03", 0, 7, "truncated fixed64");
}

static void
test_otlp_decode_rejects_bad_ids_utf8_and_duplicates(void **state)
{
    (void)state;
    /* a 2-byte trace id */
    assert_decode_error("0a 08 12 06 12 04 0a 02 01 02", 0, 7, "2 bytes, expected 16");
    /* a name that is not UTF-8 */
    assert_decode_error("0a 08 12 06 12 04 2a 02 c3 28", 0, 8, "not valid UTF-8");
    /* kind written twice */
    assert_decode_error("0a 08 12 06 12 04 30 01 30 02", 0, 8, "written twice");
    /* a bool of 2 */
    assert_decode_error("0a 0a 12 08 12 06 4a 04 12 02 10 02", 0, 11, "bool 2");
}

static void
test_otlp_decode_canonical_mode_rejects_defaults_and_padded_varints(void **state)
{
    uint8_t kind0[] = {0x0a, 0x06, 0x12, 0x04, 0x12, 0x02, 0x30, 0x00};
    json_t *root = NULL;

    (void)state;
    /* Without the flag, a written default decodes as itself. */
    root = weft_test_otlp_decode_request(kind0, sizeof(kind0), 0, NULL);
    assert_non_null(root);
    assert_int_equal(
        json_integer_value(json_object_get(
            json_array_get(
                json_object_get(
                    json_array_get(
                        json_object_get(json_array_get(json_object_get(root, "resourceSpans"), 0),
                                        "scopeSpans"),
                        0),
                    "spans"),
                0),
            "kind")),
        0);
    json_decref(root);
    assert_decode_error("0a 06 12 04 12 02 30 00", WEFT_TEST_OTLP_CANONICAL, 6,
                        "default value written");
    assert_decode_error("0a 80 00", WEFT_TEST_OTLP_CANONICAL, 1, "non-minimal varint");
    /* an empty Resource */
    assert_decode_error("0a 02 0a 00", WEFT_TEST_OTLP_CANONICAL, 2, "default value written");
}

static void
test_otlp_decode_skips_unknown_fields_and_decodes_bytes_and_kvlist(void **state)
{
    /* ResourceSpans { unknown field 9 varint, unknown fixed32, unknown fixed64,
     * resource { attributes { key "k" value { kvlist { values { key "b" value { bytes "hi!" }
     * } } } } } } */
    const char *hex = "0a 27 48 05 4d 01 02 03 04 49 01 02 03 04 05 06 07 08 "
                      "0a 15 0a 13 0a 01 6b 12 0e 32 0c 0a 0a 0a 01 62 12 05 3a 03 68 69 21";
    uint8_t bytes[128];
    size_t n = unhex(hex, bytes, sizeof(bytes));
    struct weft_test_otlp_error err;
    json_t *root = weft_test_otlp_decode_request(bytes, n, 0, &err);

    (void)state;
    if (root == NULL) {
        fail_msg("%s", err.text);
    }
    assert_string_equal(
        jstr(root, "resourceSpans.0.resource.attributes.0.value.kvlistValue.values.0.key"), "b");
    assert_string_equal(jstr(root, "resourceSpans.0.resource.attributes.0.value.kvlistValue."
                                   "values.0.value.bytesValue"),
                        "aGkh");
    json_decref(root);
}

/* ------------------------------------------------------------------------------------------ */
/* Partial-success responses                                                                    */

struct parsed {
    weft_err err;
    uint64_t rejected;
    char message[64];
};

static struct parsed
parse(const void *body, size_t len, bool is_json)
{
    struct parsed p;

    p.rejected = 99; /* must be overwritten, also on error */
    strcpy(p.message, "stale");
    p.err =
        weft__otlp_parse_response(body, len, is_json, &p.rejected, p.message, sizeof(p.message));
    return p;
}

static struct parsed
parse_hex(const char *hex)
{
    uint8_t bytes[128];
    size_t n = unhex(hex, bytes, sizeof(bytes));

    return parse(bytes, n, false);
}

static void
test_parse_response_proto_reads_partial_success(void **state)
{
    struct parsed p = parse_hex("0a 05 08 03 12 01 78");

    (void)state;
    assert_weft_ok(p.err);
    assert_int_equal(p.rejected, 3);
    assert_string_equal(p.message, "x");
    /* a message alone (a warning) */
    p = parse_hex("0a 04 12 02 68 69");
    assert_weft_ok(p.err);
    assert_int_equal(p.rejected, 0);
    assert_string_equal(p.message, "hi");
    /* the largest int64 */
    p = parse_hex("0a 0a 08 ff ff ff ff ff ff ff ff 7f");
    assert_weft_ok(p.err);
    assert_true(p.rejected == (uint64_t)INT64_MAX);
}

static void
test_parse_response_empty_body_is_full_success(void **state)
{
    struct parsed p = parse("", 0, false);

    (void)state;
    assert_weft_ok(p.err);
    assert_int_equal(p.rejected, 0);
    assert_string_equal(p.message, "");
    p = parse(NULL, 0, true);
    assert_weft_ok(p.err);
    assert_int_equal(p.rejected, 0);
    assert_string_equal(p.message, "");
    p = parse(" \r\n", 3, true);
    assert_weft_ok(p.err);
    assert_int_equal(p.rejected, 0);
    /* an empty partial_success means nothing rejected */
    p = parse_hex("0a 00");
    assert_weft_ok(p.err);
    assert_int_equal(p.rejected, 0);
}

static void
test_parse_response_proto_skips_unknown_fields(void **state)
{
    /* top level: field 2 varint, field 3 bytes, field 4 fixed32, field 5 fixed64; inside
     * partial_success: field 3 bytes and field 9 varint around the known fields */
    struct parsed p = parse_hex("10 07 1a 02 ab cd 25 01 02 03 04 29 01 02 03 04 05 06 07 08 "
                                "0a 0b 1a 01 00 08 02 48 96 01 12 01 79");

    (void)state;
    assert_weft_ok(p.err);
    assert_int_equal(p.rejected, 2);
    assert_string_equal(p.message, "y");
}

static void
test_parse_response_proto_bad_input_is_eparse(void **state)
{
    const char *bad[] = {
        "0a 05 08 03",                               /* length past the end */
        "0a 02 08 ff",                               /* truncated varint */
        "0a",                                        /* missing length */
        "0b",                                        /* group wire type */
        "08 01",                                     /* partial_success as a varint */
        "0a 02 10 01",                               /* error_message as a varint */
        "0a 0b 08 ff ff ff ff ff ff ff ff ff 01",    /* negative rejected_spans */
        "0a 0c 08 ff ff ff ff ff ff ff ff ff ff 01", /* varint over 10 bytes */
        "00 00",                                     /* field number 0 */
        "1d 01 02",                                  /* truncated fixed32 */
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct parsed p = parse_hex(bad[i]);

        if (p.err != WEFT_EPARSE) {
            fail_msg("`%s` gave %s, expected a parse error", bad[i], weft_strerror(p.err));
        }
        assert_int_equal(p.rejected, 0);
        assert_string_equal(p.message, "");
    }
}

static void
test_parse_response_truncates_message_on_a_character_boundary(void **state)
{
    const char body[] = "\x0a\x06\x12\x04\x61\xc3\xa9\x62"; /* "aéb" */
    uint64_t rejected = 0;
    char small[3];
    char tiny[1];

    (void)state;
    assert_weft_ok(weft__otlp_parse_response(body, 8, false, &rejected, small, sizeof(small)));
    assert_string_equal(small, "a"); /* "a\xc3" would cut é in half */
    assert_weft_ok(weft__otlp_parse_response(body, 8, false, &rejected, tiny, sizeof(tiny)));
    assert_string_equal(tiny, "");
    assert_weft_ok(weft__otlp_parse_response(body, 8, false, NULL, NULL, 0));
}

static void
test_parse_response_reads_protoc_and_support_encodings(void **state)
{
    const char *text = "partial_success { rejected_spans: 12 error_message: \"quota exceeded\" }";
    char *bytes = NULL;
    size_t len = 0;
    struct parsed p;
    struct weft__buf buf;

    (void)state;
    bytes = run_protoc("--encode=" PROTOC_RESPONSE, text, strlen(text), &len);
    p = parse(bytes, len, false);
    assert_weft_ok(p.err);
    assert_int_equal(p.rejected, 12);
    assert_string_equal(p.message, "quota exceeded");

    /* The receivers' builder produces the same bytes as protoc. */
    weft__buf_init(&buf, 0);
    assert_weft_ok(weft_test_otlp_response_proto(12, "quota exceeded", &buf));
    assert_int_equal(buf.len, len);
    assert_memory_equal(buf.data, bytes, len);
    weft__buf_reset(&buf);
    assert_weft_ok(weft_test_otlp_response_proto(0, NULL, &buf));
    assert_int_equal(buf.len, 0);
    assert_weft_ok(weft_test_otlp_response_proto(300, NULL, &buf));
    p = parse(buf.data, buf.len, false);
    assert_weft_ok(p.err);
    assert_int_equal(p.rejected, 300);
    assert_string_equal(p.message, "");
    free(bytes);
    weft__buf_cleanup(&buf);
}

static void
test_parse_response_json_reads_partial_success(void **state)
{
    struct {
        const char *body;
        uint64_t rejected;
        const char *message;
    } cases[] = {
        {"{\"partialSuccess\":{\"rejectedSpans\":\"3\",\"errorMessage\":\"x\"}}", 3, "x"},
        {"{\"partialSuccess\":{\"rejectedSpans\":4}}", 4, ""},
        {"{\"partial_success\":{\"rejected_spans\":\"5\",\"error_message\":\"snake\"}}", 5,
         "snake"},
        {"{\"partialSuccess\":{\"errorMessage\":\"warn only\"}}", 0, "warn only"},
        {"{\"partialSuccess\":{}}", 0, ""},
        {"{\"partialSuccess\":null}", 0, ""},
        {"{}", 0, ""},
        {"{\"other\":[1,2],\"partialSuccess\":{\"rejectedSpans\":\"9223372036854775807\","
         "\"extra\":true}}",
         (uint64_t)INT64_MAX, ""},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct parsed p = parse(cases[i].body, strlen(cases[i].body), true);

        if (p.err != WEFT_OK) {
            fail_msg("`%s`: %s", cases[i].body, weft_strerror(p.err));
        }
        assert_true(p.rejected == cases[i].rejected);
        assert_string_equal(p.message, cases[i].message);
    }
}

static void
test_parse_response_json_bad_input_is_eparse(void **state)
{
    const char *bad[] = {
        "not json",
        "[]",
        "\"x\"",
        "{\"partialSuccess\":\"x\"}",
        "{\"partialSuccess\":{\"rejectedSpans\":\"-1\"}}",
        "{\"partialSuccess\":{\"rejectedSpans\":-1}}",
        "{\"partialSuccess\":{\"rejectedSpans\":\"abc\"}}",
        "{\"partialSuccess\":{\"rejectedSpans\":\"\"}}",
        "{\"partialSuccess\":{\"rejectedSpans\":\"9223372036854775808\"}}",
        "{\"partialSuccess\":{\"rejectedSpans\":1.5}}",
        "{\"partialSuccess\":{\"rejectedSpans\":true}}",
        "{\"partialSuccess\":{\"errorMessage\":5}}",
        "{\"partialSuccess\":{}",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct parsed p = parse(bad[i], strlen(bad[i]), true);

        if (p.err != WEFT_EPARSE) {
            fail_msg("`%s` gave %s, expected a parse error", bad[i], weft_strerror(p.err));
        }
        assert_int_equal(p.rejected, 0);
        assert_string_equal(p.message, "");
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_proto_minimal_span_is_byte_exact),
        cmocka_unit_test(test_encode_proto_resource_scope_and_schema_urls_are_byte_exact),
        cmocka_unit_test(test_encode_proto_every_attribute_type_is_byte_exact),
        cmocka_unit_test(test_encode_proto_event_is_byte_exact),
        cmocka_unit_test(test_encode_proto_link_is_byte_exact),
        cmocka_unit_test(test_encode_proto_status_forms_are_byte_exact),
        cmocka_unit_test(test_encode_proto_parent_state_kind_and_remote_flag_are_byte_exact),
        cmocka_unit_test(test_encode_proto_dropped_counts_only_when_nonzero),
        cmocka_unit_test(test_encode_proto_invalid_utf8_becomes_replacement_characters),
        cmocka_unit_test(test_encode_proto_long_bodies_get_minimal_multibyte_lengths),
        cmocka_unit_test(test_encode_proto_empty_batch_appends_nothing),
        cmocka_unit_test(test_encode_proto_appends_after_existing_bytes),
        cmocka_unit_test(test_encode_proto_groups_by_resource_then_scope_in_first_seen_order),
        cmocka_unit_test(test_encode_proto_large_batch_keeps_every_span_in_order),
        cmocka_unit_test(test_encode_proto_null_arguments_are_einval),
        cmocka_unit_test(test_encode_proto_unknown_value_type_is_einval_and_restores_length),
        cmocka_unit_test(test_encode_proto_elimit_at_every_cap_restores_length),
        cmocka_unit_test(test_encode_proto_lengths_near_varint_boundaries_are_exact_under_any_cap),
        cmocka_unit_test(test_encode_proto_out_of_memory_fails_cleanly_at_every_allocation),
        cmocka_unit_test(test_encode_proto_round_trip_equals_json_encoder_output),
        cmocka_unit_test(test_encode_proto_protoc_decodes_every_field),
        cmocka_unit_test(test_encode_proto_matches_protoc_encoding_of_the_same_request),
        cmocka_unit_test(test_otlp_decode_rejects_bad_wire_type_with_offset),
        cmocka_unit_test(test_otlp_decode_rejects_truncated_varint_and_length_with_offset),
        cmocka_unit_test(test_otlp_decode_rejects_bad_ids_utf8_and_duplicates),
        cmocka_unit_test(test_otlp_decode_canonical_mode_rejects_defaults_and_padded_varints),
        cmocka_unit_test(test_otlp_decode_skips_unknown_fields_and_decodes_bytes_and_kvlist),
        cmocka_unit_test(test_parse_response_proto_reads_partial_success),
        cmocka_unit_test(test_parse_response_empty_body_is_full_success),
        cmocka_unit_test(test_parse_response_proto_skips_unknown_fields),
        cmocka_unit_test(test_parse_response_proto_bad_input_is_eparse),
        cmocka_unit_test(test_parse_response_truncates_message_on_a_character_boundary),
        cmocka_unit_test(test_parse_response_reads_protoc_and_support_encodings),
        cmocka_unit_test(test_parse_response_json_reads_partial_success),
        cmocka_unit_test(test_parse_response_json_bad_input_is_eparse),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
