/* tests/exporters/test_otlp_metrics.c - OTLP metrics: the protobuf encoder read back by the
 * test-side decoder (written separately from the encoder) and by protoc with
 * tests/support/otlp_metrics.proto, the JSON encoder equal to the decoded protobuf, and the
 * periodic reader against a real local HTTP receiver: path and content type, periodic and forced
 * exports, retries, failures counted, the final export on stop, and the environment. */
#include "base/buf.h"
#include "exporters/otlp_encode.h"
#include "support/http_receiver.h"
#include "support/otlp_decode.h"
#include "support/weft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const env_vars[] = {
    "OTEL_EXPORTER_OTLP_ENDPOINT",        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    "OTEL_EXPORTER_OTLP_COMPRESSION",     "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION",
    "OTEL_EXPORTER_OTLP_HEADERS",         "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
    "OTEL_METRIC_EXPORT_INTERVAL",        "OTEL_METRIC_EXPORT_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
};

struct fx {
    struct weft_meter *meter;
    struct weft_instrument *counter;
    struct weft_instrument *updown;
    struct weft_instrument *gauge;
    struct weft_instrument *hist;
    struct weft_instrument *unused;
    struct http_receiver *rx;
    uint8_t trace_id[WEFT_TRACE_ID_SIZE];
    uint8_t span_id[WEFT_SPAN_ID_SIZE];
    char url[160];
};

static void
clear_env(void)
{
    for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); i++) {
        weft_test_setenv(env_vars[i], NULL);
    }
}

/* A meter with one instrument of each kind, one left empty, and an exemplar from a span. */
static int
setup(void **state)
{
    static const double bounds[] = {0.5, 1, 5};
    struct fx *f = calloc(1, sizeof(*f));
    struct weft_meter_options mo = {.service_name = "metrics-test"};
    struct weft_attr ok[2] = {weft_attr_str("agent", "coder"), weft_attr_str("outcome", "success")};
    struct weft_attr bad = weft_attr_str("outcome", "failure");
    struct weft_attr kind = weft_attr_str("loop.kind", "replan");
    struct weft_provider *p = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_span *span = NULL;
    struct weft_span_context ctx;
    size_t token = 0;

    clear_env();
    assert_weft_ok(weft_meter_new(&mo, &f->meter));
    assert_weft_ok(weft_meter_instrument(f->meter, WEFT_INSTRUMENT_COUNTER,
                                         "weft.agent.invocations", "{invocation}", "agent calls",
                                         NULL, 0, &f->counter));
    assert_weft_ok(weft_meter_instrument(f->meter, WEFT_INSTRUMENT_UPDOWN_COUNTER,
                                         "weft.runs.active", "{run}", NULL, NULL, 0, &f->updown));
    assert_weft_ok(weft_meter_instrument(f->meter, WEFT_INSTRUMENT_GAUGE, "weft.queue.fill", "1",
                                         NULL, NULL, 0, &f->gauge));
    assert_weft_ok(weft_meter_instrument(f->meter, WEFT_INSTRUMENT_HISTOGRAM, "weft.step.duration",
                                         "s", "step time", bounds, 3, &f->hist));
    assert_weft_ok(weft_meter_instrument(f->meter, WEFT_INSTRUMENT_COUNTER, "weft.never.used", NULL,
                                         NULL, NULL, 0, &f->unused));
    assert_weft_ok(weft_counter_add(f->counter, 3, ok, 2));
    assert_weft_ok(weft_counter_add(f->counter, 1, &bad, 1));
    assert_weft_ok(weft_counter_add(f->updown, 2, NULL, 0));
    assert_weft_ok(weft_counter_add(f->updown, -1, NULL, 0));
    assert_weft_ok(weft_gauge_set(f->gauge, 0.25, NULL, 0));
    assert_weft_ok(weft_histogram_record(f->hist, 0.25, &kind, 1));
    assert_weft_ok(weft_histogram_record(f->hist, 2, &kind, 1));

    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_weft_ok(weft_provider_get_tracer(p, "t", NULL, &tracer));
    span = weft_span_start(tracer, "chat slow", NULL);
    weft_span_context_of(span, &ctx);
    memcpy(f->trace_id, ctx.trace_id, sizeof(f->trace_id));
    memcpy(f->span_id, ctx.span_id, sizeof(f->span_id));
    token = weft_context_attach(span);
    assert_weft_ok(weft_histogram_record(f->hist, 9, &kind, 1)); /* exemplar in (5, +inf) */
    weft_context_detach(token);
    weft_span_end(span, 0);
    weft_provider_shutdown(p, 1000);
    weft_provider_free(p);

    assert_int_equal(http_receiver_start(&f->rx), 0);
    http_receiver_url(f->rx, "/v1/metrics", f->url, sizeof(f->url));
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    http_receiver_stop(f->rx);
    weft_meter_free(f->meter);
    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
    clear_env();
    free(f);
    return 0;
}

