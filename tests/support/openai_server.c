/* tests/support/openai_server.c - a fake OpenAI chat-completions server on 127.0.0.1.
 *
 * Shaped like tests/support/http_receiver.c: one server thread accepts one connection at a
 * time and serves it with keep-alive until it closes, or until it is idle while another
 * connection waits (curl opens a new one after a timeout). Requests carry Content-Length bodies
 * (what libcurl sends for a POST of a known size). Test and server threads share the reply
 * queue and the request log under one mutex; a recorded request is never changed after it is
 * logged, so the test thread may read it without the lock.
 */
#include "openai_server.h"

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

#define MAX_REQUESTS 256
#define MAX_REPLIES  64
#define MAX_HEADERS  65536
#define MAX_BODY     (16u << 20)

struct reply_entry {
    struct openai_reply r;
    char *strings[9]; /* owned copies the pointers in r point to */
};

struct recorded {
    char method[16];
    char path[512];
    char *headers; /* raw header block */
    char *body;    /* NUL-terminated */
    json_t *json;  /* parsed body, or NULL */
    unsigned conn_id;
};

struct openai_server {
    int listen_fd;
    unsigned short port;
    pthread_t thread;
    pthread_mutex_t lock;
    bool stop;
    char *expected_key;
    struct recorded requests[MAX_REQUESTS];
    size_t count;
    struct reply_entry queue[MAX_REPLIES];
    size_t head;
    size_t len;
    unsigned next_conn;
    unsigned next_id;
};

static char *
dup_or_null(const char *s)
{
    return s == NULL ? NULL : strdup(s);
}

static void
entry_copy(struct reply_entry *dst, const struct openai_reply *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->r = *src;
    dst->r.content = dst->strings[0] = dup_or_null(src->content);
    dst->r.tool_id = dst->strings[1] = dup_or_null(src->tool_id);
    dst->r.tool_name = dst->strings[2] = dup_or_null(src->tool_name);
    dst->r.tool_arguments = dst->strings[3] = dup_or_null(src->tool_arguments);
    dst->r.model = dst->strings[4] = dup_or_null(src->model);
    dst->r.error_message = dst->strings[5] = dup_or_null(src->error_message);
    dst->r.retry_after = dst->strings[6] = dup_or_null(src->retry_after);
    dst->r.content_type = dst->strings[7] = dup_or_null(src->content_type);
    if (src->raw_body != NULL) {
        size_t n = src->raw_len != 0 ? src->raw_len : strlen(src->raw_body);

        dst->strings[8] = malloc(n + 1);
        memcpy(dst->strings[8], src->raw_body, n);
        dst->strings[8][n] = '\0';
        dst->r.raw_body = dst->strings[8];
        dst->r.raw_len = n;
    }
}

static void
entry_free(struct reply_entry *e)
{
    for (size_t i = 0; i < sizeof(e->strings) / sizeof(e->strings[0]); i++) {
        free(e->strings[i]);
    }
    memset(e, 0, sizeof(*e));
}

static bool
stopping(struct openai_server *srv)
{
    bool s = false;

    pthread_mutex_lock(&srv->lock);
    s = srv->stop;
    pthread_mutex_unlock(&srv->lock);
    return s;
}

