/* runtime/mcp/http.c - the Streamable HTTP transport (MCP 2025-03-26 and later): every message
 * is a POST to the one endpoint; the answer is a JSON body or an SSE stream.
 *
 * Each POST runs on the calling thread with its own curl easy handle, so calls from several
 * threads overlap; what the answer carries (notifications, server requests, the response) goes
 * to the sink while the transfer runs, so progress arrives as it happens. An SSE stream that
 * drops before the awaited response came is resumed with GET + Last-Event-ID (at most
 * MAX_RESUMES times) when the server gave event ids. A listener thread keeps the optional
 * standalone GET stream open for messages the server starts itself (list_changed).
 *
 * Headers: Content-Type and Accept per the transport spec, Mcp-Session-Id once the server gave
 * one, MCP-Protocol-Version once negotiated, and the configured headers, which are secrets:
 * they are handed to curl and never logged or copied anywhere else.
 *
 * Bounds: a JSON body or one SSE event over WEFT__MCP_MAX_MESSAGE ends the transfer as a
 * protocol error; an SSE line is bounded the same way.
 */
#define _GNU_SOURCE /* strcasestr, strncasecmp */

#include "runtime/mcp/transport.h"

#include "runtime/common/http.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"

#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_RESUMES  3
#define MAX_EVENT_ID 256

struct weft__mcp_http {
    struct weft__mcp_sink sink;
    weft__mcp_answered_fn answered;
    char *url;
    char **headers; /* configured, "Name: value" (secrets) */
    size_t header_count;
    char host[256];
    int port;
    pthread_mutex_t lock; /* session_id, protocol */
    char *session_id;
    char *protocol;
    atomic_bool is_stopping;
    pthread_t listener;
    bool has_listener;
};

/* One transfer: a POST, a resuming GET or the listener's GET. */
struct xfer {
    struct weft__mcp_http *h;
    uint64_t deadline; /* 0: none */
    bool is_sse;
    bool is_json;
    bool is_too_big;
    struct weft__buf body; /* JSON body */
    struct weft__buf line; /* SSE: the line being read */
    struct weft__buf data; /* SSE: the event's data lines */
    char event[64];        /* SSE: the event's type */
    char last_id[MAX_EVENT_ID];
    char new_session[256];
};

static void
xfer_init(struct xfer *x, struct weft__mcp_http *h, uint64_t deadline)
{
    memset(x, 0, sizeof(*x));
    x->h = h;
    x->deadline = deadline;
    weft__buf_init(&x->body, WEFT__MCP_MAX_MESSAGE);
    weft__buf_init(&x->line, WEFT__MCP_MAX_MESSAGE);
    weft__buf_init(&x->data, WEFT__MCP_MAX_MESSAGE);
}

static void
xfer_cleanup(struct xfer *x)
{
    weft__buf_cleanup(&x->body);
    weft__buf_cleanup(&x->line);
    weft__buf_cleanup(&x->data);
}

static size_t
on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t len = size * nmemb;
    const char *value = NULL;
    size_t vlen = 0;

    if (len > 13 && strncasecmp(ptr, "content-type:", 13) == 0) {
        char ct[128];
        size_t n = len - 13 < sizeof(ct) - 1 ? len - 13 : sizeof(ct) - 1;
        memcpy(ct, ptr + 13, n);
        ct[n] = '\0';
        x->is_sse = strcasestr(ct, "text/event-stream") != NULL;
        x->is_json = strcasestr(ct, "application/json") != NULL;
    } else if (len > 15 && strncasecmp(ptr, "mcp-session-id:", 15) == 0) {
        value = ptr + 15;
        vlen = len - 15;
        while (vlen > 0 && (*value == ' ' || *value == '\t')) {
            value++;
            vlen--;
        }
        while (vlen > 0 && isspace((unsigned char)value[vlen - 1])) {
            vlen--;
        }
        /* The spec allows only visible ASCII; anything else (or too long) is ignored. */
        if (vlen > 0 && vlen < sizeof(x->new_session)) {
            bool is_ok = true;
            for (size_t i = 0; i < vlen; i++) {
                is_ok = is_ok && value[i] >= 0x21 && value[i] <= 0x7e;
            }
            if (is_ok) {
                memcpy(x->new_session, value, vlen);
                x->new_session[vlen] = '\0';
            }
        }
    }
    return len;
}