static json_t *
decode_proto(const char *data, size_t len)
{
    struct weft_test_otlp_error err;
    json_t *root = weft_test_otlp_decode_metrics_request(data, len, WEFT_TEST_OTLP_CANONICAL, &err);

    if (root == NULL) {
        fail_msg("decode: %s", err.text);
    }
    return root;
}

static json_t *
metrics_of(json_t *root)
{
    json_t *rm = json_object_get(root, "resourceMetrics");

    assert_int_equal(json_array_size(rm), 1);
    rm = json_object_get(json_array_get(rm, 0), "scopeMetrics");
    assert_int_equal(json_array_size(rm), 1);
    return json_object_get(json_array_get(rm, 0), "metrics");
}

static json_t *
metric_named(json_t *metrics, const char *name)
{
    size_t i = 0;
    json_t *m = NULL;

    json_array_foreach(metrics, i, m)
    {
        if (strcmp(json_string_value(json_object_get(m, "name")), name) == 0) {
            return m;
        }
    }
    return NULL;
}

/* The string value of attribute @p key in a KeyValue list, or NULL. */
static const char *
attr_of(json_t *attrs, const char *key)
{
    size_t i = 0;
    json_t *kv = NULL;

    json_array_foreach(attrs, i, kv)
    {
        if (strcmp(json_string_value(json_object_get(kv, "key")), key) == 0) {
            return json_string_value(json_object_get(json_object_get(kv, "value"), "stringValue"));
        }
    }
    return NULL;
}

static void
hex(const uint8_t *id, size_t len, char *out)
{
    for (size_t i = 0; i < len; i++) {
        sprintf(out + 2 * i, "%02x", id[i]);
    }
}

