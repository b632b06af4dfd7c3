/* tests/runtime/test_webhook.c - stuck-loop alerts POSTed to a webhook, against a real HTTP
 * server on 127.0.0.1 (tests/support/http_receiver.c): both payload formats field by field, the
 * retry rules (503 + Retry-After, final 400, failures logged once), a post that never waits on
 * the network and counts what it drops, weft__rt_webhook_free() draining the queue and returning
 * within its bound when the server is down or hangs, configuration errors, and an OOM loop. */
#include "support/failalloc.h"
#include "support/http_receiver.h"
#include "support/weft_test.h"

#include "runtime/observe/webhook.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ALERT_TIME_NS 1700000000123456789ull /* 2023-11-14T22:13:20.123Z */
#define TRACE_ID      "4bf92f3577b34da6a3ce929d0e0e4736"
#define SPAN_ID       "00f067aa0ba902b7"
#define SECRET        "Bearer hook-SECRET-42"
#define PATH_TOKEN    "T000/B000/XXXXtoken"

struct fx {
    struct http_receiver *rx;
    char url[256];
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    assert_int_equal(http_receiver_start(&f->rx), 0);
    http_receiver_url(f->rx, "/hooks/" PATH_TOKEN, f->url, sizeof(f->url));
    weft_test_capture_logs();
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    if (f->rx != NULL) {
        http_receiver_stop(f->rx);
    }
    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
    free(f);
    return 0;
}

static uint64_t
elapsed_ms(uint64_t since_ns)
{
    return (weft_monotonic_ns() - since_ns) / 1000000u;
}

static struct rt_webhook_alert
sample_alert(const char *policy)
{
    struct rt_webhook_alert a = {
        .kind = "handoff",
        .evidence = "researcher and writer alternated over 6 steps without completing one",
        .policy = policy,
        .workflow = "research",
        .run_id = "run-0001",
        .trace_id = TRACE_ID,
        .span_id = SPAN_ID,
        .agent = "researcher",
        .time_unix_ns = ALERT_TIME_NS,
    };
    return a;
}

static struct rt_webhook *
make(const char *url, int format, size_t queue_cap)
{
    static const char *const headers[] = {"Authorization: " SECRET};
    struct rt_webhook_config c = {
        .url = url,
        .format = format,
        .queue_cap = queue_cap,
        .initial_backoff_ms = 10,
        .max_backoff_ms = 40,
        .headers = headers,
        .header_count = 1,
    };
    struct rt_webhook *wh = NULL;

    assert_weft_ok(weft__rt_webhook_new(&c, &wh));
    assert_non_null(wh);
    return wh;
}

/* Wait until sent + failed reaches @p n (the sender counts after the answer). */
static struct weft__rt_webhook_stats
wait_done(struct rt_webhook *wh, uint64_t n, unsigned timeout_ms)
{
    struct weft__rt_webhook_stats st;
    uint64_t start = weft_monotonic_ns();

    for (;;) {
        struct timespec ts = {0, 2000000};

        weft__rt_webhook_stats(wh, &st);
        if (st.sent + st.failed >= n || elapsed_ms(start) > timeout_ms) {
            return st;
        }
        nanosleep(&ts, NULL);
    }
}

static json_t *
body_of(struct fx *f, size_t i)
{
    const struct http_request *req = http_receiver_request(f->rx, i);
    json_t *doc = NULL;

    assert_non_null(req);
    doc = json_loadb(req->body, req->body_len, 0, NULL);
    assert_non_null(doc);
    return doc;
}

static const char *
str_at(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);

    if (!json_is_string(v)) {
        fail_msg("\"%s\" is not a string", key);
    }
    return json_string_value(v);
}