static void
sse_dispatch(struct xfer *x)
{
    if (x->data.len > 0 && (x->event[0] == '\0' || strcmp(x->event, "message") == 0)) {
        x->h->sink.on_message(x->h->sink.ctx, x->data.data, x->data.len);
    }
    weft__buf_reset(&x->data);
    x->event[0] = '\0';
}

/* One SSE line (without its end), per the HTML event-stream rules. */
static bool
sse_line(struct xfer *x, const char *line, size_t len)
{
    const char *colon = memchr(line, ':', len);
    size_t name_len = colon != NULL ? (size_t)(colon - line) : len;
    const char *value = colon != NULL ? colon + 1 : line + len;
    size_t vlen = colon != NULL ? len - name_len - 1 : 0;

    if (len == 0) {
        sse_dispatch(x);
        return true;
    }
    if (name_len == 0) {
        return true; /* a comment */
    }
    if (vlen > 0 && value[0] == ' ') {
        value++;
        vlen--;
    }
    if (name_len == 4 && memcmp(line, "data", 4) == 0) {
        if (x->data.len > 0 && weft__buf_append_byte(&x->data, '\n') != WEFT_OK) {
            return false;
        }
        return weft__buf_append(&x->data, value, vlen) == WEFT_OK;
    }
    if (name_len == 5 && memcmp(line, "event", 5) == 0) {
        size_t n = vlen < sizeof(x->event) - 1 ? vlen : sizeof(x->event) - 1;
        memcpy(x->event, value, n);
        x->event[n] = '\0';
    } else if (name_len == 2 && memcmp(line, "id", 2) == 0 && vlen < sizeof(x->last_id) &&
               memchr(value, '\0', vlen) == NULL) {
        memcpy(x->last_id, value, vlen);
        x->last_id[vlen] = '\0';
    }
    return true; /* retry: and unknown fields are ignored */
}

static bool
sse_feed(struct xfer *x, const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char ch = p[i];
        if (ch == '\n') {
            size_t l = x->line.len;
            if (l > 0 && x->line.data[l - 1] == '\r') {
                l--;
            }
            if (!sse_line(x, x->line.data != NULL ? x->line.data : "", l)) {
                return false;
            }
            weft__buf_reset(&x->line);
        } else if (weft__buf_append_byte(&x->line, (uint8_t)ch) != WEFT_OK) {
            return false;
        }
    }
    return true;
}

static size_t
on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t len = size * nmemb;

    if (x->is_sse) {
        if (!sse_feed(x, ptr, len)) {
            x->is_too_big = true;
            return 0;
        }
        return len;
    }
    if (weft__buf_append(&x->body, ptr, len) != WEFT_OK) {
        x->is_too_big = true;
        return 0;
    }
    return len;
}

static int
on_progress(void *ud, curl_off_t dlt, curl_off_t dln, curl_off_t ult, curl_off_t uln)
{
    struct xfer *x = ud;

    (void)dlt;
    (void)dln;
    (void)ult;
    (void)uln;
    if (atomic_load(&x->h->is_stopping)) {
        return 1;
    }
    if (x->deadline != 0 && weft__monotonic_ns() >= x->deadline) {
        return 1;
    }
    return 0;
}

