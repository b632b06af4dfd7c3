/* tests/support/langfuse_server.c - a Langfuse-compatible test server (see langfuse_server.h).
 *
 * It is a request handler on top of tests/support/http_receiver.c: the receiver owns the
 * socket, the connection handling, gunzip and the record of raw requests; this file decides
 * every answer. The handler runs on the receiver's single thread, so answers are computed one
 * at a time; the state they touch (spans, scores, prompts, scripted trouble, counters) is
 * guarded by one mutex because tests read it from their own thread.
 *
 * Invariants: span_count <= MAX_SPANS, every stored span and score is owned by the server
 * (json_t references), and a trace request is stored whole or not at all.
 */
#include "langfuse_server.h"

#include "base/mem.h"
#include "base/str.h"
#include "otlp_decode.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_SPANS       100000u
#define MAX_SCORES      10000u
#define MAX_PROMPTS     64u
#define MAX_BODY_BYTES  (5u << 20) /* REFERENCE.md: Langfuse refuses larger requests */
#define TRACES_PATH     "/api/public/otel/v1/traces"
#define SCORES_PATH     "/api/public/scores"
#define PROMPTS_PREFIX  "/api/public/v2/prompts/"
#define MAX_ENVIRONMENT 40

struct prompt {
    char *name;
    int version;
    json_t *doc; /* the answer body */
};

struct langfuse_server {
    struct http_receiver *rx;
    char *public_key;
    char *secret_key;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    json_t *spans;  /* array */
    json_t *scores; /* array */
    struct prompt prompts[MAX_PROMPTS];
    size_t prompt_count;
    unsigned fail_count;
    int fail_status;
    unsigned fail_retry_after_s;
    uint64_t down_until_ns;
    unsigned delay_ms;
    unsigned next_score_id;
    struct langfuse_server_stats stats;
    char last_error[256];
    /* The current answer: valid until the next request (http_receiver copies it). Touched by
     * the receiver's thread only. */
    char *reply_body;
    char reply_headers[64];
};

static uint64_t
monotonic_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------------------------ */
/* Answers                                                                                     */

/* Answer @p status with the JSON @p body (stolen). Called with the lock held. */
static void
reply_json(struct langfuse_server *s, struct http_response *resp, int status, json_t *body)
{
    free(s->reply_body);
    s->reply_body = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    resp->status = status;
    resp->content_type = "application/json";
    resp->body = s->reply_body != NULL ? s->reply_body : "{}";
    resp->body_len = strlen(resp->body);
}

/* Answer an error as Langfuse does: {"error": ..., "message": ...}; keep the message for
 * langfuse_server_last_error(). Called with the lock held. */
static void reply_error(struct langfuse_server *s,
                        struct http_response *resp,
                        int status,
                        const char *error,
                        const char *fmt,
                        ...) __attribute__((format(printf, 5, 6)));

static void
reply_error(struct langfuse_server *s,
            struct http_response *resp,
            int status,
            const char *error,
            const char *fmt,
            ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(s->last_error, sizeof(s->last_error), fmt, ap);
    va_end(ap);
    reply_json(s, resp, status, json_pack("{s:s, s:s}", "error", error, "message", s->last_error));
}

/* ------------------------------------------------------------------------------------------ */
/* Authentication                                                                              */

static int
b64_value(char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '+') {
        return 62;
    }
    if (c == '/') {
        return 63;
    }
    return -1;
}

