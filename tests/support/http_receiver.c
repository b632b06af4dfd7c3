/* tests/support/http_receiver.c - a recording, scriptable HTTP receiver for integration tests.
 * The sockets, the thread and the HTTP framing are tests/support/http_server.c's; this file
 * keeps the script of answers, the request log and gzip bodies. */
#include "http_receiver.h"

#include "base/buf.h"
#include "exporters/gzip.h"
#include "http_server.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_REQUESTS 512
#define MAX_SCRIPT   64
#define MAX_BODY     (80u << 20)

struct scripted {
    struct http_response r;
    char *headers;
    char *body;
    char *content_type;
};

struct http_receiver {
    struct http_server *server;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    struct http_request requests[MAX_REQUESTS];
    size_t count;
    struct scripted script[MAX_SCRIPT];
    size_t script_head;
    size_t script_len;
    struct scripted fallback;
    bool has_fallback;
    http_receiver_handler_fn handler;
    void *handler_data;
};

static void
scripted_copy(struct scripted *dst, const struct http_response *src)
{
    dst->r = *src;
    dst->headers = src->headers != NULL ? strdup(src->headers) : NULL;
    dst->content_type = src->content_type != NULL ? strdup(src->content_type) : NULL;
    if (src->body != NULL) {
        size_t n = src->body_len != 0 ? src->body_len : strlen(src->body);
        dst->body = malloc(n + 1);
        memcpy(dst->body, src->body, n);
        dst->r.body_len = n;
    } else {
        dst->body = NULL;
        dst->r.body_len = 0;
    }
}

static void
scripted_free(struct scripted *s)
{
    free(s->headers);
    free(s->body);
    free(s->content_type);
    memset(s, 0, sizeof(*s));
}

const char *
http_request_header(const struct http_request *req, const char *name, char *buf, size_t len)
{
    return http_header_copy(req->headers, name, buf, len);
}

/* Record one request and choose its answer: the script first, then the handler, then the
 * default response, else 200 with an empty protobuf body. */
static void
on_request(void *user_data, struct http_server_request *in, struct http_server_response *out)
{
    struct http_receiver *r = user_data;
    struct http_request req;
    struct scripted resp;
    char enc[32];

    memset(&req, 0, sizeof(req));
    memset(&resp, 0, sizeof(resp));
    snprintf(req.method, sizeof(req.method), "%s", in->method);
    snprintf(req.path, sizeof(req.path), "%s", in->path);
    req.conn_id = in->conn_id;
    req.headers = in->headers;
    req.body = in->body;
    req.body_len = in->body_len;
    req.wire_len = in->body_len;
    in->headers = NULL;
    in->body = NULL;
    if (http_request_header(&req, "Content-Encoding", enc, sizeof(enc)) != NULL &&
        strcasecmp(enc, "gzip") == 0) {
        struct weft__buf plain;

        weft__buf_init(&plain, MAX_BODY);
        if (weft__gzip_decompress(req.body, req.body_len, &plain) == WEFT_OK) {
            char *body = malloc(plain.len + 1);
            if (body != NULL) {
                memcpy(body, plain.data == NULL ? "" : plain.data, plain.len);
                body[plain.len] = '\0';
                free(req.body);
                req.body = body;
                req.body_len = plain.len;
            }
        }
        weft__buf_cleanup(&plain);
    }

    pthread_mutex_lock(&r->lock);
    if (r->script_len > 0) {
        resp = r->script[r->script_head];
        r->script_head = (r->script_head + 1) % MAX_SCRIPT;
        r->script_len--;
    } else if (r->handler != NULL) {
        http_receiver_handler_fn fn = r->handler;
        void *handler_data = r->handler_data;
        struct http_response answer;

        /* The handler may take its own locks and time: call it without ours. */
        pthread_mutex_unlock(&r->lock);
        memset(&answer, 0, sizeof(answer));
        fn(handler_data, &req, &answer);
        scripted_copy(&resp, &answer);
        pthread_mutex_lock(&r->lock);
    } else if (r->has_fallback) {
        scripted_copy(&resp, &r->fallback.r);
    }
    req.answered = resp.r.drop ? 0 : (resp.r.status == 0 ? 200 : resp.r.status);
    if (r->count < MAX_REQUESTS) {
        r->requests[r->count++] = req;
    } else {
        free(req.headers);
        free(req.body);
    }
    pthread_cond_broadcast(&r->changed);
    pthread_mutex_unlock(&r->lock);

    /* The answer's strings move to the server, which frees them once it is sent. */
    out->status = resp.r.status;
    out->delay_ms = resp.r.delay_ms;
    out->drop = resp.r.drop;
    out->content_type =
        resp.content_type != NULL ? resp.content_type : strdup("application/x-protobuf");
    out->headers = resp.headers;
    out->body = resp.body;
    out->body_len = resp.r.body_len;
}

