/* tests/support/http_server.c - the shared HTTP/1.1 server skeleton (see http_server.h).
 *
 * One connection buffer grows as a request needs it; bytes past the end of one request stay
 * in it for the next (pipelining and keep-alive). Reads poll in short slices so that a stop is
 * seen within 20 ms, and a read in the middle of a request gives up after 2 s of silence.
 */
#include "http_server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_HEADERS   65536
#define MAX_BODY      (80u << 20)
#define POLL_SLICE_MS 20
#define STALL_MS      2000

struct http_server {
    int listen_fd;
    unsigned short port;
    pthread_t thread;
    pthread_mutex_t lock;
    bool stop;
    http_server_handler_fn fn;
    void *user_data;
    unsigned next_conn; /* server thread only */
};

struct conn {
    int fd;
    char *buf;
    size_t len;
    size_t cap;
};

static bool
stopping(struct http_server *s)
{
    bool stop = false;

    pthread_mutex_lock(&s->lock);
    stop = s->stop;
    pthread_mutex_unlock(&s->lock);
    return stop;
}

/* Read until the buffer holds @p need bytes. False on close, error, stop, silence in the middle
 * of a request, or (when @p idle: between requests) a newer connection waiting. */
static bool
fill(struct http_server *s, struct conn *c, size_t need, bool idle)
{
    unsigned silent_ms = 0;

    if (need > MAX_HEADERS + (size_t)MAX_BODY + 64) {
        return false;
    }
    if (need > c->cap) {
        size_t cap = c->cap * 2 > need ? c->cap * 2 : need;
        char *grown = NULL;

        cap = cap < 65536 ? 65536 : cap;
        grown = realloc(c->buf, cap);
        if (grown == NULL) {
            return false;
        }
        c->buf = grown;
        c->cap = cap;
    }
    while (c->len < need) {
        struct pollfd p[2] = {{c->fd, POLLIN, 0}, {s->listen_fd, POLLIN, 0}};
        int n = poll(p, 2, POLL_SLICE_MS);
        ssize_t got = 0;

        if (stopping(s)) {
            return false;
        }
        if (n <= 0 || !(p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            if (idle && (p[1].revents & POLLIN)) {
                return false;
            }
            silent_ms += POLL_SLICE_MS;
            if (!idle && silent_ms >= STALL_MS) {
                return false;
            }
            continue;
        }
        got = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (got <= 0) {
            return false;
        }
        c->len += (size_t)got;
        silent_ms = 0;
    }
    return true;
}

static size_t
find_from(const struct conn *c, size_t from, const char *needle)
{
    size_t n = strlen(needle);

    for (size_t i = from; i + n <= c->len; i++) {
        if (memcmp(c->buf + i, needle, n) == 0) {
            return i;
        }
    }
    return (size_t)-1;
}

/* The index of the next "\r\n" at or after @p from, reading more as needed; -1 on failure. */
static size_t
line_end(struct http_server *s, struct conn *c, size_t from, size_t max, bool idle)
{
    for (;;) {
        size_t at = find_from(c, from, "\r\n");
        if (at != (size_t)-1) {
            return at;
        }
        if (c->len - from > max || !fill(s, c, c->len + 1, idle)) {
            return (size_t)-1;
        }
        idle = false;
    }
}

/* Read a chunked body starting at @p pos into req; @p pos ends past the last CRLF. */
static bool
read_chunked(struct http_server *s, struct conn *c, size_t *pos, struct http_server_request *req)
{
    size_t cap = 0;

    for (;;) {
        size_t eol = line_end(s, c, *pos, 64, false);
        char *endp = NULL;
        unsigned long long size = 0;

        if (eol == (size_t)-1) {
            return false;
        }
        size = strtoull(c->buf + *pos, &endp, 16);
        if (endp == c->buf + *pos || (*endp != '\r' && *endp != ';') ||
            size > MAX_BODY - req->body_len) {
            return false;
        }
        *pos = eol + 2;
        if (size == 0) {
            break;
        }
        if (!fill(s, c, *pos + size + 2, false) || memcmp(c->buf + *pos + size, "\r\n", 2) != 0) {
            return false;
        }
        if (req->body_len + size + 1 > cap) {
            size_t want = (req->body_len + size + 1) * 2;
            char *grown = realloc(req->body, want);
            if (grown == NULL) {
                return false;
            }
            req->body = grown;
            cap = want;
        }
        memcpy(req->body + req->body_len, c->buf + *pos, size);
        req->body_len += size;
        *pos += size + 2;
    }
    /* Trailer lines until an empty one. */
    for (;;) {
        size_t eol = line_end(s, c, *pos, MAX_HEADERS, false);
        if (eol == (size_t)-1) {
            return false;
        }
        if (eol == *pos) {
            *pos = eol + 2;
            break;
        }
        *pos = eol + 2;
    }
    if (req->body == NULL) {
        req->body = malloc(1);
        if (req->body == NULL) {
            return false;
        }
    }
    req->body[req->body_len] = '\0';
    return true;
}

/* Read the next request of the connection into req (zeroed by the caller). */
static bool
read_request(struct http_server *s, struct conn *c, struct http_server_request *req)
{
    size_t end = (size_t)-1;
    size_t pos = 0;
    size_t vlen = 0;
    const char *sp1 = NULL;
    const char *sp2 = NULL;
    const char *eol = NULL;
    const char *v = NULL;
    char te[64];

    while ((end = find_from(c, 0, "\r\n\r\n")) == (size_t)-1) {
        if (c->len >= MAX_HEADERS || !fill(s, c, c->len + 1, c->len == 0)) {
            return false;
        }
    }
    pos = end + 4;
    sp1 = memchr(c->buf, ' ', end);
    sp2 = sp1 == NULL ? NULL : memchr(sp1 + 1, ' ', end - (size_t)(sp1 + 1 - c->buf));
    eol = memchr(c->buf, '\r', end + 1);
    if (sp1 == NULL || sp2 == NULL || eol == NULL || sp2 > eol) {
        return false;
    }
    snprintf(req->method, sizeof(req->method), "%.*s", (int)(sp1 - c->buf), c->buf);
    snprintf(req->path, sizeof(req->path), "%.*s", (int)(sp2 - sp1 - 1), sp1 + 1);
    req->headers = strndup(eol + 2, (size_t)(c->buf + end + 2 - (eol + 2)));
    if (req->headers == NULL) {
        return false;
    }
    if (http_header_copy(req->headers, "Transfer-Encoding", te, sizeof(te)) != NULL) {
        for (char *t = te; *t != '\0'; t++) {
            *t = (char)tolower((unsigned char)*t);
        }
    } else {
        te[0] = '\0';
    }
    if (strstr(te, "chunked") != NULL) {
        if (!read_chunked(s, c, &pos, req)) {
            return false;
        }
    } else {
        v = http_find_header(req->headers, "Content-Length", &vlen);
        req->body_len = v != NULL ? strtoull(v, NULL, 10) : 0;
        if (req->body_len > MAX_BODY || !fill(s, c, pos + req->body_len, false)) {
            return false;
        }
        req->body = malloc(req->body_len + 1);
        if (req->body == NULL) {
            return false;
        }
        memcpy(req->body, c->buf + pos, req->body_len);
        req->body[req->body_len] = '\0';
        pos += req->body_len;
    }
    /* Keep what follows (the next request) at the start of the buffer. */
    memmove(c->buf, c->buf + pos, c->len - pos);
    c->len -= pos;
    return true;
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

static void
response_free(struct http_server_response *resp)
{
    free(resp->content_type);
    free(resp->headers);
    free(resp->body);
    memset(resp, 0, sizeof(*resp));
}

/* Answer @p resp on @p fd; false when the connection is to be closed. */
static bool
answer(struct http_server *s, int fd, const struct http_server_response *resp)
{
    char head[1024];

    for (unsigned left = resp->delay_ms; left > 0 && !stopping(s);) {
        unsigned step = left > 10 ? 10 : left;
        struct timespec ts = {0, (long)step * 1000000L};

        nanosleep(&ts, NULL);
        left -= step;
    }
    if (resp->drop || stopping(s)) {
        return false;
    }
    snprintf(head, sizeof(head), "HTTP/1.1 %d Status\r\n%s%s%sContent-Length: %zu\r\n",
             resp->status == 0 ? 200 : resp->status,
             resp->content_type != NULL ? "Content-Type: " : "",
             resp->content_type != NULL ? resp->content_type : "",
             resp->content_type != NULL ? "\r\n" : "", resp->body != NULL ? resp->body_len : 0);
    send_all(fd, head, strlen(head));
    if (resp->headers != NULL) {
        send_all(fd, resp->headers, strlen(resp->headers));
    }
    send_all(fd, "\r\n", 2);
    if (resp->body != NULL) {
        send_all(fd, resp->body, resp->body_len);
    }
    return true;
}

/* Serve requests on one connection until it closes. */
static void
serve(struct http_server *s, int fd, unsigned conn_id)
{
    struct conn c = {fd, NULL, 0, 0};

    for (;;) {
        struct http_server_request req;
        struct http_server_response resp;
        bool is_open = false;

        memset(&req, 0, sizeof(req));
        memset(&resp, 0, sizeof(resp));
        req.conn_id = conn_id;
        if (!read_request(s, &c, &req)) {
            free(req.headers);
            free(req.body);
            break;
        }
        s->fn(s->user_data, &req, &resp);
        free(req.headers);
        free(req.body);
        is_open = answer(s, fd, &resp);
        response_free(&resp);
        if (!is_open) {
            break;
        }
    }
    free(c.buf);
}

static void *
run(void *arg)
{
    struct http_server *s = arg;

    while (!stopping(s)) {
        struct pollfd p = {s->listen_fd, POLLIN, 0};
        int fd = -1;

        if (poll(&p, 1, POLL_SLICE_MS) <= 0) {
            continue;
        }
        fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0) {
            continue;
        }
        serve(s, fd, ++s->next_conn);
        close(fd);
    }
    return NULL;
}

int
http_server_start(http_server_handler_fn fn, void *user_data, struct http_server **out)
{
    struct http_server *s = calloc(1, sizeof(*s));
    struct sockaddr_in addr;
    socklen_t alen = sizeof(addr);
    int one = 1;

    *out = NULL;
    if (s == NULL) {
        return -1;
    }
    s->fn = fn;
    s->user_data = user_data;
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->listen_fd >= 0) {
        setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    }
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (s->listen_fd < 0 || bind(s->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
        listen(s->listen_fd, 16) != 0 ||
        getsockname(s->listen_fd, (struct sockaddr *)&addr, &alen) != 0) {
        if (s->listen_fd >= 0) {
            close(s->listen_fd);
        }
        free(s);
        return -1;
    }
    s->port = ntohs(addr.sin_port);
    pthread_mutex_init(&s->lock, NULL);
    if (pthread_create(&s->thread, NULL, run, s) != 0) {
        pthread_mutex_destroy(&s->lock);
        close(s->listen_fd);
        free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void
http_server_stop(struct http_server *s)
{
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    close(s->listen_fd);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

unsigned short
http_server_port(const struct http_server *s)
{
    return s->port;
}

const char *
http_find_header(const char *headers, const char *name, size_t *vlen)
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
http_header_copy(const char *headers, const char *name, char *buf, size_t len)
{
    size_t vlen = 0;
    const char *v = http_find_header(headers, name, &vlen);

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