/* Read more bytes; false on close, error, stop, or (when idle) a newer connection waiting. */
static bool
read_more(struct openai_server *srv, int fd, char *buf, size_t *len, size_t cap, bool idle)
{
    for (;;) {
        struct pollfd p[2] = {{fd, POLLIN, 0}, {srv->listen_fd, POLLIN, 0}};
        int n = poll(p, 2, 20);
        ssize_t got = 0;

        if (stopping(srv)) {
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

static void
sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* OpenAI's error object: {"error": {"message", "type", "param", "code"}}. */
static char *
error_body(int status, const char *message, const char *code)
{
    const char *type = "invalid_request_error";
    json_t *j = NULL;
    char *text = NULL;

    if (status == 429) {
        type = "requests";
        code = code != NULL ? code : "rate_limit_exceeded";
    } else if (status >= 500) {
        type = "server_error";
    }
    if (message == NULL) {
        message = status == 429 ? "Rate limit reached for requests"
                                : "The server had an error while processing your request. Sorry "
                                  "about that!";
    }
    j = json_pack("{s:{s:s,s:s,s:n,s:s?}}", "error", "message", message, "type", type, "param",
                  "code", code);
    text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return text;
}

/* A chat.completion object for a 200 reply. */
static char *
completion_body(const struct openai_reply *r, const char *request_model, unsigned id)
{
    json_t *message =
        json_pack("{s:s,s:o,s:n}", "role", "assistant", "content",
                  r->content != NULL ? json_string(r->content) : json_null(), "refusal");
    json_t *root = NULL;
    char chat_id[48];
    char *text = NULL;

    if (r->tool_name != NULL) {
        json_t *call =
            json_pack("{s:s,s:{s:s,s:s}}", "type", "function", "function", "name", r->tool_name,
                      "arguments", r->tool_arguments != NULL ? r->tool_arguments : "{}");
        if (r->tool_id != NULL) {
            json_object_set_new(call, "id", json_string(r->tool_id));
        }
        json_object_set_new(message, "tool_calls", json_pack("[o]", call));
    }
    snprintf(chat_id, sizeof(chat_id), "chatcmpl-weft%u", id);
    root = json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:o,s:n,s:s}],s:s}", "id", chat_id, "object",
                     "chat.completion", "created", (json_int_t)time(NULL), "model",
                     r->model != NULL        ? r->model
                     : request_model != NULL ? request_model
                                             : "gpt-4o-mini",
                     "choices", "index", 0, "message", message, "logprobs", "finish_reason",
                     r->tool_name != NULL ? "tool_calls" : "stop", "system_fingerprint",
                     "fp_weft_test");
    if (r->prompt_tokens >= 0 || r->completion_tokens >= 0) {
        int64_t in = r->prompt_tokens < 0 ? 0 : r->prompt_tokens;
        int64_t out = r->completion_tokens < 0 ? 0 : r->completion_tokens;

        json_object_set_new(root, "usage",
                            json_pack("{s:I,s:I,s:I}", "prompt_tokens", (json_int_t)in,
                                      "completion_tokens", (json_int_t)out, "total_tokens",
                                      (json_int_t)(in + out)));
    }
    text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

/* What to send for one request, decided under the lock. */
struct answer {
    int status;
    char *body;
    char content_type[64];
    char *retry_after;
    unsigned number; /* for x-request-id */
    unsigned delay_ms;
    bool drop;
};

