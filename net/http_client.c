/* net/http_client.c - the one outbound HTTP client over libcurl (see http_client.h).
 *
 * A client keeps one easy handle: each perform resets its options (curl_easy_reset keeps the
 * live connections, the DNS cache and TLS sessions) and sets them from the request, so
 * requests of any shape may follow one another on a kept-alive connection. The handle runs
 * through a private multi handle rather than curl_easy_perform(): curl_multi_poll() can be
 * cut short by curl_multi_wakeup() from another thread, so a shutdown or a drain deadline
 * ends a request waiting on a slow server at once, not at the next progress callback.
 *
 * The retry loop is the one REFERENCE.md describes for OTLP and every other caller copied:
 * only 429, 502, 503, 504 (and 500 on request) and transport failures are retried; the wait is
 * the server's Retry-After when it sent one, else a jittered exponential backoff; no attempt
 * runs past the deadline (its timeout is cut to what is left) and no wait ends past it or past
 * the retry budget. Callers see each retry through a hook and build their own error texts from
 * the response, so their messages stay theirs.
 *
 * Invariants: every header line is wiped before it is freed; nothing here logs (the callers
 * know what a failure means to them); the body never exceeds the request's cap.
 */
#include "net/http_client.h"

#include "base/http.h"
#include "base/mem.h"
#include "base/time.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#ifndef WEFT_VERSION_STRING
#define WEFT_VERSION_STRING "0"
#endif

#define POLL_SLICE_MS 1000u /* longest block on the sockets without asking should_abort */

struct weft__http_client {
    CURL *curl;
    CURLM *multi;
};

/* ------------------------------------------------------------------------------------------ */
/* Header lists                                                                                */

void
weft__http_headers_init(struct weft__http_headers *h)
{
    if (h != NULL) {
        h->list = NULL;
    }
}

static bool
has_line_break(const char *s)
{
    return strpbrk(s, "\r\n") != NULL;
}

weft_err
weft__http_headers_add(struct weft__http_headers *h, const char *line)
{
    struct curl_slist *grown = NULL;

    if (h == NULL || line == NULL || has_line_break(line)) {
        return WEFT_EINVAL;
    }
    grown = curl_slist_append(h->list, line);
    if (grown == NULL) {
        return WEFT_ENOMEM;
    }
    h->list = grown;
    return WEFT_OK;
}

weft_err
weft__http_headers_add_pair(struct weft__http_headers *h, const char *name, const char *value)
{
    size_t len = 0;
    char *line = NULL;
    weft_err err = WEFT_OK;

    if (h == NULL || name == NULL || value == NULL || has_line_break(name) ||
        has_line_break(value)) {
        return WEFT_EINVAL;
    }
    /* Exactly sized: no realloc can leave a stray copy of a secret value behind. */
    len = strlen(name) + 2 + strlen(value) + 1;
    line = weft__malloc(len);
    if (line == NULL) {
        return WEFT_ENOMEM;
    }
    snprintf(line, len, "%s: %s", name, value);
    err = weft__http_headers_add(h, line);
    weft__wipe(line, len);
    weft__free(line);
    return err;
}

weft_err
weft__http_headers_add_bearer(struct weft__http_headers *h, const char *token)
{
    static const char prefix[] = "Bearer ";
    size_t len = 0;
    char *value = NULL;
    weft_err err = WEFT_OK;

    if (token == NULL) {
        return WEFT_EINVAL;
    }
    len = sizeof(prefix) + strlen(token);
    value = weft__malloc(len);
    if (value == NULL) {
        return WEFT_ENOMEM;
    }
    snprintf(value, len, "%s%s", prefix, token);
    err = weft__http_headers_add_pair(h, "Authorization", value);
    weft__wipe(value, len);
    weft__free(value);
    return err;
}