static void
test_proto_encodes_every_kind_with_exemplars(void **state)
{
    struct fx *f = *state;
    struct weft__buf buf;
    size_t points = 0;
    json_t *root = NULL;
    json_t *metrics = NULL;
    json_t *m = NULL;
    json_t *dp = NULL;
    json_t *ex = NULL;
    json_t *rm = NULL;
    char want_trace[33];
    char want_span[17];

    weft__buf_init(&buf, 1u << 20);
    assert_weft_ok(weft__otlp_metrics_encode_proto(f->meter, &buf, &points));
    assert_int_equal(points, 5); /* 2 counter series, updown, gauge, histogram */
    root = decode_proto(buf.data, buf.len);
    rm = json_array_get(json_object_get(root, "resourceMetrics"), 0);
    assert_string_equal(
        attr_of(json_object_get(json_object_get(rm, "resource"), "attributes"), "service.name"),
        "metrics-test");
    m = json_object_get(json_array_get(json_object_get(rm, "scopeMetrics"), 0), "scope");
    assert_string_equal(json_string_value(json_object_get(m, "name")), "weft");
    assert_string_equal(json_string_value(json_object_get(m, "version")), WEFT_VERSION);
    metrics = metrics_of(root);
    assert_int_equal(json_array_size(metrics), 4);
    assert_null(metric_named(metrics, "weft.never.used")); /* no series: left out */

    m = metric_named(metrics, "weft.agent.invocations");
    assert_string_equal(json_string_value(json_object_get(m, "unit")), "{invocation}");
    assert_string_equal(json_string_value(json_object_get(m, "description")), "agent calls");
    m = json_object_get(m, "sum");
    assert_true(json_is_true(json_object_get(m, "isMonotonic")));
    assert_int_equal(json_integer_value(json_object_get(m, "aggregationTemporality")), 2);
    assert_int_equal(json_array_size(json_object_get(m, "dataPoints")), 2);
    dp = json_array_get(json_object_get(m, "dataPoints"), 0);
    assert_true(json_real_value(json_object_get(dp, "asDouble")) == 3);
    assert_string_equal(attr_of(json_object_get(dp, "attributes"), "agent"), "coder");
    assert_string_equal(attr_of(json_object_get(dp, "attributes"), "outcome"), "success");
    assert_non_null(json_object_get(dp, "startTimeUnixNano"));
    assert_non_null(json_object_get(dp, "timeUnixNano"));

    m = json_object_get(metric_named(metrics, "weft.runs.active"), "sum");
    assert_null(json_object_get(m, "isMonotonic")); /* false is the proto3 default */
    dp = json_array_get(json_object_get(m, "dataPoints"), 0);
    assert_true(json_real_value(json_object_get(dp, "asDouble")) == 1);

    m = json_object_get(metric_named(metrics, "weft.queue.fill"), "gauge");
    assert_non_null(m);
    dp = json_array_get(json_object_get(m, "dataPoints"), 0);
    assert_true(json_real_value(json_object_get(dp, "asDouble")) == 0.25);

    m = json_object_get(metric_named(metrics, "weft.step.duration"), "histogram");
    assert_int_equal(json_integer_value(json_object_get(m, "aggregationTemporality")), 2);
    dp = json_array_get(json_object_get(m, "dataPoints"), 0);
    assert_string_equal(json_string_value(json_object_get(dp, "count")), "3");
    assert_true(json_real_value(json_object_get(dp, "sum")) == 11.25);
    assert_true(json_real_value(json_object_get(dp, "min")) == 0.25);
    assert_true(json_real_value(json_object_get(dp, "max")) == 9);
    assert_int_equal(json_array_size(json_object_get(dp, "explicitBounds")), 3);
    assert_true(json_real_value(json_array_get(json_object_get(dp, "explicitBounds"), 2)) == 5);
    assert_int_equal(json_array_size(json_object_get(dp, "bucketCounts")), 4);
    assert_string_equal(json_string_value(json_array_get(json_object_get(dp, "bucketCounts"), 0)),
                        "1");
    assert_string_equal(json_string_value(json_array_get(json_object_get(dp, "bucketCounts"), 1)),
                        "0");
    assert_string_equal(json_string_value(json_array_get(json_object_get(dp, "bucketCounts"), 2)),
                        "1");
    assert_string_equal(json_string_value(json_array_get(json_object_get(dp, "bucketCounts"), 3)),
                        "1");
    assert_string_equal(attr_of(json_object_get(dp, "attributes"), "loop.kind"), "replan");
    assert_int_equal(json_array_size(json_object_get(dp, "exemplars")), 1);
    ex = json_array_get(json_object_get(dp, "exemplars"), 0);
    hex(f->trace_id, 16, want_trace);
    hex(f->span_id, 8, want_span);
    assert_string_equal(json_string_value(json_object_get(ex, "traceId")), want_trace);
    assert_string_equal(json_string_value(json_object_get(ex, "spanId")), want_span);
    assert_true(json_real_value(json_object_get(ex, "asDouble")) == 9);
    json_decref(root);
    weft__buf_cleanup(&buf);
}

