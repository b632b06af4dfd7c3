/* tests/exporters/test_ingest.c - OTLP/HTTP trace ingest (exporters/ingest.h, otlp_decode.h)
 * through a real server on 127.0.0.1 (weft__metrics_server_start_routes with the ingest route),
 * driven with libcurl: bodies built by weft's own encoders (otlp_encode.h) and by hand (a small
 * protobuf writer below), then read back through the store's public read API. */
#include "base/buf.h"
#include "base/time.h"
#include "exporters/gzip.h"
#include "exporters/ingest.h"
#include "exporters/metrics_server.h"
#include "exporters/otlp_decode.h"
#include "exporters/otlp_encode.h"
#include "support/weft_test.h"

#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct fixture {
    char dir[256];
    char db[300];
    struct weft__ingest *ingest;
    struct weft_metrics_server *server;
    unsigned port;
};

static weft_err
no_metrics(void *user_data, char **out, size_t *len)
{
    (void)user_data;
    *out = strdup("");
    *len = 0;
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

static int
start(void **state, size_t max_body)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct weft__ingest_options opts;
    struct weft__http_route route;

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "%s/ingest-XXXXXX",
             getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db, sizeof(f->db), "%s/weft.db", f->dir);
    memset(&opts, 0, sizeof(opts));
    opts.db_path = f->db;
    opts.max_body = max_body;
    assert_weft_ok(weft__ingest_new(&opts, &f->ingest));
    route = weft__ingest_route(f->ingest);
    /* A test that cannot start its server fails here: it never skips. */
    assert_weft_ok(
        weft__metrics_server_start_routes(no_metrics, NULL, "127.0.0.1:0", &route, 1, &f->server));
    f->port = weft_metrics_server_port(f->server);
    assert_true(f->port > 0);
    *state = f;
    return 0;
}

static int
setup(void **state)
{
    return start(state, 0);
}

static int
setup_small(void **state)
{
    return start(state, 64 * 1024);
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    weft_metrics_server_stop(f->server);
    weft__ingest_free(f->ingest);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* HTTP                                                                                        */

struct answer {
    long status;
    struct weft__buf body;
    char content_type[64];
};

static size_t
collect(char *data, size_t size, size_t n, void *user_data)
{
    struct answer *a = user_data;

    return weft__buf_append(&a->body, data, size * n) == WEFT_OK ? size * n : 0;
}

static size_t
header(char *data, size_t size, size_t n, void *user_data)
{
    struct answer *a = user_data;
    size_t len = size * n;

    if (len > 14 && strncasecmp(data, "Content-Type: ", 14) == 0) {
        size_t v = len - 14;

        while (v > 0 && (data[14 + v - 1] == '\r' || data[14 + v - 1] == '\n')) {
            v--;
        }
        snprintf(a->content_type, sizeof(a->content_type), "%.*s", (int)v, data + 14);
    }
    return len;
}

/* POST (or @p method) @p body to /v1/traces; fills @p a (clean it up with answer_cleanup). */
static void
post(const struct fixture *f,
     const char *method,
     const char *content_type,
     const char *encoding,
     const void *body,
     size_t len,
     struct answer *a)
{
    CURL *curl = curl_easy_init();
    struct curl_slist *headers = NULL;
    char url[96];
    char h[128];

    memset(a, 0, sizeof(*a));
    weft__buf_init(&a->body, 0);
    assert_non_null(curl);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/v1/traces", f->port);
    if (content_type != NULL) {
        snprintf(h, sizeof(h), "Content-Type: %s", content_type);
        headers = curl_slist_append(headers, h);
    }
    if (encoding != NULL) {
        snprintf(h, sizeof(h), "Content-Encoding: %s", encoding);
        headers = curl_slist_append(headers, h);
    }
    headers = curl_slist_append(headers, "Expect:");
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body != NULL ? body : "");
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    } else {
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    }
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 20000L);
    assert_int_equal(curl_easy_perform(curl), CURLE_OK);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &a->status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
}

static void
answer_cleanup(struct answer *a)
{
    weft__buf_cleanup(&a->body);
}

/* ------------------------------------------------------------------------------------------ */
/* Spans to send                                                                               */

static const char *const tags[] = {"a", "b"};
static const int64_t numbers[] = {1, -2, 3};

struct sample {
    struct weft_attr res_attrs[2];
    struct weft_resource resource;
    struct weft_scope scope;
    struct weft_attr attrs[8];
    struct weft_attr ev_attrs[1];
    struct weft_event_data events[1];
    struct weft_attr link_attrs[1];
    struct weft_link_data links[1];
    struct weft_span_data spans[2];
    const struct weft_span_data *views[2];
};

static void
fill_id(uint8_t *id, size_t len, uint8_t first)
{
    for (size_t i = 0; i < len; i++) {
        id[i] = (uint8_t)(first + i);
    }
}

/* A root (SERVER, ERROR) and a child (CLIENT, remote parent flags off) with an event, a link
 * and attributes of every type weft holds. */
static void
sample_init(struct sample *s)
{
    memset(s, 0, sizeof(*s));
    s->res_attrs[0] = weft_attr_str("service.name", "checkout");
    s->res_attrs[1] = weft_attr_str("host.name", "box-7");
    s->resource.attrs = s->res_attrs;
    s->resource.attr_count = 2;
    s->scope.name = "ingest-test";
    s->scope.version = "0.3";
    s->attrs[0] = weft_attr_str("gen_ai.operation.name", "chat");
    s->attrs[1] = weft_attr_int("gen_ai.usage.input_tokens", 1234);
    s->attrs[2] = weft_attr_double("weft.cost.usd", 0.25);
    s->attrs[3] = weft_attr_bool("weft.cache.hit", true);
    s->attrs[4].key = "tags";
    s->attrs[4].value.type = WEFT_VALUE_STRING_ARRAY;
    s->attrs[4].value.len = 2;
    s->attrs[4].value.u.strs = tags;
    s->attrs[5].key = "numbers";
    s->attrs[5].value.type = WEFT_VALUE_INT_ARRAY;
    s->attrs[5].value.len = 3;
    s->attrs[5].value.u.ints = numbers;
    s->attrs[6] = weft_attr_int("negative", -7);
    s->attrs[7] = weft_attr_str("unicode", "h\xc3\xa9llo");
    s->ev_attrs[0] = weft_attr_str("exception.type", "Timeout");
    s->events[0].name = "exception";
    s->events[0].time_ns = 1700000000150000000ull;
    s->events[0].attrs = s->ev_attrs;
    s->events[0].attr_count = 1;
    s->link_attrs[0] = weft_attr_str("link.kind", "replan");
    fill_id(s->links[0].trace_id, WEFT_TRACE_ID_SIZE, 0x90);
    fill_id(s->links[0].span_id, WEFT_SPAN_ID_SIZE, 0xa0);
    s->links[0].is_remote = true;
    s->links[0].trace_flags = 1;
    s->links[0].attrs = s->link_attrs;
    s->links[0].attr_count = 1;
    for (size_t i = 0; i < 2; i++) {
        struct weft_span_data *sp = &s->spans[i];

        fill_id(sp->trace_id, WEFT_TRACE_ID_SIZE, 0x10);
        fill_id(sp->span_id, WEFT_SPAN_ID_SIZE, (uint8_t)(0x20 + 0x10 * i));
        sp->resource = &s->resource;
        sp->scope = &s->scope;
        sp->trace_flags = 1;
        sp->start_time_ns = 1700000000000000000ull + i * 100000000ull;
        sp->end_time_ns = sp->start_time_ns + 500000000ull;
        s->views[i] = sp;
    }
    s->spans[0].name = "POST /checkout";
    s->spans[0].kind = WEFT_SPAN_KIND_SERVER;
    s->spans[0].status_code = WEFT_STATUS_ERROR;
    s->spans[0].status_message = "payment declined";
    s->spans[0].trace_state = "vendor=1";
    s->spans[1].name = "chat gpt-4o";
    s->spans[1].kind = WEFT_SPAN_KIND_CLIENT;
    s->spans[1].has_parent = true;
    memcpy(s->spans[1].parent_span_id, s->spans[0].span_id, WEFT_SPAN_ID_SIZE);
    s->spans[1].attrs = s->attrs;
    s->spans[1].attr_count = 8;
    s->spans[1].dropped_attrs = 3;
    s->spans[1].events = s->events;
    s->spans[1].event_count = 1;
    s->spans[1].links = s->links;
    s->spans[1].link_count = 1;
}