weft_err
weft__http_headers_append_all(struct weft__http_headers *h, const struct weft__http_headers *from)
{
    struct weft__http_headers copy = {NULL};

    if (h == NULL || from == NULL) {
        return WEFT_EINVAL;
    }
    for (const struct curl_slist *l = from->list; l != NULL; l = l->next) {
        if (weft__http_headers_add(&copy, l->data) != WEFT_OK) {
            weft__http_headers_cleanup(&copy);
            return WEFT_ENOMEM;
        }
    }
    if (h->list == NULL) {
        h->list = copy.list;
        return WEFT_OK;
    }
    {
        struct curl_slist *last = h->list;

        while (last->next != NULL) {
            last = last->next;
        }
        last->next = copy.list;
    }
    return WEFT_OK;
}

const char *
weft__http_headers_get(const struct weft__http_headers *h, const char *name)
{
    size_t n = 0;

    if (h == NULL || name == NULL) {
        return NULL;
    }
    n = strlen(name);
    for (const struct curl_slist *l = h->list; l != NULL; l = l->next) {
        if (strncasecmp(l->data, name, n) == 0 && l->data[n] == ':') {
            const char *v = l->data + n + 1;

            while (*v == ' ' || *v == '\t') {
                v++;
            }
            return v;
        }
    }
    return NULL;
}

void
weft__http_headers_cleanup(struct weft__http_headers *h)
{
    if (h == NULL) {
        return;
    }
    for (struct curl_slist *l = h->list; l != NULL; l = l->next) {
        weft__wipe(l->data, strlen(l->data));
    }
    curl_slist_free_all(h->list);
    h->list = NULL;
}

static bool
ends_with(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);

    return len >= n && strncasecmp(s + len - n, suffix, n) == 0;
}

bool
weft__http_header_is_secret(const char *name)
{
    static const char *const exact[] = {"authorization", "proxy-authorization", "cookie",
                                        "set-cookie"};
    size_t len = 0;

    if (name == NULL) {
        return false;
    }
    len = strcspn(name, ":");
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++) {
        if (strlen(exact[i]) == len && strncasecmp(name, exact[i], len) == 0) {
            return true;
        }
    }
    return ends_with(name, len, "key") || ends_with(name, len, "token") ||
           ends_with(name, len, "secret") || ends_with(name, len, "password");
}

/* ------------------------------------------------------------------------------------------ */
/* Responses                                                                                   */

void
weft__http_response_init(struct weft__http_response *r)
{
    if (r != NULL) {
        memset(r, 0, sizeof(*r));
        r->error = "";
        weft__buf_init(&r->body, 0);
    }
}

void
weft__http_response_cleanup(struct weft__http_response *r)
{
    if (r == NULL) {
        return;
    }
    weft__buf_cleanup(&r->body);
    weft__free(r->redirect_url);
    r->redirect_url = NULL;
}

bool
weft__http_status_is_retryable(long status, bool with_500)
{
    return status == 429 || status == 502 || status == 503 || status == 504 ||
           (with_500 && status == 500);
}

