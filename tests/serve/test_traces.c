/* tests/serve/test_traces.c - `weft serve`'s traces list (GET /api/v1/traces,
 * serve/api_traces.c over weft_store_find_traces()), the trace document's service and
 * resource, gzip of its answers (serve/gzip.c) and the runs pushed as Server-Sent Events
 * (GET /api/v1/events, serve/events.c), through the server started in-process with its OTLP
 * ingest, as a browser or an OTel SDK reaches it:
 * - traces posted as OTLP/HTTP JSON by "other SDKs" and the traces of real `weft run`s, listed
 *   newest first with service, root name, counts and run id; each filter, keyset paging to the
 *   end, a trace without its root, 400s naming the parameter;
 * - the trace document of an ingested trace has service and resource, and no run_id at all;
 * - gzip when accepted (decompressed and compared), not with q=0 or without the header, not for
 *   small answers; Vary always;
 * - events: a stream sees a run that starts after it opened, heartbeats, the 17th stream gets
 *   503, the token is required, and the server stops at once with streams open.
 *
 * Built twice: as serve/traces over SQLite, and with WEFT_TEST_TRACES_PG as
 * serve_pg/traces_pg over a real PostgreSQL (tests/support/pg_server.h), where the list and the
 * document are checked the same way (the weft runs and the SQLite-only cases are left out).
 */
#include "support/serve_proc.h"
#include "support/weft_test.h"

#include "base/time.h"
#include "serve/api.h"
#include "serve/events.h"
#include "serve/gzip.h"
#include "serve/http.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#ifdef WEFT_TEST_TRACES_PG
#include "support/pg_server.h"
static struct weft_test_pg *pg;
#define HAS_RUNS false
#else
#define HAS_RUNS true
#endif

#define TOKEN "correct-horse-battery-staple"
#define AUTH  "Authorization: Bearer " TOKEN

#define T_CART  "0af7651916cd43dd8448eb211c80319c"
#define T_PAY   "1b000000000000000000000000000002"
#define T_RUN   "2c000000000000000000000000000003"
#define T_ORPH  "3d000000000000000000000000000004"
#define T0_MS   1700000000000ull /* T_CART's start; the others 1 s apart */
#define T0_3339 "2023-11-14T22:13:20Z"

struct fx {
    char home[256];
    char state[300];
    char store[300];
    char failed[64];
    char good[64];
    struct weft__ingest *ing;
    struct weft__serve_config cfg;
    struct weft__serve *srv;
    unsigned port;
};

struct answer {
    long status;
    char *body;
    size_t len;
    char headers[4096];
    size_t hlen;
};

/* strcasestr() is a GNU extension: the first place @p needle is in @p hay, any case. */
static const char *
find_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);

    for (; *hay != '\0'; hay++) {
        if (strncasecmp(hay, needle, n) == 0) {
            return hay;
        }
    }
    return NULL;
}

static void
write_file(const struct fx *f, const char *name, const char *text)
{
    char path[512];
    FILE *out = NULL;

    snprintf(path, sizeof(path), "%s/%s", f->home, name);
    out = fopen(path, "w");
    assert_non_null(out);
    fputs(text, out);
    fclose(out);
}

/* `weft run FILE` in the fixture's home; the run's id into @p id. */
static void
run_weft(struct fx *f, const char *file, int want_status, char *id, size_t id_len)
{
    char path[512];
    char out[512];
    const char *args[] = {"run", path, "-q", "--json", NULL};
    json_t *doc = NULL;

    snprintf(path, sizeof(path), "%s/%s", f->home, file);
    snprintf(out, sizeof(out), "%s/out.json", f->home);
    assert_int_equal(serve_proc_run(WEFT_BINARY_DIR "/weft", f->home, out, args), want_status);
    doc = json_load_file(out, 0, NULL);
    assert_non_null(doc);
    snprintf(id, id_len, "%s", json_string_value(json_object_get(doc, "run_id")));
    json_decref(doc);
}

static size_t
on_body(char *p, size_t size, size_t n, void *user)
{
    struct answer *a = user;
    char *grown = realloc(a->body, a->len + size * n + 1);

    assert_non_null(grown);
    a->body = grown;
    memcpy(a->body + a->len, p, size * n);
    a->len += size * n;
    a->body[a->len] = '\0';
    return size * n;
}

static size_t
on_header(char *p, size_t size, size_t n, void *user)
{
    struct answer *a = user;
    size_t len = size * n;
    size_t room = sizeof(a->headers) - 1 - a->hlen;

    memcpy(a->headers + a->hlen, p, len < room ? len : room);
    a->hlen += len < room ? len : room;
    a->headers[a->hlen] = '\0';
    return len;
}

/* One request with up to two header lines (NULL: none); POST when @p post is not NULL. The
 * body is as sent (curl does not decode it). */
static void
request_once(const struct fx *f,
             const char *path,
             const char *h1,
             const char *h2,
             const char *post,
             struct answer *a)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char url[1024];

    memset(a, 0, sizeof(*a));
    h = h1 != NULL ? curl_slist_append(h, h1) : h;
    h = h2 != NULL ? curl_slist_append(h, h2) : h;
    if (post != NULL) {
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
    }
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", f->port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

/* As request_once(), but a 503 with Retry-After (the route's two requests at once were in: on
 * a loaded machine the server may not have seen the previous requests complete when the next
 * one comes) is asked again, as the UI does. */
static void
request(const struct fx *f,
        const char *path,
        const char *h1,
        const char *h2,
        const char *post,
        struct answer *a)
{
    for (int i = 0; i < 100; i++) {
        request_once(f, path, h1, h2, post, a);
        if (a->status != 503 || find_ci(a->headers, "Retry-After:") == NULL) {
            return;
        }
        free(a->body);
        weft__sleep_ms(50);
    }
}