static size_t
count_of(const char *haystack, const char *needle)
{
    size_t n = 0;

    for (const char *p = strstr(haystack, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

static void
test_webhook_generic_payload_is_one_exact_object(void **state)
{
    struct fx *f = *state;
    struct rt_webhook *wh = make(f->url, RT_WEBHOOK_GENERIC, 0);
    struct rt_webhook_alert a = sample_alert("break");
    const struct http_request *req = NULL;
    struct weft__rt_webhook_stats st;
    char hdr[128];
    json_t *doc = NULL;

    assert_weft_ok(weft__rt_webhook_post(wh, &a));
    st = wait_done(wh, 1, 5000);
    assert_int_equal(st.sent, 1);
    assert_int_equal(http_receiver_count(f->rx), 1);
    req = http_receiver_request(f->rx, 0);
    assert_string_equal(req->method, "POST");
    assert_string_equal(req->path, "/hooks/" PATH_TOKEN);
    assert_non_null(http_request_header(req, "Content-Type", hdr, sizeof(hdr)));
    assert_string_equal(hdr, "application/json");
    assert_non_null(http_request_header(req, "Authorization", hdr, sizeof(hdr)));
    assert_string_equal(hdr, SECRET);

    doc = body_of(f, 0);
    assert_true(json_is_object(doc));
    assert_int_equal(json_object_size(doc), 10);
    assert_string_equal(str_at(doc, "type"), "weft.stuck_loop");
    assert_string_equal(str_at(doc, "kind"), "handoff");
    assert_string_equal(str_at(doc, "evidence"), a.evidence);
    assert_string_equal(str_at(doc, "policy"), "break");
    assert_string_equal(str_at(doc, "workflow"), "research");
    assert_string_equal(str_at(doc, "run_id"), "run-0001");
    assert_string_equal(str_at(doc, "trace_id"), TRACE_ID);
    assert_string_equal(str_at(doc, "span_id"), SPAN_ID);
    assert_string_equal(str_at(doc, "agent"), "researcher");
    assert_string_equal(str_at(doc, "time"), "2023-11-14T22:13:20.123Z");
    json_decref(doc);

    /* No agent: the field stays, as null. */
    a.agent = NULL;
    assert_weft_ok(weft__rt_webhook_post(wh, &a));
    st = wait_done(wh, 2, 5000);
    assert_int_equal(st.sent, 2);
    doc = body_of(f, 1);
    assert_true(json_is_null(json_object_get(doc, "agent")));
    assert_int_equal(json_object_size(doc), 10);
    json_decref(doc);
    assert_int_equal(st.failed + st.dropped + st.retries, 0);
    weft__rt_webhook_free(wh, 1000);
}

static void
check_alertmanager(json_t *doc, const char *policy, const char *severity)
{
    json_t *alert = NULL;
    json_t *labels = NULL;
    json_t *notes = NULL;

    assert_true(json_is_array(doc));
    assert_int_equal(json_array_size(doc), 1);
    alert = json_array_get(doc, 0);
    labels = json_object_get(alert, "labels");
    notes = json_object_get(alert, "annotations");
    assert_true(json_is_object(labels));
    assert_true(json_is_object(notes));
    /* Low-cardinality labels only: no trace, span or agent. */
    assert_int_equal(json_object_size(labels), 5);
    assert_string_equal(str_at(labels, "alertname"), "WeftStuckLoop");
    assert_string_equal(str_at(labels, "kind"), "handoff");
    assert_string_equal(str_at(labels, "workflow"), "research");
    assert_string_equal(str_at(labels, "severity"), severity);
    assert_string_equal(str_at(labels, "run_id"), "run-0001");
    assert_string_equal(str_at(notes, "summary"), "Stuck loop (handoff) in workflow research");
    assert_string_equal(str_at(notes, "description"),
                        "researcher and writer alternated over 6 steps without completing one");
    assert_string_equal(str_at(notes, "policy"), policy);
    assert_string_equal(str_at(notes, "trace_id"), TRACE_ID);
    assert_string_equal(str_at(notes, "span_id"), SPAN_ID);
    assert_string_equal(str_at(notes, "run_id"), "run-0001");
    assert_string_equal(str_at(alert, "startsAt"), "2023-11-14T22:13:20.123Z");
    /* Every label and annotation value is a string (LabelSet). */
    {
        const char *k = NULL;
        json_t *v = NULL;
        json_object_foreach(labels, k, v)
        {
            assert_true(json_is_string(v));
        }
        json_object_foreach(notes, k, v)
        {
            assert_true(json_is_string(v));
        }
    }
    assert_null(json_object_get(alert, "endsAt"));
}

static void
test_webhook_alertmanager_payload_is_postable_alerts_array(void **state)
{
    struct fx *f = *state;
    static const char *const policies[] = {"warn", "break", "abort"};
    static const char *const severities[] = {"warning", "critical", "critical"};
    char url[256];
    struct rt_webhook_config c = {.format = RT_WEBHOOK_ALERTMANAGER,
                                  .trace_url = "http://jaeger:16686/trace/"};
    struct rt_webhook *wh = NULL;
    struct weft__rt_webhook_stats st;
    json_t *doc = NULL;

    c.url = http_receiver_url(f->rx, "/api/v2/alerts", url, sizeof(url));
    assert_weft_ok(weft__rt_webhook_new(&c, &wh));
    for (size_t i = 0; i < 3; i++) {
        struct rt_webhook_alert a = sample_alert(policies[i]);
        assert_weft_ok(weft__rt_webhook_post(wh, &a));
    }
    st = wait_done(wh, 3, 5000);
    assert_int_equal(st.sent, 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *alert = NULL;
        char hdr[64];

        assert_string_equal(http_receiver_request(f->rx, i)->path, "/api/v2/alerts");
        assert_non_null(
            http_request_header(http_receiver_request(f->rx, i), "Content-Type", hdr, sizeof(hdr)));
        assert_string_equal(hdr, "application/json");
        doc = body_of(f, i);
        check_alertmanager(doc, policies[i], severities[i]);
        alert = json_array_get(doc, 0);
        assert_string_equal(str_at(json_object_get(alert, "annotations"), "agent"), "researcher");
        assert_string_equal(str_at(alert, "generatorURL"), "http://jaeger:16686/trace/" TRACE_ID);
        json_decref(doc);
    }
    weft__rt_webhook_free(wh, 1000);
}

static void
test_webhook_alertmanager_leaves_out_absent_values(void **state)
{
    struct fx *f = *state;
    struct rt_webhook *wh = make(f->url, RT_WEBHOOK_ALERTMANAGER, 0);
    struct rt_webhook_alert a = {.kind = "stall", .policy = "abort", .time_unix_ns = 1};
    json_t *doc = NULL;
    json_t *alert = NULL;

    assert_weft_ok(weft__rt_webhook_post(wh, &a));
    assert_int_equal(wait_done(wh, 1, 5000).sent, 1);
    doc = body_of(f, 0);
    alert = json_array_get(doc, 0);
    /* No empty label values (Alertmanager treats them as absent anyway), no null annotations. */
    assert_int_equal(json_object_size(json_object_get(alert, "labels")), 3);
    assert_string_equal(str_at(json_object_get(alert, "labels"), "severity"), "critical");
    assert_int_equal(json_object_size(json_object_get(alert, "annotations")), 2);
    assert_string_equal(str_at(json_object_get(alert, "annotations"), "summary"),
                        "Stuck loop (stall)");
    assert_string_equal(str_at(alert, "startsAt"), "1970-01-01T00:00:00.000Z");
    assert_null(json_object_get(alert, "generatorURL"));
    json_decref(doc);
    weft__rt_webhook_free(wh, 1000);
}

static void
test_webhook_retries_503_after_retry_after(void **state)
{
    struct fx *f = *state;
    struct rt_webhook *wh = make(f->url, RT_WEBHOOK_GENERIC, 0);
    struct http_response busy = {.status = 503, .headers = "Retry-After: 1\r\n"};
    struct http_response ok = {.status = 200};
    struct rt_webhook_alert a = sample_alert("warn");
    struct weft__rt_webhook_stats st;
    uint64_t start = 0;
    uint64_t waited = 0;

    http_receiver_push(f->rx, &busy);
    http_receiver_push(f->rx, &ok);
    start = weft_monotonic_ns();
    assert_weft_ok(weft__rt_webhook_post(wh, &a));
    assert_true(http_receiver_wait(f->rx, 2, 5000));
    waited = elapsed_ms(start);
    st = wait_done(wh, 1, 5000);
    /* The server's 1 s, not the 10 ms backoff. */
    assert_true(waited >= 950);
    assert_true(waited < 2500);
    assert_int_equal(st.sent, 1);
    assert_int_equal(st.retries, 1);
    assert_int_equal(st.failed, 0);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(http_receiver_count(f->rx), 2);
    assert_int_equal(http_receiver_request(f->rx, 0)->answered, 503);
    assert_int_equal(http_receiver_request(f->rx, 1)->answered, 200);
    weft__rt_webhook_free(wh, 1000);
    assert_int_equal(http_receiver_count(f->rx), 2); /* delivered once */
}

static void
test_webhook_retries_transport_errors_then_gives_up(void **state)
{
    struct fx *f = *state;
    struct rt_webhook *wh = make(f->url, RT_WEBHOOK_GENERIC, 0);
    struct http_response drop = {.drop = true};
    struct http_response bad_gateway = {.status = 502};
    struct rt_webhook_alert a = sample_alert("warn");
    struct weft__rt_webhook_stats st;

    /* A dropped connection and a 502 are retried; the default of 3 retries ends it. */
    http_receiver_push(f->rx, &drop);
    http_receiver_push(f->rx, &bad_gateway);
    http_receiver_push(f->rx, &bad_gateway);
    http_receiver_push(f->rx, &bad_gateway);
    assert_weft_ok(weft__rt_webhook_post(wh, &a));
    st = wait_done(wh, 1, 5000);
    assert_int_equal(st.failed, 1);
    assert_int_equal(st.sent, 0);
    assert_int_equal(st.retries, 3);
    assert_int_equal(http_receiver_count(f->rx), 4);
    assert_non_null(strstr(weft_test_logs(), "after 4 attempt(s): HTTP 502"));
    weft__rt_webhook_free(wh, 1000);
}

static void
test_webhook_400_is_final_counted_and_logged_once(void **state)
{
    struct fx *f = *state;
    struct rt_webhook *wh = make(f->url, RT_WEBHOOK_GENERIC, 0);
    struct http_response bad = {
        .status = 400, .body = "invalid label set", .content_type = "text/plain"};
    struct http_response ok = {.status = 200};
    struct rt_webhook_alert a = sample_alert("warn");
    struct weft__rt_webhook_stats st;
    const char *logs = NULL;

    http_receiver_push(f->rx, &bad);
    http_receiver_push(f->rx, &bad);
    assert_weft_ok(weft__rt_webhook_post(wh, &a));
    st = wait_done(wh, 1, 5000);
    assert_int_equal(st.failed, 1);
    assert_int_equal(st.retries, 0);
    assert_int_equal(http_receiver_count(f->rx), 1); /* counted only after the final answer */
    assert_weft_ok(weft__rt_webhook_post(wh, &a));
    st = wait_done(wh, 2, 5000);
    assert_int_equal(st.failed, 2);
    assert_int_equal(st.retries, 0);
    assert_int_equal(http_receiver_count(f->rx), 2);
    http_receiver_push(f->rx, &ok);
    assert_weft_ok(weft__rt_webhook_post(wh, &a));
    st = wait_done(wh, 3, 5000);
    assert_int_equal(st.sent, 1);
    weft__rt_webhook_free(wh, 1000);

    logs = weft_test_logs();
    assert_int_equal(count_of(logs, "not delivered"), 1);
    assert_non_null(strstr(logs, "HTTP 400 (not retried): invalid label set"));
    assert_non_null(strstr(logs, "delivering again after 2 failed alert(s)"));
    /* The URL is logged as scheme://host:port only; header values never. */
    assert_null(strstr(logs, PATH_TOKEN));
    assert_null(strstr(logs, "SECRET"));
}

/* A receiver that holds every request until the test opens its gate: what happens meanwhile
 * is what a sender does while its collector hangs, with no clock in the proof. The wait is
 * bounded (30 s) only so that a broken sender fails the test instead of hanging it; is_expired
 * says the bound was reached, i.e. something waited for the held request. */
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

/* Open the gate and wait until no handler call is inside it any more. */
static void
gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->is_open = true;
    pthread_cond_broadcast(&g->cond);
    while (g->inside > 0) {
        pthread_cond_wait(&g->cond, &g->lock);
    }
    pthread_mutex_unlock(&g->lock);
}

/* Wait (at most 5 s) until a request is held at the gate; false when none came. */
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
    is_held = g->inside > 0;
    pthread_mutex_unlock(&g->lock);
    return is_held;
}

static bool
gate_expired(struct gate *g)
{
    bool is_expired = false;

    pthread_mutex_lock(&g->lock);
    is_expired = g->is_expired;
    pthread_mutex_unlock(&g->lock);
    return is_expired;
}

/* While the receiver holds the one alert in flight, 100 more posts all return: 8 queued, 92
 * dropped and counted, none sent (a post that waited for room could only have returned after
 * the held request was answered). Freeing with no drain cuts the held request instead of
 * waiting for it (the gate is still closed when the free returns). */
static void
test_webhook_post_never_blocks_and_counts_drops(void **state)
{
    struct fx *f = *state;
    struct rt_webhook *wh = make(f->url, RT_WEBHOOK_GENERIC, 8);
    struct rt_webhook_alert a = sample_alert("warn");
    struct weft__rt_webhook_stats st;
    static struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, 0};
    size_t queued = 0;
    size_t limited = 0;

    http_receiver_set_handler(f->rx, gate_handler, &g);
    /* One alert in flight, held by the receiver. */
    assert_weft_ok(weft__rt_webhook_post(wh, &a));
    assert_true(gate_wait_held(&g));
    for (int i = 0; i < 100; i++) {
        weft_err err = weft__rt_webhook_post(wh, &a);
        if (err == WEFT_OK) {
            queued++;
        } else {
            assert_int_equal(err, WEFT_ELIMIT);
            limited++;
        }
    }
    assert_false(gate_expired(&g));
    assert_int_equal(queued, 8);
    assert_int_equal(limited, 92);
    weft__rt_webhook_stats(wh, &st);
    assert_int_equal(st.dropped, 92);
    assert_int_equal(st.sent, 0);
    assert_true(gate_wait_held(&g)); /* still held: nothing waited for its answer */
    assert_int_equal(count_of(weft_test_logs(), "alert queue full (8)"), 1);

    /* No drain: the in-flight request is cut, not waited for. */
    weft__rt_webhook_free(wh, 0);
    assert_false(gate_expired(&g));
    assert_non_null(strstr(weft_test_logs(), "9 alert(s) not delivered within the 0 ms drain"));
    http_receiver_set_handler(f->rx, NULL, NULL);
    gate_open(&g); /* and the receiver's thread has left the handler */
}

