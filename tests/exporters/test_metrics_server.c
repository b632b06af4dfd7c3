/* tests/exporters/test_metrics_server.c - what the metrics server parses itself: the route of
 * a request and the listen address (exporters/metrics_server.h); and that it answers every
 * request it accepts: /healthz and /metrics while handlers of other routes hold their threads,
 * 503 with Retry-After past a route's max_active, and refusals and timeouts counted on
 * /metrics. Real servers on 127.0.0.1 driven with libcurl and a raw socket. The scrape path
 * end to end is tested in runtime/prometheus_scrape and runtime/run_metrics. */
#include "base/mem.h"
#include "base/time.h"
#include "exporters/metrics_server.h"
#include "support/weft_test.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static void
test_metrics_server_routes_by_method_and_exact_path(void **state)
{
    (void)state;
    assert_int_equal(weft__metrics_server_route("GET", "/metrics"), WEFT__ROUTE_METRICS);
    assert_int_equal(weft__metrics_server_route("HEAD", "/healthz"), WEFT__ROUTE_HEALTHZ);
    assert_int_equal(weft__metrics_server_route("POST", "/metrics"), WEFT__ROUTE_BAD_METHOD);
    assert_int_equal(weft__metrics_server_route("get", "/metrics"), WEFT__ROUTE_BAD_METHOD);
    assert_int_equal(weft__metrics_server_route("GET", "/metrics/"), WEFT__ROUTE_NOT_FOUND);
    assert_int_equal(weft__metrics_server_route("GET", "/metrics?x"), WEFT__ROUTE_NOT_FOUND);
    assert_int_equal(weft__metrics_server_route(NULL, "/metrics"), WEFT__ROUTE_NOT_FOUND);
}

static void
test_metrics_server_address_parses_host_and_port(void **state)
{
    struct sockaddr_in sa;
    char host[INET_ADDRSTRLEN];

    (void)state;
    assert_weft_ok(weft__metrics_server_parse_addr("0.0.0.0:9100", &sa));
    assert_int_equal(sa.sin_family, AF_INET);
    assert_int_equal(ntohs(sa.sin_port), 9100);
    assert_non_null(inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host)));
    assert_string_equal(host, "0.0.0.0");
    assert_weft_ok(weft__metrics_server_parse_addr(":0", &sa));
    assert_int_equal(ntohs(sa.sin_port), 0);
    assert_non_null(inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host)));
    assert_string_equal(host, "127.0.0.1");
    assert_weft_ok(weft__metrics_server_parse_addr(NULL, &sa));
    assert_int_equal(ntohs(sa.sin_port), 9464);
}

/* strtol alone took an empty port as 0 (a random port instead of an error), and a sign or
 * leading blanks too. */
static void
test_metrics_server_address_port_must_be_digits(void **state)
{
    static const char *const bad[] = {"127.0.0.1:",   "127.0.0.1: 80", "127.0.0.1:+80",
                                      "127.0.0.1:-0", "127.0.0.1:80x", "127.0.0.1:65536",
                                      "localhost:80", "9464",          "1.2.3.4.5:1"};
    struct sockaddr_in sa;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&sa, 0x55, sizeof(sa));
        assert_int_equal(weft__metrics_server_parse_addr(bad[i], &sa), WEFT_EINVAL);
        assert_int_equal(sa.sin_family, 0);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* A server whose /slow route holds its handler until the test lets it go                      */

struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool is_open;
    atomic_int inside; /* handlers running now */
};

static void
slow_handler(void *user_data, const struct weft__http_request *req, struct weft__http_reply *reply)
{
    struct gate *g = user_data;

    (void)req;
    atomic_fetch_add(&g->inside, 1);
    pthread_mutex_lock(&g->lock);
    while (!g->is_open) {
        pthread_cond_wait(&g->cond, &g->lock);
    }
    pthread_mutex_unlock(&g->lock);
    atomic_fetch_sub(&g->inside, 1);
    reply->status = 200;
    reply->content_type = "text/plain";
    reply->body = "done\n";
    reply->len = 5;
}

static void
gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->is_open = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

