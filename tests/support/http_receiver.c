/* tests/support/http_receiver.c - a small real HTTP/1.1 server for integration tests. */
#include "http_receiver.h"

#include "base/buf.h"
#include "exporters/gzip.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_REQUESTS 512
#define MAX_SCRIPT   64
#define MAX_HEADERS  65536
#define MAX_BODY     (80u << 20)

struct scripted {
    struct http_response r;
    char *headers;
    char *body;
    char *content_type;
};

struct http_receiver {
    int listen_fd;
    unsigned short port;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    bool stop;
    struct http_request requests[MAX_REQUESTS];
    size_t count;
    struct scripted script[MAX_SCRIPT];
    size_t script_head;
    size_t script_len;
    struct scripted fallback;
    bool has_fallback;
    http_receiver_handler_fn handler;
    void *handler_data;
    unsigned next_conn;
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

static bool
stopping(struct http_receiver *r)
{
    bool s = false;

    pthread_mutex_lock(&r->lock);
    s = r->stop;
    pthread_mutex_unlock(&r->lock);
    return s;
}

/* Read more bytes into buf; false on close, error or stop. Switches away (false) when a new
 * connection waits on the listening socket and this one is idle. */
static bool
read_more(struct http_receiver *r, int fd, char *buf, size_t *len, size_t cap, bool idle)
{
    for (;;) {
        struct pollfd p[2] = {{fd, POLLIN, 0}, {r->listen_fd, POLLIN, 0}};
        int n = poll(p, 2, 50);
        ssize_t got = 0;

        if (stopping(r)) {
            return false;
        }
        if (n <= 0) {
            continue;
        }
        if (idle && (p[1].revents & POLLIN) && !(p[0].revents & POLLIN)) {
            return false;
        }
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            continue;
        }
        if (*len >= cap) {
            return false;
        }
        got = recv(fd, buf + *len, cap - *len, 0);
        if (got <= 0) {
            return false;
        }
        *len += (size_t)got;
        return true;
    }
}

static char *
find_crlfcrlf(char *buf, size_t len)
{
    for (size_t i = 0; i + 4 <= len; i++) {
        if (memcmp(buf + i, "\r\n\r\n", 4) == 0) {
            return buf + i;
        }
    }
    return NULL;
}

static void
send_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n <= 0) {
            return;
        }
        data += n;
        len -= (size_t)n;
    }
}

static const char *
find_header(const char *headers, const char *name, size_t *vlen)
{
    size_t nlen = strlen(name);
    const char *p = headers;

    while (p != NULL && *p != '\0') {
        const char *eol = strstr(p, "\r\n");
        if (eol == NULL) {
            break;
        }
        if ((size_t)(eol - p) > nlen && strncasecmp(p, name, nlen) == 0 && p[nlen] == ':') {
            const char *v = p + nlen + 1;
            while (*v == ' ' || *v == '\t') {
                v++;
            }
            *vlen = (size_t)(eol - v);
            return v;
        }
        p = eol + 2;
    }
    return NULL;
}

const char *
http_request_header(const struct http_request *req, const char *name, char *buf, size_t len)
{
    size_t vlen = 0;
    const char *v = find_header(req->headers, name, &vlen);

    if (v == NULL || len == 0) {
        return NULL;
    }
    if (vlen >= len) {
        vlen = len - 1;
    }
    memcpy(buf, v, vlen);
    buf[vlen] = '\0';
    return buf;
}

