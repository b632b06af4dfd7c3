/* runtime/observe/webhook.c - stuck-loop alerts POSTed to a webhook by one sender thread (see
 * webhook.h).
 *
 * weft__rt_webhook_post() renders the JSON body on the caller's thread and queues the string: a
 * body is one allocation, it holds no pointer into the caller's memory, and the sender thread needs
 * nothing but libcurl. The queue is a ring of at most queue_cap bodies under one mutex that is
 * never held across network I/O, so a post waits at most for another post or a pop.
 *
 * The sender sends through net/http_client, whose transfers can be woken from another thread
 * (weft__http_client_wakeup() from weft__rt_webhook_free()), so a request waiting on a slow
 * server is cut at the drain bound instead of up to a second later. Backoff waits (the
 * client's retry policy with this file's sleep hook) sleep on a condition variable (monotonic
 * clock) that weft__rt_webhook_free() broadcasts.
 *
 * Invariants: count <= cap; queue[(head + i) % cap] for i < count are owned bodies; the stats
 * and the drain fields change only under lock; is_failing and answer belong
 * to the sender thread alone.
 */
#include "runtime/observe/webhook.h"

#include "net/http_client.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "base/utf8.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_FIELD_BYTES 2048 /* longer alert text is cut (on a UTF-8 boundary) */
#define ANSWER_SNIPPET  200  /* bytes of a failed answer kept for the log */
#define POLL_SLICE_MS   1000 /* longest wait on the sockets without re-checking the drain */

enum outcome { SENT, FAILED, UNSENT };

struct rt_webhook {
    char *url;
    char *trace_url;
    char log_url[128]; /* scheme://host[:port]: safe to log */
    int format;
    uint32_t timeout_ms;
    uint32_t max_retries;
    uint32_t initial_backoff_ms;
    uint32_t max_backoff_ms;
    struct weft__http_headers headers;
    struct weft__http_client *http;
    pthread_t thread;
    bool has_thread;

    pthread_mutex_t lock;
    pthread_cond_t wake;
    char **queue;
    size_t cap;
    size_t head;
    size_t count;
    bool is_draining;
    uint64_t drain_deadline_ns; /* monotonic; meaningful once is_draining */
    bool is_dropping;           /* a queue-full drop was logged; reset by the next queued post */
    struct weft__rt_webhook_stats stats;
    uint64_t unsent; /* dropped at shutdown */

    /* Sender thread only. */
    bool is_failing; /* a failure was logged; reset (and logged) by the next success */
    uint64_t failures_since_log;
    struct weft__http_response answer; /* the last answer, its body cut to ANSWER_SNIPPET */
};

/* ---- configuration ---------------------------------------------------------------------- */

/* An http(s) URL with a host and without spaces or control characters (they would end up in
 * a request line). */
static bool
is_http_url(const char *url)
{
    size_t skip = 0;

    if (strncasecmp(url, "http://", 7) == 0) {
        skip = 7;
    } else if (strncasecmp(url, "https://", 8) == 0) {
        skip = 8;
    } else {
        return false;
    }
    if (url[skip] == '\0' || url[skip] == '/' || url[skip] == '?' || url[skip] == '#') {
        return false;
    }
    for (const char *p = url; *p != '\0'; p++) {
        if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
            return false;
        }
    }
    return true;
}

/* scheme://host[:port] of @p url, without user info, path or query: webhook URLs often carry
 * their secret in the path (Slack, Discord) or the user info. */
static void
make_log_url(char *dst, size_t dst_len, const char *url)
{
    const char *authority = strstr(url, "://") + 3;
    size_t len = strcspn(authority, "/?#");
    const char *at = NULL;

    for (size_t i = 0; i < len; i++) {
        if (authority[i] == '@') {
            at = authority + i;
        }
    }
    if (at != NULL) {
        len -= (size_t)(at + 1 - authority);
        authority = at + 1;
    }
    snprintf(dst, dst_len, "%.*s%.*s", (int)(strstr(url, "://") + 3 - url), url, (int)len,
             authority);
}