/* The header list of one request. @return NULL on ENOMEM. */
static struct curl_slist *
build_headers(struct weft__mcp_http *h, const char *accept, bool has_body, const char *last_id)
{
    struct curl_slist *list = NULL;
    struct curl_slist *next = NULL;
    char line[512];
    bool is_ok = true;

    snprintf(line, sizeof(line), "Accept: %s", accept);
    list = curl_slist_append(NULL, line);
    is_ok = list != NULL;
    if (is_ok && has_body) {
        next = curl_slist_append(list, "Content-Type: application/json");
        is_ok = next != NULL;
    }
    pthread_mutex_lock(&h->lock);
    if (is_ok && h->session_id != NULL) {
        snprintf(line, sizeof(line), "Mcp-Session-Id: %s", h->session_id);
        next = curl_slist_append(list, line);
        is_ok = next != NULL;
    }
    if (is_ok && h->protocol != NULL) {
        snprintf(line, sizeof(line), "MCP-Protocol-Version: %s", h->protocol);
        next = curl_slist_append(list, line);
        is_ok = next != NULL;
    }
    pthread_mutex_unlock(&h->lock);
    if (is_ok && last_id != NULL && last_id[0] != '\0') {
        snprintf(line, sizeof(line), "Last-Event-ID: %s", last_id);
        next = curl_slist_append(list, line);
        is_ok = next != NULL;
    }
    for (size_t i = 0; is_ok && i < h->header_count; i++) {
        next = curl_slist_append(list, h->headers[i]);
        is_ok = next != NULL;
    }
    if (!is_ok) {
        weft__rt_curl_free_headers(list); /* header values may be secrets */
        return NULL;
    }
    return list;
}

/* Run one request. @p method "POST", "GET" or "DELETE". */
static weft_err
perform(struct xfer *x,
        const char *method,
        const char *body,
        size_t body_len,
        const char *last_id,
        long *status,
        char *err,
        size_t err_len)
{
    struct weft__mcp_http *h = x->h;
    CURL *curl = NULL;
    struct curl_slist *headers = NULL;
    CURLcode rc = CURLE_OK;
    weft_err result = WEFT_OK;

    *status = 0;
    if (!weft__rt_curl_ready()) {
        snprintf(err, err_len, "libcurl could not be initialised");
        return WEFT_EIO;
    }
    curl = curl_easy_init();
    headers = build_headers(h,
                            strcmp(method, "POST") == 0 ? "application/json, text/event-stream"
                                                        : "text/event-stream",
                            body != NULL, last_id);
    if (curl == NULL || headers == NULL) {
        result = WEFT_ENOMEM;
        goto out;
    }
    curl_easy_setopt(curl, CURLOPT_URL, h->url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "weft-mcp");
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(curl, CURLOPT_POST, 1L);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    } else if (strcmp(method, "DELETE") == 0) {
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    if (x->new_session[0] != '\0') {
        pthread_mutex_lock(&h->lock);
        if (h->session_id == NULL || strcmp(h->session_id, x->new_session) != 0) {
            char *copy = weft__strdup(x->new_session);
            if (copy != NULL) {
                weft__free(h->session_id);
                h->session_id = copy;
            }
        }
        pthread_mutex_unlock(&h->lock);
    }
    if (x->is_too_big) {
        snprintf(err, err_len, "answered a message over %u bytes", (unsigned)WEFT__MCP_MAX_MESSAGE);
        result = WEFT_ELIMIT; /* the call fails as "oversized" (client.c) */
    } else if (rc == CURLE_ABORTED_BY_CALLBACK || rc == CURLE_OPERATION_TIMEDOUT) {
        snprintf(err, err_len, "no answer in time");
        result = WEFT_ETIMEDOUT;
    } else if (rc != CURLE_OK) {
        snprintf(err, err_len, "%s", curl_easy_strerror(rc));
        result = WEFT_EIO;
    } else if (*status >= 400) {
        /* The head of the body says why (the SDKs answer a JSON-RPC error with a message). */
        size_t n = x->body.len < 160 ? x->body.len : 160;
        snprintf(err, err_len, "answered HTTP %ld%s%.*s", *status, n > 0 ? ": " : "", (int)n,
                 n > 0 ? x->body.data : "");
        result = WEFT_EHTTP;
    }
    /* A JSON body is delivered whatever the status: an error status may carry a JSON-RPC
     * error answer for the request. */
    if (!x->is_sse && x->body.len > 0 && (x->is_json || *status < 300) && !x->is_too_big) {
        h->sink.on_message(h->sink.ctx, x->body.data, x->body.len);
    } else if (x->is_sse && x->data.len > 0) {
        sse_dispatch(x); /* a stream that ended without the closing blank line */
    }
out:
    weft__rt_curl_free_headers(headers);
    if (curl != NULL) {
        curl_easy_cleanup(curl);
    }
    return result;
}