/* protoc reads our bytes with a schema written from REFERENCE.md: every field lands where the
 * schema puts it, with its type, and nothing is left over as an unknown field. */
static void
test_proto_decodes_with_protoc(void **state)
{
    struct fx *f = *state;
    struct weft__buf buf;
    size_t points = 0;
    char in_path[256];
    char cmd[1024];
    char text[65536];
    size_t len = 0;
    FILE *fp = NULL;
    int fd = -1;
    static const char *const expected[] = {
        "name: \"weft.agent.invocations\"",
        "unit: \"{invocation}\"",
        "is_monotonic: true",
        "aggregation_temporality: AGGREGATION_TEMPORALITY_CUMULATIVE",
        "gauge {",
        "as_double: 0.25",
        "count: 3",
        "sum: 11.25",
        "bucket_counts: 1",
        "explicit_bounds: 0.5",
        "explicit_bounds: 5",
        "min: 0.25",
        "max: 9",
        "exemplars {",
        "string_value: \"replan\"",
        "string_value: \"metrics-test\"",
    };

    if (system("protoc --version >/dev/null 2>&1") != 0) {
        fail_msg("protoc is not on PATH: install protobuf-compiler (scripts/deps.sh test)");
    }
    weft__buf_init(&buf, 1u << 20);
    assert_weft_ok(weft__otlp_metrics_encode_proto(f->meter, &buf, &points));
    snprintf(in_path, sizeof(in_path), "%s/otlp-metrics-protoc-XXXXXX", WEFT_BINARY_DIR);
    fd = mkstemp(in_path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf.data, buf.len), (ssize_t)buf.len);
    close(fd);
    snprintf(cmd, sizeof(cmd),
             "protoc --decode=opentelemetry.proto.collector.trace.v1.ExportMetricsServiceRequest "
             "-I '%s/tests/support' otlp_metrics.proto < '%s'",
             WEFT_SOURCE_DIR, in_path);
    fp = popen(cmd, "r");
    assert_non_null(fp);
    len = fread(text, 1, sizeof(text) - 1, fp);
    text[len] = '\0';
    assert_int_equal(pclose(fp), 0);
    unlink(in_path);
    for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
        if (strstr(text, expected[i]) == NULL) {
            fail_msg("protoc output lacks `%s`:\n%s", expected[i], text);
        }
    }
    /* An unknown field would print as its number. */
    for (const char *line = text; line != NULL && *line != '\0';) {
        while (*line == ' ') {
            line++;
        }
        if (*line >= '0' && *line <= '9') {
            fail_msg("protoc found an unknown field: %.60s", line);
        }
        line = strchr(line, '\n');
        line = line != NULL ? line + 1 : NULL;
    }
    weft__buf_cleanup(&buf);
}

/* Drop the collection time of every data point: two collections differ only there. */
static void
strip_times(json_t *v)
{
    size_t i = 0;
    const char *k = NULL;
    json_t *child = NULL;

    if (json_is_array(v)) {
        json_array_foreach(v, i, child)
        {
            strip_times(child);
        }
    } else if (json_is_object(v)) {
        if (json_object_get(v, "dataPoints") != NULL) {
            json_array_foreach(json_object_get(v, "dataPoints"), i, child)
            {
                json_object_del(child, "timeUnixNano");
            }
        }
        json_object_foreach(v, k, child)
        {
            strip_times(child);
        }
    }
}