static void
sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Serve requests on one connection until it closes. */
static void
serve(struct http_receiver *r, int fd, unsigned conn_id)
{
    char *buf = malloc(MAX_HEADERS);
    size_t len = 0;

    for (;;) {
        char *end = NULL;
        size_t head_len = 0;
        size_t body_len = 0;
        size_t vlen = 0;
        const char *cl = NULL;
        char *body = NULL;
        size_t have = 0;
        struct http_request req;
        struct scripted resp;
        bool from_script = false;
        char line[512];

        while ((end = find_crlfcrlf(buf, len)) == NULL) {
            if (!read_more(r, fd, buf, &len, MAX_HEADERS, len == 0)) {
                free(buf);
                return;
            }
        }
        head_len = (size_t)(end - buf) + 4;
        memset(&req, 0, sizeof(req));
        req.conn_id = conn_id;
        {
            const char *sp1 = memchr(buf, ' ', head_len);
            const char *sp2 =
                sp1 == NULL ? NULL : memchr(sp1 + 1, ' ', head_len - (size_t)(sp1 + 1 - buf));
            const char *eol = strstr(buf, "\r\n");
            if (sp1 == NULL || sp2 == NULL || eol == NULL) {
                free(buf);
                return;
            }
            snprintf(req.method, sizeof(req.method), "%.*s", (int)(sp1 - buf), buf);
            snprintf(req.path, sizeof(req.path), "%.*s", (int)(sp2 - sp1 - 1), sp1 + 1);
            req.headers = strndup(eol + 2, (size_t)(end + 2 - (eol + 2)));
        }
        cl = find_header(req.headers, "Content-Length", &vlen);
        body_len = cl != NULL ? strtoull(cl, NULL, 10) : 0;
        if (body_len > MAX_BODY) {
            free(req.headers);
            free(buf);
            return;
        }
        body = malloc(body_len + 1);
        have = len - head_len < body_len ? len - head_len : body_len;
        memcpy(body, buf + head_len, have);
        memmove(buf, buf + head_len + have, len - head_len - have);
        len -= head_len + have;
        while (have < body_len) {
            ssize_t got = 0;
            struct pollfd p = {fd, POLLIN, 0};
            if (stopping(r) || poll(&p, 1, 1000) <= 0) {
                break;
            }
            got = recv(fd, body + have, body_len - have, 0);
            if (got <= 0) {
                break;
            }
            have += (size_t)got;
        }
        if (have < body_len) {
            free(body);
            free(req.headers);
            free(buf);
            return;
        }
        body[body_len] = '\0';
        req.wire_len = body_len;
        {
            char enc[32];
            if (http_request_header(&req, "Content-Encoding", enc, sizeof(enc)) != NULL &&
                strcasecmp(enc, "gzip") == 0) {
                struct weft__buf out;
                weft__buf_init(&out, MAX_BODY);
                if (weft__gzip_decompress(body, body_len, &out) == WEFT_OK) {
                    free(body);
                    body = malloc(out.len + 1);
                    memcpy(body, out.data == NULL ? "" : out.data, out.len);
                    body[out.len] = '\0';
                    body_len = out.len;
                }
                weft__buf_cleanup(&out);
            }
        }
        req.body = body;
        req.body_len = body_len;

        pthread_mutex_lock(&r->lock);
        if (r->script_len > 0) {
            resp = r->script[r->script_head];
            r->script_head = (r->script_head + 1) % MAX_SCRIPT;
            r->script_len--;
            from_script = true;
        } else if (r->handler != NULL) {
            http_receiver_handler_fn fn = r->handler;
            void *user_data = r->handler_data;
            struct http_response answer;

            /* The handler may take its own locks and time: call it without ours. */
            pthread_mutex_unlock(&r->lock);
            memset(&answer, 0, sizeof(answer));
            fn(user_data, &req, &answer);
            scripted_copy(&resp, &answer);
            from_script = true;
            pthread_mutex_lock(&r->lock);
        } else if (r->has_fallback) {
            scripted_copy(&resp, &r->fallback.r);
            from_script = true;
        } else {
            memset(&resp, 0, sizeof(resp));
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

        if (resp.r.delay_ms > 0) {
            unsigned left = resp.r.delay_ms;
            while (left > 0 && !stopping(r)) {
                unsigned step = left > 20 ? 20 : left;
                sleep_ms(step);
                left -= step;
            }
        }
        if (resp.r.drop) {
            if (from_script) {
                scripted_free(&resp);
            }
            free(buf);
            return;
        }
        snprintf(line, sizeof(line),
                 "HTTP/1.1 %d Status\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n",
                 resp.r.status == 0 ? 200 : resp.r.status,
                 resp.content_type != NULL ? resp.content_type : "application/x-protobuf",
                 resp.r.body_len, resp.headers != NULL ? resp.headers : "");
        send_all(fd, line, strlen(line));
        if (resp.body != NULL) {
            send_all(fd, resp.body, resp.r.body_len);
        }
        if (from_script) {
            scripted_free(&resp);
        }
    }
}

static void *
run(void *arg)
{
    struct http_receiver *r = arg;

    while (!stopping(r)) {
        struct pollfd p = {r->listen_fd, POLLIN, 0};
        int fd = -1;
        unsigned id = 0;

        if (poll(&p, 1, 50) <= 0) {
            continue;
        }
        fd = accept(r->listen_fd, NULL, NULL);
        if (fd < 0) {
            continue;
        }
        pthread_mutex_lock(&r->lock);
        id = ++r->next_conn;
        pthread_mutex_unlock(&r->lock);
        serve(r, fd, id);
        close(fd);
    }
    return NULL;
}

int
http_receiver_start(struct http_receiver **out)
{
    struct http_receiver *r = calloc(1, sizeof(*r));
    struct sockaddr_in addr;
    socklen_t alen = sizeof(addr);
    int one = 1;

    if (r == NULL) {
        return -1;
    }
    r->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(r->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (r->listen_fd < 0 || bind(r->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
        listen(r->listen_fd, 16) != 0 ||
        getsockname(r->listen_fd, (struct sockaddr *)&addr, &alen) != 0) {
        if (r->listen_fd >= 0) {
            close(r->listen_fd);
        }
        free(r);
        return -1;
    }
    r->port = ntohs(addr.sin_port);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->changed, NULL);
    if (pthread_create(&r->thread, NULL, run, r) != 0) {
        close(r->listen_fd);
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
    pthread_mutex_lock(&r->lock);
    r->stop = true;
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    close(r->listen_fd);
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
    return r->port;
}

const char *
http_receiver_url(const struct http_receiver *r, const char *path, char *buf, size_t len)
{
    snprintf(buf, len, "http://127.0.0.1:%u%s", (unsigned)r->port, path);
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

struct timespec
http_deadline_in(unsigned timeout_ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
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