/* "Name: value" with a token name and no line break anywhere (header injection). */
static bool
is_header_line(const char *line)
{
    const char *colon = NULL;

    if (line == NULL) {
        return false;
    }
    colon = strchr(line, ':');
    if (colon == NULL || colon == line) {
        return false;
    }
    for (const char *p = line; p < colon; p++) {
        if ((unsigned char)*p <= 0x20 || *p == 0x7f) {
            return false;
        }
    }
    return strpbrk(line, "\r\n") == NULL;
}

static weft_err
validate(const struct rt_webhook_config *cfg)
{
    if (cfg->url == NULL || !is_http_url(cfg->url)) {
        /* The value is not echoed: it may carry a token. */
        WEFT_LOG(WEFT_LOG_ERROR, "webhook url: expected an http:// or https:// URL with a host");
        return WEFT_EINVAL;
    }
    if (cfg->trace_url != NULL && !is_http_url(cfg->trace_url)) {
        WEFT_LOG(WEFT_LOG_ERROR,
                 "webhook trace_url: expected an http:// or https:// URL prefix with a host");
        return WEFT_EINVAL;
    }
    if (cfg->format != RT_WEBHOOK_GENERIC && cfg->format != RT_WEBHOOK_ALERTMANAGER) {
        WEFT_LOG(WEFT_LOG_ERROR, "webhook format: %d is neither generic (%d) nor alertmanager (%d)",
                 cfg->format, RT_WEBHOOK_GENERIC, RT_WEBHOOK_ALERTMANAGER);
        return WEFT_EINVAL;
    }
    if (cfg->queue_cap > RT_WEBHOOK_MAX_QUEUE) {
        WEFT_LOG(WEFT_LOG_ERROR, "webhook queue_cap: %zu is over the limit of %u", cfg->queue_cap,
                 RT_WEBHOOK_MAX_QUEUE);
        return WEFT_EINVAL;
    }
    if (cfg->header_count > 0 && cfg->headers == NULL) {
        WEFT_LOG(WEFT_LOG_ERROR, "webhook headers: %zu announced but none given",
                 cfg->header_count);
        return WEFT_EINVAL;
    }
    for (size_t i = 0; i < cfg->header_count; i++) {
        if (!is_header_line(cfg->headers[i])) {
            WEFT_LOG(WEFT_LOG_ERROR,
                     "webhook headers[%zu]: expected \"Name: value\" on one line (value not shown)",
                     i);
            return WEFT_EINVAL;
        }
    }
    return WEFT_OK;
}

/* ---- payloads --------------------------------------------------------------------------- */

/* A JSON string of at most MAX_FIELD_BYTES of @p s; invalid UTF-8 bytes become '?'. NULL gives
 * JSON null. @return NULL only when out of memory. */
static json_t *
text(const char *s)
{
    char clean[MAX_FIELD_BYTES];
    size_t len = 0;
    json_t *j = NULL;

    if (s == NULL) {
        return json_null();
    }
    len = strlen(s);
    len = weft__utf8_cut(s, len, MAX_FIELD_BYTES);
    j = json_stringn(s, len);
    if (j != NULL) {
        return j;
    }
    /* Not UTF-8 (or out of memory): keep the ASCII, mark the rest. */
    for (size_t i = 0; i < len; i++) {
        clean[i] = ((unsigned char)s[i] < 0x80 && s[i] != '\0') ? s[i] : '?';
    }
    return json_stringn(clean, len);
}

static bool
set_text(json_t *obj, const char *key, const char *s)
{
    return json_object_set_new(obj, key, text(s)) == 0;
}

/* Alertmanager label sets hold strings only; an absent value is left out. */
static bool
set_label(json_t *obj, const char *key, const char *s)
{
    if (s == NULL || s[0] == '\0') {
        return true;
    }
    return set_text(obj, key, s);
}

/* RFC 3339 UTC with milliseconds, e.g. 2023-11-14T22:13:20.123Z. */
static void
rfc3339(char *buf, size_t len, uint64_t unix_ns)
{
    time_t secs = (time_t)(unix_ns / 1000000000u);
    unsigned ms = (unsigned)(unix_ns % 1000000000u / 1000000u);
    struct tm tm;
    size_t n = 0;

    if (gmtime_r(&secs, &tm) != NULL) {
        n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    }
    if (n == 0) {
        snprintf(buf, len, "1970-01-01T00:00:00");
        n = strlen(buf);
    }
    snprintf(buf + n, len - n, ".%03uZ", ms);
}