static void
test_json_equals_decoded_proto(void **state)
{
    struct fx *f = *state;
    struct weft__buf proto;
    struct weft__buf js;
    size_t points = 0;
    json_error_t jerr;
    json_t *a = NULL;
    json_t *b = NULL;

    weft__buf_init(&proto, 1u << 20);
    weft__buf_init(&js, 1u << 20);
    assert_weft_ok(weft__otlp_metrics_encode_proto(f->meter, &proto, &points));
    assert_weft_ok(weft__otlp_metrics_encode_json(f->meter, &js, &points));
    assert_int_equal(points, 5);
    a = decode_proto(proto.data, proto.len);
    b = json_loadb(js.data, js.len, 0, &jerr);
    if (b == NULL) {
        fail_msg("JSON: %s at %d: %.*s", jerr.text, jerr.position, (int)js.len, js.data);
    }
    strip_times(a);
    strip_times(b);
    if (!json_equal(a, b)) {
        char *sa = json_dumps(a, JSON_SORT_KEYS);
        char *sb = json_dumps(b, JSON_SORT_KEYS);

        fail_msg("proto %s\njson  %s", sa, sb);
    }
    json_decref(a);
    json_decref(b);
    weft__buf_cleanup(&proto);
    weft__buf_cleanup(&js);
}

/* A request over the buffer's cap fails with ELIMIT and leaves what the buffer held, in both
 * encodings, at every cap below the full size. */
static void
test_encoders_restore_the_buffer_past_the_cap(void **state)
{
    struct fx *f = *state;
    struct weft__buf full;
    size_t points = 0;

    weft__buf_init(&full, 1u << 20);
    assert_weft_ok(weft__otlp_metrics_encode_proto(f->meter, &full, &points));
    for (int is_json = 0; is_json <= 1; is_json++) {
        for (size_t cap = 8; cap < full.len; cap += full.len / 7 + 1) {
            struct weft__buf buf;

            weft__buf_init(&buf, cap);
            assert_weft_ok(weft__buf_append_str(&buf, "prefix"));
            points = 99;
            assert_weft_err(is_json ? weft__otlp_metrics_encode_json(f->meter, &buf, &points)
                                    : weft__otlp_metrics_encode_proto(f->meter, &buf, &points),
                            WEFT_ELIMIT);
            assert_int_equal(buf.len, 6);
            assert_string_equal(buf.data, "prefix");
            assert_int_equal(points, 0);
            weft__buf_cleanup(&buf);
        }
    }
    weft__buf_cleanup(&full);
}

static void
test_empty_meter_has_no_points(void **state)
{
    struct weft_meter *m = NULL;
    struct weft_instrument *c = NULL;
    struct weft__buf buf;
    size_t points = 99;

    (void)state;
    weft__buf_init(&buf, 1u << 20);
    assert_weft_ok(weft_meter_new(NULL, &m));
    assert_weft_ok(weft_meter_instrument(m, WEFT_INSTRUMENT_COUNTER, "c", NULL, NULL, NULL, 0, &c));
    assert_weft_ok(weft__otlp_metrics_encode_proto(m, &buf, &points));
    assert_int_equal(points, 0);
    assert_weft_err(weft__otlp_metrics_encode_json(NULL, &buf, &points), WEFT_EINVAL);
    weft__buf_cleanup(&buf);
    weft_meter_free(m);
}