int
http_receiver_start(struct http_receiver **out)
{
    struct http_receiver *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        return -1;
    }
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->changed, NULL);
    if (http_server_start(on_request, r, &r->server) != 0) {
        pthread_cond_destroy(&r->changed);
        pthread_mutex_destroy(&r->lock);
        free(r);
        return -1;
    }
    *out = r;
    return 0;
}

void
http_receiver_stop(struct http_receiver *r)
{
    if (r == NULL) {
        return;
    }
    http_server_stop(r->server);
    for (size_t i = 0; i < r->count; i++) {
        free(r->requests[i].headers);
        free(r->requests[i].body);
    }
    while (r->script_len > 0) {
        scripted_free(&r->script[r->script_head]);
        r->script_head = (r->script_head + 1) % MAX_SCRIPT;
        r->script_len--;
    }
    scripted_free(&r->fallback);
    pthread_cond_destroy(&r->changed);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

unsigned short
http_receiver_port(const struct http_receiver *r)
{
    return http_server_port(r->server);
}

const char *
http_receiver_url(const struct http_receiver *r, const char *path, char *buf, size_t len)
{
    snprintf(buf, len, "http://127.0.0.1:%u%s", (unsigned)http_server_port(r->server), path);
    return buf;
}

void
http_receiver_push(struct http_receiver *r, const struct http_response *resp)
{
    pthread_mutex_lock(&r->lock);
    if (r->script_len < MAX_SCRIPT) {
        scripted_copy(&r->script[(r->script_head + r->script_len) % MAX_SCRIPT], resp);
        r->script_len++;
    }
    pthread_mutex_unlock(&r->lock);
}

void
http_receiver_set_default(struct http_receiver *r, const struct http_response *resp)
{
    pthread_mutex_lock(&r->lock);
    scripted_free(&r->fallback);
    scripted_copy(&r->fallback, resp);
    r->has_fallback = true;
    pthread_mutex_unlock(&r->lock);
}

void
http_receiver_set_handler(struct http_receiver *r, http_receiver_handler_fn fn, void *user_data)
{
    pthread_mutex_lock(&r->lock);
    r->handler = fn;
    r->handler_data = user_data;
    pthread_mutex_unlock(&r->lock);
}

size_t
http_receiver_count(struct http_receiver *r)
{
    size_t n = 0;

    pthread_mutex_lock(&r->lock);
    n = r->count;
    pthread_mutex_unlock(&r->lock);
    return n;
}

bool
http_receiver_wait(struct http_receiver *r, size_t n, unsigned timeout_ms)
{
    struct timespec ts;
    bool ok = false;

    ts = http_deadline_in(timeout_ms);
    pthread_mutex_lock(&r->lock);
    while (!(ok = r->count >= n)) {
        if (pthread_cond_timedwait(&r->changed, &r->lock, &ts) == ETIMEDOUT) {
            ok = r->count >= n;
            break;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return ok;
}

const struct http_request *
http_receiver_request(struct http_receiver *r, size_t i)
{
    const struct http_request *req = NULL;

    pthread_mutex_lock(&r->lock);
    req = i < r->count ? &r->requests[i] : NULL;
    pthread_mutex_unlock(&r->lock);
    return req;
}