static void
test_webhook_free_drains_queued_alerts(void **state)
{
    struct fx *f = *state;
    struct rt_webhook *wh = make(f->url, RT_WEBHOOK_GENERIC, 0);
    struct http_response slowish = {.status = 200, .delay_ms = 50};
    struct rt_webhook_alert a = sample_alert("warn");
    uint64_t start = 0;

    http_receiver_set_default(f->rx, &slowish);
    for (int i = 0; i < 5; i++) {
        assert_weft_ok(weft__rt_webhook_post(wh, &a));
    }
    start = weft_monotonic_ns();
    weft__rt_webhook_free(wh, 5000);
    assert_int_equal(http_receiver_count(f->rx), 5);
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(http_receiver_request(f->rx, i)->answered, 200);
    }
    assert_true(elapsed_ms(start) < 2000); /* done when the queue is empty, not at the bound */
    assert_null(strstr(weft_test_logs(), "not delivered"));
}

static void
test_webhook_free_with_server_down_returns_within_drain(void **state)
{
    struct fx *f = *state;
    struct rt_webhook_config c = {.url = f->url, .initial_backoff_ms = 100, .max_retries = 20};
    struct rt_webhook_alert a = sample_alert("abort");
    struct rt_webhook *wh = NULL;
    uint64_t start = 0;
    uint64_t took = 0;

    /* Nothing listens on the port any more: every attempt is refused, and retried. */
    http_receiver_stop(f->rx);
    f->rx = NULL;
    assert_weft_ok(weft__rt_webhook_new(&c, &wh));
    for (int i = 0; i < 3; i++) {
        assert_weft_ok(weft__rt_webhook_post(wh, &a));
    }
    start = weft_monotonic_ns();
    weft__rt_webhook_free(wh, 300);
    took = elapsed_ms(start);
    assert_true(took < 300 + 1500); /* twenty retries would take many seconds */
    assert_non_null(strstr(weft_test_logs(), "3 alert(s) not delivered within the 300 ms drain"));
}

