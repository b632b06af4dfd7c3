/* tests/exporters/test_otlp_http.c - the OTLP/HTTP exporter against a real HTTP/1.1 receiver on
 * 127.0.0.1 (tests/support/http_receiver.c) that decodes what it receives with an OTLP decoder
 * independent of the encoder. Covers both protocols, gzip, endpoint and header rules, the retry
 * rules (429/502/503/504 and transport failures only, Retry-After in both forms, deadlines),
 * partial success, connection reuse, and the whole pipeline: no span lost across transient
 * failures, drops counted, shutdown delivering the queue, span end never waiting. */
#include "base/buf.h"
#include "exporters/otlp_transport.h"
#include "support/http_receiver.h"
#include "support/otlp_decode.h"
#include "support/weft_test.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *const env_vars[] = {
    "OTEL_EXPORTER_OTLP_ENDPOINT",    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
    "OTEL_EXPORTER_OTLP_HEADERS",     "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",     "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
};

struct fx {
    struct http_receiver *rx;
    struct weft_span_data spans[4];
    struct weft_attr attrs[4][2];
    const struct weft_span_data *views[4];
    struct weft_resource resource;
    struct weft_scope scope;
    struct weft_attr res_attr;
    char url[128];
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); i++) {
        weft_test_setenv(env_vars[i], NULL);
    }
    assert_int_equal(http_receiver_start(&f->rx), 0);
    f->res_attr = weft_attr_str("service.name", "http-test");
    f->resource.attrs = &f->res_attr;
    f->resource.attr_count = 1;
    f->scope.name = "test";
    for (int i = 0; i < 4; i++) {
        struct weft_span_data *s = &f->spans[i];

        memset(s->trace_id, 0x11, 16);
        memset(s->span_id, 0x20 + i, 8);
        s->name = i == 0 ? "invoke_agent planner" : "chat gpt";
        s->kind = WEFT_SPAN_KIND_INTERNAL;
        s->start_time_ns = 1700000000000000000ull + (uint64_t)i;
        s->end_time_ns = s->start_time_ns + 1000;
        f->attrs[i][0] = weft_attr_str("gen_ai.agent.name", "planner");
        f->attrs[i][1] = weft_attr_int("weft.step.id", i);
        s->attrs = f->attrs[i];
        s->attr_count = 2;
        s->resource = &f->resource;
        s->scope = &f->scope;
        f->views[i] = s;
    }
    http_receiver_url(f->rx, "", f->url, sizeof(f->url));
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    http_receiver_stop(f->rx);
    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
    for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); i++) {
        weft_test_setenv(env_vars[i], NULL);
    }
    free(f);
    return 0;
}

static struct weft_exporter *
make_exporter(struct fx *f, struct weft_otlp_options *o)
{
    struct weft_exporter *e = NULL;
    struct weft_otlp_options defaults = {0};

    if (o == NULL) {
        o = &defaults;
    }
    if (o->endpoint == NULL && o->traces_endpoint == NULL) {
        o->endpoint = f->url;
    }
    if (o->initial_backoff_ms == 0) {
        o->initial_backoff_ms = 20;
        o->max_backoff_ms = 50;
    }
    assert_weft_ok(weft_otlp_exporter_new(o, &e));
    return e;
}

/* Call the exporter's export op directly (no processor). */
static weft_err
export_now(struct weft_exporter *e, struct fx *f, size_t n, uint32_t budget_ms, uint64_t *rejected)
{
    const struct weft_exporter_ops *ops = *(const struct weft_exporter_ops *const *)e;
    void *self = ((void *const *)e)[1];
    struct weft_export_result res = {0};
    weft_err err = ops->export_batch(self, f->views, n,
                                     weft_monotonic_ns() + (uint64_t)budget_ms * 1000000u, &res);

    if (rejected != NULL) {
        *rejected = res.rejected;
    }
    return err;
}

static uint64_t
ms_since(uint64_t t)
{
    return (weft_monotonic_ns() - t) / 1000000u;
}

static json_t *
decode(const struct http_request *req)
{
    struct weft_test_otlp_error err;
    json_t *j = weft_test_otlp_decode_request(req->body, req->body_len, 0, &err);

    if (j == NULL) {
        fail_msg("receiver could not decode the request: %s", err.text);
    }
    return j;
}

static json_t *
first_span(json_t *req)
{
    return json_array_get(
        json_object_get(
            json_array_get(json_object_get(json_array_get(json_object_get(req, "resourceSpans"), 0),
                                           "scopeSpans"),
                           0),
            "spans"),
        0);
}

static void
test_otlp_http_protobuf_delivered_and_decodable(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = make_exporter(f, NULL);
    const struct http_request *req = NULL;
    char h[128];
    json_t *j = NULL;
    struct weft_otlp_stats st;

    assert_weft_ok(export_now(e, f, 2, 5000, NULL));
    assert_int_equal(http_receiver_count(f->rx), 1);
    req = http_receiver_request(f->rx, 0);
    assert_string_equal(req->method, "POST");
    assert_string_equal(req->path, "/v1/traces");
    assert_string_equal(http_request_header(req, "Content-Type", h, sizeof(h)),
                        "application/x-protobuf");
    assert_non_null(strstr(http_request_header(req, "User-Agent", h, sizeof(h)), "weft/"));
    assert_null(http_request_header(req, "Content-Encoding", h, sizeof(h)));
    j = decode(req);
    assert_string_equal(json_string_value(json_object_get(first_span(j), "name")),
                        "invoke_agent planner");
    assert_string_equal(json_string_value(json_object_get(first_span(j), "traceId")),
                        "11111111111111111111111111111111");
    assert_int_equal(
        json_array_size(json_object_get(
            json_array_get(json_object_get(json_array_get(json_object_get(j, "resourceSpans"), 0),
                                           "scopeSpans"),
                           0),
            "spans")),
        2);
    json_decref(j);
    weft_otlp_exporter_stats(e, &st);
    assert_int_equal(st.requests, 1);
    assert_int_equal(st.retries, 0);
    assert_int_equal(st.last_http_status, 200);
    weft_exporter_free(e);
}