static weft_err
empty_metrics(void *user_data, char **out, size_t *len)
{
    (void)user_data;
    *out = strdup("");
    *len = 0;
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

struct call {
    unsigned port;
    const char *path;
    const char *content_type; /* NULL: none */
    long timeout_ms;
    CURLcode rc;
    long status;
    bool has_retry_after;
    char body[8192];
    size_t body_len;
    uint64_t elapsed_ms;
};

static size_t
call_body(char *data, size_t size, size_t n, void *user_data)
{
    struct call *c = user_data;
    size_t len = size * n;
    size_t room = sizeof(c->body) - 1 - c->body_len;
    size_t take = len < room ? len : room;

    memcpy(c->body + c->body_len, data, take);
    c->body_len += take;
    c->body[c->body_len] = '\0';
    return len;
}

static size_t
call_header(char *data, size_t size, size_t n, void *user_data)
{
    struct call *c = user_data;

    if (size * n >= 12 && strncasecmp(data, "Retry-After:", 12) == 0) {
        c->has_retry_after = true;
    }
    return size * n;
}

/* GET (or POST a small body, when content_type is set) without asserting: runs on threads. */
static void
call_run(struct call *c)
{
    CURL *curl = curl_easy_init();
    struct curl_slist *headers = NULL;
    char url[128];
    char h[96];
    uint64_t t0 = weft__monotonic_ns();

    c->rc = CURLE_FAILED_INIT;
    c->status = 0;
    c->body_len = 0;
    c->body[0] = '\0';
    if (curl == NULL) {
        return;
    }
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", c->port, c->path);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    if (c->content_type != NULL) {
        snprintf(h, sizeof(h), "Content-Type: %s", c->content_type);
        headers = curl_slist_append(headers, h);
        headers = curl_slist_append(headers, "Expect:");
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "0123456789");
    }
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, call_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, call_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, c);
    c->rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &c->status);
    c->elapsed_ms = (weft__monotonic_ns() - t0) / 1000000u;
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
}

static void *
call_thread(void *arg)
{
    call_run(arg);
    return NULL;
}

/* Wait (at most 10 s) until @p n handlers are inside the gate. */
static bool
wait_inside(struct gate *g, int n)
{
    uint64_t deadline = weft__monotonic_ns() + 10000000000ull;

    while (atomic_load(&g->inside) < n) {
        if (weft__monotonic_ns() > deadline) {
            return false;
        }
        weft__sleep_ms(2);
    }
    return true;
}

/* The server's /metrics text (a test failure when it does not answer in 2 s). */
static void
scrape(unsigned port, struct call *c)
{
    memset(c, 0, sizeof(*c));
    c->port = port;
    c->path = "/metrics";
    c->timeout_ms = 2000;
    call_run(c);
    assert_int_equal(c->rc, CURLE_OK);
    assert_int_equal(c->status, 200);
}

/* Four handlers of one route hold their threads; /healthz and /metrics still answer at once.
 * With the former pool of two threads, the third and fourth requests were never even read
 * (the test timed out waiting for four handlers inside), and /healthz waited behind them. */
static void
test_metrics_server_healthz_answers_while_handlers_hold_their_threads(void **state)
{
    struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0};
    struct weft__http_route route = {"/slow", 0, slow_handler, &g, false, 0, false};
    struct weft_metrics_server *srv = NULL;
    pthread_t threads[4];
    struct call calls[4];
    struct call health;
    bool are_inside = false;
    unsigned port = 0;

    (void)state;
    assert_weft_ok(
        weft__metrics_server_start_routes(empty_metrics, NULL, "127.0.0.1:0", &route, 1, &srv));
    port = weft_metrics_server_port(srv);
    for (size_t i = 0; i < 4; i++) {
        memset(&calls[i], 0, sizeof(calls[i]));
        calls[i].port = port;
        calls[i].path = "/slow";
        calls[i].timeout_ms = 20000;
        assert_int_equal(pthread_create(&threads[i], NULL, call_thread, &calls[i]), 0);
    }
    are_inside = wait_inside(&g, 4);
    /* The bound is loose for a loaded CI machine under ASan; docs/serve.md has the figure. */
    memset(&health, 0, sizeof(health));
    health.port = port;
    health.path = "/healthz";
    health.timeout_ms = 1000;
    call_run(&health);
    gate_open(&g);
    for (size_t i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
    }
    assert_true(are_inside);
    assert_int_equal(health.rc, CURLE_OK);
    assert_int_equal(health.status, 200);
    assert_true(health.elapsed_ms < 1000);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(calls[i].rc, CURLE_OK);
        assert_int_equal(calls[i].status, 200);
    }
    weft_metrics_server_stop(srv);
}

/* Past max_active, a request is answered at once with 503 and Retry-After (a google.rpc.Status
 * in the request's encoding) and counted by route and reason on /metrics. */