static const struct weft_value *
attr(const struct weft_attr *attrs, size_t count, const char *key)
{
    for (size_t i = 0; i < count; i++) {
        if (strcmp(attrs[i].key, key) == 0) {
            return &attrs[i].value;
        }
    }
    fail_msg("attribute %s missing", key);
    return NULL;
}

/* Load trace 1011...1f from the store. */
static struct weft_trace *
load(const struct fixture *f, const char *trace_hex)
{
    struct weft_store *store = NULL;
    struct weft_trace *trace = NULL;

    assert_weft_ok(weft_store_open(f->db, &store));
    assert_weft_ok(weft_store_load_trace(store, trace_hex, &trace));
    weft_store_close(store);
    return trace;
}

#define SAMPLE_TRACE "101112131415161718191a1b1c1d1e1f"

/* What the store holds after the sample went in, whatever the encoding. */
static void
check_sample_stored(const struct fixture *f)
{
    struct weft_trace *trace = load(f, SAMPLE_TRACE);
    const struct weft_span_data *root = NULL;
    const struct weft_span_data *child = NULL;
    const struct weft_value *v = NULL;
    char hex[33];

    assert_int_equal(weft_trace_span_count(trace), 2);
    root = weft_trace_span(trace, 0);
    child = weft_trace_span(trace, 1);
    assert_string_equal(root->name, "POST /checkout");
    assert_int_equal(root->kind, WEFT_SPAN_KIND_SERVER);
    assert_int_equal(root->status_code, WEFT_STATUS_ERROR);
    assert_string_equal(root->status_message, "payment declined");
    assert_string_equal(root->trace_state, "vendor=1");
    assert_false(root->has_parent);
    assert_int_equal(weft_trace_span_depth(trace, 1), 1);
    assert_memory_equal(child->parent_span_id, root->span_id, WEFT_SPAN_ID_SIZE);
    weft_hex_encode(child->span_id, WEFT_SPAN_ID_SIZE, hex);
    assert_string_equal(hex, "3031323334353637");
    assert_string_equal(child->name, "chat gpt-4o");
    assert_int_equal(child->kind, WEFT_SPAN_KIND_CLIENT);
    assert_int_equal(child->start_time_ns, 1700000000100000000ull);
    assert_int_equal(child->end_time_ns, 1700000000600000000ull);
    assert_int_equal(child->trace_flags, 1);
    assert_int_equal(child->dropped_attrs, 3);
    assert_non_null(child->resource);
    assert_string_equal(weft_span_data_attr(child, "gen_ai.operation.name")->u.str, "chat");
    v = attr(child->resource->attrs, child->resource->attr_count, "service.name");
    assert_string_equal(v->u.str, "checkout");
    assert_string_equal(child->scope->name, "ingest-test");
    assert_string_equal(child->scope->version, "0.3");
    assert_int_equal(weft_span_data_attr(child, "gen_ai.usage.input_tokens")->u.i, 1234);
    assert_true(weft_span_data_attr(child, "weft.cost.usd")->u.d == 0.25);
    assert_true(weft_span_data_attr(child, "weft.cache.hit")->u.b);
    assert_int_equal(weft_span_data_attr(child, "negative")->u.i, -7);
    assert_string_equal(weft_span_data_attr(child, "unicode")->u.str, "h\xc3\xa9llo");
    v = weft_span_data_attr(child, "tags");
    assert_int_equal(v->type, WEFT_VALUE_STRING_ARRAY);
    assert_int_equal(v->len, 2);
    assert_string_equal(v->u.strs[1], "b");
    v = weft_span_data_attr(child, "numbers");
    assert_int_equal(v->type, WEFT_VALUE_INT_ARRAY);
    assert_int_equal(v->u.ints[1], -2);
    assert_int_equal(child->event_count, 1);
    assert_string_equal(child->events[0].name, "exception");
    assert_int_equal(child->events[0].time_ns, 1700000000150000000ull);
    assert_string_equal(
        attr(child->events[0].attrs, child->events[0].attr_count, "exception.type")->u.str,
        "Timeout");
    assert_int_equal(child->link_count, 1);
    weft_hex_encode(child->links[0].trace_id, WEFT_TRACE_ID_SIZE, hex);
    assert_string_equal(hex, "909192939495969798999a9b9c9d9e9f");
    assert_true(child->links[0].is_remote);
    assert_string_equal(attr(child->links[0].attrs, child->links[0].attr_count, "link.kind")->u.str,
                        "replan");
    weft_trace_free(trace);
}

/* ------------------------------------------------------------------------------------------ */
/* Bodies from weft's encoders                                                                 */

static void
test_ingest_protobuf_from_encoder_is_stored(void **state)
{
    struct fixture *f = *state;
    struct sample s;
    struct weft__buf body;
    struct answer a;
    struct weft__ingest_stats st;

    sample_init(&s);
    weft__buf_init(&body, 0);
    assert_weft_ok(weft__otlp_encode_proto(s.views, 2, &body));
    post(f, "POST", "application/x-protobuf", NULL, body.data, body.len, &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.content_type, "application/x-protobuf");
    assert_int_equal(a.body.len, 0); /* an ExportTraceServiceResponse with nothing to say */
    check_sample_stored(f);
    weft__ingest_stats(f->ingest, &st);
    assert_int_equal(st.spans_accepted, 2);
    assert_int_equal(st.requests_200, 1);
    answer_cleanup(&a);
    weft__buf_cleanup(&body);
}

static void
test_ingest_json_from_encoder_is_stored(void **state)
{
    struct fixture *f = *state;
    struct sample s;
    struct weft__buf body;
    struct answer a;
    uint64_t rejected = 1;

    sample_init(&s);
    weft__buf_init(&body, 0);
    assert_weft_ok(weft__otlp_encode_json(s.views, 2, &body));
    post(f, "POST", "application/json; charset=utf-8", NULL, body.data, body.len, &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.content_type, "application/json");
    assert_weft_ok(weft__otlp_parse_response(a.body.data, a.body.len, true, &rejected, NULL, 0));
    assert_int_equal(rejected, 0);
    check_sample_stored(f);
    answer_cleanup(&a);
    weft__buf_cleanup(&body);
}

static void
test_ingest_gzip_body_is_inflated(void **state)
{
    struct fixture *f = *state;
    struct sample s;
    struct weft__buf body;
    struct weft__buf gz;
    struct answer a;

    sample_init(&s);
    weft__buf_init(&body, 0);
    weft__buf_init(&gz, 0);
    assert_weft_ok(weft__otlp_encode_proto(s.views, 2, &body));
    assert_weft_ok(weft__gzip_compress(body.data, body.len, 1, &gz));
    post(f, "POST", "application/x-protobuf", "gzip", gz.data, gz.len, &a);
    assert_int_equal(a.status, 200);
    check_sample_stored(f);
    answer_cleanup(&a);
    weft__buf_cleanup(&body);
    weft__buf_cleanup(&gz);
}

/* ------------------------------------------------------------------------------------------ */
/* Hand-built protobuf                                                                         */

/* A minimal protobuf writer: fields appended to a weft__buf; nested messages are built in
 * their own buffer and appended with pb_msg. */
static void
pb_varint(struct weft__buf *b, uint64_t v)
{
    while (v >= 0x80) {
        assert_weft_ok(weft__buf_append_byte(b, (uint8_t)(v | 0x80)));
        v >>= 7;
    }
    assert_weft_ok(weft__buf_append_byte(b, (uint8_t)v));
}

static void
pb_bytes(struct weft__buf *b, uint32_t field, const void *data, size_t len)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, len);
    assert_weft_ok(weft__buf_append(b, data, len));
}