static void
test_webhook_free_cuts_hanging_request_at_drain_bound(void **state)
{
    struct fx *f = *state;
    struct rt_webhook *wh = make(f->url, RT_WEBHOOK_GENERIC, 0);
    struct http_response hang = {.status = 200, .delay_ms = 10000};
    struct rt_webhook_alert a = sample_alert("warn");
    uint64_t start = 0;
    uint64_t took = 0;

    http_receiver_set_default(f->rx, &hang);
    assert_weft_ok(weft__rt_webhook_post(wh, &a));
    assert_true(http_receiver_wait(f->rx, 1, 5000));
    start = weft_monotonic_ns();
    weft__rt_webhook_free(wh, 200);
    took = elapsed_ms(start);
    assert_true(took >= 150);
    assert_true(took < 200 + 1500); /* the request hangs for 10 s */
    assert_non_null(strstr(weft_test_logs(), "1 alert(s) not delivered"));
}

static void
test_webhook_free_wakes_a_retry_after_wait(void **state)
{
    struct fx *f = *state;
    struct rt_webhook *wh = make(f->url, RT_WEBHOOK_GENERIC, 0);
    struct http_response busy = {.status = 429, .headers = "Retry-After: 20\r\n"};
    struct rt_webhook_alert a = sample_alert("warn");
    uint64_t start = 0;

    http_receiver_push(f->rx, &busy);
    assert_weft_ok(weft__rt_webhook_post(wh, &a));
    assert_true(http_receiver_wait(f->rx, 1, 5000));
    /* The sender now sleeps 20 s; a 5 s drain cannot cover it, so the alert is given up at
     * once instead of waiting out the drain. */
    start = weft_monotonic_ns();
    weft__rt_webhook_free(wh, 5000);
    assert_true(elapsed_ms(start) < 2500);
    assert_int_equal(http_receiver_count(f->rx), 1);
    assert_non_null(strstr(weft_test_logs(), "1 alert(s) not delivered within the 5000 ms drain"));
}

