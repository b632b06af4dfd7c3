/* tests/support/openai_server.c - a fake OpenAI chat-completions server on 127.0.0.1.
 *
 * The sockets, the thread and the HTTP framing are tests/support/http_server.c's; this file
 * keeps the OpenAI protocol: the checks a real server makes, the reply queue and the request
 * log. Test and server threads share the queue and the log under one mutex; a recorded request
 * is never changed after it is logged, so the test thread may read it without the lock.
 */
#include "openai_server.h"

#include "http_server.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_REQUESTS 256
#define MAX_REPLIES  64

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
    struct http_server *server;
    pthread_mutex_t lock;
    char *expected_key;
    struct recorded requests[MAX_REQUESTS];
    size_t count;
    struct reply_entry queue[MAX_REPLIES];
    size_t head;
    size_t len;
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
    const char *v = http_find_header(req->headers, "Authorization", &vlen);
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

/* Record one request and answer it. */
static void
on_request(void *user_data, struct http_server_request *in, struct http_server_response *out)
{
    struct openai_server *srv = user_data;
    struct recorded req;
    struct answer a;
    char extra[512];

    memset(&req, 0, sizeof(req));
    snprintf(req.method, sizeof(req.method), "%s", in->method);
    snprintf(req.path, sizeof(req.path), "%s", in->path);
    req.conn_id = in->conn_id;
    req.headers = in->headers;
    req.body = in->body;
    in->headers = NULL;
    in->body = NULL;
    req.json = json_loadb(req.body, in->body_len, 0, NULL);

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

    snprintf(extra, sizeof(extra), "x-request-id: req_weft%u\r\nopenai-processing-ms: 1\r\n%s%s%s",
             a.number, a.retry_after != NULL ? "Retry-After: " : "",
             a.retry_after != NULL ? a.retry_after : "", a.retry_after != NULL ? "\r\n" : "");
    free(a.retry_after);
    out->status = a.status;
    out->content_type = strdup(a.content_type);
    out->headers = strdup(extra);
    out->body = a.body;
    out->body_len = a.body != NULL ? strlen(a.body) : 0;
    out->delay_ms = a.delay_ms;
    out->drop = a.drop;
}

int
openai_server_start(struct openai_server **out)
{
    struct openai_server *srv = calloc(1, sizeof(*srv));

    if (srv == NULL) {
        return -1;
    }
    pthread_mutex_init(&srv->lock, NULL);
    if (http_server_start(on_request, srv, &srv->server) != 0) {
        pthread_mutex_destroy(&srv->lock);
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
    http_server_stop(srv->server);
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
    return http_server_port(srv->server);
}

const char *
openai_server_base_url(const struct openai_server *srv, char *buf, size_t len)
{
    snprintf(buf, len, "http://127.0.0.1:%u/v1", (unsigned)http_server_port(srv->server));
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

    return req == NULL ? NULL : http_header_copy(req->headers, name, buf, len);
}