/* Decode standard base64 (with padding) into out. @return false on bad input or overflow. */
static bool
b64_decode(const char *in, char *out, size_t cap)
{
    size_t len = strlen(in);
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;

    while (len > 0 && in[len - 1] == '=') {
        len--;
    }
    for (size_t i = 0; i < len; i++) {
        int v = b64_value(in[i]);
        if (v < 0) {
            return false;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n + 1 >= cap) {
                return false;
            }
            out[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[n] = '\0';
    return true;
}

static bool
is_authorised(const struct langfuse_server *s, const struct http_request *req)
{
    char header[1024];
    char pair[768];
    const char *colon = NULL;

    if (http_request_header(req, "Authorization", header, sizeof(header)) == NULL ||
        strncasecmp(header, "Basic ", 6) != 0 || !b64_decode(header + 6, pair, sizeof(pair))) {
        return false;
    }
    colon = strchr(pair, ':');
    return colon != NULL && strlen(s->public_key) == (size_t)(colon - pair) &&
           strncmp(pair, s->public_key, (size_t)(colon - pair)) == 0 &&
           strcmp(colon + 1, s->secret_key) == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Traces                                                                                      */

/* A valid id: 2 * @p bytes lowercase hex digits, not all zero. */
static bool
is_valid_id(const json_t *id, size_t bytes)
{
    const char *text = json_string_value(id);
    bool is_zero = true;

    if (text == NULL || strlen(text) != 2 * bytes) {
        return false;
    }
    for (size_t i = 0; i < 2 * bytes; i++) {
        char c = text[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
        if (c != '0') {
            is_zero = false;
        }
    }
    return !is_zero;
}

/* Check every span of a decoded request; @return NULL or what is wrong (in buf). */
static const char *
check_spans(const json_t *request, char *buf, size_t len, size_t *count)
{
    const json_t *rs_list = json_object_get(request, "resourceSpans");
    const json_t *rs = NULL;
    size_t i = 0;

    *count = 0;
    if (rs_list != NULL && !json_is_array(rs_list)) {
        return "resourceSpans is not an array";
    }
    json_array_foreach(rs_list, i, rs)
    {
        const json_t *ss = NULL;
        size_t j = 0;
        json_array_foreach(json_object_get(rs, "scopeSpans"), j, ss)
        {
            const json_t *sp = NULL;
            size_t k = 0;
            json_array_foreach(json_object_get(ss, "spans"), k, sp)
            {
                const char *name = json_string_value(json_object_get(sp, "name"));
                if (!is_valid_id(json_object_get(sp, "traceId"), 16)) {
                    snprintf(buf, len, "span '%s': invalid traceId (need 16 bytes, not all zero)",
                             name != NULL ? name : "");
                    return buf;
                }
                if (!is_valid_id(json_object_get(sp, "spanId"), 8)) {
                    snprintf(buf, len, "span '%s': invalid spanId (need 8 bytes, not all zero)",
                             name != NULL ? name : "");
                    return buf;
                }
                (*count)++;
            }
        }
    }
    return NULL;
}

static void
store_spans(struct langfuse_server *s, const json_t *request)
{
    const json_t *rs = NULL;
    size_t i = 0;

    json_array_foreach(json_object_get(request, "resourceSpans"), i, rs)
    {
        const json_t *ss = NULL;
        size_t j = 0;
        json_array_foreach(json_object_get(rs, "scopeSpans"), j, ss)
        {
            json_t *sp = NULL;
            size_t k = 0;
            json_array_foreach(json_object_get(ss, "spans"), k, sp)
            {
                if (json_array_size(s->spans) >= MAX_SPANS ||
                    json_array_append(s->spans, sp) != 0) {
                    s->stats.spans_overflow++;
                    continue;
                }
                s->stats.spans_stored++;
            }
        }
    }
}

/* The media type of a Content-Type value, without parameters, into buf. */
static const char *
media_type(const struct http_request *req, char *buf, size_t len)
{
    char *semi = NULL;
    size_t n = 0;

    if (http_request_header(req, "Content-Type", buf, len) == NULL) {
        return "";
    }
    semi = strchr(buf, ';');
    if (semi != NULL) {
        *semi = '\0';
    }
    n = strlen(buf);
    while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\t')) {
        buf[--n] = '\0';
    }
    return buf;
}

static void
handle_traces(struct langfuse_server *s, const struct http_request *req, struct http_response *resp)
{
    char version[32];
    char type[128];
    char why[256];
    const char *media = media_type(req, type, sizeof(type));
    const char *problem = NULL;
    bool is_json = strcasecmp(media, "application/json") == 0;
    struct weft_test_otlp_error err;
    json_t *request = NULL;
    size_t count = 0;

    if (strcmp(req->method, "POST") != 0) {
        reply_error(s, resp, 405, "MethodNotAllowedError", "%s: use POST", req->method);
        return;
    }
    s->stats.trace_requests++;
    if (s->fail_count > 0) {
        s->fail_count--;
        s->stats.trace_scripted++;
        if (s->fail_status == 0) {
            s->stats.dropped++;
            resp->drop = true;
            return;
        }
        reply_error(s, resp, s->fail_status, "ScriptedError", "scripted failure %d",
                    s->fail_status);
        if (s->fail_retry_after_s > 0) {
            snprintf(s->reply_headers, sizeof(s->reply_headers), "Retry-After: %u\r\n",
                     s->fail_retry_after_s);
            resp->headers = s->reply_headers;
        }
        return;
    }
    if (http_request_header(req, "x-langfuse-ingestion-version", version, sizeof(version)) ==
            NULL ||
        strcmp(version, "4") != 0) {
        s->stats.missing_ingestion_version++;
        s->stats.trace_rejected++;
        reply_error(s, resp, 400, "InvalidRequestError",
                    "x-langfuse-ingestion-version: 4 is required");
        return;
    }
    if (!is_json && strcasecmp(media, "application/x-protobuf") != 0) {
        s->stats.trace_unsupported++;
        reply_error(s, resp, 415, "UnsupportedMediaTypeError",
                    "Content-Type '%s': expected application/x-protobuf or application/json",
                    media);
        return;
    }
    if (req->body_len > MAX_BODY_BYTES) {
        s->stats.trace_rejected++;
        reply_error(s, resp, 413, "PayloadTooLargeError", "request of %zu bytes", req->body_len);
        return;
    }
    if (is_json) {
        json_error_t jerr;
        request = json_loadb(req->body, req->body_len, 0, &jerr);
        if (request == NULL) {
            snprintf(why, sizeof(why), "invalid JSON: %.160s", jerr.text);
            problem = why;
        }
    } else {
        request = weft_test_otlp_decode_request(req->body, req->body_len, 0, &err);
        if (request == NULL) {
            snprintf(why, sizeof(why), "invalid protobuf: %.200s", err.text);
            problem = why;
        }
    }
    if (problem == NULL && !json_is_object(request)) {
        problem = "the body is not an ExportTraceServiceRequest";
    }
    if (problem == NULL) {
        problem = check_spans(request, why, sizeof(why), &count);
    }
    if (problem != NULL) {
        /* One bad span refuses the whole request, as Langfuse does. */
        s->stats.trace_rejected++;
        reply_error(s, resp, 400, "InvalidRequestError", "%s", problem);
        json_decref(request);
        return;
    }
    store_spans(s, request);
    json_decref(request);
    s->stats.trace_accepted++;
    pthread_cond_broadcast(&s->changed);
    reply_json(s, resp, 200, json_object());
    resp->delay_ms = s->delay_ms;
}

/* ------------------------------------------------------------------------------------------ */
/* Scores                                                                                      */

static bool
is_valid_environment(const char *env)
{
    size_t len = strlen(env);

    if (len == 0 || len > MAX_ENVIRONMENT || strncmp(env, "langfuse", 8) == 0) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = env[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) {
            return false;
        }
    }
    return true;
}

/* Present and not null. */
static const json_t *
field(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);

    return json_is_null(v) ? NULL : v;
}

/* Langfuse's validation of a score body; @return NULL or what is wrong (in buf). */
static const char *
check_score(const json_t *score, char *buf, size_t len)
{
    static const char *const allowed[] = {"id",      "name",          "value",     "dataType",
                                          "traceId", "observationId", "sessionId", "datasetRunId",
                                          "comment", "environment",   "configId",  "metadata",
                                          "queueId"};
    static const char *const optional_strings[] = {"id", "comment", "configId", "queueId"};
    const char *key = NULL;
    const json_t *v = NULL;
    const json_t *value = field(score, "value");
    const char *data_type = json_string_value(field(score, "dataType"));
    int targets = 0;

    if (!json_is_object(score)) {
        return "the body is not a JSON object";
    }
    json_object_foreach((json_t *)score, key, v)
    {
        bool known = false;
        for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
            known = known || strcmp(key, allowed[i]) == 0;
        }
        if (!known) {
            snprintf(buf, len, "unknown field '%s'", key);
            return buf;
        }
    }
    for (size_t i = 0; i < sizeof(optional_strings) / sizeof(optional_strings[0]); i++) {
        v = field(score, optional_strings[i]);
        if (v != NULL && (!json_is_string(v) || json_string_length(v) == 0)) {
            snprintf(buf, len, "'%s' must be a non-empty string", optional_strings[i]);
            return buf;
        }
    }
    v = field(score, "name");
    if (!json_is_string(v) || json_string_length(v) == 0) {
        return "'name' is required (a non-empty string)";
    }
    for (size_t i = 0; i < 3; i++) {
        static const char *const target_keys[] = {"traceId", "sessionId", "datasetRunId"};
        v = field(score, target_keys[i]);
        if (v == NULL) {
            continue;
        }
        if (!json_is_string(v) || json_string_length(v) == 0) {
            snprintf(buf, len, "'%s' must be a non-empty string", target_keys[i]);
            return buf;
        }
        targets++;
    }
    if (targets != 1) {
        return "exactly one of traceId, sessionId and datasetRunId is required";
    }
    v = field(score, "observationId");
    if (v != NULL) {
        if (!json_is_string(v) || json_string_length(v) == 0) {
            return "'observationId' must be a non-empty string";
        }
        if (field(score, "traceId") == NULL) {
            return "'observationId' needs 'traceId'";
        }
    }
    v = field(score, "environment");
    if (v != NULL && (!json_is_string(v) || !is_valid_environment(json_string_value(v)))) {
        return "'environment' must be at most 40 of [a-z0-9-_], not starting with 'langfuse'";
    }
    if (value == NULL) {
        return "'value' is required";
    }
    if (field(score, "dataType") != NULL && data_type == NULL) {
        return "'dataType' must be a string";
    }
    if (data_type == NULL) {
        /* Langfuse infers the type from the value when none is given. */
        data_type = json_is_string(value) ? "CATEGORICAL" : "NUMERIC";
    }
    if (strcmp(data_type, "NUMERIC") == 0) {
        if (!json_is_number(value)) {
            return "a NUMERIC score needs a number value";
        }
    } else if (strcmp(data_type, "CATEGORICAL") == 0) {
        if (!json_is_string(value)) {
            return "a CATEGORICAL score needs a string value";
        }
    } else if (strcmp(data_type, "BOOLEAN") == 0) {
        double d = json_number_value(value);
        if (!json_is_number(value) || (d != 0.0 && d != 1.0)) {
            return "a BOOLEAN score needs the value 0 or 1";
        }
    } else {
        snprintf(buf, len, "dataType '%s': expected NUMERIC, CATEGORICAL or BOOLEAN", data_type);
        return buf;
    }
    return NULL;
}