static void
pb_str(struct weft__buf *b, uint32_t field, const char *s)
{
    pb_bytes(b, field, s, strlen(s));
}

static void
pb_msg(struct weft__buf *b, uint32_t field, struct weft__buf *m)
{
    pb_bytes(b, field, m->data != NULL ? m->data : "", m->len);
    weft__buf_cleanup(m);
}

static void
pb_uint(struct weft__buf *b, uint32_t field, uint64_t v)
{
    pb_varint(b, (uint64_t)field << 3);
    pb_varint(b, v);
}

static void
pb_fixed64(struct weft__buf *b, uint32_t field, uint64_t v)
{
    pb_varint(b, (uint64_t)field << 3 | 1);
    for (int i = 0; i < 8; i++) {
        assert_weft_ok(weft__buf_append_byte(b, (uint8_t)(v >> (8 * i))));
    }
}

static void
pb_fixed32(struct weft__buf *b, uint32_t field, uint32_t v)
{
    pb_varint(b, (uint64_t)field << 3 | 5);
    for (int i = 0; i < 4; i++) {
        assert_weft_ok(weft__buf_append_byte(b, (uint8_t)(v >> (8 * i))));
    }
}

/* KeyValue {key, value: AnyValue built by the caller}. */
static void
pb_kv(struct weft__buf *b, uint32_t field, const char *key, struct weft__buf *any)
{
    struct weft__buf kv;

    weft__buf_init(&kv, 0);
    pb_str(&kv, 1, key);
    pb_msg(&kv, 2, any);
    pb_msg(b, field, &kv);
}

static void
any_str(struct weft__buf *any, const char *s)
{
    weft__buf_init(any, 0);
    pb_str(any, 1, s);
}

/* A span with @p trace_id (len bytes) and @p span_id, plus unknown fields of every wire type
 * that a decoder must skip. */
static void
pb_span(struct weft__buf *ss,
        const uint8_t *trace_id,
        size_t trace_len,
        const uint8_t *span_id,
        const char *name,
        struct weft__buf *extra_attrs)
{
    struct weft__buf span;

    weft__buf_init(&span, 0);
    pb_bytes(&span, 1, trace_id, trace_len);
    pb_bytes(&span, 2, span_id, 8);
    pb_str(&span, 5, name);
    pb_uint(&span, 6, 1);
    pb_fixed64(&span, 7, 1700000000000000000ull);
    pb_fixed64(&span, 8, 1700000000002000000ull);
    pb_uint(&span, 99, 12345);             /* unknown varint */
    pb_fixed64(&span, 100, 1);             /* unknown fixed64 */
    pb_fixed32(&span, 101, 1);             /* unknown fixed32 */
    pb_str(&span, 102, "from the future"); /* unknown length-delimited */
    pb_fixed32(&span, 16, 0x301);          /* sampled, has-is-remote, is-remote */
    if (extra_attrs != NULL) {
        assert_weft_ok(weft__buf_append(&span, extra_attrs->data, extra_attrs->len));
    }
    pb_msg(ss, 2, &span);
}

/* ExportTraceServiceRequest {ResourceSpans {Resource {service.name}, ScopeSpans {@p spans}}}. */
static void
pb_request(struct weft__buf *req, const char *service, struct weft__buf *scope_spans)
{
    struct weft__buf rs;
    struct weft__buf res;
    struct weft__buf any;

    weft__buf_init(req, 0);
    weft__buf_init(&rs, 0);
    weft__buf_init(&res, 0);
    any_str(&any, service);
    pb_kv(&res, 1, "service.name", &any);
    pb_msg(&rs, 2, scope_spans); /* scope_spans before the resource: order is free */
    pb_msg(&rs, 1, &res);
    pb_msg(req, 1, &rs);
}

static const uint8_t good_trace[16] = {0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
static const uint8_t span_a[8] = {1, 1, 1, 1, 1, 1, 1, 1};
static const uint8_t span_b[8] = {2, 2, 2, 2, 2, 2, 2, 2};
static const uint8_t span_c[8] = {3, 3, 3, 3, 3, 3, 3, 3};

static void
test_ingest_bad_spans_give_partial_success(void **state)
{
    struct fixture *f = *state;
    static const uint8_t zero[16] = {0};
    struct weft__buf ss;
    struct weft__buf req;
    struct answer a;
    uint64_t rejected = 0;
    char message[128];
    struct weft_trace *trace = NULL;
    struct weft__ingest_stats st;

    weft__buf_init(&ss, 0);
    pb_span(&ss, good_trace, 16, span_a, "good", NULL);
    pb_span(&ss, good_trace, 15, span_b, "short trace id", NULL);
    pb_span(&ss, zero, 0, span_c, "empty trace id", NULL);
    pb_span(&ss, zero, 16, span_c, "zero trace id", NULL);
    pb_request(&req, "hand-built", &ss);
    post(f, "POST", "application/x-protobuf", NULL, req.data, req.len, &a);
    assert_int_equal(a.status, 200);
    assert_weft_ok(weft__otlp_parse_response(a.body.data, a.body.len, false, &rejected, message,
                                             sizeof(message)));
    assert_int_equal(rejected, 3);
    assert_non_null(strstr(message, "trace id"));
    trace = load(f, "ab0102030405060708090a0b0c0d0e0f");
    assert_int_equal(weft_trace_span_count(trace), 1);
    assert_string_equal(weft_trace_span(trace, 0)->name, "good");
    assert_string_equal(weft_trace_span(trace, 0)->resource->attrs[0].value.u.str, "hand-built");
    assert_true(weft_trace_span(trace, 0)->trace_flags == 1);
    weft_trace_free(trace);
    weft__ingest_stats(f->ingest, &st);
    assert_int_equal(st.spans_accepted, 1);
    assert_int_equal(st.spans_rejected, 3);
    answer_cleanup(&a);
    weft__buf_cleanup(&req);
}

/* kvlist, bytes, a heterogeneous array and an empty value: what struct weft_value cannot hold
 * is kept as JSON (or base64) text; an empty value is dropped and counted. */
static void
test_ingest_every_anyvalue_kind_is_kept(void **state)
{
    struct fixture *f = *state;
    struct weft__buf attrs;
    struct weft__buf any;
    struct weft__buf inner;
    struct weft__buf list;
    struct weft__buf ss;
    struct weft__buf req;
    struct answer a;
    struct weft_trace *trace = NULL;
    const struct weft_span_data *span = NULL;
    static const uint8_t raw[] = {0xde, 0xad, 0xbe, 0xef};

    weft__buf_init(&attrs, 0);
    /* kvlist {"x": 1, "y": ["s", true]} */
    weft__buf_init(&list, 0);
    weft__buf_init(&any, 0);
    pb_uint(&any, 3, 1);
    pb_kv(&list, 1, "x", &any);
    weft__buf_init(&inner, 0);
    any_str(&any, "s");
    pb_msg(&inner, 1, &any);
    weft__buf_init(&any, 0);
    pb_uint(&any, 2, 1);
    pb_msg(&inner, 1, &any);
    weft__buf_init(&any, 0);
    pb_msg(&any, 5, &inner);
    pb_kv(&list, 1, "y", &any);
    weft__buf_init(&any, 0);
    pb_msg(&any, 6, &list);
    pb_kv(&attrs, 9, "map", &any);
    /* bytes */
    weft__buf_init(&any, 0);
    pb_bytes(&any, 7, raw, sizeof(raw));
    pb_kv(&attrs, 9, "blob", &any);
    /* a double array with NaN */
    weft__buf_init(&list, 0);
    weft__buf_init(&any, 0);
    pb_fixed64(&any, 4, 0x3ff8000000000000ull); /* 1.5 */
    pb_msg(&list, 1, &any);
    weft__buf_init(&any, 0);
    pb_fixed64(&any, 4, 0x7ff8000000000000ull); /* NaN */
    pb_msg(&list, 1, &any);
    weft__buf_init(&any, 0);
    pb_msg(&any, 5, &list);
    pb_kv(&attrs, 9, "doubles", &any);
    /* an empty value */
    weft__buf_init(&any, 0);
    pb_kv(&attrs, 9, "nothing", &any);
    weft__buf_init(&ss, 0);
    pb_span(&ss, good_trace, 16, span_b, "values", &attrs);
    weft__buf_cleanup(&attrs);
    pb_request(&req, "values", &ss);
    post(f, "POST", "application/x-protobuf", NULL, req.data, req.len, &a);
    assert_int_equal(a.status, 200);
    assert_int_equal(a.body.len, 0);
    trace = load(f, "ab0102030405060708090a0b0c0d0e0f");
    span = weft_trace_span(trace, 0);
    assert_string_equal(weft_span_data_attr(span, "map")->u.str, "{\"x\":1,\"y\":[\"s\",true]}");
    assert_string_equal(weft_span_data_attr(span, "blob")->u.str, "3q2+7w==");
    assert_int_equal(weft_span_data_attr(span, "doubles")->type, WEFT_VALUE_DOUBLE_ARRAY);
    assert_true(weft_span_data_attr(span, "doubles")->u.doubles[0] == 1.5);
    assert_true(isnan(weft_span_data_attr(span, "doubles")->u.doubles[1]));
    assert_null(weft_span_data_attr(span, "nothing"));
    assert_int_equal(span->dropped_attrs, 1);
    assert_true(span->parent_is_remote == false); /* no parent: remote means nothing */
    weft_trace_free(trace);
    answer_cleanup(&a);
    weft__buf_cleanup(&req);
}

/* ------------------------------------------------------------------------------------------ */
/* Refusals                                                                                    */

static void
test_ingest_malformed_protobuf_is_400_with_status(void **state)
{
    struct fixture *f = *state;
    struct weft__buf ss;
    struct weft__buf req;
    struct answer a;
    struct weft__ingest_stats st;

    weft__buf_init(&ss, 0);
    pb_span(&ss, good_trace, 16, span_a, "cut", NULL);
    pb_request(&req, "cut", &ss);
    post(f, "POST", "application/x-protobuf", NULL, req.data, req.len - 3, &a);
    assert_int_equal(a.status, 400);
    assert_string_equal(a.content_type, "application/x-protobuf");
    /* google.rpc.Status: code (field 1) INVALID_ARGUMENT = 3, then a message (field 2). */
    assert_true(a.body.len > 4);
    assert_int_equal((uint8_t)a.body.data[0], 0x08);
    assert_int_equal((uint8_t)a.body.data[1], 3);
    assert_int_equal((uint8_t)a.body.data[2], 0x12);
    answer_cleanup(&a);
    weft__ingest_stats(f->ingest, &st);
    assert_int_equal(st.requests_400, 1);
    assert_int_equal(st.spans_accepted, 0);
    weft__buf_cleanup(&req);
}

static void
test_ingest_malformed_json_is_400_with_status(void **state)
{
    struct fixture *f = *state;
    static const char *const bodies[] = {"{\"resourceSpans\": [", "[]", "{\"resourceSpans\": {}}",
                                         "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":"
                                         "[{\"startTimeUnixNano\":\"soon\"}]}]}]}"};

    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        struct answer a;
        json_t *j = NULL;

        post(f, "POST", "application/json", NULL, bodies[i], strlen(bodies[i]), &a);
        assert_int_equal(a.status, 400);
        j = json_loadb(a.body.data, a.body.len, 0, NULL);
        assert_non_null(j);
        assert_int_equal(json_integer_value(json_object_get(j, "code")), 3);
        assert_true(json_is_string(json_object_get(j, "message")));
        json_decref(j);
        answer_cleanup(&a);
    }
}