static void
decide(struct openai_server *srv, const struct recorded *req, struct answer *a)
{
    char auth[512];
    size_t vlen = 0;
    const char *v = find_header(req->headers, "Authorization", &vlen);
    const char *model = json_string_value(json_object_get(req->json, "model"));
    struct reply_entry e;

    memset(a, 0, sizeof(*a));
    a->number = (unsigned)srv->count + 1;
    snprintf(a->content_type, sizeof(a->content_type), "application/json");
    snprintf(auth, sizeof(auth), "%.*s", v == NULL ? 0 : (int)vlen, v == NULL ? "" : v);
    if (srv->expected_key != NULL) {
        bool is_bearer = strncmp(auth, "Bearer ", 7) == 0;

        if (v == NULL || !is_bearer) {
            a->status = 401;
            a->body = error_body(401,
                                 "You didn't provide an API key. You need to provide your API key "
                                 "in an Authorization header using Bearer auth (i.e. "
                                 "Authorization: Bearer YOUR_KEY).",
                                 NULL);
            return;
        }
        if (strcmp(auth + 7, srv->expected_key) != 0) {
            char msg[700];

            /* OpenAI masks the key here; echoing it whole tests the client's scrubbing. */
            snprintf(msg, sizeof(msg),
                     "Incorrect API key provided: %s. You can find your API key at "
                     "https://platform.openai.com/account/api-keys.",
                     auth + 7);
            a->status = 401;
            a->body = error_body(401, msg, "invalid_api_key");
            return;
        }
    }
    if (strcmp(req->method, "POST") != 0 || strcmp(req->path, "/v1/chat/completions") != 0) {
        char msg[600];

        snprintf(msg, sizeof(msg), "Invalid URL (%s %s)", req->method, req->path);
        a->status = 404;
        a->body = error_body(404, msg, NULL);
        return;
    }
    if (!json_is_object(req->json)) {
        a->status = 400;
        a->body = error_body(400,
                             "We could not parse the JSON body of your request. (HINT: This "
                             "likely means you aren't using your HTTP library correctly.)",
                             NULL);
        return;
    }
    if (model == NULL) {
        a->status = 400;
        a->body = error_body(400, "you must provide a model parameter", NULL);
        return;
    }
    if (!json_is_array(json_object_get(req->json, "messages"))) {
        a->status = 400;
        a->body = error_body(400, "Missing required parameter: 'messages'.",
                             "missing_required_parameter");
        return;
    }
    if (srv->len == 0) {
        a->status = 500;
        a->body = error_body(500, NULL, NULL);
        return;
    }
    e = srv->queue[srv->head];
    srv->head = (srv->head + 1) % MAX_REPLIES;
    srv->len--;
    a->status = e.r.status == 0 ? 200 : e.r.status;
    a->delay_ms = e.r.delay_ms;
    a->drop = e.r.drop;
    a->retry_after = dup_or_null(e.r.retry_after);
    if (e.r.raw_body != NULL) {
        a->body = malloc(e.r.raw_len + 1);
        memcpy(a->body, e.r.raw_body, e.r.raw_len + 1);
        if (e.r.content_type != NULL) {
            snprintf(a->content_type, sizeof(a->content_type), "%s", e.r.content_type);
        }
    } else if (a->status == 200) {
        a->body = completion_body(&e.r, model, ++srv->next_id);
    } else {
        a->body = error_body(a->status, e.r.error_message, NULL);
    }
    entry_free(&e);
}