/* trace_url + trace id, or NULL when either is missing. Ownership: returns new (weft__free);
 * *is_oom tells a failed allocation from an absent link. */
static char *
trace_link(const struct rt_webhook *wh, const struct rt_webhook_alert *alert, bool *is_oom)
{
    struct weft__buf b;

    *is_oom = false;
    if (wh->trace_url == NULL || alert->trace_id == NULL || alert->trace_id[0] == '\0') {
        return NULL;
    }
    weft__buf_init(&b, 0);
    if (weft__buf_printf(&b, "%s%.64s", wh->trace_url, alert->trace_id) != WEFT_OK) {
        weft__buf_cleanup(&b);
        *is_oom = true;
        return NULL;
    }
    return b.data;
}

static json_t *
generic_body(const struct rt_webhook_alert *alert, const char *when, const char *link)
{
    json_t *o = json_object();
    bool ok = o != NULL;

    ok = ok && set_text(o, "type", "weft.stuck_loop");
    ok = ok && set_text(o, "kind", alert->kind);
    ok = ok && set_text(o, "evidence", alert->evidence);
    ok = ok && set_text(o, "policy", alert->policy);
    ok = ok && set_text(o, "workflow", alert->workflow);
    ok = ok && set_text(o, "run_id", alert->run_id);
    ok = ok && set_text(o, "trace_id", alert->trace_id);
    ok = ok && set_text(o, "span_id", alert->span_id);
    ok = ok && set_text(o, "agent", alert->agent);
    ok = ok && set_text(o, "time", when);
    if (link != NULL) {
        ok = ok && set_text(o, "trace_url", link);
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *
alertmanager_body(const struct rt_webhook_alert *alert, const char *when, const char *link)
{
    json_t *list = json_array();
    json_t *a = json_object();
    json_t *labels = json_object();
    json_t *notes = json_object();
    char summary[320];
    bool ok = list != NULL && a != NULL && labels != NULL && notes != NULL;

    if (alert->workflow != NULL && alert->workflow[0] != '\0') {
        snprintf(summary, sizeof(summary), "Stuck loop (%.64s) in workflow %.200s", alert->kind,
                 alert->workflow);
    } else {
        snprintf(summary, sizeof(summary), "Stuck loop (%.64s)", alert->kind);
    }
    ok = ok && set_label(labels, "alertname", "WeftStuckLoop");
    ok = ok && set_label(labels, "kind", alert->kind);
    ok = ok && set_label(labels, "workflow", alert->workflow);
    ok = ok &&
         set_label(labels, "severity", strcmp(alert->policy, "warn") == 0 ? "warning" : "critical");
    ok = ok && set_label(labels, "run_id", alert->run_id);
    ok = ok && set_label(notes, "summary", summary);
    ok = ok && set_label(notes, "description", alert->evidence);
    ok = ok && set_label(notes, "policy", alert->policy);
    ok = ok && set_label(notes, "trace_id", alert->trace_id);
    ok = ok && set_label(notes, "span_id", alert->span_id);
    ok = ok && set_label(notes, "run_id", alert->run_id);
    ok = ok && set_label(notes, "agent", alert->agent);
    /* The *_new calls take their value even when they fail; only then is it no longer ours. */
    if (ok) {
        ok = json_object_set_new(a, "labels", labels) == 0;
        labels = NULL;
    }
    if (ok) {
        ok = json_object_set_new(a, "annotations", notes) == 0;
        notes = NULL;
    }
    ok = ok && set_text(a, "startsAt", when);
    if (link != NULL) {
        ok = ok && set_text(a, "generatorURL", link);
    }
    if (ok) {
        ok = json_array_append_new(list, a) == 0;
        a = NULL;
    }
    json_decref(labels);
    json_decref(notes);
    json_decref(a);
    if (!ok) {
        json_decref(list);
        return NULL;
    }
    return list;
}

/* Render @p alert into a NUL-terminated body. Ownership: *out is new (weft__free). */
static weft_err
render(const struct rt_webhook *wh, const struct rt_webhook_alert *alert, char **out)
{
    char when[48];
    char *link = NULL;
    bool is_oom = false;
    json_t *doc = NULL;
    char *body = NULL;
    size_t n = 0;
    weft_err err = WEFT_ENOMEM;

    rfc3339(when, sizeof(when), alert->time_unix_ns != 0 ? alert->time_unix_ns : weft__now_ns());
    link = trace_link(wh, alert, &is_oom);
    if (is_oom) {
        goto out;
    }
    doc = wh->format == RT_WEBHOOK_ALERTMANAGER ? alertmanager_body(alert, when, link)
                                                : generic_body(alert, when, link);
    if (doc == NULL) {
        goto out;
    }
    /* Dump into our own allocation, so the queued body goes through weft's allocator. */
    n = json_dumpb(doc, NULL, 0, JSON_COMPACT);
    if (n == 0) {
        goto out;
    }
    body = weft__malloc(n + 1);
    if (body == NULL) {
        goto out;
    }
    if (json_dumpb(doc, body, n, JSON_COMPACT) != n) {
        weft__free(body);
        body = NULL;
        goto out;
    }
    body[n] = '\0';
    *out = body;
    err = WEFT_OK;
out:
    json_decref(doc);
    weft__free(link);
    return err;
}

/* ---- delivery (sender thread) ------------------------------------------------------------ */

/* How long the sender may block before it must look at the drain deadline again.
 * @return false when the drain deadline has passed. */
static bool
time_left_ms(struct rt_webhook *wh, uint32_t *out)
{
    bool is_alive = true;

    *out = POLL_SLICE_MS;
    pthread_mutex_lock(&wh->lock);
    if (wh->is_draining) {
        uint64_t now = weft__monotonic_ns();
        if (now >= wh->drain_deadline_ns) {
            is_alive = false;
        } else {
            uint64_t left = (wh->drain_deadline_ns - now + 999999u) / 1000000u;
            if (left < (uint64_t)*out) {
                *out = (uint32_t)left;
            }
        }
    }
    pthread_mutex_unlock(&wh->lock);
    return is_alive;
}

/* The client's should_abort hook: the drain deadline cuts a request short. */
static bool
is_cut(void *user_data, uint32_t *poll_ms)
{
    return !time_left_ms(user_data, poll_ms);
}

/* Sleep until @p until_ns (monotonic) or until the drain makes the wait pointless.
 * @return false when the alert must be given up: the wait would end past the drain deadline. */
static bool
pause_until(struct rt_webhook *wh, uint64_t until_ns)
{
    struct timespec ts;
    bool is_alive = true;

    ts.tv_sec = (time_t)(until_ns / 1000000000u);
    ts.tv_nsec = (long)(until_ns % 1000000000u);
    pthread_mutex_lock(&wh->lock);
    for (;;) {
        if (wh->is_draining && until_ns > wh->drain_deadline_ns) {
            is_alive = false;
            break;
        }
        if (weft__monotonic_ns() >= until_ns) {
            break;
        }
        pthread_cond_timedwait(&wh->wake, &wh->lock, &ts);
    }
    pthread_mutex_unlock(&wh->lock);
    return is_alive;
}

/* Log the first failure of a run of failures; the rest are only counted. */
static void
note_failure(struct rt_webhook *wh)
{
    const struct weft__http_response *r = &wh->answer;
    char snippet[ANSWER_SNIPPET + 1];

    wh->failures_since_log++;
    if (wh->is_failing) {
        return;
    }
    wh->is_failing = true;
    if (r->failure != WEFT__HTTP_FAIL_NONE) {
        WEFT_LOG(WEFT_LOG_ERROR,
                 "webhook %s: alert not delivered after %u attempt(s): %s; further failures are "
                 "counted, not logged, until one succeeds",
                 wh->log_url, r->attempts, r->error);
        return;
    }
    for (size_t i = 0; i < r->body.len; i++) {
        char c = r->body.data[i];
        snippet[i] = (c >= 0x20 && c < 0x7f) ? c : '.';
    }
    snippet[r->body.len] = '\0';
    WEFT_LOG(WEFT_LOG_ERROR,
             "webhook %s: alert not delivered after %u attempt(s): HTTP %ld%s: %s; further "
             "failures are counted, not logged, until one succeeds",
             wh->log_url, r->attempts, r->status,
             weft__http_status_is_retryable(r->status, false) ? "" : " (not retried)", snippet);
}

static void
note_success(struct rt_webhook *wh)
{
    if (wh->is_failing) {
        WEFT_LOG(WEFT_LOG_INFO, "webhook %s: delivering again after %llu failed alert(s)",
                 wh->log_url, (unsigned long long)wh->failures_since_log);
    }
    wh->is_failing = false;
    wh->failures_since_log = 0;
}

/* The retry policy's hooks: a retry is counted and said at DEBUG; a backoff wait that would
 * end past the drain deadline gives the alert up. */
static void
on_retry(void *user_data, const struct weft__http_response *r, uint64_t wait_ms)
{
    struct rt_webhook *wh = user_data;

    pthread_mutex_lock(&wh->lock);
    wh->stats.retries++;
    pthread_mutex_unlock(&wh->lock);
    WEFT_LOG(WEFT_LOG_DEBUG, "webhook %s: %s; retrying in %llu ms", wh->log_url,
             r->failure != WEFT__HTTP_FAIL_NONE ? r->error : "retryable HTTP status",
             (unsigned long long)wait_ms);
}

static bool
sleep_ms(void *user_data, uint64_t ms)
{
    return pause_until(user_data, weft__monotonic_ns() + ms * 1000000u);
}

static enum outcome
deliver(struct rt_webhook *wh, const char *body)
{
    struct weft__http_client_request req;
    struct weft__http_retry retry;
    weft_err err = WEFT_OK;

    memset(&req, 0, sizeof(req));
    req.url = wh->url;
    req.headers = &wh->headers;
    req.body = body;
    req.body_len = strlen(body);
    req.has_body = true;
    req.user_agent = "weft/" WEFT_VERSION_STRING " (webhook)";
    req.timeout_ms = wh->timeout_ms;
    req.max_response_bytes = ANSWER_SNIPPET; /* kept for the log line of a failure */
    req.is_truncate_ok = true;
    req.is_keepalive = true;
    req.should_abort = is_cut;
    req.user_data = wh;
    /* Waits drawn from [b/2, b]: never a burst of immediate retries, still spread out. The
     * server's Retry-After counts on 429 and 503 only, and no more than the cap. */
    memset(&retry, 0, sizeof(retry));
    retry.max_attempts = wh->max_retries + 1;
    retry.initial_backoff_ms = wh->initial_backoff_ms;
    retry.max_backoff_ms = wh->max_backoff_ms;
    retry.is_half_jitter = true;
    retry.is_retry_after_503_429 = true;
    retry.retry_after_max_ms = RT_WEBHOOK_MAX_RETRY_AFTER_MS;
    retry.sleep_ms = sleep_ms;
    retry.on_retry = on_retry;
    retry.user_data = wh;
    err = weft__http_client_perform(wh->http, &req, &retry, &wh->answer);
    if (wh->answer.failure == WEFT__HTTP_FAIL_ABORTED ||
        wh->answer.stop == WEFT__HTTP_STOP_CANCELLED) {
        return UNSENT;
    }
    if (err == WEFT_OK && wh->answer.status >= 200 && wh->answer.status < 300) {
        note_success(wh);
        return SENT;
    }
    note_failure(wh);
    return FAILED;
}

static void *
sender_main(void *arg)
{
    struct rt_webhook *wh = arg;

    pthread_mutex_lock(&wh->lock);
    for (;;) {
        char *body = NULL;
        enum outcome result = FAILED;

        while (wh->count == 0 && !wh->is_draining) {
            pthread_cond_wait(&wh->wake, &wh->lock);
        }
        if (wh->count == 0 || (wh->is_draining && weft__monotonic_ns() >= wh->drain_deadline_ns)) {
            break;
        }
        body = wh->queue[wh->head];
        wh->queue[wh->head] = NULL;
        wh->head = (wh->head + 1) % wh->cap;
        wh->count--;
        pthread_mutex_unlock(&wh->lock);

        result = deliver(wh, body);
        weft__free(body);

        pthread_mutex_lock(&wh->lock);
        if (result == SENT) {
            wh->stats.sent++;
        } else if (result == FAILED) {
            wh->stats.failed++;
        } else {
            wh->stats.dropped++;
            wh->unsent++;
        }
    }
    /* Out of time (or told to stop): what is left was never sent. */
    while (wh->count > 0) {
        weft__free(wh->queue[wh->head]);
        wh->queue[wh->head] = NULL;
        wh->head = (wh->head + 1) % wh->cap;
        wh->count--;
        wh->stats.dropped++;
        wh->unsent++;
    }
    pthread_mutex_unlock(&wh->lock);
    return NULL;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

/* Free everything but the thread (joined by the caller, or never started). */
static void
destroy(struct rt_webhook *wh)
{
    if (wh->queue != NULL) {
        for (size_t i = 0; i < wh->count; i++) {
            weft__free(wh->queue[(wh->head + i) % wh->cap]);
        }
    }
    weft__http_client_free(wh->http);
    weft__http_headers_cleanup(&wh->headers);
    weft__http_response_cleanup(&wh->answer);
    pthread_cond_destroy(&wh->wake);
    pthread_mutex_destroy(&wh->lock);
    weft__free(wh->queue);
    weft__free(wh->url);
    weft__free(wh->trace_url);
    weft__free(wh);
}

static weft_err
setup_http(struct rt_webhook *wh, const struct rt_webhook_config *cfg)
{
    weft_err err = WEFT_OK;

    err = weft__http_headers_add(&wh->headers, "Content-Type: application/json");
    /* "Expect: 100-continue" would cost a round trip per alert. */
    if (err == WEFT_OK) {
        err = weft__http_headers_add(&wh->headers, "Expect:");
    }
    for (size_t i = 0; err == WEFT_OK && i < cfg->header_count; i++) {
        err = weft__http_headers_add(&wh->headers, cfg->headers[i]);
    }
    if (err != WEFT_OK) {
        return err;
    }
    return weft__http_client_new(&wh->http);
}

weft_err
weft__rt_webhook_new(const struct rt_webhook_config *cfg, struct rt_webhook **out)
{
    struct rt_webhook *wh = NULL;
    pthread_condattr_t attr;
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (cfg == NULL) {
        return WEFT_EINVAL;
    }
    err = validate(cfg);
    if (err != WEFT_OK) {
        return err;
    }
    if (!weft__http_global_init()) {
        WEFT_LOG(WEFT_LOG_ERROR, "webhook: libcurl could not be initialised");
        return WEFT_EIO;
    }
    wh = weft__calloc(1, sizeof(*wh));
    if (wh == NULL) {
        return WEFT_ENOMEM;
    }
    pthread_mutex_init(&wh->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&wh->wake, &attr);
    pthread_condattr_destroy(&attr);
    wh->format = cfg->format;
    wh->timeout_ms = cfg->timeout_ms != 0 ? cfg->timeout_ms : RT_WEBHOOK_DEFAULT_TIMEOUT_MS;
    wh->max_retries = cfg->max_retries == RT_WEBHOOK_NO_RETRIES ? 0
                      : cfg->max_retries != 0                   ? cfg->max_retries
                                                                : RT_WEBHOOK_DEFAULT_RETRIES;
    wh->cap = cfg->queue_cap != 0 ? cfg->queue_cap : RT_WEBHOOK_DEFAULT_QUEUE;
    wh->initial_backoff_ms =
        cfg->initial_backoff_ms != 0 ? cfg->initial_backoff_ms : RT_WEBHOOK_DEFAULT_BACKOFF_MS;
    wh->max_backoff_ms =
        cfg->max_backoff_ms != 0 ? cfg->max_backoff_ms : RT_WEBHOOK_DEFAULT_MAX_BACKOFF_MS;
    if (wh->max_backoff_ms < wh->initial_backoff_ms) {
        wh->max_backoff_ms = wh->initial_backoff_ms;
    }
    weft__http_response_init(&wh->answer);
    make_log_url(wh->log_url, sizeof(wh->log_url), cfg->url);
    wh->url = weft__strdup(cfg->url);
    wh->queue = weft__calloc(wh->cap, sizeof(*wh->queue));
    if (wh->url == NULL || wh->queue == NULL) {
        err = WEFT_ENOMEM;
        goto fail;
    }
    if (cfg->trace_url != NULL) {
        wh->trace_url = weft__strdup(cfg->trace_url);
        if (wh->trace_url == NULL) {
            err = WEFT_ENOMEM;
            goto fail;
        }
    }
    err = setup_http(wh, cfg);
    if (err != WEFT_OK) {
        goto fail;
    }
    if (pthread_create(&wh->thread, NULL, sender_main, wh) != 0) {
        WEFT_LOG(WEFT_LOG_ERROR, "webhook %s: cannot start the sender thread", wh->log_url);
        err = WEFT_ENOMEM;
        goto fail;
    }
    wh->has_thread = true;
    *out = wh;
    return WEFT_OK;
fail:
    destroy(wh);
    return err;
}

weft_err
weft__rt_webhook_post(struct rt_webhook *wh, const struct rt_webhook_alert *alert)
{
    char *body = NULL;
    bool is_first_drop = false;
    size_t cap = 0;
    weft_err err = WEFT_OK;

    if (wh == NULL || alert == NULL || alert->kind == NULL || alert->kind[0] == '\0' ||
        alert->policy == NULL ||
        (strcmp(alert->policy, "warn") != 0 && strcmp(alert->policy, "break") != 0 &&
         strcmp(alert->policy, "abort") != 0)) {
        return WEFT_EINVAL;
    }
    /* Rendering happens outside the lock: posts from several runs do not serialise on it. */
    err = render(wh, alert, &body);
    pthread_mutex_lock(&wh->lock);
    if (err == WEFT_OK && wh->count == wh->cap) {
        err = WEFT_ELIMIT;
    }
    if (err != WEFT_OK) {
        wh->stats.dropped++;
        is_first_drop = err == WEFT_ELIMIT && !wh->is_dropping;
        wh->is_dropping = wh->is_dropping || err == WEFT_ELIMIT;
        cap = wh->cap;
        pthread_mutex_unlock(&wh->lock);
        weft__free(body);
        if (is_first_drop) {
            WEFT_LOG(WEFT_LOG_WARN,
                     "webhook %s: alert queue full (%zu); dropping alerts until it drains",
                     wh->log_url, cap);
        }
        return err;
    }
    wh->queue[(wh->head + wh->count) % wh->cap] = body;
    wh->count++;
    wh->is_dropping = false;
    pthread_cond_broadcast(&wh->wake);
    pthread_mutex_unlock(&wh->lock);
    return WEFT_OK;
}

void
weft__rt_webhook_stats(struct rt_webhook *wh, struct weft__rt_webhook_stats *out)
{
    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof(*out));
    if (wh == NULL) {
        return;
    }
    pthread_mutex_lock(&wh->lock);
    *out = wh->stats;
    pthread_mutex_unlock(&wh->lock);
}

void
weft__rt_webhook_free(struct rt_webhook *wh, uint32_t drain_ms)
{
    uint64_t unsent = 0;

    if (wh == NULL) {
        return;
    }
    if (wh->has_thread) {
        pthread_mutex_lock(&wh->lock);
        wh->is_draining = true;
        wh->drain_deadline_ns = weft__monotonic_ns() + (uint64_t)drain_ms * 1000000u;
        pthread_cond_broadcast(&wh->wake);
        pthread_mutex_unlock(&wh->lock);
        /* Cut a request's poll short; harmless when the sender is elsewhere. */
        weft__http_client_wakeup(wh->http);
        pthread_join(wh->thread, NULL);
        unsent = wh->unsent;
    }
    if (unsent > 0) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "webhook %s: %llu alert(s) not delivered within the %u ms drain "
                 "were dropped",
                 wh->log_url, (unsigned long long)unsent, drain_ms);
    }
    destroy(wh);
}