/* GET @p path with the token; the JSON body, the status in *status. */
static json_t *
get_json(const struct fx *f, const char *path, long *status)
{
    struct answer a;
    json_t *doc = NULL;

    request(f, path, AUTH, NULL, NULL, &a);
    *status = a.status;
    doc = json_loads(a.body != NULL ? a.body : "", 0, NULL);
    if (doc == NULL) {
        fail_msg("%s: not JSON: %s", path, a.body != NULL ? a.body : "(empty)");
    }
    free(a.body);
    return doc;
}

/* One OTLP/HTTP JSON request of one resource (service @p service) and its spans. */
static void
post_spans(const struct fx *f, const char *service, const char *spans)
{
    char body[4096];
    struct answer a;

    snprintf(body, sizeof(body),
             "{\"resourceSpans\": [{\"resource\": {\"attributes\": [{\"key\": \"service.name\", "
             "\"value\": {\"stringValue\": \"%s\"}}]}, \"scopeSpans\": [{\"scope\": {\"name\": "
             "\"otel-js\"}, \"spans\": [%s]}]}]}",
             service, spans);
    request(f, "/v1/traces", AUTH, NULL, body, &a);
    assert_int_equal(a.status, 200);
    free(a.body);
}

static void
post_otel_traces(const struct fx *f)
{
    post_spans(f, "checkout",
               "{\"traceId\": \"" T_CART "\", \"spanId\": \"b7ad6b7169203331\", \"name\": \"GET "
               "/cart\", \"kind\": 2, \"startTimeUnixNano\": \"1700000000000000000\", "
               "\"endTimeUnixNano\": \"1700000000100000000\"}");
    post_spans(f, "checkout",
               "{\"traceId\": \"" T_PAY "\", \"spanId\": \"1000000000000001\", \"name\": \"POST "
               "/pay\", \"kind\": 2, \"startTimeUnixNano\": \"1700000001000000000\", "
               "\"endTimeUnixNano\": \"1700000001500000000\"}, {\"traceId\": \"" T_PAY
               "\", \"spanId\": \"1000000000000002\", \"parentSpanId\": \"1000000000000001\", "
               "\"name\": \"charge card\", \"kind\": 3, \"startTimeUnixNano\": "
               "\"1700000001100000000\", \"endTimeUnixNano\": \"1700000001400000000\", "
               "\"status\": {\"code\": 2, \"message\": \"declined\"}}");
    post_spans(f, "inventory",
               "{\"traceId\": \"" T_RUN "\", \"spanId\": \"2000000000000001\", \"name\": "
               "\"reserve stock\", \"kind\": 1, \"startTimeUnixNano\": \"1700000002000000000\", "
               "\"endTimeUnixNano\": \"1700000002200000000\", \"attributes\": [{\"key\": "
               "\"weft.run.id\", \"value\": {\"stringValue\": \"remote-run-7\"}}]}");
    post_spans(f, "inventory",
               "{\"traceId\": \"" T_ORPH "\", \"spanId\": \"3000000000000002\", \"parentSpanId\": "
               "\"aaaaaaaaaaaaaaaa\", \"name\": \"late child\", \"kind\": 1, "
               "\"startTimeUnixNano\": \"1700000003000000000\", \"endTimeUnixNano\": "
               "\"1700000003100000000\"}");
}

static weft_err
no_metrics(void *user_data, char **out, size_t *len)
{
    (void)user_data;
    *out = strdup("weft_up 1\n");
    *len = strlen(*out);
    return WEFT_OK;
}

/* Start the server in-process: explorer, API and OTLP ingest, behind the token. */
static void
start_server(struct fx *f, uint64_t poll_ms, uint64_t heartbeat_ms)
{
    struct weft__ingest_options io = {f->store, 0, NULL, 0};

    assert_weft_ok(weft__ingest_new(&io, &f->ing));
    memset(&f->cfg, 0, sizeof(f->cfg));
    f->cfg.addr = "127.0.0.1:0";
    f->cfg.token = TOKEN;
    f->cfg.api.state_path = f->state;
    f->cfg.api.store_path = f->store;
    f->cfg.metrics = no_metrics;
    f->cfg.ingest = f->ing;
    f->cfg.events_poll_ms = poll_ms;
    f->cfg.events_heartbeat_ms = heartbeat_ms;
    assert_weft_ok(weft__serve_start(&f->cfg, &f->srv));
    f->port = weft__serve_port(f->srv);
}

#ifdef WEFT_TEST_TRACES_PG
static int
group_setup(void **state)
{
    char err[512] = "";

    (void)state;
    pg = weft_test_pg_start(NULL, err, sizeof(err));
    if (pg == NULL) {
        fail_msg("PostgreSQL did not start: %s", err);
    }
    return 0;
}

static int
group_teardown(void **state)
{
    (void)state;
    weft_test_pg_stop(pg);
    return 0;
}
#endif

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    snprintf(f->home, sizeof(f->home), "/tmp/weft-serve-traces-XXXXXX");
    assert_non_null(mkdtemp(f->home));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->home);
#ifdef WEFT_TEST_TRACES_PG
    static unsigned n;
    char name[32];
    snprintf(name, sizeof(name), "traces%u", n++);
    assert_int_equal(weft_test_pg_createdb(pg, name, f->store, sizeof(f->store)), 0);