weft_err
weft__mcp_http_post(struct weft__mcp_http *h,
                    const char *msg,
                    size_t len,
                    int64_t want_id,
                    uint64_t deadline_mono_ns,
                    long *status,
                    char *err,
                    size_t err_len)
{
    struct xfer x;
    weft_err result = WEFT_OK;
    char last_id[MAX_EVENT_ID] = "";

    xfer_init(&x, h, deadline_mono_ns);
    result = perform(&x, "POST", msg, len, NULL, status, err, err_len);
    snprintf(last_id, sizeof(last_id), "%s", x.last_id);
    /* The stream of a request dropped before its answer: resume it where it broke. */
    for (int i = 0; i < MAX_RESUMES && x.is_sse && want_id >= 0 && last_id[0] != '\0' &&
                    (result == WEFT_OK || result == WEFT_EIO) && !h->answered(h->sink.ctx, want_id);
         i++) {
        struct xfer r;
        long st = 0;
        xfer_init(&r, h, deadline_mono_ns);
        WEFT_LOG(WEFT_LOG_DEBUG, "mcp: resuming an SSE stream after event %s", last_id);
        result = perform(&r, "GET", NULL, 0, last_id, &st, err, err_len);
        if (r.last_id[0] != '\0') {
            snprintf(last_id, sizeof(last_id), "%s", r.last_id);
        }
        if (result == WEFT_EHTTP && st == 405) {
            result = WEFT_EIO; /* the server cannot resume */
            snprintf(err, err_len, "the stream dropped and the server cannot resume it");
            xfer_cleanup(&r);
            break;
        }
        xfer_cleanup(&r);
    }
    if (result == WEFT_OK && want_id >= 0 && x.is_sse && !h->answered(h->sink.ctx, want_id)) {
        snprintf(err, err_len, "the answer stream ended without the response");
        result = WEFT_EIO;
    }
    xfer_cleanup(&x);
    return result;
}

static void *
listener_main(void *arg)
{
    struct weft__mcp_http *h = arg;
    char last_id[MAX_EVENT_ID] = "";
    unsigned delay_ms = 500;

    while (!atomic_load(&h->is_stopping)) {
        struct xfer x;
        long status = 0;
        char err[128];
        weft_err rc = WEFT_OK;

        xfer_init(&x, h, 0);
        rc = perform(&x, "GET", NULL, 0, last_id, &status, err, sizeof(err));
        if (x.last_id[0] != '\0') {
            snprintf(last_id, sizeof(last_id), "%s", x.last_id);
        }
        xfer_cleanup(&x);
        if (rc == WEFT_EHTTP && (status == 405 || status == 404 || status == 400)) {
            WEFT_LOG(WEFT_LOG_DEBUG, "mcp: no standalone stream (HTTP %ld)", status);
            break;
        }
        /* Sleep in small steps so close() is never kept waiting. */
        for (unsigned waited = 0; waited < delay_ms && !atomic_load(&h->is_stopping);
             waited += 50) {
            weft__sleep_ms(50);
        }
        delay_ms = delay_ms < 8000 ? delay_ms * 2 : delay_ms;
    }
    return NULL;
}

weft_err
weft__mcp_http_listen(struct weft__mcp_http *h)
{
    if (h->has_listener) {
        return WEFT_OK;
    }
    if (pthread_create(&h->listener, NULL, listener_main, h) != 0) {
        return WEFT_ENOMEM;
    }
    h->has_listener = true;
    return WEFT_OK;
}