static void
test_reader_force_flush_sends_protobuf(void **state)
{
    struct fx *f = *state;
    struct weft_otlp_options o = {.metrics_endpoint = f->url};
    struct weft_metric_reader_options ro = {.otlp = &o, .interval_ms = 600000};
    struct weft_metric_reader *r = NULL;
    struct weft_metric_reader_stats st;
    const struct http_request *req = NULL;
    char ct[64];
    json_t *root = NULL;

    assert_weft_ok(weft_otlp_metric_reader_start(f->meter, &ro, &r));
    assert_weft_ok(weft_metric_reader_force_flush(r, 5000));
    assert_int_equal(http_receiver_count(f->rx), 1);
    req = http_receiver_request(f->rx, 0);
    assert_string_equal(req->method, "POST");
    assert_string_equal(req->path, "/v1/metrics");
    assert_string_equal(http_request_header(req, "Content-Type", ct, sizeof(ct)),
                        "application/x-protobuf");
    root = decode_proto(req->body, req->body_len);
    assert_non_null(metric_named(metrics_of(root), "weft.step.duration"));
    json_decref(root);
    weft_metric_reader_get_stats(r, &st);
    assert_int_equal(st.exports, 1);
    assert_int_equal(st.failures, 0);
    assert_int_equal(st.points, 5);
    assert_int_equal(st.last_http_status, 200);
    /* The export is counted on the meter and goes out with the next one. */
    assert_weft_ok(weft_metric_reader_force_flush(r, 5000));
    req = http_receiver_request(f->rx, 1);
    root = decode_proto(req->body, req->body_len);
    {
        json_t *m = metric_named(metrics_of(root), "weft.metrics.exports");
        json_t *dp = json_array_get(json_object_get(json_object_get(m, "sum"), "dataPoints"), 0);

        assert_non_null(m);
        assert_string_equal(attr_of(json_object_get(dp, "attributes"), "outcome"), "success");
        assert_true(json_real_value(json_object_get(dp, "asDouble")) == 1);
    }
    json_decref(root);
    weft_metric_reader_stop(r);
}

static void
test_reader_json_and_env_endpoint(void **state)
{
    struct fx *f = *state;
    struct weft_metric_reader *r = NULL;
    const struct http_request *req = NULL;
    char ct[64];
    char base[160];
    json_error_t jerr;
    json_t *root = NULL;

    /* The base endpoint gets v1/metrics appended; the protocol comes from the metrics env. */
    http_receiver_url(f->rx, "/collector", base, sizeof(base));
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", base);
    weft_test_setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/json");
    weft_test_setenv("OTEL_METRIC_EXPORT_INTERVAL", "600000");
    assert_weft_ok(weft_otlp_metric_reader_start(f->meter, NULL, &r));
    assert_weft_ok(weft_metric_reader_force_flush(r, 5000));
    req = http_receiver_request(f->rx, 0);
    assert_string_equal(req->path, "/collector/v1/metrics");
    assert_string_equal(http_request_header(req, "Content-Type", ct, sizeof(ct)),
                        "application/json");
    root = json_loadb(req->body, req->body_len, 0, &jerr);
    assert_non_null(root);
    assert_non_null(metric_named(metrics_of(root), "weft.agent.invocations"));
    json_decref(root);
    weft_metric_reader_stop(r);

    /* The signal's own endpoint is used as given. */
    http_receiver_url(f->rx, "/exact/path", base, sizeof(base));
    weft_test_setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", base);
    assert_weft_ok(weft_otlp_metric_reader_start(f->meter, NULL, &r));
    assert_weft_ok(weft_metric_reader_force_flush(r, 5000));
    /* Request 1 was the first reader's final export on stop. */
    assert_int_equal(http_receiver_count(f->rx), 3);
    assert_string_equal(http_receiver_request(f->rx, 1)->path, "/collector/v1/metrics");
    assert_string_equal(http_receiver_request(f->rx, 2)->path, "/exact/path");
    weft_metric_reader_stop(r);
}

static void
test_reader_exports_periodically_and_on_stop(void **state)
{
    struct fx *f = *state;
    struct weft_otlp_options o = {.metrics_endpoint = f->url};
    struct weft_metric_reader_options ro = {.otlp = &o, .interval_ms = 50};
    struct weft_metric_reader *r = NULL;
    size_t before = 0;

    assert_weft_ok(weft_otlp_metric_reader_start(f->meter, &ro, &r));
    assert_true(http_receiver_wait(f->rx, 3, 5000));
    weft_metric_reader_stop(r);

    /* A long interval: only the final export on stop. */
    ro.interval_ms = 600000;
    before = http_receiver_count(f->rx);
    assert_weft_ok(weft_otlp_metric_reader_start(f->meter, &ro, &r));
    assert_int_equal(http_receiver_count(f->rx), before);
    weft_metric_reader_stop(r);
    assert_int_equal(http_receiver_count(f->rx), before + 1);
}