#else
    snprintf(f->store, sizeof(f->store), "%s/weft.db", f->home);
    write_file(f, "s.json", "{\"responses\": {}}");
    write_file(f, "fail.json",
               "{\"name\": \"fails\", \"models\": {\"m\": {\"provider\": \"scripted\", "
               "\"script\": \"s.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": [{\"id\": "
               "\"boom\", \"executor\": \"command\", \"task\": \"explode\", \"argv\": [\"sh\", "
               "\"-c\", \"exit 4\"]}]}");
    write_file(f, "good.json",
               "{\"name\": \"works\", \"models\": {\"m\": {\"provider\": \"scripted\", "
               "\"script\": \"s.json\"}}, \"agents\": [{\"name\": \"a\"}], \"plan\": [{\"id\": "
               "\"fine\", \"executor\": \"command\", \"task\": \"succeed\", \"argv\": [\"sh\", "
               "\"-c\", \"sleep 1.5\"]}]}");
    run_weft(f, "fail.json", 1, f->failed, sizeof(f->failed));
#endif
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft__serve_stop(f->srv);
    weft__ingest_free(f->ing);
    weft_test_rmtree(f->home);
    free(f);
    return 0;
}

/* The trace ids of GET @p path's list, in order, comma-separated into @p out. */
static void
list_ids(const struct fx *f, const char *path, char *out, size_t out_len)
{
    long status = 0;
    json_t *doc = get_json(f, path, &status);
    json_t *item = NULL;
    size_t i = 0;

    assert_int_equal(status, 200);
    out[0] = '\0';
    json_array_foreach(json_object_get(doc, "traces"), i, item)
    {
        size_t used = strlen(out);
        snprintf(out + used, out_len - used, "%s%.6s", i > 0 ? "," : "",
                 json_string_value(json_object_get(item, "trace_id")));
    }
    json_decref(doc);
}

static json_t *
find_item(json_t *list, const char *trace_id)
{
    json_t *item = NULL;
    size_t i = 0;

    json_array_foreach(list, i, item)
    {
        if (strcmp(json_string_value(json_object_get(item, "trace_id")), trace_id) == 0) {
            return item;
        }
    }
    fail_msg("trace %s is not listed", trace_id);
    return NULL;
}

static void
expect_400(const struct fx *f, const char *path, const char *names)
{
    long status = 0;
    json_t *doc = get_json(f, path, &status);
    const char *msg = json_string_value(json_object_get(json_object_get(doc, "error"), "message"));

    assert_int_equal(status, 400);
    assert_non_null(msg);
    if (strncmp(msg, names, strlen(names)) != 0) {
        fail_msg("%s: message \"%s\" does not name %s", path, msg, names);
    }
    json_decref(doc);
}

static void
test_traces_list_filters_and_pages(void **state)
{
    struct fx *f = *state;
    long status = 0;
    json_t *doc = NULL;
    json_t *list = NULL;
    json_t *it = NULL;
    char ids[512];
    char got[512] = "";
    char path[256];
    char cursor[128] = "";
    size_t pages = 0;
    size_t weft_traces = HAS_RUNS ? 1 : 0;

    start_server(f, 0, 0);
    post_otel_traces(f);
    doc = get_json(f, "/api/v1/traces", &status);
    assert_int_equal(status, 200);
    list = json_object_get(doc, "traces");
    assert_int_equal(json_array_size(list), 4 + weft_traces);
    assert_true(json_is_null(json_object_get(doc, "next")));
    /* An OTel trace: every field; run_id null. */
    it = find_item(list, T_PAY);
    assert_string_equal(json_string_value(json_object_get(it, "service")), "checkout");
    assert_string_equal(json_string_value(json_object_get(it, "root_name")), "POST /pay");
    assert_true(json_is_true(json_object_get(it, "has_root")));
    assert_int_equal(json_integer_value(json_object_get(it, "start_ns")), 1700000001000000000);
    assert_int_equal(json_integer_value(json_object_get(it, "duration_ns")), 500000000);
    assert_int_equal(json_integer_value(json_object_get(it, "span_count")), 2);
    assert_int_equal(json_integer_value(json_object_get(it, "error_count")), 1);
    assert_true(json_is_null(json_object_get(it, "run_id")));
    /* The root's weft.run.id names the run, from any SDK. */
    it = find_item(list, T_RUN);
    assert_string_equal(json_string_value(json_object_get(it, "run_id")), "remote-run-7");
    /* A trace whose root never came says so. */
    it = find_item(list, T_ORPH);
    assert_true(json_is_false(json_object_get(it, "has_root")));
    assert_string_equal(json_string_value(json_object_get(it, "root_name")), "late child");
    if (HAS_RUNS) { /* a real weft run, newest first */
        it = json_array_get(list, 0);
        assert_string_equal(json_string_value(json_object_get(it, "run_id")), f->failed);
        assert_string_equal(json_string_value(json_object_get(it, "service")), "weft");
        assert_true(json_integer_value(json_object_get(it, "error_count")) > 0);
    }
    json_decref(doc);

    /* Each filter. */
    list_ids(f, "/api/v1/traces?service=checkout", ids, sizeof(ids));
    assert_string_equal(ids, "1b0000,0af765");
    list_ids(f, "/api/v1/traces?service=check", ids, sizeof(ids)); /* exact, not a prefix */
    assert_string_equal(ids, "");
    list_ids(f, "/api/v1/traces?q=CART", ids, sizeof(ids)); /* root name, any case */
    assert_string_equal(ids, "0af765");
    list_ids(f, "/api/v1/traces?q=0AF7", ids, sizeof(ids)); /* trace id prefix */
    assert_string_equal(ids, "0af765");
    list_ids(f, "/api/v1/traces?q=charge", ids, sizeof(ids)); /* not a root's name */
    assert_string_equal(ids, "");
    list_ids(f, "/api/v1/traces?status=error&to=1700000010000", ids, sizeof(ids));
    assert_string_equal(ids, "1b0000");
    list_ids(f, "/api/v1/traces?status=ok&service=inventory", ids, sizeof(ids));
    assert_string_equal(ids, "3d0000,2c0000");
    snprintf(path, sizeof(path), "/api/v1/traces?from=%llu&to=%llu",
             (unsigned long long)(T0_MS + 1000), (unsigned long long)(T0_MS + 3000));
    list_ids(f, path, ids, sizeof(ids)); /* [from, to) */
    assert_string_equal(ids, "2c0000,1b0000");
    list_ids(f, "/api/v1/traces?from=2023-11-14T23:13:21%2B01:00&to=2023-11-14T22:13:22.5Z", ids,
             sizeof(ids));
    assert_string_equal(ids, "2c0000,1b0000");

    /* Paging: two at a time to the end, the same order as one page. */
    list_ids(f, "/api/v1/traces", ids, sizeof(ids));
    do {
        json_t *item = NULL;
        size_t i = 0;
        snprintf(path, sizeof(path), "/api/v1/traces?limit=2%s%s", cursor[0] ? "&cursor=" : "",
                 cursor);
        doc = get_json(f, path, &status);
        assert_int_equal(status, 200);
        assert_true(json_array_size(json_object_get(doc, "traces")) <= 2);
        json_array_foreach(json_object_get(doc, "traces"), i, item)
        {
            size_t used = strlen(got);
            snprintf(got + used, sizeof(got) - used, "%s%.6s", used > 0 ? "," : "",
                     json_string_value(json_object_get(item, "trace_id")));
        }
        it = json_object_get(doc, "next");
        snprintf(cursor, sizeof(cursor), "%s", json_is_string(it) ? json_string_value(it) : "");
        json_decref(doc);
        pages++;
    } while (cursor[0] != '\0' && pages < 10);
    assert_string_equal(got, ids);
    assert_int_equal(pages, (4 + weft_traces + 1) / 2);

    /* Bad parameters: 400 naming the parameter. */
    expect_400(f, "/api/v1/traces?limit=0", "limit");
    expect_400(f, "/api/v1/traces?limit=501", "limit");
    expect_400(f, "/api/v1/traces?limit=ten", "limit");
    expect_400(f, "/api/v1/traces?status=failed", "status");
    expect_400(f, "/api/v1/traces?from=yesterday", "from");
    expect_400(f, "/api/v1/traces?to=" T0_3339 "x", "to");
    expect_400(f, "/api/v1/traces?to=2023-13-01T00:00:00Z", "to");
    expect_400(f, "/api/v1/traces?cursor=abc", "cursor");
    expect_400(f, "/api/v1/traces?cursor=12-" T_CART "0", "cursor");
}

/* The trace document of an ingested trace: its service and resource; no run, so no run_id
 * (not a null the page would print); a weft run's trace opened by id names its run. */
static void
test_trace_document_names_service_and_resource(void **state)
{
    struct fx *f = *state;
    long status = 0;
    json_t *doc = NULL;

    start_server(f, 0, 0);
    post_otel_traces(f);
    doc = get_json(f, "/api/v1/traces/" T_PAY, &status);
    assert_int_equal(status, 200);
    assert_string_equal(json_string_value(json_object_get(doc, "service")), "checkout");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(doc, "resource"), "service.name")),
        "checkout");
    assert_null(json_object_get(doc, "run_id"));
    json_decref(doc);
    doc = get_json(f, "/api/v1/traces/" T_PAY "?view=waterfall", &status);
    assert_int_equal(status, 200);
    assert_string_equal(json_string_value(json_object_get(doc, "service")), "checkout");
    assert_null(json_object_get(doc, "run_id"));
    json_decref(doc);
    doc = get_json(f, "/api/v1/traces/" T_RUN, &status);
    assert_string_equal(json_string_value(json_object_get(doc, "run_id")), "remote-run-7");
    json_decref(doc);
    if (HAS_RUNS) {
        char run_path[128];
        json_t *run = NULL;
        snprintf(run_path, sizeof(run_path), "/api/v1/runs/%s", f->failed);
        run = get_json(f, run_path, &status);
        snprintf(run_path, sizeof(run_path), "/api/v1/traces/%s",
                 json_string_value(json_object_get(json_object_get(run, "run"), "trace_id")));
        json_decref(run);
        doc = get_json(f, run_path, &status);
        assert_int_equal(status, 200);
        assert_string_equal(json_string_value(json_object_get(doc, "run_id")), f->failed);
        assert_string_equal(json_string_value(json_object_get(doc, "service")), "weft");
        json_decref(doc);
    }
}

