/* tests/net/test_http_client.c - the outbound HTTP client (net/http_client) against the real
 * local test server (tests/support/http_server) on 127.0.0.1: retries on 503 honouring
 * Retry-After, giving up after max attempts with the last status, no retry on 400, the
 * response cap, the timeout, the headers sent, secret headers never in the log, and the header
 * list and URL helpers. */
#include "net/http_client.h"
#include "support/http_server.h"
#include "support/weft_test.h"

#include "base/mem.h"
#include "base/time.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the handler answers, and what it saw. */
struct script {
    pthread_mutex_t lock;
    unsigned requests;
    unsigned fail_first;     /* answer fail_status this many times, then 200 */
    int fail_status;         /* 0: 200 always */
    const char *retry_after; /* sent with the failures; NULL: none */
    size_t body_bytes;       /* the size of the 200 answer's body */
    unsigned delay_ms;       /* before every answer */
    char seen_headers[2048]; /* the last request's header block */
    char seen_method[16];
    char seen_body[256];
};

struct fixture {
    struct script script;
    struct http_server *server;
    char url[128];
};

static void
handler(void *user_data, struct http_server_request *req, struct http_server_response *resp)
{
    struct script *s = user_data;
    unsigned n = 0;

    pthread_mutex_lock(&s->lock);
    n = s->requests++;
    snprintf(s->seen_headers, sizeof(s->seen_headers), "%s",
             req->headers != NULL ? req->headers : "");
    snprintf(s->seen_method, sizeof(s->seen_method), "%s", req->method);
    snprintf(s->seen_body, sizeof(s->seen_body), "%s", req->body != NULL ? req->body : "");
    resp->delay_ms = s->delay_ms;
    if (s->fail_status != 0 && n < s->fail_first) {
        char line[96];

        resp->status = s->fail_status;
        if (s->retry_after != NULL) {
            snprintf(line, sizeof(line), "Retry-After: %s\r\n", s->retry_after);
            resp->headers = strdup(line);
        }
        resp->body = strdup("busy");
        resp->body_len = 4;
    } else {
        resp->status = 200;
        resp->content_type = strdup("text/plain");
        resp->headers = strdup("Mcp-Session-Id: s-42\r\n");
        resp->body = malloc(s->body_bytes + 1);
        memset(resp->body, 'x', s->body_bytes);
        resp->body[s->body_bytes] = '\0';
        resp->body_len = s->body_bytes;
    }
    pthread_mutex_unlock(&s->lock);
}

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    pthread_mutex_init(&f->script.lock, NULL);
    f->script.body_bytes = 2;
    assert_int_equal(http_server_start(handler, &f->script, &f->server), 0);
    snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%u/v1/x", http_server_port(f->server));
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    http_server_stop(f->server);
    pthread_mutex_destroy(&f->script.lock);
    free(f);
    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
    return 0;
}

static struct weft__http_client_request
post(const struct fixture *f, const char *body)
{
    struct weft__http_client_request r;

    memset(&r, 0, sizeof(r));
    r.url = f->url;
    r.body = body;
    r.body_len = strlen(body);
    r.has_body = true;
    r.content_type = "application/json";
    r.timeout_ms = 5000;
    return r;
}

static void
test_http_client_retries_503_honouring_retry_after(void **state)
{
    struct fixture *f = *state;
    struct weft__http_client_request req = post(f, "{}");
    struct weft__http_retry retry = {.max_attempts = 3, .initial_backoff_ms = 1};
    struct weft__http_response resp;
    uint64_t t0 = weft__monotonic_ns();

    f->script.fail_status = 503;
    f->script.fail_first = 1;
    f->script.retry_after = "1";
    weft__http_response_init(&resp);
    assert_weft_ok(weft__http_perform(&req, &retry, &resp));
    assert_int_equal(resp.status, 200);
    assert_int_equal(resp.attempts, 2);
    assert_int_equal(f->script.requests, 2);
    /* The server said one second; the backoff alone would have waited at most 1 ms. */
    assert_true(weft__monotonic_ns() - t0 >= 1000000000u);
    assert_string_equal(resp.captured, "");
    weft__http_response_cleanup(&resp);
}

static void
test_http_client_gives_up_after_max_attempts_with_last_status(void **state)
{
    struct fixture *f = *state;
    struct weft__http_client_request req = post(f, "{}");
    struct weft__http_retry retry = {
        .max_attempts = 3, .initial_backoff_ms = 2, .max_backoff_ms = 4};
    struct weft__http_response resp;

    f->script.fail_status = 502;
    f->script.fail_first = 100;
    weft__http_response_init(&resp);
    assert_weft_ok(weft__http_perform(&req, &retry, &resp));
    assert_int_equal(resp.status, 502);
    assert_int_equal(resp.attempts, 3);
    assert_int_equal(resp.stop, WEFT__HTTP_STOP_ATTEMPTS);
    assert_int_equal(f->script.requests, 3);
    assert_string_equal(resp.body.data, "busy");
    weft__http_response_cleanup(&resp);
}