static bool
curl_is_retryable(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* One attempt                                                                                 */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static bool curl_ok;

static void
curl_init_once(void)
{
    curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

bool
weft__http_global_init(void)
{
    pthread_once(&curl_once, curl_init_once);
    return curl_ok;
}

/* The state of one attempt, seen by libcurl's callbacks. */
struct attempt {
    const struct weft__http_client_request *req;
    struct weft__http_response *resp;
    size_t cap;
    weft__http_failure write_failure; /* why the write callback stopped the transfer */
};

static size_t
on_body(char *data, size_t size, size_t n, void *userdata)
{
    struct attempt *a = userdata;
    size_t len = size * n;
    weft_err err = WEFT_OK;

    if (a->req->on_write != NULL) {
        if (!a->req->on_write(data, len, a->req->user_data)) {
            a->write_failure = WEFT__HTTP_FAIL_WRITE;
            return 0;
        }
        return len;
    }
    err = weft__buf_append(&a->resp->body, data, len);
    if (err == WEFT_ELIMIT && a->req->is_truncate_ok) {
        /* Keep what fits and stop the transfer: the rest is not wanted (attempt_once takes
         * the stop for a success). */
        (void)weft__buf_append(&a->resp->body, data, a->cap - a->resp->body.len);
        a->resp->is_truncated = true;
        return 0;
    }
    if (err != WEFT_OK) {
        a->write_failure = err == WEFT_ELIMIT ? WEFT__HTTP_FAIL_TOO_LARGE : WEFT__HTTP_FAIL_NOMEM;
        return 0;
    }
    return len;
}

static size_t
on_header(char *data, size_t size, size_t n, void *userdata)
{
    struct attempt *a = userdata;
    struct weft__http_response *r = a->resp;
    size_t len = size * n;

    if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
        /* A new answer (after a 1xx or a followed redirect): its headers replace the last. */
        r->retry_after[0] = '\0';
        r->content_type[0] = '\0';
        r->captured[0] = '\0';
    }
    if (!weft__http_header_value(data, len, "Retry-After", r->retry_after,
                                 sizeof(r->retry_after)) &&
        !weft__http_header_value(data, len, "Content-Type", r->content_type,
                                 sizeof(r->content_type)) &&
        a->req->capture_header != NULL) {
        (void)weft__http_header_value(data, len, a->req->capture_header, r->captured,
                                      sizeof(r->captured));
    }
    if (a->req->on_header != NULL && !a->req->on_header(data, len, a->req->user_data)) {
        a->write_failure = WEFT__HTTP_FAIL_WRITE;
        return 0;
    }
    return len;
}

static void
set_options(CURL *curl, struct attempt *a, struct curl_slist *headers, uint64_t timeout_ms)
{
    const struct weft__http_client_request *req = a->req;

    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, req->url);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR,
                     req->protocols != NULL ? req->protocols : "http,https");
    curl_easy_setopt(curl, CURLOPT_USERAGENT,
                     req->user_agent != NULL ? req->user_agent : "weft/" WEFT_VERSION_STRING);
    if (headers != NULL) {
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    }
    if (req->has_body) {
        curl_easy_setopt(curl, CURLOPT_POST, 1L);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, req->body != NULL ? req->body : "");
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    }
    if (req->method != NULL && strcmp(req->method, req->has_body ? "POST" : "GET") != 0) {
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req->method);
    }
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    if (req->connect_timeout_ms != 0) {
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)req->connect_timeout_ms);
    }
    /* A redirect would resend the body and the credentials somewhere nobody configured. */
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, req->max_redirects > 0 ? 1L : 0L);
    if (req->max_redirects > 0) {
        curl_easy_setopt(curl, CURLOPT_MAXREDIRS, req->max_redirects);
        curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    }
    curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, req->is_keepalive ? 1L : 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, req->is_insecure ? 0L : 1L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, req->is_insecure ? 0L : 2L);
    if (req->ca_file != NULL) {
        curl_easy_setopt(curl, CURLOPT_CAINFO, req->ca_file);
    }
    if (req->client_cert != NULL) {
        curl_easy_setopt(curl, CURLOPT_SSLCERT, req->client_cert);
    }
    if (req->client_key != NULL) {
        curl_easy_setopt(curl, CURLOPT_SSLKEY, req->client_key);
    }
    if (req->basic_user != NULL) {
        curl_easy_setopt(curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(curl, CURLOPT_USERNAME, req->basic_user);
        curl_easy_setopt(curl, CURLOPT_PASSWORD,
                         req->basic_password != NULL ? req->basic_password : "");
    }
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, a);
}

/* Run the transfer on the multi handle, asking should_abort between polls.
 * @return the transfer's result, CURLE_ABORTED_BY_CALLBACK when aborted. */