/* The resource a trace arrived with, as the trace document gives it: every attribute (arrays
 * as arrays), a secret's value redacted, the count of what was left out; a span of another
 * resource in the same trace does not change it. */
static void
test_trace_document_keeps_the_resource_attributes(void **state)
{
    struct fx *f = *state;
    long status = 0;
    json_t *doc = NULL;
    json_t *res = NULL;
    struct answer a;
    const char *body =
        "{\"resourceSpans\": [{\"resource\": {\"attributes\": ["
        "{\"key\": \"service.name\", \"value\": {\"stringValue\": \"checkout\"}},"
        "{\"key\": \"service.version\", \"value\": {\"stringValue\": \"2.4.1\"}},"
        "{\"key\": \"telemetry.sdk.language\", \"value\": {\"stringValue\": \"nodejs\"}},"
        "{\"key\": \"host.cpus\", \"value\": {\"intValue\": \"8\"}},"
        "{\"key\": \"process.command_args\", \"value\": {\"arrayValue\": {\"values\": ["
        "{\"stringValue\": \"node\"}, {\"stringValue\": \"server.js\"}]}}},"
        "{\"key\": \"deployment.client_secret\", \"value\": {\"stringValue\": "
        "\"hunter2-hunter2\"}}],"
        " \"droppedAttributesCount\": 3},"
        " \"scopeSpans\": [{\"scope\": {\"name\": \"otel-js\"}, \"spans\": ["
        "{\"traceId\": \"" T_CART "\", \"spanId\": \"b7ad6b7169203331\", \"name\": \"GET /cart\","
        " \"kind\": 2, \"startTimeUnixNano\": \"1700000000000000000\","
        " \"endTimeUnixNano\": \"1700000000100000000\"}]}]},"
        " {\"resource\": {\"attributes\": [{\"key\": \"service.name\", \"value\":"
        " {\"stringValue\": \"pricing\"}}, {\"key\": \"service.version\", \"value\":"
        " {\"stringValue\": \"0.1\"}}]}, \"scopeSpans\": [{\"scope\": {\"name\": \"otel-go\"},"
        " \"spans\": [{\"traceId\": \"" T_CART "\", \"spanId\": \"c000000000000001\","
        " \"parentSpanId\": \"b7ad6b7169203331\", \"name\": \"price\", \"kind\": 2,"
        " \"startTimeUnixNano\": \"1700000000010000000\","
        " \"endTimeUnixNano\": \"1700000000020000000\"}]}]}]}";

    start_server(f, 0, 0);
    request(f, "/v1/traces", AUTH, NULL, body, &a);
    assert_int_equal(a.status, 200);
    free(a.body);
    for (int view = 0; view < 2; view++) {
        doc = get_json(
            f, view == 0 ? "/api/v1/traces/" T_CART : "/api/v1/traces/" T_CART "?view=waterfall",
            &status);
        assert_int_equal(status, 200);
        res = json_object_get(doc, "resource");
        assert_string_equal(json_string_value(json_object_get(doc, "service")), "checkout");
        assert_string_equal(json_string_value(json_object_get(res, "service.version")), "2.4.1");
        assert_string_equal(json_string_value(json_object_get(res, "telemetry.sdk.language")),
                            "nodejs");
        assert_int_equal(json_integer_value(json_object_get(res, "host.cpus")), 8);
        assert_int_equal(json_array_size(json_object_get(res, "process.command_args")), 2);
        assert_string_equal(json_string_value(json_object_get(res, "deployment.client_secret")),
                            "[REDACTED]");
        assert_int_equal(json_integer_value(json_object_get(doc, "resource_dropped")), 3);
        json_decref(doc);
    }
}