static void
test_ingest_body_over_cap_is_413(void **state)
{
    struct fixture *f = *state;
    size_t len = 100 * 1024;
    char *big = calloc(1, len);
    struct answer a;
    struct weft__ingest_stats st;

    assert_non_null(big);
    post(f, "POST", "application/x-protobuf", NULL, big, len, &a);
    assert_int_equal(a.status, 413);
    answer_cleanup(&a);
    weft__ingest_stats(f->ingest, &st);
    assert_int_equal(st.requests_413, 1);
    free(big);
}

/* 32 MiB of zeros gzip to about 32 KiB: under the 64 KiB cap on the wire, far over it inflated. */
static void
test_ingest_gzip_bomb_is_413(void **state)
{
    struct fixture *f = *state;
    size_t len = (size_t)32 << 20;
    char *zeros = calloc(1, len);
    struct weft__buf gz;
    struct answer a;

    assert_non_null(zeros);
    weft__buf_init(&gz, 0);
    assert_weft_ok(weft__gzip_compress(zeros, len, 9, &gz));
    free(zeros);
    assert_true(gz.len < 64 * 1024);
    post(f, "POST", "application/x-protobuf", "gzip", gz.data, gz.len, &a);
    assert_int_equal(a.status, 413);
    answer_cleanup(&a);
    weft__buf_cleanup(&gz);
}

static void
test_ingest_wrong_content_type_is_415_and_get_is_405(void **state)
{
    struct fixture *f = *state;
    struct answer a;
    struct weft__ingest_stats st;

    post(f, "POST", "text/plain", NULL, "hi", 2, &a);
    assert_int_equal(a.status, 415);
    answer_cleanup(&a);
    post(f, "POST", NULL, NULL, "hi", 2, &a); /* curl sends form-urlencoded */
    assert_int_equal(a.status, 415);
    answer_cleanup(&a);
    post(f, "POST", "application/json", "br", "{}", 2, &a);
    assert_int_equal(a.status, 415);
    answer_cleanup(&a);
    post(f, "GET", NULL, NULL, NULL, 0, &a);
    assert_int_equal(a.status, 405);
    answer_cleanup(&a);
    post(f, "POST", "application/x-protobuf", "gzip", "not gzip", 8, &a);
    assert_int_equal(a.status, 400);
    answer_cleanup(&a);
    weft__ingest_stats(f->ingest, &st);
    assert_int_equal(st.requests_415, 3);
    assert_int_equal(st.requests_405, 1);
    assert_int_equal(st.requests_400, 1);
}

static void
test_ingest_counters_reach_the_meter(void **state)
{
    struct fixture *f = *state;
    struct weft_meter *meter = NULL;
    char *text = NULL;
    size_t len = 0;
    struct answer a;

    post(f, "POST", "text/plain", NULL, "x", 1, &a);
    answer_cleanup(&a);
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft__ingest_observe(f->ingest, meter));
    assert_weft_ok(weft_prometheus_render(meter, &text, &len));
    assert_non_null(strstr(text, "weft_ingest_requests_total{status=\"415\"} 1"));
    assert_non_null(strstr(text, "weft_ingest_spans_total{outcome=\"accepted\"} 0"));
    assert_non_null(strstr(text, "weft_ingest_store_checkpoints_total{mode=\"background\"} 0"));
    assert_non_null(strstr(text, "weft_ingest_store_checkpoints_total{mode=\"inline\"} 0"));
    free(text);
    weft_meter_free(meter);
}

/* ------------------------------------------------------------------------------------------ */
/* The decoders directly                                                                       */

static void
test_ingest_decoder_caps_the_decoded_size(void **state)
{
    struct weft__otlp_batch batch;
    struct weft__buf ss;
    struct weft__buf req;

    (void)state;
    weft__buf_init(&ss, 0);
    for (int i = 0; i < 200; i++) {
        pb_span(&ss, good_trace, 16, span_a, "many", NULL);
    }
    pb_request(&req, "cap", &ss);
    weft__otlp_batch_init(&batch, 4096);
    assert_int_equal(weft__otlp_decode_proto((const uint8_t *)req.data, req.len, &batch, NULL, 0),
                     WEFT_ELIMIT);
    weft__otlp_batch_cleanup(&batch);
    weft__otlp_batch_init(&batch, 1 << 20);
    assert_weft_ok(weft__otlp_decode_proto((const uint8_t *)req.data, req.len, &batch, NULL, 0));
    assert_int_equal(batch.count, 200);
    weft__otlp_batch_cleanup(&batch);
    weft__buf_cleanup(&req);
}