static void
handle_scores(struct langfuse_server *s, const struct http_request *req, struct http_response *resp)
{
    char why[256];
    const char *problem = NULL;
    json_error_t jerr;
    json_t *score = NULL;
    const char *id = NULL;
    char made_id[32];
    size_t i = 0;
    json_t *old = NULL;
    bool is_replaced = false;

    if (strcmp(req->method, "POST") != 0) {
        reply_error(s, resp, 405, "MethodNotAllowedError", "%s: use POST", req->method);
        return;
    }
    s->stats.score_requests++;
    score = json_loadb(req->body, req->body_len, 0, &jerr);
    if (score == NULL) {
        snprintf(why, sizeof(why), "invalid JSON: %.160s", jerr.text);
        problem = why;
    } else {
        problem = check_score(score, why, sizeof(why));
    }
    if (problem != NULL) {
        s->stats.scores_rejected++;
        reply_error(s, resp, 400, "InvalidRequestError", "%s", problem);
        json_decref(score);
        return;
    }
    id = json_string_value(field(score, "id"));
    if (id == NULL) {
        snprintf(made_id, sizeof(made_id), "score-%u", ++s->next_score_id);
        json_object_set_new(score, "id", json_string(made_id));
        id = made_id;
    }
    json_array_foreach(s->scores, i, old)
    {
        if (strcmp(json_string_value(json_object_get(old, "id")), id) == 0) {
            json_array_set(s->scores, i, score);
            is_replaced = true;
            break;
        }
    }
    if (!is_replaced && json_array_size(s->scores) >= MAX_SCORES) {
        s->stats.scores_rejected++;
        reply_error(s, resp, 429, "TooManyScores", "the test server keeps %u scores", MAX_SCORES);
        json_decref(score);
        return;
    }
    if (!is_replaced) {
        json_array_append(s->scores, score);
    }
    s->stats.scores_accepted++;
    s->stats.scores_replaced += is_replaced;
    reply_json(s, resp, 200, json_pack("{s:s}", "id", id));
    json_decref(score);
    pthread_cond_broadcast(&s->changed);
}