/* The integers of JSON array @p a as "1,2,3" (to compare a column in one assert). */
static void
ints(const json_t *a, char *out, size_t cap)
{
    size_t len = 0;

    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(a) && len < cap; i++) {
        len += (size_t)snprintf(out + len, cap - len, "%s%lld", i > 0 ? "," : "",
                                (long long)json_integer_value(json_array_get(a, i)));
    }
}

static void
expect_ints(const json_t *doc, const char *col, const char *want)
{
    char got[256];

    ints(json_object_get(doc, col), got, sizeof(got));
    if (strcmp(got, want) != 0) {
        fail_msg("%s: [%s], expected [%s]", col, got, want);
    }
}

#define T_MARK "4e000000000000000000000000000005"

/* view=rows (weft.rows/v1): the rows as columns in microseconds after the trace's start, in
 * parts with the whole trace's counts, extent and critical path; markers exactly (a span whose
 * text mentions circuit_breaker elsewhere is not one); a view that is not known is a 400. */
static void
test_rows_view_columns_parts_and_marks(void **state)
{
    struct fx *f = *state;
    long status = 0;
    json_t *doc = NULL;

    start_server(f, 0, 0);
    post_otel_traces(f);
    doc = get_json(f, "/api/v1/traces/" T_PAY "?view=rows", &status);
    assert_int_equal(status, 200);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "weft.rows/v1");
    assert_string_equal(json_string_value(json_object_get(doc, "service")), "checkout");
    assert_int_equal(json_integer_value(json_object_get(doc, "span_count")), 2);
    assert_int_equal(json_integer_value(json_object_get(doc, "error_count")), 1);
    assert_int_equal(json_integer_value(json_object_get(doc, "offset")), 0);
    assert_int_equal(json_integer_value(json_object_get(doc, "count")), 2);
    assert_int_equal(json_integer_value(json_object_get(doc, "unit_ns")), 1000);
    assert_int_equal(json_integer_value(json_object_get(doc, "end")), 500000);
    assert_string_equal(json_string_value(json_object_get(doc, "id")),
                        "10000000000000011000000000000002");
    assert_string_equal(json_string_value(json_array_get(json_object_get(doc, "names"), 1)),
                        "charge card");
    expect_ints(doc, "name", "0,1");
    expect_ints(doc, "depth", "0,1");
    expect_ints(doc, "start", "0,100000");
    expect_ints(doc, "dur", "500000,300000");
    expect_ints(doc, "status", "0,2");
    expect_ints(doc, "marker", "");
    expect_ints(doc, "critical", "0,1");
    json_decref(doc);
    /* The second part alone: its own rows, indexes in the whole trace's order. */
    doc = get_json(f, "/api/v1/traces/" T_PAY "?view=rows&offset=1&limit=5", &status);
    assert_int_equal(status, 200);
    assert_int_equal(json_integer_value(json_object_get(doc, "offset")), 1);
    assert_int_equal(json_integer_value(json_object_get(doc, "count")), 1);
    assert_string_equal(json_string_value(json_object_get(doc, "id")), "1000000000000002");
    expect_ints(doc, "name", "0");
    expect_ints(doc, "critical", "1");
    json_decref(doc);
    /* Markers: a stuck-loop event, a circuit-breaker decision; not a mere mention. */
    post_spans(f, "agents",
               "{\"traceId\": \"" T_MARK "\", \"spanId\": \"4000000000000001\", \"name\": "
               "\"invoke_workflow w\", \"startTimeUnixNano\": \"1700000004000000000\", "
               "\"endTimeUnixNano\": \"1700000004900000000\"}, {\"traceId\": \"" T_MARK
               "\", \"spanId\": \"4000000000000002\", \"parentSpanId\": \"4000000000000001\", "
               "\"name\": \"plan sup\", \"startTimeUnixNano\": \"1700000004100000000\", "
               "\"endTimeUnixNano\": \"1700000004200000000\", \"attributes\": [{\"key\": "
               "\"weft.decision.layer\", \"value\": {\"stringValue\": \"circuit_breaker\"}}]}, "
               "{\"traceId\": \"" T_MARK "\", \"spanId\": \"4000000000000003\", "
               "\"parentSpanId\": \"4000000000000001\", \"name\": \"invoke_agent a\", "
               "\"startTimeUnixNano\": \"1700000004300000000\", \"endTimeUnixNano\": "
               "\"1700000004400000000\", \"events\": [{\"name\": \"weft.stuck_loop\", "
               "\"timeUnixNano\": \"1700000004350000000\"}]}, {\"traceId\": \"" T_MARK
               "\", \"spanId\": \"4000000000000004\", \"parentSpanId\": \"4000000000000001\", "
               "\"name\": \"plan sup\", \"startTimeUnixNano\": \"1700000004500000000\", "
               "\"endTimeUnixNano\": \"1700000004600000000\", \"attributes\": [{\"key\": "
               "\"weft.decision.layer\", \"value\": {\"stringValue\": \"llm\"}}, {\"key\": "
               "\"note\", \"value\": {\"stringValue\": \"no circuit_breaker, no "
               "weft.stuck_loop\"}}], \"events\": [{\"name\": \"weft.stuck_loop_cleared\", "
               "\"timeUnixNano\": \"1700000004550000000\"}]}");
    doc = get_json(f, "/api/v1/traces/" T_MARK "?view=rows", &status);
    assert_int_equal(status, 200);
    expect_ints(doc, "marker", "1,2");
    expect_ints(doc, "depth", "0,1,1,1");
    /* The root, its child that ends last, then each one that ended before the next began. */
    expect_ints(doc, "critical", "0,1,2,3");
    json_decref(doc);
    expect_400(f, "/api/v1/traces/" T_PAY "?view=columns", "view");
    expect_400(f, "/api/v1/traces/" T_PAY "?view=rows&limit=100001", "offset, limit");
}