static CURLcode
run(struct weft__http_client *c, const struct weft__http_client_request *req)
{
    CURLcode rc = CURLE_GOT_NOTHING;
    CURLMcode mc = CURLM_OK;
    bool is_done = false;
    int running = 1;

    if (curl_multi_add_handle(c->multi, c->curl) != CURLM_OK) {
        return CURLE_OUT_OF_MEMORY;
    }
    for (;;) {
        uint32_t poll_ms = POLL_SLICE_MS;

        mc = curl_multi_perform(c->multi, &running);
        if (mc != CURLM_OK || running == 0) {
            break;
        }
        if (req->should_abort != NULL && req->should_abort(req->user_data, &poll_ms)) {
            curl_multi_remove_handle(c->multi, c->curl);
            return CURLE_ABORTED_BY_CALLBACK;
        }
        /* Returns on socket activity, libcurl's own timers, or weft__http_client_wakeup(). */
        mc = curl_multi_poll(c->multi, NULL, 0, (int)poll_ms, NULL);
        if (mc != CURLM_OK) {
            break;
        }
    }
    {
        CURLMsg *msg = NULL;
        int left = 0;

        while ((msg = curl_multi_info_read(c->multi, &left)) != NULL) {
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == c->curl) {
                rc = msg->data.result;
                is_done = true;
            }
        }
    }
    if (!is_done && mc != CURLM_OK) {
        rc = CURLE_OUT_OF_MEMORY;
    }
    curl_multi_remove_handle(c->multi, c->curl);
    return rc;
}

static weft__http_failure
failure_of(CURLcode rc, const struct attempt *a)
{
    switch (rc) {
    case CURLE_OK:
        return WEFT__HTTP_FAIL_NONE;
    case CURLE_COULDNT_CONNECT:
        return WEFT__HTTP_FAIL_CONNECT;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return WEFT__HTTP_FAIL_RESOLVE;
    case CURLE_OPERATION_TIMEDOUT:
        return WEFT__HTTP_FAIL_TIMEOUT;
    case CURLE_GOT_NOTHING:
        return WEFT__HTTP_FAIL_NOTHING;
    case CURLE_WRITE_ERROR:
        return a->write_failure != WEFT__HTTP_FAIL_NONE ? a->write_failure : WEFT__HTTP_FAIL_WRITE;
    case CURLE_ABORTED_BY_CALLBACK:
        return WEFT__HTTP_FAIL_ABORTED;
    case CURLE_OUT_OF_MEMORY:
        return WEFT__HTTP_FAIL_NOMEM;
    default:
        return WEFT__HTTP_FAIL_OTHER;
    }
}

static weft_err
err_of(weft__http_failure f)
{
    switch (f) {
    case WEFT__HTTP_FAIL_NONE:
        return WEFT_OK;
    case WEFT__HTTP_FAIL_TIMEOUT:
        return WEFT_ETIMEDOUT;
    case WEFT__HTTP_FAIL_TOO_LARGE:
        return WEFT_ELIMIT;
    case WEFT__HTTP_FAIL_NOMEM:
        return WEFT_ENOMEM;
    case WEFT__HTTP_FAIL_WRITE:
    case WEFT__HTTP_FAIL_ABORTED:
        return WEFT_ESTATE;
    default:
        return WEFT_EIO;
    }
}

/* One attempt with @p timeout_ms (0: none). */
static weft_err
attempt_once(struct weft__http_client *c,
             const struct weft__http_client_request *req,
             struct curl_slist *headers,
             uint64_t timeout_ms,
             struct weft__http_response *resp)
{
    struct attempt a;
    CURLcode rc = CURLE_OK;
    char *location = NULL;