static void
test_reader_retries_then_counts_failures(void **state)
{
    struct fx *f = *state;
    struct weft_otlp_options o = {
        .metrics_endpoint = f->url, .initial_backoff_ms = 10, .max_backoff_ms = 20};
    struct weft_metric_reader_options ro = {.otlp = &o, .interval_ms = 600000, .timeout_ms = 5000};
    struct weft_metric_reader *r = NULL;
    struct weft_metric_reader_stats st;
    const struct http_request *req = NULL;
    json_t *root = NULL;
    json_t *dp = NULL;

    http_receiver_push(f->rx, &(struct http_response){.status = 503});
    http_receiver_push(f->rx, &(struct http_response){.status = 429});
    assert_weft_ok(weft_otlp_metric_reader_start(f->meter, &ro, &r));
    assert_weft_ok(weft_metric_reader_force_flush(r, 5000));
    assert_int_equal(http_receiver_count(f->rx), 3);
    weft_metric_reader_get_stats(r, &st);
    assert_int_equal(st.exports, 1);
    assert_int_equal(st.failures, 0);

    /* 400 is final: no retry, the failure is counted and reported. */
    http_receiver_push(f->rx, &(struct http_response){.status = 400});
    assert_weft_err(weft_metric_reader_force_flush(r, 5000), WEFT_EHTTP);
    assert_int_equal(http_receiver_count(f->rx), 4);
    weft_metric_reader_get_stats(r, &st);
    assert_int_equal(st.exports, 2);
    assert_int_equal(st.failures, 1);
    assert_int_equal(st.last_http_status, 400);
    assert_weft_ok(weft_metric_reader_force_flush(r, 5000));
    req = http_receiver_request(f->rx, 4);
    root = decode_proto(req->body, req->body_len);
    dp = json_object_get(
        json_object_get(metric_named(metrics_of(root), "weft.metrics.exports"), "sum"),
        "dataPoints");
    assert_int_equal(json_array_size(dp), 2); /* outcome=success and outcome=failure */
    json_decref(root);
    weft_metric_reader_stop(r);
}

static void
test_reader_sends_nothing_without_points(void **state)
{
    struct fx *f = *state;
    struct weft_meter *m = NULL;
    struct weft_otlp_options o = {.metrics_endpoint = f->url};
    struct weft_metric_reader_options ro = {.otlp = &o, .interval_ms = 600000};
    struct weft_metric_reader *r = NULL;

    assert_weft_ok(weft_meter_new(NULL, &m));
    assert_weft_ok(weft_otlp_metric_reader_start(m, &ro, &r));
    assert_weft_ok(weft_metric_reader_force_flush(r, 5000));
    weft_metric_reader_stop(r);
    assert_int_equal(http_receiver_count(f->rx), 0);
    weft_meter_free(m);

    /* Delta is asked for but not supported: said once, at start. */
    weft_test_capture_logs();
    weft_test_setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta");
    assert_weft_ok(weft_otlp_metric_reader_start(f->meter, &ro, &r));
    weft_metric_reader_stop(r);
    assert_non_null(strstr(weft_test_logs(), "cumulative temporality only"));
    weft_test_clear_logs();

    /* A bad endpoint is refused at start. */
    o.metrics_endpoint = "ftp://example.invalid/v1/metrics";
    assert_weft_err(weft_otlp_metric_reader_start(f->meter, &ro, &r), WEFT_EINVAL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_proto_encodes_every_kind_with_exemplars, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_proto_decodes_with_protoc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_equals_decoded_proto, setup, teardown),
        cmocka_unit_test(test_empty_meter_has_no_points),
        cmocka_unit_test_setup_teardown(test_encoders_restore_the_buffer_past_the_cap, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reader_force_flush_sends_protobuf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_json_and_env_endpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_exports_periodically_and_on_stop, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reader_retries_then_counts_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_sends_nothing_without_points, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