/* ------------------------------------------------------------------------------------------ */
/* Prompts                                                                                     */

/* Percent-decode @p len bytes of @p in into out (weft__percent_decode(), as the OTLP header
 * parser does). @return false on a bad escape or overflow. */
static bool
url_decode(const char *in, size_t len, char *out, size_t cap)
{
    char *decoded = weft__percent_decode(in, len);
    bool is_ok = decoded != NULL && strlen(decoded) < cap;

    if (is_ok) {
        memcpy(out, decoded, strlen(decoded) + 1);
    }
    weft__free(decoded);
    return is_ok;
}

/* The value of query parameter @p key in @p query (after '?'), decoded into buf. */
static const char *
query_param(const char *query, const char *key, char *buf, size_t len)
{
    size_t klen = strlen(key);
    const char *p = query;

    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, '&');
        size_t plen = end != NULL ? (size_t)(end - p) : strlen(p);
        if (plen > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            return url_decode(p + klen + 1, plen - klen - 1, buf, len) ? buf : NULL;
        }
        p = end != NULL ? end + 1 : NULL;
    }
    return NULL;
}

static bool
has_label(const struct prompt *p, const char *label)
{
    const json_t *l = NULL;
    size_t i = 0;

    json_array_foreach(json_object_get(p->doc, "labels"), i, l)
    {
        if (strcmp(json_string_value(l), label) == 0) {
            return true;
        }
    }
    return false;
}