static void
test_http_client_does_not_retry_400(void **state)
{
    struct fixture *f = *state;
    struct weft__http_client_request req = post(f, "{}");
    struct weft__http_retry retry = {.max_attempts = 5, .initial_backoff_ms = 1};
    struct weft__http_response resp;

    f->script.fail_status = 400;
    f->script.fail_first = 100;
    weft__http_response_init(&resp);
    assert_weft_ok(weft__http_perform(&req, &retry, &resp));
    assert_int_equal(resp.status, 400);
    assert_int_equal(resp.attempts, 1);
    assert_int_equal(resp.stop, WEFT__HTTP_STOP_FINAL);
    assert_false(resp.is_retryable);
    assert_int_equal(f->script.requests, 1);
    weft__http_response_cleanup(&resp);
}

static void
test_http_client_deadline_bounds_retry_after(void **state)
{
    struct fixture *f = *state;
    struct weft__http_client_request req = post(f, "{}");
    struct weft__http_retry retry = {.max_attempts = 5, .initial_backoff_ms = 1};
    struct weft__http_response resp;
    uint64_t t0 = weft__monotonic_ns();

    /* Retry-After as an HTTP-date far ahead: waiting would pass the deadline, so it stops. */
    f->script.fail_status = 503;
    f->script.fail_first = 100;
    f->script.retry_after = "Fri, 31 Dec 2099 23:59:59 GMT";
    retry.deadline_ns = t0 + 2000000000u;
    weft__http_response_init(&resp);
    assert_weft_ok(weft__http_perform(&req, &retry, &resp));
    assert_int_equal(resp.status, 503);
    assert_int_equal(resp.attempts, 1);
    assert_int_equal(resp.stop, WEFT__HTTP_STOP_DEADLINE);
    assert_true(weft__monotonic_ns() - t0 < 1500000000u);
    weft__http_response_cleanup(&resp);
}

static void
test_http_client_enforces_the_response_cap(void **state)
{
    struct fixture *f = *state;
    struct weft__http_client_request req = post(f, "{}");
    struct weft__http_response resp;

    f->script.body_bytes = 10000;
    req.max_response_bytes = 4096;
    weft__http_response_init(&resp);
    assert_weft_err(weft__http_perform(&req, NULL, &resp), WEFT_ELIMIT);
    assert_int_equal(resp.failure, WEFT__HTTP_FAIL_TOO_LARGE);
    assert_true(resp.body.len <= 4096);

    /* The same answer cut at the cap when the caller takes a prefix. */
    req.is_truncate_ok = true;
    assert_weft_ok(weft__http_perform(&req, NULL, &resp));
    assert_int_equal(resp.status, 200);
    assert_true(resp.is_truncated);
    assert_int_equal(resp.body.len, 4096);
    weft__http_response_cleanup(&resp);
}

static void
test_http_client_enforces_the_timeout(void **state)
{
    struct fixture *f = *state;
    struct weft__http_client_request req = post(f, "{}");
    struct weft__http_response resp;
    uint64_t t0 = weft__monotonic_ns();

    f->script.delay_ms = 3000;
    req.timeout_ms = 200;
    weft__http_response_init(&resp);
    assert_weft_err(weft__http_perform(&req, NULL, &resp), WEFT_ETIMEDOUT);
    assert_int_equal(resp.failure, WEFT__HTTP_FAIL_TIMEOUT);
    assert_true(resp.is_retryable);
    assert_true(weft__monotonic_ns() - t0 < 2000000000u);
    weft__http_response_cleanup(&resp);
}

static void
test_http_client_sends_headers_and_captures_answers(void **state)
{
    struct fixture *f = *state;
    struct weft__http_client_request req = post(f, "{\"a\":1}");
    struct weft__http_headers h;
    struct weft__http_response resp;

    weft__http_headers_init(&h);
    assert_weft_ok(weft__http_headers_add(&h, "Accept: application/json"));
    assert_weft_ok(weft__http_headers_add_pair(&h, "X-Trace", "abc"));
    assert_weft_err(weft__http_headers_add_pair(&h, "X-Bad", "a\r\nInjected: 1"), WEFT_EINVAL);
    req.headers = &h;
    req.user_agent = "weft-test/1";
    req.capture_header = "Mcp-Session-Id";
    weft__http_response_init(&resp);
    assert_weft_ok(weft__http_perform(&req, NULL, &resp));
    assert_int_equal(resp.status, 200);
    assert_string_equal(resp.content_type, "text/plain");
    assert_string_equal(resp.captured, "s-42");
    assert_string_equal(resp.body.data, "xx");
    assert_string_equal(f->script.seen_method, "POST");
    assert_string_equal(f->script.seen_body, "{\"a\":1}");
    assert_non_null(strstr(f->script.seen_headers, "Content-Type: application/json"));
    assert_non_null(strstr(f->script.seen_headers, "Accept: application/json"));
    assert_non_null(strstr(f->script.seen_headers, "X-Trace: abc"));
    assert_non_null(strstr(f->script.seen_headers, "User-Agent: weft-test/1"));
    assert_null(strstr(f->script.seen_headers, "Injected"));
    assert_string_equal(weft__http_headers_get(&h, "x-trace"), "abc");

    /* A GET with Basic auth built by libcurl, and a DELETE. */
    memset(&req, 0, sizeof(req));
    req.url = f->url;
    req.basic_user = "pk";
    req.basic_password = "sk";
    assert_weft_ok(weft__http_perform(&req, NULL, &resp));
    assert_string_equal(f->script.seen_method, "GET");
    assert_non_null(strstr(f->script.seen_headers, "Authorization: Basic cGs6c2s="));
    req.method = "DELETE";
    assert_weft_ok(weft__http_perform(&req, NULL, &resp));
    assert_string_equal(f->script.seen_method, "DELETE");
    weft__http_response_cleanup(&resp);
    weft__http_headers_cleanup(&h);
    assert_null(h.list);
}