static void
test_metrics_server_busy_route_answers_503_with_retry_after(void **state)
{
    struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0};
    struct weft__http_route route = {"/slow", 64, slow_handler, &g, false, 1, false};
    struct weft_metrics_server *srv = NULL;
    pthread_t first;
    struct call held;
    struct call busy;
    struct call busy_proto;
    struct call again;
    struct call m;
    bool is_inside = false;
    unsigned port = 0;

    (void)state;
    assert_weft_ok(
        weft__metrics_server_start_routes(empty_metrics, NULL, "127.0.0.1:0", &route, 1, &srv));
    port = weft_metrics_server_port(srv);
    memset(&held, 0, sizeof(held));
    held.port = port;
    held.path = "/slow";
    held.timeout_ms = 20000;
    assert_int_equal(pthread_create(&first, NULL, call_thread, &held), 0);
    is_inside = wait_inside(&g, 1);
    memset(&busy, 0, sizeof(busy));
    busy.port = port;
    busy.path = "/slow";
    busy.content_type = "application/json";
    busy.timeout_ms = 2000;
    call_run(&busy);
    busy_proto = busy;
    busy_proto.content_type = "application/x-protobuf";
    busy_proto.has_retry_after = false;
    call_run(&busy_proto);
    gate_open(&g);
    pthread_join(first, NULL);
    assert_true(is_inside);
    assert_int_equal(held.status, 200);
    assert_int_equal(busy.rc, CURLE_OK);
    assert_int_equal(busy.status, 503);
    assert_true(busy.has_retry_after);
    assert_non_null(strstr(busy.body, "\"code\":14"));
    assert_int_equal(busy_proto.status, 503);
    assert_true(busy_proto.has_retry_after);
    assert_true(busy_proto.body_len > 4);
    assert_int_equal((unsigned char)busy_proto.body[0], 0x08); /* Status.code */
    assert_int_equal((unsigned char)busy_proto.body[1], 14);   /* UNAVAILABLE */
    /* The slot is given back when a request completes. */
    again = held;
    again.has_retry_after = false;
    call_run(&again);
    assert_int_equal(again.status, 200);
    scrape(port, &m);
    weft_metrics_server_stop(srv);
    assert_non_null(
        strstr(m.body, "weft_http_requests_refused_total{reason=\"busy\",route=\"/slow\"} 2"));
}

/* A request whose body never finishes is closed after the idle timeout, unanswered: counted
 * as reason="timeout", so that nothing a client sent vanishes unseen. */
static void
test_metrics_server_unanswered_timeout_is_counted(void **state)
{
    struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, true, 0};
    struct weft__http_route route = {"/slow", 1024, slow_handler, &g, false, 1, false};
    struct weft_metrics_server *srv = NULL;
    struct sockaddr_in sa;
    static const char head[] = "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123";
    uint64_t deadline = 0;
    struct call m;
    bool is_counted = false;
    char buf[64];
    int fd = -1;

    (void)state;
    assert_weft_ok(
        weft__metrics_server_start_routes(empty_metrics, NULL, "127.0.0.1:0", &route, 1, &srv));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(weft_metrics_server_port(srv));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(write(fd, head, sizeof(head) - 1), (ssize_t)(sizeof(head) - 1));
    /* The server closes the silent connection (read returns 0 or an error) without answering. */
    assert_true(read(fd, buf, sizeof(buf)) <= 0);
    close(fd);
    deadline = weft__monotonic_ns() + 10000000000ull;
    while (!is_counted && weft__monotonic_ns() < deadline) {
        scrape(weft_metrics_server_port(srv), &m);
        is_counted = strstr(m.body, "{reason=\"timeout\",route=\"/slow\"} 1") != NULL;
        if (!is_counted) {
            weft__sleep_ms(20);
        }
    }
    weft_metrics_server_stop(srv);
    assert_true(is_counted);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_server_routes_by_method_and_exact_path),
        cmocka_unit_test(test_metrics_server_address_parses_host_and_port),
        cmocka_unit_test(test_metrics_server_address_port_must_be_digits),
        cmocka_unit_test(test_metrics_server_healthz_answers_while_handlers_hold_their_threads),
        cmocka_unit_test(test_metrics_server_busy_route_answers_503_with_retry_after),
        cmocka_unit_test(test_metrics_server_unanswered_timeout_is_counted),
    };

    curl_global_init(CURL_GLOBAL_DEFAULT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