/* The value of query argument @p name in the query string @p ctx ("a=1&b=2"), or NULL; valid
 * until the fourth call after. */
static const char *
query_arg(void *ctx, const char *name)
{
    static char values[4][64]; /* the API keeps a few at once */
    static size_t next;
    char *value = values[next++ % 4];
    const char *q = ctx;
    size_t n = strlen(name);

    for (const char *p = q; p != NULL && *p != '\0';
         p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
        if (strncmp(p, name, n) == 0 && p[n] == '=') {
            size_t len = strcspn(p + n + 1, "&");
            snprintf(value, sizeof(values[0]), "%.*s", (int)len, p + n + 1);
            return value;
        }
    }
    return NULL;
}

/* weft.serve.rows_cache's count of @p event on the server's /metrics (weft__serve_observe()). */
static long
rows_cache_count(const struct fx *f, const char *event)
{
    struct weft_meter *meter = NULL;
    char *text = NULL;
    char want[96];
    size_t len = 0;
    const char *at = NULL;
    long n = -1;

    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft__serve_observe(f->srv, meter));
    assert_weft_ok(weft_prometheus_render(meter, &text, &len));
    snprintf(want, sizeof(want), "weft_serve_rows_cache_total{event=\"%s\"} ", event);
    at = strstr(text, want);
    if (at != NULL) {
        n = strtol(at + strlen(want), NULL, 10);
    }
    free(text);
    weft_meter_free(meter);
    return n;
}

/* The rows cache (serve/rows_cache.h), through the server: parts answered from the outline
 * kept since the first part are byte for byte the parts the API writes with no cache; a trace
 * that gains a span between two parts is read again (the span in the next part, a miss). */