static void
handle_prompt(struct langfuse_server *s, const struct http_request *req, struct http_response *resp)
{
    const char *rest = req->path + strlen(PROMPTS_PREFIX);
    const char *query = strchr(rest, '?');
    size_t name_len = query != NULL ? (size_t)(query - rest) : strlen(rest);
    char name[256];
    char label[128];
    char version_text[32];
    const char *want_label = NULL;
    const char *want_version = NULL;
    const struct prompt *found = NULL;
    long version = 0;

    if (strcmp(req->method, "GET") != 0) {
        reply_error(s, resp, 405, "MethodNotAllowedError", "%s: use GET", req->method);
        return;
    }
    s->stats.prompt_requests++;
    if (query != NULL) {
        want_label = query_param(query + 1, "label", label, sizeof(label));
        want_version = query_param(query + 1, "version", version_text, sizeof(version_text));
    }
    if (!url_decode(rest, name_len, name, sizeof(name)) || name[0] == '\0') {
        reply_error(s, resp, 400, "InvalidRequestError", "bad prompt name");
        return;
    }
    if (want_label != NULL && want_version != NULL) {
        reply_error(s, resp, 400, "InvalidRequestError", "give label or version, not both");
        return;
    }
    if (want_version != NULL) {
        char *end = NULL;
        version = strtol(want_version, &end, 10);
        if (end == want_version || *end != '\0' || version <= 0) {
            reply_error(s, resp, 400, "InvalidRequestError", "version '%s': expected a number",
                        want_version);
            return;
        }
    } else if (want_label == NULL) {
        want_label = "production";
    }
    for (size_t i = 0; i < s->prompt_count; i++) {
        const struct prompt *p = &s->prompts[i];
        if (strcmp(p->name, name) != 0) {
            continue;
        }
        if (want_version != NULL && p->version == version) {
            found = p;
            break;
        }
        if (want_label != NULL && strcmp(want_label, "latest") == 0) {
            if (found == NULL || p->version > found->version) {
                found = p;
            }
        } else if (want_label != NULL && has_label(p, want_label)) {
            found = p;
            break;
        }
    }
    if (found == NULL) {
        s->stats.prompts_not_found++;
        reply_error(s, resp, 404, "LangfuseNotFoundError", "Prompt not found: '%s'", name);
        return;
    }
    reply_json(s, resp, 200, json_deep_copy(found->doc));
}

/* ------------------------------------------------------------------------------------------ */
/* Dispatch                                                                                    */