    memset(&a, 0, sizeof(a));
    a.req = req;
    a.resp = resp;
    a.cap =
        req->max_response_bytes != 0 ? req->max_response_bytes : WEFT__HTTP_DEFAULT_MAX_RESPONSE;
    weft__buf_reset(&resp->body);
    resp->body.max = a.cap;
    resp->status = 0;
    resp->failure = WEFT__HTTP_FAIL_NONE;
    resp->error = "";
    resp->os_errno = 0;
    resp->is_retryable = false;
    resp->is_truncated = false;
    resp->retry_after[0] = '\0';
    resp->content_type[0] = '\0';
    resp->captured[0] = '\0';
    resp->timeout_ms = timeout_ms;
    weft__free(resp->redirect_url);
    resp->redirect_url = NULL;
    set_options(c->curl, &a, headers, timeout_ms);
    resp->attempts++;
    rc = run(c, req);
    if (rc == CURLE_WRITE_ERROR && resp->is_truncated) {
        rc = CURLE_OK; /* cut at the cap, as asked */
    }
    resp->failure = failure_of(rc, &a);
    /* The status of an answer whose body broke off is known too (a dropped SSE stream). */
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &resp->status);
    if (rc != CURLE_OK) {
        resp->error = curl_easy_strerror(rc);
        resp->is_retryable = curl_is_retryable(rc);
        if (rc == CURLE_COULDNT_CONNECT) {
            curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &resp->os_errno);
        }
        return err_of(resp->failure);
    }
    if (resp->status >= 300 && resp->status < 400 &&
        curl_easy_getinfo(c->curl, CURLINFO_REDIRECT_URL, &location) == CURLE_OK &&
        location != NULL) {
        resp->redirect_url = weft__strdup(location);
    }
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Retries                                                                                     */

