/* tests/ingest/test_otel_sdk.c - the OpenTelemetry JS SDK (npm, pinned in tests/ingest/package.json
 * and installed by `make deps-test`) sends traces to a `weft serve` this test starts on a free
 * 127.0.0.1 port with a throwaway WEFT_HOME: protobuf and JSON, gzip and not, through the SDK's
 * own OTLP/HTTP exporters (tests/ingest/send.js). The spans must then be in the span store, read
 * back through the public read API, and counted on /metrics.
 * A missing node or node_modules fails the test: it never skips. */
#include "support/serve_proc.h"
#include "support/weft_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WEFT_BIN   WEFT_BINARY_DIR "/weft"
#define INGEST_DIR WEFT_SOURCE_DIR "/tests/ingest"

struct fixture {
    char home[256];
    unsigned port;
    pid_t serve;
};

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct stat sb;

    assert_non_null(f);
    if (stat(INGEST_DIR "/node_modules/@opentelemetry/exporter-trace-otlp-proto", &sb) != 0) {
        fail_msg("the OpenTelemetry JS SDK is not installed in tests/ingest/node_modules: run "
                 "`make deps-test` (npm ci in tests/ingest)");
    }
    snprintf(f->home, sizeof(f->home), "%s/weft-ingest-sdk-XXXXXX",
             getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(f->home));
    f->serve = serve_proc_start(WEFT_BIN, f->home, &f->port);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    if (f->serve > 0) {
        serve_proc_stop(f->serve);
    }
    weft_test_rmtree(f->home);
    free(f);
    return 0;
}

/* Run send.js and return what it printed (the ids), parsed. */
static json_t *
send_trace(const struct fixture *f,
           const char *protocol,
           const char *compression,
           const char *service)
{
    char cmd[1024];
    char out[512] = "";
    FILE *p = NULL;
    size_t n = 0;
    json_t *ids = NULL;
    int status = 0;

    snprintf(cmd, sizeof(cmd), "node '%s/send.js' http://127.0.0.1:%u/v1/traces %s %s %s",
             INGEST_DIR, f->port, protocol, compression, service);
    p = popen(cmd, "r");
    assert_non_null(p);
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    status = pclose(p);
    if (status != 0) {
        fail_msg("%s: exit status %d, output: %s", cmd, status, out);
    }
    ids = json_loads(out, 0, NULL);
    assert_non_null(ids);
    return ids;
}

static const struct weft_span_data *
find_span(const struct weft_trace *trace, const char *name)
{
    for (size_t i = 0; i < weft_trace_span_count(trace); i++) {
        if (strcmp(weft_trace_span(trace, i)->name, name) == 0) {
            return weft_trace_span(trace, i);
        }
    }
    fail_msg("span %s not stored", name);
    return NULL;
}

static const char *
resource_service(const struct weft_span_data *span)
{
    for (size_t i = 0; span->resource != NULL && i < span->resource->attr_count; i++) {
        if (strcmp(span->resource->attrs[i].key, "service.name") == 0) {
            return span->resource->attrs[i].value.u.str;
        }
    }
    return NULL;
}

/* What the store must hold for one trace send.js sent. */
static void
check_trace(const char *db, const json_t *ids, const char *service)
{
    struct weft_store *store = NULL;
    struct weft_trace *trace = NULL;
    const struct weft_span_data *root = NULL;
    const struct weft_span_data *child = NULL;
    const struct weft_span_data *tool = NULL;
    char hex[17];

    assert_weft_ok(weft_store_open(db, &store));
    assert_weft_ok(
        weft_store_load_trace(store, json_string_value(json_object_get(ids, "traceId")), &trace));
    assert_int_equal(weft_trace_span_count(trace), 3);
    root = find_span(trace, "GET /orders");
    child = find_span(trace, "chat gpt-4o");
    tool = find_span(trace, "execute_tool search");
    assert_int_equal(root->kind, WEFT_SPAN_KIND_SERVER);
    assert_false(root->has_parent);
    weft_hex_encode(root->span_id, WEFT_SPAN_ID_SIZE, hex);
    assert_string_equal(hex, json_string_value(json_object_get(ids, "rootSpanId")));
    assert_memory_equal(child->parent_span_id, root->span_id, WEFT_SPAN_ID_SIZE);
    assert_memory_equal(tool->parent_span_id, child->span_id, WEFT_SPAN_ID_SIZE);
    assert_int_equal(child->kind, WEFT_SPAN_KIND_CLIENT);
    assert_int_equal(child->status_code, WEFT_STATUS_ERROR);
    assert_string_equal(child->status_message, "rate limited");
    assert_string_equal(weft_span_data_attr(child, "gen_ai.operation.name")->u.str, "chat");
    assert_int_equal(weft_span_data_attr(child, "gen_ai.usage.input_tokens")->u.i, 321);
    assert_true(weft_span_data_attr(child, "weft.cost.usd")->u.d == 0.5);
    assert_false(weft_span_data_attr(child, "weft.cache.hit")->u.b);
    assert_int_equal(weft_span_data_attr(child, "tags")->type, WEFT_VALUE_STRING_ARRAY);
    assert_int_equal(child->event_count, 1);
    assert_string_equal(child->events[0].name, "exception");
    assert_int_equal(child->link_count, 1);
    weft_hex_encode(child->links[0].span_id, WEFT_SPAN_ID_SIZE, hex);
    assert_string_equal(hex, "bbbbbbbbbbbbbbbb");
    assert_string_equal(resource_service(root), service);
    assert_string_equal(child->scope->name, "weft-ingest-test");
    assert_true(root->end_time_ns >= root->start_time_ns && root->start_time_ns > 0);
    weft_trace_free(trace);
    weft_store_close(store);
}

static void
test_otel_js_sdk_spans_land_in_the_store(void **state)
{
    struct fixture *f = *state;
    static const char *const cases[][3] = {{"proto", "none", "js-proto"},
                                           {"proto", "gzip", "js-proto-gzip"},
                                           {"json", "none", "js-json"},
                                           {"json", "gzip", "js-json-gzip"}};
    json_t *ids[4] = {NULL};
    char db[320];
    char *metrics = NULL;
    long status = 0;
    const char *accepted[] = {"outcome=\"accepted\"", NULL};
    const char *ok[] = {"status=\"200\"", NULL};

    for (size_t i = 0; i < 4; i++) {
        ids[i] = send_trace(f, cases[i][0], cases[i][1], cases[i][2]);
    }
    metrics = serve_proc_get(f->port, "/metrics", 10000, &status);
    assert_non_null(metrics);
    assert_int_equal(status, 200);
    assert_true(serve_proc_sum(metrics, "weft_ingest_spans_total", accepted, NULL) == 12.0);
    assert_true(serve_proc_sum(metrics, "weft_ingest_requests_total", ok, NULL) == 4.0);
    free(metrics);
    serve_proc_stop(f->serve);
    f->serve = 0;
    snprintf(db, sizeof(db), "%s/weft.db", f->home);
    for (size_t i = 0; i < 4; i++) {
        check_trace(db, ids[i], cases[i][2]);
        json_decref(ids[i]);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_otel_js_sdk_spans_land_in_the_store, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