static void
test_ingest_decoder_rejects_deep_nesting_and_groups(void **state)
{
    struct weft__otlp_batch batch;
    struct weft__buf any;
    struct weft__buf attrs;
    struct weft__buf ss;
    struct weft__buf req;
    char why[128];
    static const uint8_t group[] = {0x0b, 0x0c}; /* field 1 start group, end group */

    (void)state;
    any_str(&any, "leaf");
    for (int i = 0; i < WEFT__OTLP_MAX_VALUE_DEPTH + 2; i++) {
        struct weft__buf arr;
        struct weft__buf outer;

        weft__buf_init(&arr, 0);
        pb_msg(&arr, 1, &any);
        weft__buf_init(&outer, 0);
        pb_msg(&outer, 5, &arr);
        any = outer;
    }
    weft__buf_init(&attrs, 0);
    pb_kv(&attrs, 9, "deep", &any);
    weft__buf_init(&ss, 0);
    pb_span(&ss, good_trace, 16, span_a, "deep", &attrs);
    weft__buf_cleanup(&attrs);
    pb_request(&req, "deep", &ss);
    weft__otlp_batch_init(&batch, 1 << 20);
    assert_int_equal(
        weft__otlp_decode_proto((const uint8_t *)req.data, req.len, &batch, why, sizeof(why)),
        WEFT_EPARSE);
    assert_non_null(strstr(why, "nested"));
    weft__otlp_batch_cleanup(&batch);
    assert_int_equal(weft__otlp_decode_proto(group, sizeof(group), &batch, why, sizeof(why)),
                     WEFT_EPARSE);
    weft__otlp_batch_cleanup(&batch);
    weft__buf_cleanup(&req);
}

static void
test_ingest_json_decoder_accepts_proto_names_and_enum_names(void **state)
{
    static const char body[] =
        "{\"resource_spans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
        "\"value\":{\"string_value\":\"snake\"}}]},\"scope_spans\":[{\"spans\":[{"
        "\"trace_id\":\"AB0102030405060708090A0B0C0D0E0F\",\"span_id\":\"0101010101010101\","
        "\"parent_span_id\":\"0202020202020202\",\"name\":\"n\",\"kind\":\"SPAN_KIND_PRODUCER\","
        "\"start_time_unix_nano\":1700000000000000000,\"end_time_unix_nano\":"
        "\"1700000000000000001\","
        "\"status\":{\"code\":\"STATUS_CODE_OK\"},\"unknownMember\":{\"a\":[1]},"
        "\"attributes\":[{\"key\":\"i\",\"value\":{\"intValue\":-5}},"
        "{\"key\":\"b\",\"value\":{\"bytesValue\":\"3q2+7w==\"}},"
        "{\"key\":\"mixed\",\"value\":{\"arrayValue\":{\"values\":[{\"intValue\":\"1\"},"
        "{\"stringValue\":\"x\"}]}}}]}]}]}]}";
    struct weft__otlp_batch batch;
    const struct weft_span_data *s = NULL;

    (void)state;
    weft__otlp_batch_init(&batch, 1 << 20);
    assert_weft_ok(weft__otlp_decode_json(body, strlen(body), &batch, NULL, 0));
    assert_int_equal(batch.count, 1);
    s = batch.spans[0];
    assert_int_equal(s->kind, WEFT_SPAN_KIND_PRODUCER);
    assert_int_equal(s->status_code, WEFT_STATUS_OK);
    assert_int_equal(s->trace_id[0], 0xab);
    assert_true(s->has_parent);
    assert_int_equal(s->end_time_ns, 1700000000000000001ull);
    assert_int_equal(weft_span_data_attr(s, "i")->u.i, -5);
    assert_string_equal(weft_span_data_attr(s, "b")->u.str, "3q2+7w==");
    assert_string_equal(weft_span_data_attr(s, "mixed")->u.str, "[1,\"x\"]");
    assert_string_equal(s->resource->attrs[0].value.u.str, "snake");
    weft__otlp_batch_cleanup(&batch);
}

/* A link with an all-zero trace or span id is dropped and counted in JSON as in protobuf (the
 * JSON decoder used to keep it). */