/* Serve requests on one connection until it closes. */
static void
serve(struct openai_server *srv, int fd, unsigned conn_id)
{
    char *buf = malloc(MAX_HEADERS);
    size_t len = 0;

    for (;;) {
        char *end = NULL;
        size_t head_len = 0;
        size_t body_len = 0;
        size_t vlen = 0;
        size_t have = 0;
        const char *cl = NULL;
        struct recorded req;
        struct answer a;
        char head[1024];

        while ((end = find_crlfcrlf(buf, len)) == NULL) {
            if (!read_more(srv, fd, buf, &len, MAX_HEADERS, len == 0)) {
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
        req.body = malloc(body_len + 1);
        have = len - head_len < body_len ? len - head_len : body_len;
        memcpy(req.body, buf + head_len, have);
        memmove(buf, buf + head_len + have, len - head_len - have);
        len -= head_len + have;
        while (have < body_len) {
            struct pollfd p = {fd, POLLIN, 0};
            ssize_t got = 0;

            if (stopping(srv) || poll(&p, 1, 1000) <= 0) {
                break;
            }
            got = recv(fd, req.body + have, body_len - have, 0);
            if (got <= 0) {
                break;
            }
            have += (size_t)got;
        }
        if (have < body_len) {
            free(req.body);
            free(req.headers);
            free(buf);
            return;
        }
        req.body[body_len] = '\0';
        req.json = json_loadb(req.body, body_len, 0, NULL);

        pthread_mutex_lock(&srv->lock);
        decide(srv, &req, &a);
        if (srv->count < MAX_REQUESTS) {
            srv->requests[srv->count++] = req;
        } else {
            free(req.headers);
            free(req.body);
            json_decref(req.json);
        }
        pthread_mutex_unlock(&srv->lock);

        for (unsigned left = a.delay_ms; left > 0 && !stopping(srv);) {
            unsigned step = left > 10 ? 10 : left;

            sleep_ms(step);
            left -= step;
        }
        if (a.drop || stopping(srv)) {
            free(a.body);
            free(a.retry_after);
            free(buf);
            return;
        }
        snprintf(head, sizeof(head),
                 "HTTP/1.1 %d Status\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                 "x-request-id: req_weft%u\r\nopenai-processing-ms: 1\r\n%s%s%s\r\n",
                 a.status, a.content_type, a.body != NULL ? strlen(a.body) : (size_t)0, a.number,
                 a.retry_after != NULL ? "Retry-After: " : "",
                 a.retry_after != NULL ? a.retry_after : "", a.retry_after != NULL ? "\r\n" : "");
        send_all(fd, head, strlen(head));
        if (a.body != NULL) {
            send_all(fd, a.body, strlen(a.body));
        }
        free(a.body);
        free(a.retry_after);
    }
}

static void *
run(void *arg)
{
    struct openai_server *srv = arg;

    while (!stopping(srv)) {
        struct pollfd p = {srv->listen_fd, POLLIN, 0};
        int fd = -1;
        unsigned id = 0;

        if (poll(&p, 1, 20) <= 0) {
            continue;
        }
        fd = accept(srv->listen_fd, NULL, NULL);
        if (fd < 0) {
            continue;
        }
        pthread_mutex_lock(&srv->lock);
        id = ++srv->next_conn;
        pthread_mutex_unlock(&srv->lock);
        serve(srv, fd, id);
        close(fd);
    }
    return NULL;
}

int
openai_server_start(struct openai_server **out)
{
    struct openai_server *srv = calloc(1, sizeof(*srv));
    struct sockaddr_in addr;
    socklen_t alen = sizeof(addr);
    int one = 1;

    if (srv == NULL) {
        return -1;
    }
    srv->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (srv->listen_fd >= 0) {
        setsockopt(srv->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    }
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (srv->listen_fd < 0 || bind(srv->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
        listen(srv->listen_fd, 16) != 0 ||
        getsockname(srv->listen_fd, (struct sockaddr *)&addr, &alen) != 0) {
        if (srv->listen_fd >= 0) {
            close(srv->listen_fd);
        }
        free(srv);
        return -1;
    }
    srv->port = ntohs(addr.sin_port);
    pthread_mutex_init(&srv->lock, NULL);
    if (pthread_create(&srv->thread, NULL, run, srv) != 0) {
        pthread_mutex_destroy(&srv->lock);
        close(srv->listen_fd);
        free(srv);
        return -1;
    }
    *out = srv;
    return 0;
}

void
openai_server_stop(struct openai_server *srv)
{
    if (srv == NULL) {
        return;
    }
    pthread_mutex_lock(&srv->lock);
    srv->stop = true;
    pthread_mutex_unlock(&srv->lock);
    pthread_join(srv->thread, NULL);
    close(srv->listen_fd);
    for (size_t i = 0; i < srv->count; i++) {
        free(srv->requests[i].headers);
        free(srv->requests[i].body);
        json_decref(srv->requests[i].json);
    }
    while (srv->len > 0) {
        entry_free(&srv->queue[srv->head]);
        srv->head = (srv->head + 1) % MAX_REPLIES;
        srv->len--;
    }
    free(srv->expected_key);
    pthread_mutex_destroy(&srv->lock);
    free(srv);
}

unsigned short
openai_server_port(const struct openai_server *srv)
{
    return srv->port;
}

const char *
openai_server_base_url(const struct openai_server *srv, char *buf, size_t len)
{
    snprintf(buf, len, "http://127.0.0.1:%u/v1", (unsigned)srv->port);
    return buf;
}

void
openai_server_expect_key(struct openai_server *srv, const char *key)
{
    char *copy = dup_or_null(key);

    pthread_mutex_lock(&srv->lock);
    free(srv->expected_key);
    srv->expected_key = copy;
    pthread_mutex_unlock(&srv->lock);
}

void
openai_server_push(struct openai_server *srv, const struct openai_reply *reply)
{
    pthread_mutex_lock(&srv->lock);
    if (srv->len < MAX_REPLIES) {
        entry_copy(&srv->queue[(srv->head + srv->len) % MAX_REPLIES], reply);
        srv->len++;
    }
    pthread_mutex_unlock(&srv->lock);
}

void
openai_server_push_text(struct openai_server *srv,
                        const char *content,
                        int64_t prompt_tokens,
                        int64_t completion_tokens)
{
    struct openai_reply r = {0};

    r.content = content;
    r.prompt_tokens = prompt_tokens;
    r.completion_tokens = completion_tokens;
    openai_server_push(srv, &r);
}

void
openai_server_push_tool_call(struct openai_server *srv,
                             const char *call_id,
                             const char *name,
                             const char *arguments_json,
                             int64_t prompt_tokens,
                             int64_t completion_tokens)
{
    struct openai_reply r = {0};

    r.tool_id = call_id;
    r.tool_name = name;
    r.tool_arguments = arguments_json;
    r.prompt_tokens = prompt_tokens;
    r.completion_tokens = completion_tokens;
    openai_server_push(srv, &r);
}

void
openai_server_push_error(struct openai_server *srv,
                         int status,
                         const char *retry_after,
                         const char *message)
{
    struct openai_reply r = {0};

    r.status = status;
    r.retry_after = retry_after;
    r.error_message = message;
    openai_server_push(srv, &r);
}

void
openai_server_push_delay(struct openai_server *srv, unsigned delay_ms, const char *content)
{
    struct openai_reply r = {0};

    r.content = content;
    r.prompt_tokens = -1;
    r.completion_tokens = -1;
    r.delay_ms = delay_ms;
    openai_server_push(srv, &r);
}

size_t
openai_server_request_count(struct openai_server *srv)
{
    size_t n = 0;

    pthread_mutex_lock(&srv->lock);
    n = srv->count;
    pthread_mutex_unlock(&srv->lock);
    return n;
}

static const struct recorded *
request_at(struct openai_server *srv, size_t i)
{
    const struct recorded *req = NULL;

    pthread_mutex_lock(&srv->lock);
    req = i < srv->count ? &srv->requests[i] : NULL;
    pthread_mutex_unlock(&srv->lock);
    return req;
}

const json_t *
openai_server_request_body(struct openai_server *srv, size_t i)
{
    const struct recorded *req = request_at(srv, i);

    return req == NULL ? NULL : req->json;
}

const char *
openai_server_request_text(struct openai_server *srv, size_t i)
{
    const struct recorded *req = request_at(srv, i);

    return req == NULL ? NULL : req->body;
}

const char *
openai_server_request_path(struct openai_server *srv, size_t i)
{
    const struct recorded *req = request_at(srv, i);

    return req == NULL ? NULL : req->path;
}

const char *
openai_server_request_headers(struct openai_server *srv, size_t i)
{
    const struct recorded *req = request_at(srv, i);

    return req == NULL ? NULL : req->headers;
}

unsigned
openai_server_request_conn(struct openai_server *srv, size_t i)
{
    const struct recorded *req = request_at(srv, i);

    return req == NULL ? 0 : req->conn_id;
}

const char *
openai_server_request_header(
    struct openai_server *srv, size_t i, const char *name, char *buf, size_t len)
{
    const struct recorded *req = request_at(srv, i);
    size_t vlen = 0;
    const char *v = req == NULL ? NULL : find_header(req->headers, name, &vlen);

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