static void
test_webhook_rejects_bad_config_and_alerts(void **state)
{
    struct fx *f = *state;
    static const char *const bad_urls[] = {
        "ftp://example.com/hook",  "localhost:9093/api/v2/alerts", "", "http://", "http:///x",
        "https://host/with space", "file:///etc/passwd",
    };
    static const char *const injected[] = {"X-Token: abc\r\nX-Evil: 1"};
    static const char *const nameless[] = {": value"};
    struct rt_webhook_config c = {0};
    struct rt_webhook *wh = (struct rt_webhook *)&c; /* must come back NULL */
    struct rt_webhook_alert a = sample_alert("warn");

    assert_weft_err(weft__rt_webhook_new(&c, &wh), WEFT_EINVAL); /* no URL */
    assert_null(wh);
    for (size_t i = 0; i < sizeof(bad_urls) / sizeof(bad_urls[0]); i++) {
        c.url = bad_urls[i];
        assert_weft_err(weft__rt_webhook_new(&c, &wh), WEFT_EINVAL);
        assert_null(wh);
    }
    assert_non_null(strstr(weft_test_logs(), "webhook url: expected an http:// or https://"));
    assert_null(strstr(weft_test_logs(), "passwd"));
    c.url = f->url;
    c.format = 7;
    assert_weft_err(weft__rt_webhook_new(&c, &wh), WEFT_EINVAL);
    assert_non_null(strstr(weft_test_logs(), "webhook format"));
    c.format = RT_WEBHOOK_GENERIC;
    c.queue_cap = RT_WEBHOOK_MAX_QUEUE + 1;
    assert_weft_err(weft__rt_webhook_new(&c, &wh), WEFT_EINVAL);
    assert_non_null(strstr(weft_test_logs(), "webhook queue_cap"));
    c.queue_cap = 0;
    c.headers = injected;
    c.header_count = 1;
    assert_weft_err(weft__rt_webhook_new(&c, &wh), WEFT_EINVAL);
    c.headers = nameless;
    assert_weft_err(weft__rt_webhook_new(&c, &wh), WEFT_EINVAL);
    assert_non_null(strstr(weft_test_logs(), "webhook headers[0]"));
    assert_null(strstr(weft_test_logs(), "abc"));
    c.headers = NULL;
    c.header_count = 0;
    c.trace_url = "jaeger/trace/";
    assert_weft_err(weft__rt_webhook_new(&c, &wh), WEFT_EINVAL);
    assert_non_null(strstr(weft_test_logs(), "webhook trace_url"));
    c.trace_url = NULL;
    assert_weft_err(weft__rt_webhook_new(NULL, &wh), WEFT_EINVAL);
    assert_weft_err(weft__rt_webhook_new(&c, NULL), WEFT_EINVAL);

    /* Alerts: kind and a known policy are required; nothing is queued or counted. */
    wh = make(f->url, RT_WEBHOOK_GENERIC, 0);
    assert_weft_err(weft__rt_webhook_post(wh, NULL), WEFT_EINVAL);
    assert_weft_err(weft__rt_webhook_post(NULL, &a), WEFT_EINVAL);
    a.policy = "panic";
    assert_weft_err(weft__rt_webhook_post(wh, &a), WEFT_EINVAL);
    a.policy = NULL;
    assert_weft_err(weft__rt_webhook_post(wh, &a), WEFT_EINVAL);
    a.policy = "warn";
    a.kind = "";
    assert_weft_err(weft__rt_webhook_post(wh, &a), WEFT_EINVAL);
    {
        struct weft__rt_webhook_stats st;
        weft__rt_webhook_stats(wh, &st);
        assert_int_equal(st.sent + st.failed + st.dropped + st.retries, 0);
    }
    weft__rt_webhook_free(wh, 0);
    assert_int_equal(http_receiver_count(f->rx), 0);
    weft__rt_webhook_free(NULL, 0);
    weft__rt_webhook_stats(NULL, NULL);
}