static void
test_ingest_json_decoder_drops_zero_id_links(void **state)
{
    static const char body[] =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{"
        "\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0101010101010101\","
        "\"name\":\"n\",\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"2\",\"links\":["
        "{\"traceId\":\"00000000000000000000000000000000\",\"spanId\":\"0202020202020202\"},"
        "{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0000000000000000\"},"
        "{\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0303030303030303\"}]}]}]}]"
        "}";
    struct weft__otlp_batch batch;
    const struct weft_span_data *s = NULL;

    (void)state;
    weft__otlp_batch_init(&batch, 1 << 20);
    assert_weft_ok(weft__otlp_decode_json(body, strlen(body), &batch, NULL, 0));
    assert_int_equal(batch.count, 1);
    s = batch.spans[0];
    assert_int_equal(s->link_count, 1);
    assert_int_equal(s->links[0].span_id[0], 0x03);
    assert_int_equal(s->dropped_links, 2);
    weft__otlp_batch_cleanup(&batch);
}

/* A kvlistValue entry without a key is kept under "" (proto3's default, as the protobuf
 * decoder reads it); one whose key is not a string fails the body (it was dropped unseen). */
static void
test_ingest_json_kvlist_keys(void **state)
{
#define KV_SPAN(kv)                                                                             \
    "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{"                                        \
    "\"traceId\":\"0102030405060708090a0b0c0d0e0f10\",\"spanId\":\"0101010101010101\","         \
    "\"name\":\"n\",\"attributes\":[{\"key\":\"m\",\"value\":{\"kvlistValue\":{\"values\":[" kv \
    "]}}}]}]}]}]}"
    static const char keyless[] = KV_SPAN("{\"value\":{\"intValue\":\"1\"}}");
    static const char numeric[] = KV_SPAN("{\"key\":5,\"value\":{\"intValue\":\"1\"}}");
#undef KV_SPAN
    struct weft__otlp_batch batch;
    char why[192] = "";

    (void)state;
    weft__otlp_batch_init(&batch, 1 << 20);
    assert_weft_ok(weft__otlp_decode_json(keyless, strlen(keyless), &batch, NULL, 0));
    assert_int_equal(batch.count, 1);
    assert_string_equal(weft_span_data_attr(batch.spans[0], "m")->u.str, "{\"\":1}");
    weft__otlp_batch_cleanup(&batch);
    weft__otlp_batch_init(&batch, 1 << 20);
    assert_true(weft__otlp_decode_json(numeric, strlen(numeric), &batch, why, sizeof(why)) !=
                WEFT_OK);
    assert_non_null(strstr(why, "key is not a string"));
    weft__otlp_batch_cleanup(&batch);
}

/* Found by fuzz_otlp_ingest (corpus regress-nul-key): a key that starts with a NUL byte was kept
 * and read as an empty key. */
static void
test_ingest_decoders_drop_keys_holding_nul(void **state)
{
    static const char json[] =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":"
        "\"ab0102030405060708090a0b0c0d0e0f\",\"spanId\":\"0101010101010101\",\"attributes\":"
        "[{\"key\":\"\\u0000x\",\"value\":{\"intValue\":1}},{\"key\":\"ok\",\"value\":"
        "{\"intValue\":2}}]}]}]}]}";
    static const char nul_key[] = {'\0', 'x'};
    struct weft__otlp_batch batch;
    struct weft__buf attrs;
    struct weft__buf any;
    struct weft__buf kv;
    struct weft__buf ss;
    struct weft__buf req;

    (void)state;
    weft__otlp_batch_init(&batch, 1 << 20);
    assert_weft_ok(weft__otlp_decode_json(json, strlen(json), &batch, NULL, 0));
    assert_int_equal(batch.count, 1);
    assert_int_equal(batch.spans[0]->attr_count, 1);
    assert_string_equal(batch.spans[0]->attrs[0].key, "ok");
    assert_int_equal(batch.spans[0]->dropped_attrs, 1);
    weft__otlp_batch_cleanup(&batch);
    weft__buf_init(&attrs, 0);
    weft__buf_init(&kv, 0);
    pb_bytes(&kv, 1, nul_key, sizeof(nul_key));
    any_str(&any, "v");
    pb_msg(&kv, 2, &any);
    pb_msg(&attrs, 9, &kv);
    weft__buf_init(&ss, 0);
    pb_span(&ss, good_trace, 16, span_a, "nul", &attrs);
    weft__buf_cleanup(&attrs);
    pb_request(&req, "nul", &ss);
    assert_weft_ok(weft__otlp_decode_proto((const uint8_t *)req.data, req.len, &batch, NULL, 0));
    assert_int_equal(batch.count, 1);
    assert_int_equal(batch.spans[0]->attr_count, 0);
    assert_int_equal(batch.spans[0]->dropped_attrs, 1);
    weft__otlp_batch_cleanup(&batch);
    weft__buf_cleanup(&req);
}

static size_t
discard(char *data, size_t size, size_t n, void *user_data)
{
    (void)data;
    (void)user_data;
    return size * n;
}

static size_t
discard_body(char *data, size_t size, size_t n, void *user_data)
{
    return discard(data, size, n, user_data);
}

/* A route with max_body 0 (every explorer route) takes no body: one sent chunked, with no
 * Content-Length to refuse it by, is not accumulated either (it once was, without a cap). */
struct probe {
    bool is_too_large;
    size_t body_len;
    bool is_called;
};

static void
probe_handler(void *user_data, const struct weft__http_request *req, struct weft__http_reply *reply)
{
    struct probe *p = user_data;

    p->is_called = true;
    p->is_too_large = req->is_too_large;
    p->body_len = req->body_len;
    reply->status = 405;
    reply->content_type = "text/plain";
    reply->body = "no body here\n";
    reply->len = strlen(reply->body);
}

static void
test_ingest_bodyless_route_keeps_no_chunked_body(void **state)
{
    struct probe p = {false, 0, false};
    struct weft__http_route route = {"/probe", 0, probe_handler, &p, false, 0, false};
    struct weft_metrics_server *server = NULL;
    struct curl_slist *headers = curl_slist_append(NULL, "Transfer-Encoding: chunked");
    static char body[256 * 1024];
    CURL *curl = curl_easy_init();
    char url[96];
    long status = 0;

    (void)state;
    memset(body, 'x', sizeof(body));
    assert_weft_ok(
        weft__metrics_server_start_routes(no_metrics, NULL, "127.0.0.1:0", &route, 1, &server));
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/probe", weft_metrics_server_port(server));
    assert_non_null(curl);
    assert_non_null(headers);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)sizeof(body));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    assert_int_equal(curl_easy_perform(curl), CURLE_OK);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    curl_slist_free_all(headers);
    weft_metrics_server_stop(server);
    assert_int_equal(status, 405);
    assert_true(p.is_called);
    assert_true(p.is_too_large);
    assert_int_equal(p.body_len, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* Every request answered, memory bounded                                                     */

struct poster {
    unsigned port;
    const char *path;
    const void *body;
    size_t len;
    CURLcode rc;
    long status;
    bool has_retry_after;
};

static size_t
poster_header(char *data, size_t size, size_t n, void *user_data)
{
    struct poster *p = user_data;

    if (size * n >= 12 && strncasecmp(data, "Retry-After:", 12) == 0) {
        p->has_retry_after = true;
    }
    return size * n;
}

/* POST a protobuf body, or GET when body is NULL; no assertion: runs on a thread. */
static void *
poster_run(void *arg)
{
    struct poster *p = arg;
    CURL *curl = curl_easy_init();
    struct curl_slist *headers = NULL;
    char url[128];

    p->rc = CURLE_FAILED_INIT;
    if (curl == NULL) {
        return NULL;
    }
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", p->port, p->path);
    headers = curl_slist_append(headers, "Content-Type: application/x-protobuf");
    headers = curl_slist_append(headers, "Expect:");
    curl_easy_setopt(curl, CURLOPT_URL, url);
    if (p->body != NULL) {
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, p->body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)p->len);
    }
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard_body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, poster_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, p);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 30000L);
    p->rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &p->status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return NULL;
}

/* GET @p path on the fixture's server into @p a (status and body). */
static void
get(const struct fixture *f, const char *path, long timeout_ms, struct answer *a, uint64_t *ms)
{
    CURL *curl = curl_easy_init();
    char url[128];
    uint64_t t0 = weft__monotonic_ns();

    memset(a, 0, sizeof(*a));
    weft__buf_init(&a->body, 0);
    assert_non_null(curl);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", f->port, path);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    assert_int_equal(curl_easy_perform(curl), CURLE_OK);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &a->status);
    curl_easy_cleanup(curl);
    if (ms != NULL) {
        *ms = (weft__monotonic_ns() - t0) / 1000000u;
    }
}

/* The server's refusal counter for /v1/traces with @p reason, from its /metrics. */
static long
refused(const struct fixture *f, const char *reason)
{
    struct answer a;
    char needle[128];
    const char *at = NULL;
    long n = -1;

    get(f, "/metrics", 2000, &a, NULL);
    snprintf(needle, sizeof(needle),
             "weft_http_requests_refused_total{reason=\"%s\",route=\"/v1/traces\"} ", reason);
    at = a.body.data != NULL ? strstr(a.body.data, needle) : NULL;
    if (at != NULL) {
        n = strtol(at + strlen(needle), NULL, 10);
    }
    answer_cleanup(&a);
    return n;
}

#define POSTERS        6
#define POSTER_SPANS   20000
#define STORE_LOCKED_S 3.5

/* The reported fault: big posts while the span store is locked. The server used to run two
 * threads; both sat in handlers waiting for the store, the other connections were not read
 * for 3 s and were closed unanswered, their spans lost and counted nowhere, and /healthz
 * waited too. Now two posts are admitted (they wait for the store and succeed), the other
 * four are answered 503 with Retry-After at once, /healthz answers meanwhile, and /metrics
 * counts the refusals. */