static void
test_http_client_never_logs_secret_headers(void **state)
{
    struct fixture *f = *state;
    struct weft__http_client_request req = post(f, "{}");
    struct weft__http_retry retry = {.max_attempts = 2, .initial_backoff_ms = 1};
    struct weft__http_headers h;
    struct weft__http_response resp;

    weft_test_capture_logs();
    weft__http_headers_init(&h);
    assert_weft_ok(weft__http_headers_add_bearer(&h, "sk-secret-token-123"));
    assert_weft_ok(weft__http_headers_add_pair(&h, "x-api-key", "key-secret-456"));
    f->script.fail_status = 503;
    f->script.fail_first = 100;
    req.headers = &h;
    weft__http_response_init(&resp);
    assert_weft_ok(weft__http_perform(&req, &retry, &resp));
    assert_int_equal(resp.attempts, 2);
    /* The server got them ... */
    assert_non_null(strstr(f->script.seen_headers, "Authorization: Bearer sk-secret-token-123"));
    assert_non_null(strstr(f->script.seen_headers, "x-api-key: key-secret-456"));
    /* ... and no log line holds them. */
    assert_null(strstr(weft_test_logs(), "sk-secret-token-123"));
    assert_null(strstr(weft_test_logs(), "key-secret-456"));
    assert_true(weft__http_header_is_secret("Authorization"));
    assert_true(weft__http_header_is_secret("x-api-key: v"));
    assert_true(weft__http_header_is_secret("api-key"));
    assert_false(weft__http_header_is_secret("Content-Type"));
    weft__http_response_cleanup(&resp);
    weft__http_headers_cleanup(&h);
}

static void
test_http_client_reports_refused_connections_as_retryable(void **state)
{
    struct fixture *f = *state;
    struct weft__http_client_request req;
    struct weft__http_retry retry = {.max_attempts = 2, .initial_backoff_ms = 1};
    struct weft__http_response resp;
    char url[64];
    unsigned short port = http_server_port(f->server);

    /* The server's port, once it is stopped, refuses. */
    http_server_stop(f->server);
    f->server = NULL;
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/", port);
    memset(&req, 0, sizeof(req));
    req.url = url;
    req.timeout_ms = 2000;
    weft__http_response_init(&resp);
    assert_weft_err(weft__http_perform(&req, &retry, &resp), WEFT_EIO);
    assert_int_equal(resp.failure, WEFT__HTTP_FAIL_CONNECT);
    assert_int_equal(resp.attempts, 2);
    assert_int_equal(resp.stop, WEFT__HTTP_STOP_ATTEMPTS);
    assert_true(resp.error[0] != '\0');
    weft__http_response_cleanup(&resp);
}

static void
test_http_client_url_helpers(void **state)
{
    struct weft__http_url u;
    char where[128];
    char *e = NULL;

    (void)state;
    assert_weft_ok(weft__http_url_parse("http://user:pw@example.com/a/b?q=1", false, &u));
    assert_string_equal(u.scheme, "http");
    assert_string_equal(u.user, "user");
    assert_string_equal(u.host, "example.com");
    assert_string_equal(u.port, "80");
    assert_string_equal(u.path, "/a/b");
    assert_string_equal(u.query, "q=1");
    weft__http_url_cleanup(&u);
    assert_weft_err(weft__http_url_parse("not a url", false, &u), WEFT_EINVAL);
    weft__http_url_describe("https://u:secret@h:8443/p?token=1", "?", where, sizeof(where));
    assert_string_equal(where, "https://h:8443/p");
    e = weft__http_escape("a b/c");
    assert_string_equal(e, "a%20b%2Fc");
    weft__free(e);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_http_client_retries_503_honouring_retry_after, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_http_client_gives_up_after_max_attempts_with_last_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_client_does_not_retry_400, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_client_deadline_bounds_retry_after, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_client_enforces_the_response_cap, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_client_enforces_the_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_client_sends_headers_and_captures_answers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_client_never_logs_secret_headers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_client_reports_refused_connections_as_retryable,
                                        setup, teardown),
        cmocka_unit_test(test_http_client_url_helpers),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