static uint64_t
next_random(void)
{
    /* splitmix64 over a per-thread counter seeded from the clock: jitter only needs to
     * decorrelate clients, not to be unpredictable. */
    static _Thread_local uint64_t state;
    uint64_t z = 0;

    if (state == 0) {
        state = weft__monotonic_ns() ^ (uint64_t)(uintptr_t)&state;
    }
    z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static bool
sleep_plain(void *user_data, uint64_t ms)
{
    struct timespec ts;

    (void)user_data;
    ts.tv_sec = (time_t)(ms / 1000u);
    ts.tv_nsec = (long)(ms % 1000u) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    return true;
}

/* The wait before the next attempt: Retry-After when the answer carries one, else jitter. */
static uint64_t
wait_for(const struct weft__http_retry *p, const struct weft__http_response *r, uint64_t backoff)
{
    uint64_t wait_ms = 0;

    if (backoff != 0) {
        if (p->is_half_jitter) {
            wait_ms = backoff / 2 + next_random() % (backoff - backoff / 2 + 1);
        } else {
            wait_ms = next_random() % (backoff + 1);
        }
    }
    if (r->failure == WEFT__HTTP_FAIL_NONE &&
        (!p->is_retry_after_503_429 || r->status == 429 || r->status == 503)) {
        uint64_t ra = weft__http_retry_after_ms(r->retry_after);

        if (ra > 0) {
            wait_ms = p->retry_after_max_ms != 0 && ra > p->retry_after_max_ms
                          ? p->retry_after_max_ms
                          : ra;
        }
    }
    return wait_ms;
}

/* A Content-Type given apart is sent with the request's own lines, in a list of this call. */
static weft_err
build_headers(const struct weft__http_client_request *req, struct weft__http_headers *out)
{
    weft_err err = WEFT_OK;

    weft__http_headers_init(out);
    if (req->content_type == NULL) {
        return WEFT_OK;
    }
    err = weft__http_headers_add_pair(out, "Content-Type", req->content_type);
    if (err == WEFT_OK && req->headers != NULL) {
        err = weft__http_headers_append_all(out, req->headers);
    }
    if (err != WEFT_OK) {
        weft__http_headers_cleanup(out);
    }
    return err;
}

weft_err
weft__http_client_perform(struct weft__http_client *c,
                          const struct weft__http_client_request *req,
                          const struct weft__http_retry *retry,
                          struct weft__http_response *resp)
{
    static const struct weft__http_retry once;
    const struct weft__http_retry *p = retry != NULL ? retry : &once;
    struct weft__http_headers own;
    struct curl_slist *headers = NULL;
    uint64_t started = weft__monotonic_ns();
    uint64_t backoff = p->initial_backoff_ms;
    uint64_t max_backoff =
        p->max_backoff_ms > p->initial_backoff_ms ? p->max_backoff_ms : p->initial_backoff_ms;
    weft_err err = WEFT_OK;

    if (c == NULL || req == NULL || req->url == NULL || resp == NULL) {
        return WEFT_EINVAL;
    }
    resp->attempts = 0;
    resp->stop = WEFT__HTTP_STOP_FINAL;
    err = build_headers(req, &own);
    if (err != WEFT_OK) {
        return err;
    }
    headers = own.list != NULL ? own.list : (req->headers != NULL ? req->headers->list : NULL);
    for (;;) {
        uint64_t now = weft__monotonic_ns();
        uint64_t timeout = req->timeout_ms;
        uint64_t wait_ms = 0;
        bool is_retryable = false;

        if (p->deadline_ns != 0) {
            uint64_t left = 0;

            if (now >= p->deadline_ns) {
                resp->stop = WEFT__HTTP_STOP_DEADLINE;
                err = resp->attempts == 0 ? WEFT_ETIMEDOUT : err;
                break;
            }
            /* Rounded up, so that libcurl's timer cannot fire before the deadline. */
            left = (p->deadline_ns - now + 999999u) / 1000000u;
            if (timeout == 0 || left < timeout) {
                timeout = left;
            }
        }
        err = attempt_once(c, req, headers, timeout, resp);
        if (err == WEFT_OK) {
            is_retryable = weft__http_status_is_retryable(resp->status, p->is_500_retryable);
            resp->is_retryable = is_retryable;
        } else {
            is_retryable = resp->is_retryable;
        }
        if (!is_retryable) {
            resp->stop = WEFT__HTTP_STOP_FINAL;
            break;
        }
        if (resp->attempts >= (p->max_attempts == 0 ? 1u : p->max_attempts)) {
            resp->stop = WEFT__HTTP_STOP_ATTEMPTS;
            break;
        }
        wait_ms = wait_for(p, resp, backoff);
        backoff = backoff * 2 > max_backoff ? max_backoff : backoff * 2;
        now = weft__monotonic_ns();
        if ((p->deadline_ns != 0 && now + wait_ms * 1000000u >= p->deadline_ns) ||
            (p->budget_ms != 0 && now + wait_ms * 1000000u - started > p->budget_ms * 1000000u)) {
            resp->stop = WEFT__HTTP_STOP_DEADLINE;
            break;
        }
        if (p->on_retry != NULL) {
            p->on_retry(p->user_data, resp, wait_ms);
        }
        if (!(p->sleep_ms != NULL ? p->sleep_ms : sleep_plain)(p->user_data, wait_ms)) {
            resp->stop = WEFT__HTTP_STOP_CANCELLED;
            break;
        }
    }
    weft__http_headers_cleanup(&own);
    return err;
}

weft_err
weft__http_client_new(struct weft__http_client **out)
{
    struct weft__http_client *c = NULL;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (!weft__http_global_init()) {
        return WEFT_EIO;
    }
    c = weft__calloc(1, sizeof(*c));
    if (c == NULL) {
        return WEFT_ENOMEM;
    }
    c->curl = curl_easy_init();
    c->multi = curl_multi_init();
    if (c->curl == NULL || c->multi == NULL) {
        weft__http_client_free(c);
        return WEFT_ENOMEM;
    }
    *out = c;
    return WEFT_OK;
}

void
weft__http_client_free(struct weft__http_client *c)
{
    if (c == NULL) {
        return;
    }
    if (c->multi != NULL) {
        curl_multi_cleanup(c->multi);
    }
    if (c->curl != NULL) {
        curl_easy_cleanup(c->curl);
    }
    weft__free(c);
}

void
weft__http_client_wakeup(struct weft__http_client *c)
{
    if (c != NULL && c->multi != NULL) {
        curl_multi_wakeup(c->multi);
    }
}

weft_err
weft__http_perform(const struct weft__http_client_request *req,
                   const struct weft__http_retry *retry,
                   struct weft__http_response *resp)
{
    struct weft__http_client *c = NULL;
    weft_err err = weft__http_client_new(&c);

    if (err != WEFT_OK) {
        return err;
    }
    err = weft__http_client_perform(c, req, retry, resp);
    weft__http_client_free(c);
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* URLs                                                                                        */

/* A copy of libcurl's string in weft's allocator, freeing libcurl's. */
static bool
take_part(CURLU *u, CURLUPart part, unsigned flags, char **out)
{
    char *v = NULL;
    CURLUcode uc = curl_url_get(u, part, &v, flags);

    *out = NULL;
    if (uc != CURLUE_OK || v == NULL) {
        return true; /* absent */
    }
    *out = weft__strdup(v);
    curl_free(v);
    return *out != NULL;
}

weft_err
weft__http_url_parse(const char *url, bool any_scheme, struct weft__http_url *out)
{
    CURLU *u = NULL;
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    if (url == NULL || !weft__http_global_init()) {
        return WEFT_EINVAL;
    }
    u = curl_url();
    if (u == NULL) {
        return WEFT_ENOMEM;
    }
    if (curl_url_set(u, CURLUPART_URL, url, any_scheme ? CURLU_NON_SUPPORT_SCHEME : 0) !=
        CURLUE_OK) {
        err = WEFT_EINVAL;
    } else if (!take_part(u, CURLUPART_SCHEME, 0, &out->scheme) ||
               !take_part(u, CURLUPART_USER, 0, &out->user) ||
               !take_part(u, CURLUPART_HOST, 0, &out->host) ||
               !take_part(u, CURLUPART_PORT, CURLU_DEFAULT_PORT, &out->port) ||
               !take_part(u, CURLUPART_PATH, 0, &out->path) ||
               !take_part(u, CURLUPART_QUERY, 0, &out->query) ||
               !take_part(u, CURLUPART_URL, 0, &out->url)) {
        err = WEFT_ENOMEM;
    }
    curl_url_cleanup(u);
    if (err != WEFT_OK) {
        weft__http_url_cleanup(out);
    }
    return err;
}

void
weft__http_url_cleanup(struct weft__http_url *u)
{
    if (u == NULL) {
        return;
    }
    weft__free(u->scheme);
    weft__free(u->user);
    weft__free(u->host);
    weft__free(u->port);
    weft__free(u->path);
    weft__free(u->query);
    weft__free(u->url);
    memset(u, 0, sizeof(*u));
}

void
weft__http_url_describe(const char *url, const char *fallback, char *out, size_t len)
{
    struct weft__http_url u;

    if (out == NULL || len == 0) {
        return;
    }
    snprintf(out, len, "%s", fallback != NULL ? fallback : "");
    if (weft__http_url_parse(url, false, &u) != WEFT_OK) {
        return;
    }
    if (u.scheme != NULL && u.host != NULL && u.port != NULL && u.path != NULL) {
        snprintf(out, len, "%s://%s:%s%s", u.scheme, u.host, u.port, u.path);
    }
    weft__http_url_cleanup(&u);
}

char *
weft__http_escape(const char *s)
{
    char *escaped = NULL;
    char *copy = NULL;

    if (s == NULL || !weft__http_global_init()) {
        return NULL;
    }
    escaped = curl_easy_escape(NULL, s, 0);
    if (escaped == NULL) {
        return NULL;
    }
    copy = weft__strdup(escaped);
    curl_free(escaped);
    return copy;
}