weft_err
weft__mcp_http_parse_url(const char *url, char *host, size_t host_len, int *port)
{
    CURLU *u = NULL;
    char *h = NULL;
    char *p = NULL;
    char *scheme = NULL;
    weft_err result = WEFT_OK;

    u = weft__rt_curl_ready() ? curl_url() : NULL;
    if (u == NULL) {
        return WEFT_ENOMEM;
    }
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT) != CURLUE_OK ||
        (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
        result = WEFT_EINVAL;
    } else if (h[0] == '[') {
        /* An IPv6 literal comes back in brackets; server.address wants the bare address. */
        size_t n = strlen(h);
        snprintf(host, host_len, "%.*s", (int)(n > 2 ? n - 2 : 0), h + 1);
        *port = atoi(p);
    } else {
        snprintf(host, host_len, "%s", h);
        *port = atoi(p);
    }
    curl_free(scheme);
    curl_free(h);
    curl_free(p);
    curl_url_cleanup(u);
    return result;
}

weft_err
weft__mcp_http_new(const struct weft__mcp_server_config *cfg,
                   const struct weft__mcp_sink *sink,
                   struct weft__mcp_http **out,
                   char *err,
                   size_t err_len)
{
    struct weft__mcp_http *h = NULL;
    weft_err result = WEFT_OK;

    *out = NULL;
    h = weft__calloc(1, sizeof(*h));
    if (h == NULL) {
        return WEFT_ENOMEM;
    }
    pthread_mutex_init(&h->lock, NULL);
    atomic_init(&h->is_stopping, false);
    h->sink = *sink;
    h->headers = cfg->headers;
    h->header_count = cfg->header_count;
    h->url = weft__strdup(cfg->url);
    if (h->url == NULL) {
        result = WEFT_ENOMEM;
        goto fail;
    }
    result = weft__mcp_http_parse_url(cfg->url, h->host, sizeof(h->host), &h->port);
    if (result != WEFT_OK) {
        snprintf(err, err_len, "url is not an http(s) URL");
        goto fail;
    }
    *out = h;
    return WEFT_OK;
fail:
    weft__free(h->url);
    pthread_mutex_destroy(&h->lock);
    weft__free(h);
    return result;
}

void
weft__mcp_http_set_answered(struct weft__mcp_http *h, weft__mcp_answered_fn fn)
{
    h->answered = fn;
}

weft_err
weft__mcp_http_set_protocol(struct weft__mcp_http *h, const char *version)
{
    char *copy = weft__strdup(version);

    if (copy == NULL) {
        return WEFT_ENOMEM;
    }
    pthread_mutex_lock(&h->lock);
    weft__free(h->protocol);
    h->protocol = copy;
    pthread_mutex_unlock(&h->lock);
    return WEFT_OK;
}

char *
weft__mcp_http_session_id(struct weft__mcp_http *h)
{
    char *copy = NULL;

    pthread_mutex_lock(&h->lock);
    if (h->session_id != NULL) {
        copy = weft__strdup(h->session_id);
    }
    pthread_mutex_unlock(&h->lock);
    return copy;
}

const char *
weft__mcp_http_host(const struct weft__mcp_http *h)
{
    return h->host;
}

int
weft__mcp_http_port(const struct weft__mcp_http *h)
{
    return h->port;
}

void
weft__mcp_http_close(struct weft__mcp_http *h, unsigned timeout_ms)
{
    bool has_session = false;

    if (h == NULL) {
        return;
    }
    atomic_store(&h->is_stopping, true);
    if (h->has_listener) {
        pthread_join(h->listener, NULL);
    }
    atomic_store(&h->is_stopping, false);
    pthread_mutex_lock(&h->lock);
    has_session = h->session_id != NULL;
    pthread_mutex_unlock(&h->lock);
    if (has_session && timeout_ms > 0) {
        /* The spec's session end: DELETE with the session id (405 means the server keeps
         * sessions until they expire, which is fine too). */
        struct xfer x;
        long status = 0;
        char err[128];
        xfer_init(&x, h, weft__monotonic_ns() + (uint64_t)timeout_ms * 1000000u);
        (void)perform(&x, "DELETE", NULL, 0, NULL, &status, err, sizeof(err));
        xfer_cleanup(&x);
    }
    weft__free(h->url);
    weft__free(h->session_id);
    weft__free(h->protocol);
    pthread_mutex_destroy(&h->lock);
    weft__free(h);
}