static void
test_otlp_http_json_protocol_sends_otlp_json(void **state)
{
    struct fx *f = *state;
    struct weft_otlp_options o = {.protocol_set = true, .protocol = WEFT_OTLP_HTTP_JSON};
    struct weft_exporter *e = make_exporter(f, &o);
    const struct http_request *req = NULL;
    json_error_t jerr;
    json_t *j = NULL;
    char h[128];

    assert_weft_ok(export_now(e, f, 1, 5000, NULL));
    req = http_receiver_request(f->rx, 0);
    assert_string_equal(http_request_header(req, "Content-Type", h, sizeof(h)), "application/json");
    j = json_loadb(req->body, req->body_len, 0, &jerr);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(first_span(j), "spanId")),
                        "2020202020202020");
    json_decref(j);
    weft_exporter_free(e);
}

static void
test_otlp_http_gzip_from_env_compresses_body(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = NULL;
    const struct http_request *req = NULL;
    char h[64];
    json_t *j = NULL;

    weft_test_setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip");
    e = make_exporter(f, NULL);
    assert_weft_ok(export_now(e, f, 4, 5000, NULL));
    req = http_receiver_request(f->rx, 0);
    assert_string_equal(http_request_header(req, "Content-Encoding", h, sizeof(h)), "gzip");
    assert_true(req->wire_len != req->body_len); /* the receiver gunzipped it */
    j = decode(req);
    assert_non_null(first_span(j));
    json_decref(j);
    weft_exporter_free(e);
}

static void
test_otlp_http_headers_env_are_percent_decoded(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = NULL;
    const struct http_request *req = NULL;
    char h[64];

    weft_test_setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=team%20a, api-key = s3cr%3Dt ,bad");
    weft_test_capture_logs();
    e = make_exporter(f, NULL);
    assert_weft_ok(export_now(e, f, 1, 5000, NULL));
    req = http_receiver_request(f->rx, 0);
    assert_string_equal(http_request_header(req, "x-tenant", h, sizeof(h)), "team a");
    assert_string_equal(http_request_header(req, "api-key", h, sizeof(h)), "s3cr=t");
    /* The malformed member is reported by variable name; no header value is ever logged. */
    assert_non_null(strstr(weft_test_logs(), "OTEL_EXPORTER_OTLP_HEADERS"));
    assert_null(strstr(weft_test_logs(), "s3cr"));
    weft_exporter_free(e);
}

static void
test_otlp_http_endpoint_base_keeps_path_and_traces_endpoint_is_exact(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = NULL;
    char url[160];

    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT",
                     http_receiver_url(f->rx, "/base", url, sizeof(url)));
    assert_weft_ok(
        weft_otlp_exporter_new(&(struct weft_otlp_options){.initial_backoff_ms = 10}, &e));
    assert_weft_ok(export_now(e, f, 1, 5000, NULL));
    assert_string_equal(http_receiver_request(f->rx, 0)->path, "/base/v1/traces");
    weft_exporter_free(e);

    weft_test_setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                     http_receiver_url(f->rx, "/custom/path", url, sizeof(url)));
    assert_weft_ok(
        weft_otlp_exporter_new(&(struct weft_otlp_options){.initial_backoff_ms = 10}, &e));
    assert_weft_ok(export_now(e, f, 1, 5000, NULL));
    assert_string_equal(http_receiver_request(f->rx, 1)->path, "/custom/path");
    weft_exporter_free(e);
}

