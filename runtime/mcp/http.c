/* runtime/mcp/http.c - the Streamable HTTP transport (MCP 2025-03-26 and later): every message
 * is a POST to the one endpoint; the answer is a JSON body or an SSE stream.
 *
 * Each POST runs on the calling thread with its own HTTP client (net/http_client), so calls from
 * several threads overlap; what the answer carries (notifications, server requests, the response)
 * goes to the sink while the transfer runs, so progress arrives as it happens. An SSE stream that
 * drops before the awaited response came is resumed with GET + Last-Event-ID (at most
 * MAX_RESUMES times) when the server gave event ids. A listener thread keeps the optional
 * standalone GET stream open for messages the server starts itself (list_changed).
 *
 * Headers: Content-Type and Accept per the transport spec, Mcp-Session-Id once the server gave
 * one, MCP-Protocol-Version once negotiated, and the configured headers, which are secrets:
 * they are handed to the client's wiped header lists and never logged or copied anywhere else.
 *
 * Bounds: a JSON body or one SSE event over WEFT__MCP_MAX_MESSAGE ends the transfer as a
 * protocol error; an SSE line is bounded the same way.
 */
#define _GNU_SOURCE /* strcasestr, strncasecmp */

#include "runtime/mcp/transport.h"

#include "net/http_client.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"

#include <ctype.h>
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

static bool
on_header(const char *ptr, size_t len, void *ud)
{
    struct xfer *x = ud;
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
    return true;
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

static bool
on_body(const char *ptr, size_t len, void *ud)
{
    struct xfer *x = ud;

    if (x->is_sse) {
        if (!sse_feed(x, ptr, len)) {
            x->is_too_big = true;
            return false;
        }
        return true;
    }
    if (weft__buf_append(&x->body, ptr, len) != WEFT_OK) {
        x->is_too_big = true;
        return false;
    }
    return true;
}

/* Close and the call's deadline cut a transfer short; the client polls no longer than the
 * time left. */
static bool
should_abort(void *ud, uint32_t *poll_ms)
{
    struct xfer *x = ud;
    uint64_t now = 0;

    if (atomic_load(&x->h->is_stopping)) {
        return true;
    }
    if (x->deadline == 0) {
        return false;
    }
    now = weft__monotonic_ns();
    if (now >= x->deadline) {
        return true;
    }
    if ((x->deadline - now) / 1000000u + 1 < *poll_ms) {
        *poll_ms = (uint32_t)((x->deadline - now) / 1000000u + 1);
    }
    return false;
}

/* The header list of one request (wiped when freed: configured values may be secrets).
 * @return WEFT_OK, WEFT_ENOMEM. */
static weft_err
build_headers(struct weft__mcp_http *h,
              const char *accept,
              bool has_body,
              const char *last_id,
              struct weft__http_headers *list)
{
    weft_err err = weft__http_headers_add_pair(list, "Accept", accept);

    if (err == WEFT_OK && has_body) {
        err = weft__http_headers_add(list, "Content-Type: application/json");
    }
    pthread_mutex_lock(&h->lock);
    if (err == WEFT_OK && h->session_id != NULL) {
        err = weft__http_headers_add_pair(list, "Mcp-Session-Id", h->session_id);
    }
    if (err == WEFT_OK && h->protocol != NULL) {
        err = weft__http_headers_add_pair(list, "MCP-Protocol-Version", h->protocol);
    }
    pthread_mutex_unlock(&h->lock);
    if (err == WEFT_OK && last_id != NULL && last_id[0] != '\0') {
        err = weft__http_headers_add_pair(list, "Last-Event-ID", last_id);
    }
    for (size_t i = 0; err == WEFT_OK && i < h->header_count; i++) {
        err = weft__http_headers_add(list, h->headers[i]);
    }
    return err == WEFT_ENOMEM ? WEFT_ENOMEM : WEFT_OK;
}

/* Run one request, on a client of its own so that calls from several threads overlap.
 * @p method "POST", "GET" or "DELETE". */
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
    struct weft__http_headers headers;
    struct weft__http_client_request req;
    struct weft__http_response resp;
    weft_err rc = WEFT_OK;
    weft_err result = WEFT_OK;

    *status = 0;
    weft__http_headers_init(&headers);
    weft__http_response_init(&resp);
    if (!weft__http_global_init()) {
        snprintf(err, err_len, "libcurl could not be initialised");
        return WEFT_EIO;
    }
    if (build_headers(h,
                      strcmp(method, "POST") == 0 ? "application/json, text/event-stream"
                                                  : "text/event-stream",
                      body != NULL, last_id, &headers) != WEFT_OK) {
        result = WEFT_ENOMEM;
        goto out;
    }
    memset(&req, 0, sizeof(req));
    req.method = method;
    req.url = h->url;
    req.headers = &headers;
    req.has_body = strcmp(method, "POST") == 0;
    req.body = body;
    req.body_len = body_len;
    req.user_agent = "weft-mcp";
    req.connect_timeout_ms = 10000;
    req.on_header = on_header;
    req.on_write = on_body; /* JSON bodies and SSE streams are parsed here, as they arrive */
    req.should_abort = should_abort;
    req.user_data = x;
    rc = weft__http_perform(&req, NULL, &resp);
    *status = resp.status;
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
    } else if (resp.failure == WEFT__HTTP_FAIL_ABORTED || resp.failure == WEFT__HTTP_FAIL_TIMEOUT) {
        snprintf(err, err_len, "no answer in time");
        result = WEFT_ETIMEDOUT;
    } else if (rc != WEFT_OK) {
        snprintf(err, err_len, "%s", resp.error[0] != '\0' ? resp.error : weft_strerror(rc));
        result = rc == WEFT_ENOMEM ? WEFT_ENOMEM : WEFT_EIO;
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
    weft__http_headers_cleanup(&headers);
    weft__http_response_cleanup(&resp);
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
    struct weft__http_url u;
    weft_err result = weft__http_url_parse(url, false, &u);

    if (result == WEFT_ENOMEM) {
        return result;
    }
    if (result != WEFT_OK || u.scheme == NULL || u.host == NULL || u.port == NULL ||
        (strcmp(u.scheme, "http") != 0 && strcmp(u.scheme, "https") != 0)) {
        result = WEFT_EINVAL;
    } else if (u.host[0] == '[') {
        /* An IPv6 literal comes back in brackets; server.address wants the bare address. */
        size_t n = strlen(u.host);
        snprintf(host, host_len, "%.*s", (int)(n > 2 ? n - 2 : 0), u.host + 1);
        *port = atoi(u.port);
    } else {
        snprintf(host, host_len, "%s", u.host);
        *port = atoi(u.port);
    }
    weft__http_url_cleanup(&u);
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