static void
test_webhook_cuts_long_and_invalid_utf8_text(void **state)
{
    struct fx *f = *state;
    struct rt_webhook *wh = make(f->url, RT_WEBHOOK_GENERIC, 0);
    struct rt_webhook_alert a = sample_alert("warn");
    char *long_text = malloc(5000);
    json_t *doc = NULL;
    const char *evidence = NULL;

    /* 4999 bytes of two-byte characters ("é"), then a lone continuation byte in the agent. */
    for (size_t i = 0; i + 1 < 5000; i += 2) {
        long_text[i] = (char)0xc3;
        long_text[i + 1] = (char)0xa9;
    }
    long_text[4999] = '\0';
    a.evidence = long_text;
    a.agent = "bad\xa9name";
    assert_weft_ok(weft__rt_webhook_post(wh, &a));
    assert_int_equal(wait_done(wh, 1, 5000).sent, 1);
    doc = body_of(f, 0);
    evidence = str_at(doc, "evidence");
    assert_true(strlen(evidence) <= 2048);
    assert_true(strlen(evidence) >= 2046);
    assert_int_equal(strlen(evidence) % 2, 0); /* never half a character */
    assert_string_equal(str_at(doc, "agent"), "bad?name");
    json_decref(doc);
    free(long_text);
    weft__rt_webhook_free(wh, 1000);
}