static void
test_otlp_http_bad_url_is_refused_naming_the_variable(void **state)
{
    struct weft_exporter *e = NULL;

    (void)state;
    weft_test_capture_logs();
    weft_test_setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://example.com/x");
    assert_weft_err(weft_otlp_exporter_new(NULL, &e), WEFT_EINVAL);
    assert_null(e);
    assert_non_null(strstr(weft_test_logs(), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"));
}

static void
test_otlp_http_bad_env_values_warn_and_fall_back(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = NULL;
    const struct http_request *req = NULL;
    char h[64];

    weft_test_capture_logs();
    weft_test_setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    weft_test_setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd");
    weft_test_setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "ten");
    e = make_exporter(f, NULL);
    assert_weft_ok(export_now(e, f, 1, 5000, NULL));
    req = http_receiver_request(f->rx, 0);
    assert_string_equal(http_request_header(req, "Content-Type", h, sizeof(h)),
                        "application/x-protobuf");
    assert_null(http_request_header(req, "Content-Encoding", h, sizeof(h)));
    assert_non_null(strstr(weft_test_logs(), "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"));
    assert_non_null(strstr(weft_test_logs(), "OTEL_EXPORTER_OTLP_COMPRESSION=zstd"));
    assert_non_null(strstr(weft_test_logs(), "OTEL_EXPORTER_OTLP_TIMEOUT=ten"));
    weft_exporter_free(e);
}

static void
test_otlp_http_503_is_retried_then_delivered_once(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = make_exporter(f, NULL);
    struct weft_otlp_stats st;

    http_receiver_push(f->rx, &(struct http_response){.status = 503});
    http_receiver_push(f->rx, &(struct http_response){.status = 502});
    http_receiver_push(f->rx, &(struct http_response){.status = 504});
    assert_weft_ok(export_now(e, f, 2, 5000, NULL));
    assert_int_equal(http_receiver_count(f->rx), 4);
    weft_otlp_exporter_stats(e, &st);
    assert_int_equal(st.requests, 4);
    assert_int_equal(st.retries, 3);
    weft_exporter_free(e);
}

static void
test_otlp_http_429_honours_retry_after_seconds(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = make_exporter(f, NULL);
    uint64_t t = weft_monotonic_ns();

    http_receiver_push(f->rx,
                       &(struct http_response){.status = 429, .headers = "Retry-After: 1\r\n"});
    assert_weft_ok(export_now(e, f, 1, 10000, NULL));
    assert_true(ms_since(t) >= 950); /* the backoff alone would be at most 20 ms */
    assert_int_equal(http_receiver_count(f->rx), 2);
    weft_exporter_free(e);
}

static void
test_otlp_http_retry_after_http_date_is_honoured(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = make_exporter(f, NULL);
    char headers[128];
    char date[64];
    time_t when = time(NULL) + 2;
    struct tm tm;
    uint64_t t = 0;

    gmtime_r(&when, &tm);
    strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    snprintf(headers, sizeof(headers), "Retry-After: %s\r\n", date);
    http_receiver_push(f->rx, &(struct http_response){.status = 503, .headers = headers});
    t = weft_monotonic_ns();
    assert_weft_ok(export_now(e, f, 1, 10000, NULL));
    assert_true(ms_since(t) >= 900); /* at least the rest of the current second and one more */
    assert_int_equal(http_receiver_count(f->rx), 2);
    weft_exporter_free(e);
}

/* A 503's numeric Retry-After is honoured as a 429's is: the backoff alone is at most 50 ms
 * here, so a second request before about a second means the header was ignored. */
static void
test_otlp_http_503_honours_numeric_retry_after(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = make_exporter(f, NULL);
    struct weft_otlp_stats st;
    uint64_t t = weft_monotonic_ns();

    http_receiver_push(f->rx,
                       &(struct http_response){.status = 503, .headers = "Retry-After: 1\r\n"});
    assert_weft_ok(export_now(e, f, 1, 10000, NULL));
    assert_true(ms_since(t) >= 950);
    assert_int_equal(http_receiver_count(f->rx), 2);
    weft_otlp_exporter_stats(e, &st);
    assert_int_equal(st.retries, 1);
    weft_exporter_free(e);
}

/* A Retry-After that ends past the export's deadline is not waited for: the exporter gives
 * up at once (one request, ETIMEDOUT, logged), rather than sleeping to the deadline or past
 * it. The bound on the time is generous (the deadline is 20 s away; the server asks for 60). */
static void
test_otlp_http_gives_up_when_retry_after_is_past_the_deadline(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = make_exporter(f, NULL);
    uint64_t t = weft_monotonic_ns();

    weft_test_capture_logs();
    http_receiver_set_default(
        f->rx, &(struct http_response){.status = 503, .headers = "Retry-After: 60\r\n"});
    assert_weft_err(export_now(e, f, 1, 20000, NULL), WEFT_ETIMEDOUT);
    assert_int_equal(http_receiver_count(f->rx), 1);
    assert_true(ms_since(t) < 15000);
    assert_non_null(strstr(weft_test_logs(), "giving up after 1 attempts"));
    weft_exporter_free(e);
    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
}

static void
test_otlp_http_400_is_final(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = make_exporter(f, NULL);

    weft_test_capture_logs();
    http_receiver_push(f->rx, &(struct http_response){.status = 400,
                                                      .body = "bad span id",
                                                      .content_type = "text/plain"});
    assert_weft_err(export_now(e, f, 1, 5000, NULL), WEFT_EHTTP);
    assert_int_equal(http_receiver_count(f->rx), 1);
    assert_non_null(strstr(weft_test_logs(), "HTTP 400"));
    assert_non_null(strstr(weft_test_logs(), "bad span id"));
    /* 500 and 401 are final too (only 429, 502, 503, 504 are retryable). */
    http_receiver_push(f->rx, &(struct http_response){.status = 500});
    assert_weft_err(export_now(e, f, 1, 5000, NULL), WEFT_EHTTP);
    http_receiver_push(f->rx, &(struct http_response){.status = 401});
    assert_weft_err(export_now(e, f, 1, 5000, NULL), WEFT_EHTTP);
    assert_int_equal(http_receiver_count(f->rx), 3);
    weft_exporter_free(e);
}

static void
test_otlp_http_partial_success_counts_rejects_without_retry(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = make_exporter(f, NULL);
    struct weft__buf body;
    uint64_t rejected = 0;
    struct weft_otlp_stats st;

    weft__buf_init(&body, 0);
    assert_weft_ok(weft_test_otlp_response_proto(2, "span name too long", &body));
    http_receiver_push(f->rx, &(struct http_response){.body = body.data, .body_len = body.len});
    weft_test_capture_logs();
    assert_weft_ok(export_now(e, f, 3, 5000, &rejected));
    assert_int_equal(rejected, 2);
    assert_int_equal(http_receiver_count(f->rx), 1);
    weft_otlp_exporter_stats(e, &st);
    assert_int_equal(st.spans_rejected, 2);
    assert_non_null(strstr(weft_test_logs(), "span name too long"));
    weft__buf_cleanup(&body);
    weft_exporter_free(e);
}

static void
test_otlp_http_dropped_connection_is_retried(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = make_exporter(f, NULL);

    http_receiver_push(f->rx, &(struct http_response){.drop = true});
    assert_weft_ok(export_now(e, f, 1, 5000, NULL));
    assert_int_equal(http_receiver_count(f->rx), 2);
    assert_int_not_equal(http_receiver_request(f->rx, 0)->conn_id,
                         http_receiver_request(f->rx, 1)->conn_id);
    weft_exporter_free(e);
}

static void
test_otlp_http_slow_answer_times_out_and_is_retried(void **state)
{
    struct fx *f = *state;
    struct weft_otlp_options o = {.timeout_ms = 200};
    struct weft_exporter *e = make_exporter(f, &o);

    http_receiver_push(f->rx, &(struct http_response){.delay_ms = 1500});
    assert_weft_ok(export_now(e, f, 1, 10000, NULL));
    assert_true(http_receiver_wait(f->rx, 2, 5000));
    weft_exporter_free(e);
}

static void
test_otlp_http_gives_up_at_the_deadline(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = make_exporter(f, NULL);
    uint64_t t = weft_monotonic_ns();

    http_receiver_set_default(f->rx, &(struct http_response){.status = 503});
    assert_weft_err(export_now(e, f, 1, 400, NULL), WEFT_ETIMEDOUT);
    assert_true(ms_since(t) < 1500);
    assert_true(http_receiver_count(f->rx) >= 2);
    weft_exporter_free(e);
}

static void
test_otlp_http_reuses_the_connection(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = make_exporter(f, NULL);

    assert_weft_ok(export_now(e, f, 1, 5000, NULL));
    assert_weft_ok(export_now(e, f, 2, 5000, NULL));
    assert_weft_ok(export_now(e, f, 3, 5000, NULL));
    assert_int_equal(http_receiver_request(f->rx, 0)->conn_id,
                     http_receiver_request(f->rx, 2)->conn_id);
    weft_exporter_free(e);
}

static void
test_otlp_http_oversized_answer_is_an_error(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = make_exporter(f, NULL);
    size_t n = (4u << 20) + 1024;
    char *big = malloc(n);

    memset(big, 'x', n);
    http_receiver_push(f->rx, &(struct http_response){.body = big, .body_len = n});
    assert_weft_err(export_now(e, f, 1, 5000, NULL), WEFT_EIO);
    free(big);
    weft_exporter_free(e);
}

static void
test_otlp_http_shutdown_cuts_a_retry_wait_short(void **state)
{
    struct fx *f = *state;
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_processor *proc = NULL;
    struct weft_batch_options bo = {64, 8, 10, 60000};
    struct weft_trace_stats st;
    uint64_t t = 0;

    http_receiver_set_default(
        f->rx, &(struct http_response){.status = 503, .headers = "Retry-After: 30\r\n"});
    assert_weft_ok(weft_provider_new(NULL, &provider));
    assert_weft_ok(weft_provider_get_tracer(provider, "t", NULL, &tracer));
    assert_weft_ok(weft_batch_processor_new(make_exporter(f, NULL), &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(provider, proc));
    weft_span_end(weft_span_start(tracer, "stuck", NULL), 0);
    assert_true(http_receiver_wait(f->rx, 1, 5000));
    t = weft_monotonic_ns();
    assert_weft_err(weft_provider_shutdown(provider, 300), WEFT_ETIMEDOUT);
    assert_true(ms_since(t) < 3000);
    weft_provider_get_stats(provider, &st);
    assert_int_equal(st.spans_failed + st.spans_dropped, 1);
    assert_int_equal(st.spans_exported, 0);
    weft_provider_free(provider);
}

static void
test_otlp_http_shutdown_cuts_a_slow_request_short(void **state)
{
    struct fx *f = *state;
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_processor *proc = NULL;
    struct weft_batch_options bo = {64, 8, 10, 60000};
    struct weft_otlp_options o = {.timeout_ms = 60000};
    uint64_t t = 0;

    http_receiver_set_default(f->rx, &(struct http_response){.delay_ms = 20000});
    assert_weft_ok(weft_provider_new(NULL, &provider));
    assert_weft_ok(weft_provider_get_tracer(provider, "t", NULL, &tracer));
    assert_weft_ok(weft_batch_processor_new(make_exporter(f, &o), &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(provider, proc));
    weft_span_end(weft_span_start(tracer, "slow", NULL), 0);
    assert_true(http_receiver_wait(f->rx, 1, 5000));
    t = weft_monotonic_ns();
    assert_weft_err(weft_provider_shutdown(provider, 300), WEFT_ETIMEDOUT);
    /* curl checks the abort flag about once a second. */
    assert_true(ms_since(t) < 3000);
    weft_provider_free(provider);
}

/* ---- the whole pipeline: provider → batch processor → OTLP/HTTP → receiver ------------- */

struct pipeline {
    struct weft_provider *provider;
    struct weft_tracer *tracer;
};

static void
pipeline_start(struct fx *f, struct pipeline *p, size_t queue, size_t batch, uint32_t delay_ms)
{
    struct weft_processor *proc = NULL;
    struct weft_batch_options bo = {queue, batch, delay_ms, 30000};

    assert_weft_ok(weft_provider_new(NULL, &p->provider));
    assert_weft_ok(weft_provider_get_tracer(p->provider, "pipeline", NULL, &p->tracer));
    assert_weft_ok(weft_batch_processor_new(make_exporter(f, NULL), &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(p->provider, proc));
}

/* Count distinct span ids across the requests the receiver accepted (answered 2xx). */
static size_t
distinct_spans(struct http_receiver *rx, size_t *total)
{
    json_t *seen = json_object();
    size_t n = 0;

    *total = 0;
    for (size_t i = 0; i < http_receiver_count(rx); i++) {
        const struct http_request *raw = http_receiver_request(rx, i);
        json_t *req = NULL;
        json_t *rs = NULL;
        size_t a = 0;

        if (raw->answered < 200 || raw->answered > 299) {
            continue;
        }
        req = decode(raw);
        json_array_foreach(json_object_get(req, "resourceSpans"), a, rs)
        {
            json_t *ss = NULL;
            size_t b = 0;
            json_array_foreach(json_object_get(rs, "scopeSpans"), b, ss)
            {
                json_t *sp = NULL;
                size_t c = 0;
                json_array_foreach(json_object_get(ss, "spans"), c, sp)
                {
                    json_object_set_new(seen, json_string_value(json_object_get(sp, "spanId")),
                                        json_true());
                    (*total)++;
                }
            }
        }
        json_decref(req);
    }
    n = json_object_size(seen);
    json_decref(seen);
    return n;
}

static void
test_pipeline_no_span_lost_across_transient_failures(void **state)
{
    struct fx *f = *state;
    struct pipeline p;
    struct weft_trace_stats st;
    size_t total = 0;

    http_receiver_push(f->rx, &(struct http_response){.status = 503});
    http_receiver_push(f->rx, &(struct http_response){.drop = true});
    http_receiver_push(f->rx,
                       &(struct http_response){.status = 429, .headers = "Retry-After: 0\r\n"});
    http_receiver_push(f->rx, &(struct http_response){.status = 502});
    pipeline_start(f, &p, 1024, 50, 20);
    for (int i = 0; i < 200; i++) {
        struct weft_span *s = weft_span_start(p.tracer, "step", NULL);
        weft_span_set_int(s, "i", i);
        weft_span_end(s, 0);
    }
    assert_weft_ok(weft_provider_shutdown(p.provider, 20000));
    weft_provider_get_stats(p.provider, &st);
    assert_int_equal(st.spans_exported, 200);
    assert_int_equal(st.spans_dropped + st.spans_failed, 0);
    /* Every span arrived, and exactly once (a retried request is not a duplicate delivery). */
    assert_int_equal(distinct_spans(f->rx, &total), 200);
    assert_int_equal(total, 200);
    weft_provider_free(p.provider);
}

static void
test_pipeline_400_is_counted_failed_not_retried(void **state)
{
    struct fx *f = *state;
    struct pipeline p;
    struct weft_trace_stats st;

    http_receiver_push(f->rx, &(struct http_response){.status = 400});
    pipeline_start(f, &p, 64, 10, 3600000);
    for (int i = 0; i < 10; i++) {
        weft_span_end(weft_span_start(p.tracer, "bad", NULL), 0);
    }
    assert_weft_err(weft_provider_force_flush(p.provider, 5000), WEFT_EIO);
    weft_provider_get_stats(p.provider, &st);
    assert_int_equal(st.spans_failed, 10);
    assert_int_equal(http_receiver_count(f->rx), 1);
    weft_provider_free(p.provider);
}

/* A receiver that holds every request until the test opens its gate (bounded at 30 s only so
 * that a broken exporter fails the test instead of hanging it: is_expired then says so). */
struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool is_open;
    bool is_expired;
    unsigned inside; /* handler calls not yet returned */
};

static void
gate_handler(void *user_data, const struct http_request *req, struct http_response *resp)
{
    struct gate *g = user_data;
    struct timespec until;

    (void)req;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    pthread_mutex_lock(&g->lock);
    g->inside++;
    pthread_cond_broadcast(&g->cond);
    while (!g->is_open && !g->is_expired) {
        if (pthread_cond_timedwait(&g->cond, &g->lock, &until) != 0) {
            g->is_expired = true;
        }
    }
    g->inside--;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
    resp->status = 200;
}

/* Wait (at most 5 s) until a request is held at the gate. */
static bool
gate_wait_held(struct gate *g)
{
    struct timespec until;
    bool is_held = false;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&g->lock);
    while (g->inside == 0 && pthread_cond_timedwait(&g->cond, &g->lock, &until) == 0) {
    }
    is_held = g->inside > 0 && !g->is_expired;
    pthread_mutex_unlock(&g->lock);
    return is_held;
}

static void
gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->is_open = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

/* 2000 span ends while the receiver holds the first export: every end returns (the request
 * is still held when they are done, so none waited for it) and the 16-span queue's overflow
 * is counted as dropped. No clock in the proof. */
static void
test_pipeline_span_end_never_waits_on_a_slow_receiver(void **state)
{
    struct fx *f = *state;
    struct pipeline p;
    struct weft_trace_stats st;
    static struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, 0};

    http_receiver_set_handler(f->rx, gate_handler, &g);
    pipeline_start(f, &p, 16, 4, 1);
    weft_span_end(weft_span_start(p.tracer, "first", NULL), 0);
    assert_true(gate_wait_held(&g)); /* the first export is in flight, held */
    for (int i = 0; i < 2000; i++) {
        weft_span_end(weft_span_start(p.tracer, "fast", NULL), 0);
    }
    assert_true(gate_wait_held(&g)); /* still held: no span end waited for its answer */
    weft_provider_get_stats(p.provider, &st);
    assert_true(st.spans_dropped > 0); /* the 16-span queue overflowed: counted */
    gate_open(&g);
    assert_weft_ok(weft_provider_shutdown(p.provider, 20000));
    weft_provider_get_stats(p.provider, &st);
    assert_int_equal(st.spans_exported + st.spans_dropped + st.spans_failed, 2001);
    http_receiver_set_handler(f->rx, NULL, NULL);
    weft_provider_free(p.provider);
}

static void
test_pipeline_shutdown_delivers_what_is_queued(void **state)
{
    struct fx *f = *state;
    struct pipeline p;
    struct weft_trace_stats st;
    size_t total = 0;

    pipeline_start(f, &p, 2048, 512, 3600000);
    for (int i = 0; i < 300; i++) {
        weft_span_end(weft_span_start(p.tracer, "queued", NULL), 0);
    }
    assert_int_equal(http_receiver_count(f->rx), 0); /* nothing sent before shutdown */
    assert_weft_ok(weft_provider_shutdown(p.provider, 10000));
    weft_provider_get_stats(p.provider, &st);
    assert_int_equal(st.spans_exported, 300);
    assert_int_equal(distinct_spans(f->rx, &total), 300);
    weft_provider_free(p.provider);
}

/* ---- what a failed export says (issue 12: "N spans failed: invalid state") ------------- */

/* A port on 127.0.0.1 nothing listens on: bound to get a free number, then closed. */
static unsigned short
closed_port(void)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof(addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    unsigned short port = 0;

    assert_true(fd >= 0);
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    port = ntohs(addr.sin_port);
    close(fd);
    return port;
}

/* The exporter's own description of its last failure. */
static const char *
exporter_error(struct weft_exporter *e, char *buf, size_t len)
{
    const struct weft_exporter_ops *ops = *(const struct weft_exporter_ops *const *)e;
    void *self = ((void *const *)e)[1];

    assert_non_null(ops->last_error);
    ops->last_error(self, buf, len);
    return buf;
}

static void
test_otlp_http_refused_connection_says_so_and_where(void **state)
{
    struct fx *f = *state;
    char url[160];
    char want[160];
    char text[400];
    unsigned short port = closed_port();
    struct weft_otlp_options o = {.traces_endpoint = url};
    struct weft_exporter *e = NULL;

    /* User info and query may carry credentials: never in a message. */
    snprintf(url, sizeof(url), "http://user:s3cret@127.0.0.1:%u/v1/traces?token=t0ken", port);
    e = make_exporter(f, &o);
    weft_test_capture_logs();
    assert_weft_err(export_now(e, f, 1, 300, NULL), WEFT_ETIMEDOUT);
    snprintf(want, sizeof(want), "connection refused by http://127.0.0.1:%u/v1/traces", port);
    assert_string_equal(exporter_error(e, text, sizeof(text)), want);
    /* The first failed attempt is reported at once, not when the retries give up. */
    assert_non_null(strstr(weft_test_logs(), "OTLP export failed: connection refused by"));
    assert_null(strstr(weft_test_logs(), "s3cret"));
    assert_null(strstr(weft_test_logs(), "t0ken"));
    weft_exporter_free(e);
}

static void
test_otlp_http_silent_collector_is_no_answer_within_the_timeout(void **state)
{
    struct fx *f = *state;
    struct weft_otlp_options o = {.timeout_ms = 150};
    struct weft_exporter *e = make_exporter(f, &o);
    char want[160];
    char text[400];

    http_receiver_set_default(f->rx, &(struct http_response){.delay_ms = 10000});
    assert_weft_err(export_now(e, f, 1, 400, NULL), WEFT_ETIMEDOUT);
    /* The last attempt may have had less than 150 ms left before the deadline. */
    snprintf(want, sizeof(want), "no answer from http://127.0.0.1:%u/v1/traces within ",
             http_receiver_port(f->rx));
    assert_ptr_equal(strstr(exporter_error(e, text, sizeof(text)), want), text);
    assert_non_null(strstr(text, " ms"));
    weft_exporter_free(e);
}

static void
test_otlp_http_final_status_names_status_url_and_body(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = make_exporter(f, NULL);
    char want[200];
    char text[400];

    http_receiver_push(f->rx, &(struct http_response){.status = 400,
                                                      .body = "bad span id\n",
                                                      .content_type = "text/plain"});
    assert_weft_err(export_now(e, f, 1, 5000, NULL), WEFT_EHTTP);
    snprintf(want, sizeof(want), "HTTP 400 from http://127.0.0.1:%u/v1/traces: bad span id.",
             http_receiver_port(f->rx));
    assert_string_equal(exporter_error(e, text, sizeof(text)), want);
    weft_exporter_free(e);
}

/* OTLP/HTTP: a receiver answers 200 with an empty body or an ExportTraceServiceResponse in the
 * encoding its Content-Type names. An HTML page (a web server or proxy at that address) or
 * bytes that do not decode mean the spans did not reach an OTLP receiver: a failure, not
 * retried. */
static void
test_otlp_http_200_that_is_not_an_otlp_response_fails(void **state)
{
    struct fx *f = *state;
    struct weft_exporter *e = make_exporter(f, NULL);
    struct weft_otlp_options jo = {.protocol_set = true, .protocol = WEFT_OTLP_HTTP_JSON};
    struct weft_exporter *je = NULL;
    char text[400];

    http_receiver_push(f->rx, &(struct http_response){.body = "<html><body>It works!</body></html>",
                                                      .content_type = "text/html"});
    assert_weft_err(export_now(e, f, 1, 5000, NULL), WEFT_EPARSE);
    assert_int_equal(http_receiver_count(f->rx), 1); /* not retried */
    assert_non_null(strstr(exporter_error(e, text, sizeof(text)),
                           "is not an OTLP response (Content-Type text/html): <html>"));
    /* Protobuf that does not decode (a truncated varint, field 0). */
    http_receiver_push(f->rx, &(struct http_response){.body = "\xff\xff\xff", .body_len = 3});
    assert_weft_err(export_now(e, f, 1, 5000, NULL), WEFT_EPARSE);
    assert_non_null(strstr(exporter_error(e, text, sizeof(text)), "not an OTLP protobuf response"));
    /* An empty body is a success, and so is a valid response. */
    assert_weft_ok(export_now(e, f, 1, 5000, NULL));
    assert_int_equal(http_receiver_count(f->rx), 3);

    je = make_exporter(f, &jo);
    http_receiver_push(f->rx,
                       &(struct http_response){.body = "{}", .content_type = "application/json"});
    assert_weft_ok(export_now(je, f, 1, 5000, NULL));
    http_receiver_push(f->rx, &(struct http_response){.body = "Service Unavailable",
                                                      .content_type = "application/json"});
    assert_weft_err(export_now(je, f, 1, 5000, NULL), WEFT_EPARSE);
    assert_non_null(strstr(exporter_error(je, text, sizeof(text)), "not an OTLP JSON response"));
    weft_exporter_free(je);
    weft_exporter_free(e);
}

/* Through a batch processor: the failure is counted and the processor keeps what happened,
 * even when shutdown cuts the retries short (that used to read "invalid state"). */
static void
test_pipeline_failure_detail_survives_a_shutdown_mid_retry(void **state)
{
    struct fx *f = *state;
    char url[160];
    char text[400];
    unsigned short port = closed_port();
    struct weft_otlp_options o = {.traces_endpoint = url};
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_processor *proc = NULL;
    struct weft_batch_options bo = {64, 8, 3600000, 30000};
    struct weft_processor_stats ps;
    uint64_t t = 0;

    snprintf(url, sizeof(url), "http://127.0.0.1:%u/v1/traces", port);
    assert_weft_ok(weft_provider_new(NULL, &provider));
    assert_weft_ok(weft_provider_get_tracer(provider, "pipeline", NULL, &tracer));
    assert_weft_ok(weft_batch_processor_new(make_exporter(f, &o), &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(provider, proc));
    weft_test_capture_logs();
    for (int i = 0; i < 8; i++) {
        weft_span_end(weft_span_start(tracer, "lost", NULL), 0);
    }
    /* The 8th span woke the export thread: its export retries within its 30 s limit, so
     * the flush gives up first and the shutdown then cuts the retries short. */
    assert_weft_err(weft_provider_force_flush(provider, 300), WEFT_ETIMEDOUT);
    t = weft_monotonic_ns();
    assert_weft_err(weft_provider_shutdown(provider, 300), WEFT_ETIMEDOUT);
    assert_true(ms_since(t) < 3000);
    proc = weft_provider_processor(provider, 0);
    assert_string_equal(weft_processor_exporter_name(proc), "otlp");
    assert_weft_ok(weft_processor_get_stats(proc, &ps));
    assert_int_equal(ps.exported, 0);
    assert_int_equal(ps.failed, 8);
    assert_true(weft_processor_last_error(proc, text, sizeof(text)) > 0);
    assert_non_null(strstr(text, "connection refused by http://127.0.0.1:"));
    assert_null(strstr(weft_test_logs(), "invalid state"));
    assert_non_null(strstr(weft_test_logs(), "8 spans failed: connection refused by"));
    weft_provider_free(provider);
}

/* A collector that accepts the connection and never answers, cut short by shutdown: the
 * processor says there was no answer, and from where. */
static void
test_pipeline_silent_collector_at_shutdown_says_no_answer(void **state)
{
    struct fx *f = *state;
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_processor *proc = NULL;
    struct weft_batch_options bo = {64, 4, 3600000, 30000};
    char want[160];
    char text[400];

    http_receiver_set_default(f->rx, &(struct http_response){.delay_ms = 30000});
    assert_weft_ok(weft_provider_new(NULL, &provider));
    assert_weft_ok(weft_provider_get_tracer(provider, "pipeline", NULL, &tracer));
    assert_weft_ok(weft_batch_processor_new(make_exporter(f, NULL), &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(provider, proc));
    for (int i = 0; i < 4; i++) {
        weft_span_end(weft_span_start(tracer, "unanswered", NULL), 0);
    }
    assert_true(http_receiver_wait(f->rx, 1, 5000));
    assert_weft_err(weft_provider_shutdown(provider, 300), WEFT_ETIMEDOUT);
    proc = weft_provider_processor(provider, 0);
    assert_true(weft_processor_last_error(proc, text, sizeof(text)) > 0);
    snprintf(want, sizeof(want), "no answer from http://127.0.0.1:%u/v1/traces within ",
             http_receiver_port(f->rx));
    assert_ptr_equal(strstr(text, want), text);
    assert_non_null(strstr(text, " ms (stopped at shutdown)"));
    weft_provider_free(provider);
}

/* weft_exporter_failing turns 1 at the first failed attempt, while the batch still retries
 * within its time limit (so monitoring sees a collector that is down at once, not after the
 * limit), and back to 0 when a later attempt delivers. */
static void
test_pipeline_failing_gauge_shows_at_the_first_failed_attempt(void **state)
{
    struct fx *f = *state;
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_processor *proc = NULL;
    struct weft_meter *meter = NULL;
    struct weft_batch_options bo = {64, 4, 3600000, 30000};
    struct weft_otlp_options o = {.initial_backoff_ms = 200, .max_backoff_ms = 200};
    struct weft_processor_stats ps;
    char *text = NULL;
    size_t len = 0;

    http_receiver_set_default(f->rx, &(struct http_response){.status = 503});
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft_provider_new(NULL, &provider));
    assert_weft_ok(weft_meter_observe_provider(meter, provider));
    assert_weft_ok(weft_provider_get_tracer(provider, "pipeline", NULL, &tracer));
    assert_weft_ok(weft_batch_processor_new(make_exporter(f, &o), &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(provider, proc));
    assert_weft_ok(weft_prometheus_render(meter, &text, &len));
    assert_non_null(strstr(text, "weft_exporter_failing{exporter=\"otlp\"} 0\n"));
    free(text);
    weft_test_capture_logs();
    for (int i = 0; i < 4; i++) {
        weft_span_end(weft_span_start(tracer, "retried", NULL), 0);
    }
    assert_true(http_receiver_wait(f->rx, 1, 5000));
    /* The answer reaches the transport just after the receiver counted the request. */
    for (int i = 0; i < 300; i++) {
        bool is_shown = false;
        assert_weft_ok(weft_prometheus_render(meter, &text, &len));
        is_shown = strstr(text, "weft_exporter_failing{exporter=\"otlp\"} 1\n") != NULL;
        free(text);
        if (is_shown) {
            break;
        }
        assert_true(i < 299);
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    proc = weft_provider_processor(provider, 0);
    assert_weft_ok(weft_processor_get_stats(proc, &ps));
    assert_int_equal(ps.failed, 0); /* not given up: still retrying */
    http_receiver_set_default(f->rx, &(struct http_response){.status = 200});
    assert_weft_ok(weft_provider_force_flush(provider, 5000));
    assert_weft_ok(weft_processor_get_stats(proc, &ps));
    assert_int_equal(ps.exported, 4);
    assert_weft_ok(weft_prometheus_render(meter, &text, &len));
    assert_non_null(strstr(text, "weft_exporter_failing{exporter=\"otlp\"} 0\n"));
    free(text);
    weft_provider_free(provider);
    weft_meter_free(meter);
}

/* Found by tests/fuzz/fuzz_otel_env: OTEL_EXPORTER_OTLP_HEADERS members became header lines
 * as given, so a name with spaces or bytes outside ASCII, or a value decoded to CR LF (a second,
 * injected header), went out on the wire. */
static void
test_otlp_http_headers_that_are_not_http_are_skipped(void **state)
{
    struct curl_slist *headers = NULL;

    (void)state;
    assert_weft_ok(weft__otlp_headers_add(&headers,
                                          "a=1%0D%0AInjected: x,b c=2,\xff=3,d:e=4,f=%7F,"
                                          "ok-1=v%20w, tab = x%09y ",
                                          "OTEL_EXPORTER_OTLP_HEADERS"));
    assert_non_null(headers);
    assert_string_equal(headers->data, "ok-1: v w");
    assert_non_null(headers->next);
    assert_string_equal(headers->next->data, "tab: x\ty");
    assert_null(headers->next->next);
    curl_slist_free_all(headers);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_otlp_http_protobuf_delivered_and_decodable),
        T(test_otlp_http_json_protocol_sends_otlp_json),
        T(test_otlp_http_gzip_from_env_compresses_body),
        T(test_otlp_http_headers_env_are_percent_decoded),
        T(test_otlp_http_headers_that_are_not_http_are_skipped),
        T(test_otlp_http_endpoint_base_keeps_path_and_traces_endpoint_is_exact),
        T(test_otlp_http_bad_url_is_refused_naming_the_variable),
        T(test_otlp_http_bad_env_values_warn_and_fall_back),
        T(test_otlp_http_503_is_retried_then_delivered_once),
        T(test_otlp_http_429_honours_retry_after_seconds),
        T(test_otlp_http_retry_after_http_date_is_honoured),
        T(test_otlp_http_503_honours_numeric_retry_after),
        T(test_otlp_http_gives_up_when_retry_after_is_past_the_deadline),
        T(test_otlp_http_400_is_final),
        T(test_otlp_http_partial_success_counts_rejects_without_retry),
        T(test_otlp_http_dropped_connection_is_retried),
        T(test_otlp_http_slow_answer_times_out_and_is_retried),
        T(test_otlp_http_gives_up_at_the_deadline),
        T(test_otlp_http_reuses_the_connection),
        T(test_otlp_http_oversized_answer_is_an_error),
        T(test_otlp_http_shutdown_cuts_a_retry_wait_short),
        T(test_otlp_http_shutdown_cuts_a_slow_request_short),
        T(test_pipeline_no_span_lost_across_transient_failures),
        T(test_pipeline_400_is_counted_failed_not_retried),
        T(test_pipeline_span_end_never_waits_on_a_slow_receiver),
        T(test_pipeline_shutdown_delivers_what_is_queued),
        T(test_otlp_http_refused_connection_says_so_and_where),
        T(test_otlp_http_silent_collector_is_no_answer_within_the_timeout),
        T(test_otlp_http_final_status_names_status_url_and_body),
        T(test_otlp_http_200_that_is_not_an_otlp_response_fails),
        T(test_pipeline_failure_detail_survives_a_shutdown_mid_retry),
        T(test_pipeline_failing_gauge_shows_at_the_first_failed_attempt),
        T(test_pipeline_silent_collector_at_shutdown_says_no_answer),
#undef T
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