static void
handle(void *user_data, const struct http_request *req, struct http_response *resp)
{
    struct langfuse_server *s = user_data;
    char path[512];
    char *query = NULL;

    snprintf(path, sizeof(path), "%s", req->path);
    query = strchr(path, '?');
    if (query != NULL) {
        *query = '\0';
    }
    pthread_mutex_lock(&s->lock);
    if (monotonic_ns() < s->down_until_ns) {
        s->stats.dropped++;
        resp->drop = true;
    } else if (strcmp(path, TRACES_PATH) != 0 && strcmp(path, SCORES_PATH) != 0 &&
               strncmp(path, PROMPTS_PREFIX, strlen(PROMPTS_PREFIX)) != 0) {
        s->stats.not_found++;
        reply_error(s, resp, 404, "NotFoundError", "no route %s %s", req->method, path);
    } else if (!is_authorised(s, req)) {
        s->stats.unauthorized++;
        reply_error(s, resp, 401, "UnauthorizedError",
                    "Invalid credentials. Confirm that you've configured the correct host.");
    } else if (strcmp(path, TRACES_PATH) == 0) {
        handle_traces(s, req, resp);
    } else if (strcmp(path, SCORES_PATH) == 0) {
        handle_scores(s, req, resp);
    } else {
        handle_prompt(s, req, resp);
    }
    pthread_mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------------------------------------ */
/* Life cycle and set-up                                                                       */

int
langfuse_server_start(const char *public_key, const char *secret_key, struct langfuse_server **out)
{
    struct langfuse_server *s = NULL;

    *out = NULL;
    if (public_key == NULL || secret_key == NULL) {
        return -1;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return -1;
    }
    s->public_key = strdup(public_key);
    s->secret_key = strdup(secret_key);
    s->spans = json_array();
    s->scores = json_array();
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    if (s->public_key == NULL || s->secret_key == NULL || s->spans == NULL || s->scores == NULL ||
        http_receiver_start(&s->rx) != 0) {
        s->rx = NULL;
        langfuse_server_stop(s);
        return -1;
    }
    http_receiver_set_handler(s->rx, handle, s);
    *out = s;
    return 0;
}

void
langfuse_server_stop(struct langfuse_server *s)
{
    if (s == NULL) {
        return;
    }
    /* The receiver's thread is the only caller of handle(): after this nothing else runs. */
    http_receiver_stop(s->rx);
    for (size_t i = 0; i < s->prompt_count; i++) {
        free(s->prompts[i].name);
        json_decref(s->prompts[i].doc);
    }
    json_decref(s->spans);
    json_decref(s->scores);
    free(s->reply_body);
    free(s->public_key);
    free(s->secret_key);
    pthread_cond_destroy(&s->changed);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

const char *
langfuse_server_host(const struct langfuse_server *s, char *buf, size_t len)
{
    return http_receiver_url(s->rx, "", buf, len);
}

struct http_receiver *
langfuse_server_receiver(struct langfuse_server *s)
{
    return s->rx;
}

void
langfuse_server_fail_traces(struct langfuse_server *s,
                            unsigned count,
                            int status,
                            unsigned retry_after_s)
{
    pthread_mutex_lock(&s->lock);
    s->fail_count = count;
    s->fail_status = status;
    s->fail_retry_after_s = retry_after_s;
    pthread_mutex_unlock(&s->lock);
}

void
langfuse_server_go_down(struct langfuse_server *s, unsigned ms)
{
    pthread_mutex_lock(&s->lock);
    s->down_until_ns = monotonic_ns() + (uint64_t)ms * 1000000u;
    pthread_mutex_unlock(&s->lock);
}

void
langfuse_server_set_delay(struct langfuse_server *s, unsigned ms)
{
    pthread_mutex_lock(&s->lock);
    s->delay_ms = ms;
    pthread_mutex_unlock(&s->lock);
}

int
langfuse_server_add_prompt(struct langfuse_server *s,
                           const char *name,
                           int version,
                           const char *labels,
                           const char *type,
                           const char *prompt,
                           const char *config)
{
    json_t *doc = NULL;
    json_t *body = NULL;
    json_t *cfg = NULL;
    json_t *label_list = json_array();
    char *name_copy = NULL;
    int rc = -1;

    if (name == NULL || version <= 0 || type == NULL || prompt == NULL || label_list == NULL) {
        goto out;
    }
    if (strcmp(type, "text") == 0) {
        body = json_string(prompt);
    } else if (strcmp(type, "chat") == 0) {
        body = json_loads(prompt, 0, NULL);
        if (!json_is_array(body)) {
            goto out;
        }
    } else {
        goto out;
    }
    cfg = config != NULL ? json_loads(config, 0, NULL) : json_object();
    if (!json_is_object(cfg)) {
        goto out;
    }
    for (const char *p = labels; p != NULL && *p != '\0';) {
        const char *comma = strchr(p, ',');
        size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
        if (n > 0) {
            json_array_append_new(label_list, json_stringn(p, n));
        }
        p = comma != NULL ? comma + 1 : NULL;
    }
    doc = json_pack("{s:s, s:s, s:i, s:s, s:O, s:O, s:O, s:[]}", "id", name, "name", name,
                    "version", version, "type", type, "prompt", body, "config", cfg, "labels",
                    label_list, "tags");
    name_copy = strdup(name);
    if (doc == NULL || name_copy == NULL) {
        goto out;
    }
    pthread_mutex_lock(&s->lock);
    if (s->prompt_count < MAX_PROMPTS) {
        s->prompts[s->prompt_count].name = name_copy;
        s->prompts[s->prompt_count].version = version;
        s->prompts[s->prompt_count].doc = doc;
        s->prompt_count++;
        name_copy = NULL;
        doc = NULL;
        rc = 0;
    }
    pthread_mutex_unlock(&s->lock);
out:
    free(name_copy);
    json_decref(doc);
    json_decref(body);
    json_decref(cfg);
    json_decref(label_list);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Queries                                                                                     */

void
langfuse_server_get_stats(struct langfuse_server *s, struct langfuse_server_stats *out)
{
    pthread_mutex_lock(&s->lock);
    *out = s->stats;
    pthread_mutex_unlock(&s->lock);
}

size_t
langfuse_server_span_count(struct langfuse_server *s)
{
    size_t n = 0;

    pthread_mutex_lock(&s->lock);
    n = json_array_size(s->spans);
    pthread_mutex_unlock(&s->lock);
    return n;
}

size_t
langfuse_server_score_count(struct langfuse_server *s)
{
    size_t n = 0;

    pthread_mutex_lock(&s->lock);
    n = json_array_size(s->scores);
    pthread_mutex_unlock(&s->lock);
    return n;
}

static bool
wait_for(struct langfuse_server *s, json_t *const *array, size_t n, unsigned timeout_ms)
{
    struct timespec ts;
    bool ok = false;

    ts = http_deadline_in(timeout_ms);
    pthread_mutex_lock(&s->lock);
    while (!(ok = json_array_size(*array) >= n)) {
        if (pthread_cond_timedwait(&s->changed, &s->lock, &ts) == ETIMEDOUT) {
            ok = json_array_size(*array) >= n;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

bool
langfuse_server_wait_spans(struct langfuse_server *s, size_t n, unsigned timeout_ms)
{
    return wait_for(s, &s->spans, n, timeout_ms);
}

bool
langfuse_server_wait_scores(struct langfuse_server *s, size_t n, unsigned timeout_ms)
{
    return wait_for(s, &s->scores, n, timeout_ms);
}

json_t *
langfuse_server_spans(struct langfuse_server *s)
{
    json_t *copy = NULL;

    pthread_mutex_lock(&s->lock);
    copy = json_deep_copy(s->spans);
    pthread_mutex_unlock(&s->lock);
    return copy;
}

json_t *
langfuse_server_scores(struct langfuse_server *s)
{
    json_t *copy = NULL;

    pthread_mutex_lock(&s->lock);
    copy = json_deep_copy(s->scores);
    pthread_mutex_unlock(&s->lock);
    return copy;
}

const char *
langfuse_server_last_error(struct langfuse_server *s, char *buf, size_t len)
{
    pthread_mutex_lock(&s->lock);
    snprintf(buf, len, "%s", s->last_error);
    pthread_mutex_unlock(&s->lock);
    return buf;
}

const json_t *
langfuse_span_attr(const json_t *span, const char *key)
{
    const json_t *a = NULL;
    size_t i = 0;

    json_array_foreach(json_object_get(span, "attributes"), i, a)
    {
        const char *k = json_string_value(json_object_get(a, "key"));
        if (k != NULL && strcmp(k, key) == 0) {
            return json_object_get(a, "value");
        }
    }
    return NULL;
}

const char *
langfuse_span_str(const json_t *span, const char *key)
{
    return json_string_value(json_object_get(langfuse_span_attr(span, key), "stringValue"));
}

const json_t *
langfuse_spans_find(const json_t *spans, const char *name)
{
    const json_t *sp = NULL;
    size_t i = 0;

    json_array_foreach(spans, i, sp)
    {
        const char *n = json_string_value(json_object_get(sp, "name"));
        if (n != NULL && strcmp(n, name) == 0) {
            return sp;
        }
    }
    return NULL;
}