static void
test_rows_cache_parts_equal_cold_and_reread_on_growth(void **state)
{
    static const char *const parts[] = {"view=rows&limit=1", "view=rows&offset=1&limit=5",
                                        "view=rows"};
    struct fx *f = *state;
    struct weft__api_config cold = {f->state, f->store, NULL, NULL};
    struct weft__api_request req = {"/api/v1/traces/" T_PAY, query_arg, NULL};
    char path[256];
    struct answer a;
    long status = 0;
    json_t *doc = NULL;

    start_server(f, 0, 0);
    post_otel_traces(f);
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        struct weft__api_reply r = {0};
        snprintf(path, sizeof(path), "/api/v1/traces/" T_PAY "?%s", parts[i]);
        request(f, path, AUTH, NULL, NULL, &a);
        assert_int_equal(a.status, 200);
        req.ctx = (void *)parts[i];
        weft__api_get(&cold, &req, &r);
        assert_int_equal(r.status, 200);
        if (a.len != r.len || memcmp(a.body, r.body, r.len) != 0) {
            fail_msg("%s: cached [%s], cold [%s]", parts[i], a.body, r.body);
        }
        free(a.body);
        free(r.body);
    }
    assert_int_equal(rows_cache_count(f, "miss"), 1);
    assert_int_equal(rows_cache_count(f, "hit"), 2);
    /* A span stored after the first part: the next part reads the trace again. */
    post_spans(f, "checkout",
               "{\"traceId\": \"" T_PAY "\", \"spanId\": \"1000000000000003\", \"parentSpanId\": "
               "\"1000000000000001\", \"name\": \"send receipt\", \"startTimeUnixNano\": "
               "\"1700000001420000000\", \"endTimeUnixNano\": \"1700000001450000000\"}");
    doc = get_json(f, "/api/v1/traces/" T_PAY "?view=rows&offset=1&limit=5", &status);
    assert_int_equal(status, 200);
    assert_int_equal(json_integer_value(json_object_get(doc, "span_count")), 3);
    assert_string_equal(json_string_value(json_object_get(doc, "id")),
                        "10000000000000021000000000000003");
    json_decref(doc);
    assert_int_equal(rows_cache_count(f, "miss"), 2);
    doc = get_json(f, "/api/v1/traces/" T_PAY "?view=rows&offset=2", &status);
    assert_int_equal(json_integer_value(json_object_get(doc, "span_count")), 3);
    json_decref(doc);
    assert_int_equal(rows_cache_count(f, "hit"), 3);
    assert_int_equal(rows_cache_count(f, "eviction"), 0);
}

#ifndef WEFT_TEST_TRACES_PG
/* @p in gunzipped into a new string (free()). */
static char *
gunzip(const char *in, size_t len, size_t *out_len)
{
    z_stream zs;
    size_t cap = 1 << 22;
    char *out = malloc(cap);

    memset(&zs, 0, sizeof(zs));
    assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
    zs.next_in = (Bytef *)(uintptr_t)in;
    zs.avail_in = (uInt)len;
    zs.next_out = (Bytef *)out;
    zs.avail_out = (uInt)cap - 1;
    assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
    *out_len = zs.total_out;
    out[*out_len] = '\0';
    inflateEnd(&zs);
    return out;
}

static void
test_gzip_when_accepted_and_not_with_q0(void **state)
{
    struct fx *f = *state;
    struct answer plain;
    struct answer packed;
    struct answer a;
    char path[128];
    char *unpacked = NULL;
    size_t len = 0;

    start_server(f, 0, 0);
    post_otel_traces(f);
    snprintf(path, sizeof(path), "/api/v1/runs/%s", f->failed);
    request(f, path, AUTH, NULL, NULL, &plain);
    assert_int_equal(plain.status, 200);
    assert_true(plain.len >= WEFT__GZIP_MIN_BYTES);
    assert_null(find_ci(plain.headers, "Content-Encoding"));
    assert_non_null(find_ci(plain.headers, "Vary: Accept-Encoding"));

    request(f, path, AUTH, "Accept-Encoding: deflate, gzip;q=0.8, br", NULL, &packed);
    assert_int_equal(packed.status, 200);
    assert_non_null(find_ci(packed.headers, "Content-Encoding: gzip"));
    assert_non_null(find_ci(packed.headers, "Vary: Accept-Encoding"));
    assert_true(packed.len < plain.len);
    unpacked = gunzip(packed.body, packed.len, &len);
    assert_int_equal(len, plain.len);
    assert_memory_equal(unpacked, plain.body, len);
    free(unpacked);
    free(packed.body);

    /* q=0 refuses gzip, also when "*" would allow it; "*" alone allows it. */
    request(f, path, AUTH, "Accept-Encoding: gzip;q=0, *;q=1", NULL, &a);
    assert_null(find_ci(a.headers, "Content-Encoding"));
    assert_int_equal(a.len, plain.len);
    free(a.body);
    request(f, path, AUTH, "Accept-Encoding: GZIP; Q=0.000", NULL, &a);
    assert_null(find_ci(a.headers, "Content-Encoding"));
    free(a.body);
    request(f, path, AUTH, "Accept-Encoding: *", NULL, &a);
    assert_non_null(find_ci(a.headers, "Content-Encoding: gzip"));
    free(a.body);
    request(f, path, AUTH, "Accept-Encoding: identity", NULL, &a);
    assert_null(find_ci(a.headers, "Content-Encoding"));
    free(a.body);
    free(plain.body);

    /* A small answer goes as it is; the UI's assets are compressed too. */
    request(f, "/api/v1/traces?limit=0", AUTH, "Accept-Encoding: gzip", NULL, &a);
    assert_int_equal(a.status, 400);
    assert_null(find_ci(a.headers, "Content-Encoding"));
    assert_non_null(strstr(a.body, "limit"));
    free(a.body);
    request(f, "/assets/app.js", AUTH, "Accept-Encoding: gzip", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_non_null(find_ci(a.headers, "Content-Encoding: gzip"));
    free(a.body);
}

/* A raw connection to the server that sent GET @p path; the socket. */
static int
open_stream(const struct fx *f, const char *path, const char *header)
{
    struct sockaddr_in sa;
    char req[512];
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)f->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n%s%s\r\n", path, f->port,
             header != NULL ? header : "", header != NULL ? "\r\n" : "");
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    return fd;
}