static void
test_ingest_every_post_is_answered_while_the_store_is_locked(void **state)
{
    struct fixture *f = *state;
    struct weft__buf ss;
    struct weft__buf req;
    struct poster posters[POSTERS];
    pthread_t threads[POSTERS];
    struct weft__ingest_stats st;
    struct answer health;
    struct answer scraped;
    sqlite3 *db = NULL;
    uint64_t t0 = 0;
    uint64_t health_ms = 0;
    uint64_t metrics_ms = 0;
    uint64_t deadline = 0;
    long busy = 0;
    size_t n200 = 0;
    size_t n503 = 0;

    weft__buf_init(&ss, 0);
    for (uint32_t i = 0; i < POSTER_SPANS; i++) {
        uint8_t id[8] = {
            1, 0, 0, 0, (uint8_t)(i >> 24), (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i};
        pb_span(&ss, good_trace, 16, id, "load", NULL);
    }
    pb_request(&req, "load", &ss);
    /* Another writer holds the store's write lock, as a checkpoint or a second process may. */
    assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    t0 = weft__monotonic_ns();
    for (size_t i = 0; i < POSTERS; i++) {
        posters[i] = (struct poster){f->port, "/v1/traces", req.data, req.len, 0, 0, false};
        assert_int_equal(pthread_create(&threads[i], NULL, poster_run, &posters[i]), 0);
    }
    deadline = t0 + 20000000000ull;
    while ((busy = refused(f, "busy")) < POSTERS - WEFT__INGEST_MAX_ACTIVE &&
           weft__monotonic_ns() < deadline) {
        weft__sleep_ms(10);
    }
    get(f, "/healthz", 1000, &health, &health_ms);
    print_message("/healthz answered in %llu ms\n", (unsigned long long)health_ms);
    get(f, "/metrics", 1000, &scraped, &metrics_ms);
    /* Long enough that a server parking connections behind busy handlers times them out. */
    while (weft__monotonic_ns() < t0 + (uint64_t)(STORE_LOCKED_S * 1e9)) {
        weft__sleep_ms(50);
    }
    assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    for (size_t i = 0; i < POSTERS; i++) {
        pthread_join(threads[i], NULL);
    }
    assert_int_equal(busy, POSTERS - WEFT__INGEST_MAX_ACTIVE);
    assert_int_equal(health.status, 200);
    assert_true(health_ms < 1000);
    answer_cleanup(&health);
    assert_int_equal(scraped.status, 200);
    assert_true(metrics_ms < 1000);
    answer_cleanup(&scraped);
    for (size_t i = 0; i < POSTERS; i++) {
        assert_int_equal(posters[i].rc, CURLE_OK); /* an answer, not a closed connection */
        assert_true(posters[i].status == 200 || posters[i].status == 503);
        n200 += posters[i].status == 200;
        if (posters[i].status == 503) {
            assert_true(posters[i].has_retry_after);
            n503++;
        }
    }
    assert_int_equal(n200, WEFT__INGEST_MAX_ACTIVE);
    assert_int_equal(n503, POSTERS - WEFT__INGEST_MAX_ACTIVE);
    /* What the clients saw is what /metrics says. */
    weft__ingest_stats(f->ingest, &st);
    assert_int_equal(st.requests_200, n200);
    assert_int_equal(st.spans_accepted, n200 * POSTER_SPANS);
    assert_int_equal(refused(f, "busy"), (long)n503);
    assert_int_equal(refused(f, "timeout"), 0);
    assert_int_equal(refused(f, "client_closed"), 0);
    weft__buf_cleanup(&req);
}

/* The process's peak resident set since the last reset, in KiB (VmHWM). */
static long
vm_kib(const char *field)
{
    FILE *fp = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;

    assert_non_null(fp);
    while (fgets(line, sizeof(line), fp) != NULL) {
        if (strncmp(line, field, strlen(field)) == 0) {
            kib = strtol(line + strlen(field) + 1, NULL, 10);
        }
    }
    fclose(fp);
    assert_true(kib > 0);
    return kib;
}

/* Reset VmHWM to the current resident set (Linux >= 4.0). */
static void
reset_peak(void)
{
    FILE *fp = fopen("/proc/self/clear_refs", "w");

    assert_non_null(fp);
    assert_true(fputs("5", fp) >= 0);
    assert_int_equal(fclose(fp), 0);
}

/* The bound on the bomb's peak: the budget (128 MiB) and the inflated body (16 MiB) with the
 * allocator's and ASan's overheads (measured 127 MiB plain, 214 MiB under ASan); ThreadSanitizer
 * shadows every allocation several times over (636 MiB measured). Before the fix: 1,174 MiB
 * plain. */
#if defined(__SANITIZE_THREAD__)
#define BOMB_PEAK_MIB 1500
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BOMB_PEAK_MIB 1500
#endif
#endif
#ifndef BOMB_PEAK_MIB
#define BOMB_PEAK_MIB 600
#endif

/* The reported bomb: 16 KB of gzip inflating to ~16 MB of empty attributes, under the body
 * cap. jansson's tree of it took 1.3 GB, then was counted against the decoded budget (8 x the
 * body cap) and refused with 413. The streaming decoder builds no tree: each empty attribute
 * is dropped and counted as it is read, so the request is accepted within little memory. */
static void
test_ingest_gzip_json_bomb_is_decoded_within_the_budget(void **state)
{
    struct fixture *f = *state;
    static const char head[] =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":"
        "\"ab0102030405060708090a0b0c0d0e0f\",\"spanId\":\"0101010101010101\",\"attributes\":[";
    static const char tail[] = "{}]}]}]}]}";
    size_t count = ((size_t)15 << 20) / 3;
    struct weft__buf json;
    struct weft__buf gz;
    struct answer a;
    struct weft__ingest_stats st;
    long before = 0;
    long peak = 0;

    weft__buf_init(&json, 0);
    weft__buf_init(&gz, 0);
    assert_weft_ok(weft__buf_reserve(&json, sizeof(head) + 3 * count + sizeof(tail)));
    assert_weft_ok(weft__buf_append_str(&json, head));
    for (size_t i = 0; i < count; i++) {
        assert_weft_ok(weft__buf_append(&json, "{},", 3));
    }
    assert_weft_ok(weft__buf_append_str(&json, tail));
    assert_true(json.len < WEFT__INGEST_DEFAULT_MAX_BODY);
    assert_weft_ok(weft__gzip_compress(json.data, json.len, 9, &gz));
    weft__buf_cleanup(&json);
    assert_true(gz.len < 64 * 1024);
    before = vm_kib("VmRSS:");
    reset_peak();
    post(f, "POST", "application/json", "gzip", gz.data, gz.len, &a);
    peak = vm_kib("VmHWM:");
    assert_int_equal(a.status, 200);
    answer_cleanup(&a);
    weft__buf_cleanup(&gz);
    weft__ingest_stats(f->ingest, &st);
    assert_int_equal(st.requests_413, 0);
    assert_int_equal(st.spans_accepted, 1);
    print_message("peak growth %ld MiB\n", (peak - before) / 1024);
    assert_true(peak - before < BOMB_PEAK_MIB * 1024);
}

/* The OTel SDK's span limits, applied at ingest (a sender may not have): 128 attributes,
 * events and links per span and 128 attributes per event and link; the first are kept, the
 * rest dropped and added to the dropped counts that the store keeps. */
static void
test_ingest_span_limits_drop_and_count(void **state)
{
    struct fixture *f = *state;
    struct weft__buf json;
    struct answer a;
    struct weft_trace *trace = NULL;
    const struct weft_span_data *span = NULL;
    struct weft__ingest_stats st;
    struct weft_meter *meter = NULL;

    weft__buf_init(&json, 0);
    assert_weft_ok(weft__buf_append_str(
        &json, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":"
               "\"ab0102030405060708090a0b0c0d0e0f\",\"spanId\":\"0101010101010101\","
               "\"droppedAttributesCount\":5,\"attributes\":["));
    for (int i = 0; i < 200; i++) {
        assert_weft_ok(weft__buf_printf(&json, "%s{\"key\":\"k%d\",\"value\":{\"intValue\":%d}}",
                                        i > 0 ? "," : "", i, i));
    }
    assert_weft_ok(weft__buf_append_str(&json, "],\"events\":["));
    for (int i = 0; i < 130; i++) {
        assert_weft_ok(
            weft__buf_printf(&json, "%s{\"name\":\"e%d\",\"attributes\":[", i > 0 ? "," : "", i));
        for (int k = 0; i == 0 && k < 131; k++) {
            assert_weft_ok(weft__buf_printf(&json, "%s{\"key\":\"a%d\",\"value\":{\"intValue\":1}}",
                                            k > 0 ? "," : "", k));
        }
        assert_weft_ok(weft__buf_append_str(&json, "]}"));
    }
    assert_weft_ok(weft__buf_append_str(&json, "],\"links\":["));
    for (int i = 0; i < 129; i++) {
        assert_weft_ok(weft__buf_printf(&json,
                                        "%s{\"traceId\":\"cd0102030405060708090a0b0c0d0e0f\","
                                        "\"spanId\":\"02020202020202%02x\",\"attributes\":[",
                                        i > 0 ? "," : "", i + 1));
        for (int k = 0; i == 0 && k < 132; k++) {
            assert_weft_ok(weft__buf_printf(&json, "%s{\"key\":\"l%d\",\"value\":{\"intValue\":1}}",
                                            k > 0 ? "," : "", k));
        }
        assert_weft_ok(weft__buf_append_str(&json, "]}"));
    }
    assert_weft_ok(weft__buf_append_str(&json, "]}]}]}]}"));
    post(f, "POST", "application/json", NULL, json.data, json.len, &a);
    assert_int_equal(a.status, 200);
    answer_cleanup(&a);
    weft__buf_cleanup(&json);
    trace = load(f, "ab0102030405060708090a0b0c0d0e0f");
    assert_int_equal(weft_trace_span_count(trace), 1);
    span = weft_trace_span(trace, 0);
    assert_int_equal(span->attr_count, 128);
    assert_int_equal(span->dropped_attrs, 5 + 72); /* the sender's and ours */
    assert_string_equal(span->attrs[127].key, "k127");
    assert_int_equal(span->event_count, 128);
    assert_int_equal(span->dropped_events, 2);
    assert_string_equal(span->events[127].name, "e127");
    assert_int_equal(span->events[0].attr_count, 128);
    assert_int_equal(span->events[0].dropped_attrs, 3);
    assert_int_equal(span->link_count, 128);
    assert_int_equal(span->dropped_links, 1);
    assert_int_equal(span->links[0].attr_count, 128);
    assert_int_equal(span->links[0].dropped_attrs, 4);
    weft_trace_free(trace);
    weft__ingest_stats(f->ingest, &st);
    assert_int_equal(st.limited, 72 + 2 + 3 + 1 + 4);
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft__ingest_observe(f->ingest, meter));
    assert_true(weft_test_prom_has(meter, "weft_ingest_limited_total 82"));
    weft_meter_free(meter);
}