static void
test_webhook_out_of_memory_fails_cleanly(void **state)
{
    struct fx *f = *state;
    struct rt_webhook_alert a = sample_alert("warn");
    bool is_done = false;
    size_t delivered = 0;

    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; !is_done && budget < 1000; budget++) {
        struct rt_webhook_config c = {.url = f->url, .trace_url = "http://ui/trace/"};
        struct rt_webhook *wh = NULL;
        weft_err err = WEFT_OK;

        failalloc_budget = budget;
        err = weft__rt_webhook_new(&c, &wh);
        if (err != WEFT_OK) {
            assert_int_equal(err, WEFT_ENOMEM);
            assert_null(wh);
            continue;
        }
        err = weft__rt_webhook_post(wh, &a);
        if (err == WEFT_OK) {
            is_done = true;
        } else {
            struct weft__rt_webhook_stats st;
            assert_int_equal(err, WEFT_ENOMEM);
            weft__rt_webhook_stats(wh, &st);
            assert_int_equal(st.dropped, 1);
        }
        failalloc_budget = -1;
        weft__rt_webhook_free(wh, 5000);
    }
    failalloc_budget = -1;
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
    delivered = http_receiver_count(f->rx);
    assert_int_equal(delivered, 1);
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_webhook_generic_payload_is_one_exact_object),
        T(test_webhook_alertmanager_payload_is_postable_alerts_array),
        T(test_webhook_alertmanager_leaves_out_absent_values),
        T(test_webhook_retries_503_after_retry_after),
        T(test_webhook_retries_transport_errors_then_gives_up),
        T(test_webhook_400_is_final_counted_and_logged_once),
        T(test_webhook_post_never_blocks_and_counts_drops),
        T(test_webhook_free_drains_queued_alerts),
        T(test_webhook_free_with_server_down_returns_within_drain),
        T(test_webhook_free_cuts_hanging_request_at_drain_bound),
        T(test_webhook_free_wakes_a_retry_after_wait),
        T(test_webhook_rejects_bad_config_and_alerts),
        T(test_webhook_cuts_long_and_invalid_utf8_text),
        T(test_webhook_out_of_memory_fails_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