/* Read @p fd into @p buf until it holds @p want or @p ms pass. @return whether it does. */
static bool
read_until(int fd, char *buf, size_t cap, size_t *len, const char *want, int ms)
{
    uint64_t deadline = weft__monotonic_ns() + (uint64_t)ms * 1000000u;

    while (strstr(buf, want) == NULL && weft__monotonic_ns() < deadline) {
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t n = 0;
        if (poll(&p, 1, 100) <= 0) {
            continue;
        }
        n = read(fd, buf + *len, cap - 1 - *len);
        if (n <= 0) {
            break;
        }
        *len += (size_t)n;
        buf[*len] = '\0';
    }
    return strstr(buf, want) != NULL;
}

/* A stream whose state store cannot be read says so (one store_error event), rather than
 * sending heartbeats as if nothing happened. */
static void
test_events_say_when_the_state_store_cannot_be_read(void **state)
{
    struct fx *f = *state;
    static char buf[1 << 14];
    size_t len = 0;
    FILE *out = NULL;
    int fd = -1;

    start_server(f, 100, 300);
    fd = open_stream(f, "/api/v1/events", AUTH);
    assert_true(read_until(fd, buf, sizeof(buf), &len, ": connected\n\n", 5000));
    assert_null(strstr(buf, "store_error"));
    out = fopen(f->state, "w"); /* no longer a database */
    assert_non_null(out);
    fputs("this is not an SQLite database, and it is long enough to have a header", out);
    fclose(out);
    assert_true(read_until(fd, buf, sizeof(buf), &len, "event: store_error\n", 5000));
    assert_non_null(strstr(buf, "the state store cannot be read"));
    close(fd);
}

static void
test_events_push_runs_heartbeats_and_cap(void **state)
{
    struct fx *f = *state;
    static char buf[1 << 16];
    size_t len = 0;
    int fds[WEFT__EVENTS_MAX_CLIENTS];
    int fd = -1;
    char want[256];
    char one[4096] = "";
    size_t one_len = 0;
    uint64_t t0 = 0;

    start_server(f, 100, 300);
    /* Without the token: 401, as for the rest of the API. */
    fd = open_stream(f, "/api/v1/events", NULL);
    assert_true(read_until(fd, one, sizeof(one), &one_len, "\r\n\r\n", 5000));
    assert_non_null(strstr(one, " 401 "));
    close(fd);

    fd = open_stream(f, "/api/v1/events", AUTH);
    assert_true(read_until(fd, buf, sizeof(buf), &len, ": connected\n\n", 5000));
    assert_non_null(strstr(buf, " 200 "));
    assert_non_null(find_ci(buf, "Content-Type: text/event-stream"));
    /* Nothing for the run that was there before (the baseline), a heartbeat while idle. */
    assert_true(read_until(fd, buf, sizeof(buf), &len, ": heartbeat\n\n", 5000));
    assert_null(strstr(buf, f->failed));

    /* A run that starts now: seen running, then completed (it runs 1.5 s). */
    run_weft(f, "good.json", 0, f->good, sizeof(f->good));
    snprintf(want, sizeof(want),
             "event: run\ndata: {\"run_id\":\"%s\",\"status\":\"completed\",\"workflow\":"
             "\"works\"}\n\n",
             f->good);
    assert_true(read_until(fd, buf, sizeof(buf), &len, want, 5000));
    snprintf(want, sizeof(want), "{\"run_id\":\"%s\",\"status\":\"running\"", f->good);
    assert_non_null(strstr(buf, want));
    assert_true(strstr(buf, want) < strstr(buf, "\"status\":\"completed\""));

    /* At most 16 streams: the 17th is refused with 503. */
    fds[0] = fd;
    for (size_t i = 1; i < WEFT__EVENTS_MAX_CLIENTS; i++) {
        char b[512] = "";
        size_t l = 0;
        fds[i] = open_stream(f, "/api/v1/events", AUTH);
        assert_true(read_until(fds[i], b, sizeof(b), &l, ": connected", 5000));
    }
    one[0] = '\0';
    one_len = 0;
    fd = open_stream(f, "/api/v1/events", AUTH);
    assert_true(read_until(fd, one, sizeof(one), &one_len, "\r\n\r\n", 5000));
    assert_non_null(strstr(one, " 503 "));
    close(fd);
    /* The other routes are not held up by the streams. */
    {
        long status = 0;
        json_t *doc = get_json(f, "/api/v1/traces", &status);
        assert_int_equal(status, 200);
        json_decref(doc);
    }

    /* Stopping with 16 streams open takes no time. */
    t0 = weft__monotonic_ns();
    weft__serve_stop(f->srv);
    f->srv = NULL;
    assert_true(weft__monotonic_ns() - t0 < 2000000000ull);
    for (size_t i = 0; i < WEFT__EVENTS_MAX_CLIENTS; i++) {
        close(fds[i]);
    }
}
#endif

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_traces_list_filters_and_pages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trace_document_keeps_the_resource_attributes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_trace_document_names_service_and_resource, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rows_view_columns_parts_and_marks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rows_cache_parts_equal_cold_and_reread_on_growth,
                                        setup, teardown),
#ifndef WEFT_TEST_TRACES_PG
        cmocka_unit_test_setup_teardown(test_gzip_when_accepted_and_not_with_q0, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_push_runs_heartbeats_and_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_say_when_the_state_store_cannot_be_read, setup,
                                        teardown),
#endif
    };

    curl_global_init(CURL_GLOBAL_DEFAULT);
#ifdef WEFT_TEST_TRACES_PG
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
#else
    return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