/* The limits come from the environment as the SDK reads them; 0 keeps none. */
static void
test_ingest_span_limits_follow_the_environment(void **state)
{
    struct weft__otlp_limits l;

    (void)state;
    weft_test_setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "3");
    weft_test_setenv("OTEL_ATTRIBUTE_COUNT_LIMIT", "2");
    weft_test_setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "0");
    weft_test_setenv("OTEL_SPAN_LINK_COUNT_LIMIT", "many");
    weft__otlp_limits_from_env(&l);
    assert_int_equal(l.attrs, 3);
    assert_int_equal(l.event_attrs, 2); /* OTEL_ATTRIBUTE_COUNT_LIMIT */
    assert_int_equal(l.link_attrs, 2);
    assert_int_equal(l.events, 0);
    assert_int_equal(l.links, WEFT__OTLP_DEFAULT_LIMIT); /* not a number */
    weft_test_setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", NULL);
    weft_test_setenv("OTEL_ATTRIBUTE_COUNT_LIMIT", NULL);
    weft_test_setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", NULL);
    weft_test_setenv("OTEL_SPAN_LINK_COUNT_LIMIT", NULL);
    weft__otlp_limits_from_env(&l);
    assert_int_equal(l.attrs, 128);
    assert_int_equal(l.events, 128);
}

/* A NUL byte in a span's or an event's name cut the name there ("a\0b" stored as "a"): it is
 * now stored as U+FFFD and counted, by both decoders. */
static void
test_ingest_nul_in_names_is_escaped(void **state)
{
    struct fixture *f = *state;
    static const char json[] =
        "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":"
        "\"ab0102030405060708090a0b0c0d0e0f\",\"spanId\":\"0101010101010101\",\"name\":"
        "\"a\\u0000b\",\"events\":[{\"name\":\"\\u0000e\"}]}]}]}]}";
    struct weft__otlp_batch batch;
    struct weft__buf span;
    struct weft__buf ss;
    struct weft__buf req;
    struct weft_trace *trace = NULL;
    struct weft__ingest_stats st;
    struct answer a;

    post(f, "POST", "application/json", NULL, json, strlen(json), &a);
    assert_int_equal(a.status, 200);
    answer_cleanup(&a);
    trace = load(f, "ab0102030405060708090a0b0c0d0e0f");
    assert_string_equal(weft_trace_span(trace, 0)->name, "a\357\277\275b"); /* U+FFFD */
    assert_string_equal(weft_trace_span(trace, 0)->events[0].name, "\357\277\275e");
    weft_trace_free(trace);
    weft__ingest_stats(f->ingest, &st);
    assert_int_equal(st.names_escaped, 2);
    weft__buf_init(&span, 0);
    weft__buf_init(&ss, 0);
    pb_bytes(&span, 1, good_trace, 16);
    pb_bytes(&span, 2, span_a, 8);
    pb_bytes(&span, 5, "x\0\0y", 4);
    pb_msg(&ss, 2, &span);
    pb_request(&req, "nul", &ss);
    weft__otlp_batch_init(&batch, 1 << 20);
    assert_weft_ok(weft__otlp_decode_proto((const uint8_t *)req.data, req.len, &batch, NULL, 0));
    assert_int_equal(batch.count, 1);
    assert_string_equal(batch.spans[0]->name, "x\xef\xbf\xbd\xef\xbf\xbdy");
    assert_int_equal(batch.names_escaped, 1);
    weft__otlp_batch_cleanup(&batch);
    weft__buf_cleanup(&req);
}

/* The protobuf decoder's jansson trees (kvlist and mixed array values) count against the
 * budget too: 4 MiB of empty kvlists in an array built a tree of ~100 MB under a 16 MiB cap. */
static void
test_ingest_value_trees_count_against_the_budget(void **state)
{
    struct weft__otlp_batch batch;
    struct weft__buf list;
    struct weft__buf any;
    struct weft__buf attrs;
    struct weft__buf ss;
    struct weft__buf req;
    /* ArrayValue.values: an AnyValue holding an empty kvlist_value. */
    static const uint8_t empty_kvlist[] = {0x0a, 0x02, 0x32, 0x00};

    (void)state;
    weft__buf_init(&list, 0);
    for (int i = 0; i < (1 << 20); i++) {
        assert_weft_ok(weft__buf_append(&list, empty_kvlist, sizeof(empty_kvlist)));
    }
    weft__buf_init(&any, 0);
    pb_msg(&any, 5, &list); /* AnyValue.array_value */
    weft__buf_init(&attrs, 0);
    pb_kv(&attrs, 9, "big", &any);
    weft__buf_init(&ss, 0);
    pb_span(&ss, good_trace, 16, span_a, "kv", &attrs);
    weft__buf_cleanup(&attrs);
    pb_request(&req, "kv", &ss);
    weft__otlp_batch_init(&batch, (size_t)16 << 20);
    assert_int_equal(weft__otlp_decode_proto((const uint8_t *)req.data, req.len, &batch, NULL, 0),
                     WEFT_ELIMIT);
    assert_true(batch.is_json_over);
    weft__otlp_batch_cleanup(&batch);
    weft__buf_cleanup(&req);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ingest_protobuf_from_encoder_is_stored, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ingest_json_from_encoder_is_stored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ingest_gzip_body_is_inflated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ingest_bad_spans_give_partial_success, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ingest_every_anyvalue_kind_is_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ingest_malformed_protobuf_is_400_with_status, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ingest_malformed_json_is_400_with_status, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ingest_body_over_cap_is_413, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_ingest_gzip_bomb_is_413, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_ingest_wrong_content_type_is_415_and_get_is_405, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ingest_counters_reach_the_meter, setup, teardown),
        cmocka_unit_test(test_ingest_decoder_caps_the_decoded_size),
        cmocka_unit_test(test_ingest_decoder_rejects_deep_nesting_and_groups),
        cmocka_unit_test(test_ingest_json_decoder_accepts_proto_names_and_enum_names),
        cmocka_unit_test(test_ingest_decoders_drop_keys_holding_nul),
        cmocka_unit_test(test_ingest_json_decoder_drops_zero_id_links),
        cmocka_unit_test(test_ingest_json_kvlist_keys),
        cmocka_unit_test(test_ingest_bodyless_route_keeps_no_chunked_body),
        cmocka_unit_test_setup_teardown(
            test_ingest_every_post_is_answered_while_the_store_is_locked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ingest_gzip_json_bomb_is_decoded_within_the_budget,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_ingest_span_limits_drop_and_count, setup, teardown),
        cmocka_unit_test(test_ingest_span_limits_follow_the_environment),
        cmocka_unit_test_setup_teardown(test_ingest_nul_in_names_is_escaped, setup, teardown),
        cmocka_unit_test(test_ingest_value_trees_count_against_the_budget),
    };

    curl_global_init(CURL_GLOBAL_DEFAULT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
