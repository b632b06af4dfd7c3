/* runtime/llm/openai.c - the OpenAI-compatible chat-completions provider over net/http_client.
 *
 * One call is one POST of {model, messages, tools, ...} to {base_url}/chat/completions, retried
 * on 429, 500, 502, 503, 504 and transport failures with exponential backoff and full jitter
 * (or the server's Retry-After), never more than max_retries times and never past the
 * request's overall timeout: each attempt gets only the time that is left. Any other status is
 * final. The answer's first choice becomes a struct llm_response.
 *
 * Invariants:
 * - One HTTP client per provider, so consecutive calls reuse the connection (keep-alive);
 *   a provider is used by one engine thread at a time (llm.h), so the client needs no lock.
 * - The API key lives only in the header list ("Authorization: Bearer ..."): it is not in
 *   the struct, never logged, never copied into an error, scrubbed from error messages a server
 *   echoes it in, and zeroed before the list is freed.
 * - Answers are capped at MAX_RESPONSE_BYTES; a bigger one is an unusable answer, and so is
 *   one with a wrong-typed member (content that is not text, tool_calls that is not an array,
 *   token counts that are not integers in [0, 10^12]): never taken as an empty answer.
 * - Error messages never hold request content: they are built from the status, libcurl's error
 *   text and the server's error.message only.
 *
 * Why: the engine owns the spans and the error reporting (llm.h), so this file logs only its
 * retries, at DEBUG, and reports everything else through struct llm_error.
 */
#include "llm.h"

#include "net/http_client.h"
#include "runtime/common/json_type.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <weft/weft.h>

#define MAX_RESPONSE_BYTES         (8u << 20)
#define MAX_REQUEST_BYTES          (64u << 20)
#define DEFAULT_MAX_RETRIES        3u
#define DEFAULT_INITIAL_BACKOFF_MS 500u
#define DEFAULT_MAX_BACKOFF_MS     8000u

struct openai {
    char *url;           /* {base_url}/chat/completions */
    char *provider_name; /* gen_ai.provider.name */
    unsigned max_retries;
    uint32_t initial_backoff_ms;
    uint32_t max_backoff_ms;
    uint64_t generated_ids; /* for tool calls the server sent without an id */
    struct weft__http_client *http;
    struct weft__http_headers headers;   /* the only place the API key is kept */
    struct weft__buf request;            /* the JSON body of the current call */
    struct weft__http_response response; /* the answer, its body capped */
};

static void set_error(struct llm_error *error, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
set_error(struct llm_error *error, const char *type, const char *fmt, ...)
{
    va_list ap;

    snprintf(error->type, sizeof(error->type), "%s", type);
    va_start(ap, fmt);
    vsnprintf(error->message, sizeof(error->message), fmt, ap);
    va_end(ap);
}

/* The API key as stored in the header list, or NULL when none was given. */
static const char *
api_key(const struct openai *x, size_t *len)
{
    static const char bearer[] = "Bearer ";
    const char *v = weft__http_headers_get(&x->headers, "Authorization");

    if (v == NULL || strncmp(v, bearer, sizeof(bearer) - 1) != 0) {
        return NULL;
    }
    v += sizeof(bearer) - 1;
    *len = strlen(v);
    return *len > 0 ? v : NULL;
}

struct dump_sink {
    struct weft__buf *buf;
    weft_err err;
};

static int
dump_to_buf(const char *data, size_t size, void *userdata)
{
    struct dump_sink *sink = userdata;

    sink->err = weft__buf_append(sink->buf, data, size);
    return sink->err == WEFT_OK ? 0 : -1;
}

/* Serialise the request body into x->request. @return WEFT_OK, WEFT_ENOMEM, WEFT_ELIMIT. */
static weft_err
build_body(struct openai *x, const struct llm_request *request)
{
    json_t *body = json_object();
    json_t *rf = NULL;
    struct dump_sink sink = {&x->request, WEFT_OK};
    int rc = 0;

    weft__buf_reset(&x->request);
    if (body == NULL) {
        return WEFT_ENOMEM;
    }
    /* Deep copies keep the borrowed request untouched (not even its reference counts); the
     * copy is small next to the HTTP exchange it feeds. */
    rc |= json_object_set_new(body, "model", json_string(request->model));
    rc |= json_object_set_new(body, "messages", json_deep_copy(request->messages));
    if (request->tools != NULL && json_array_size(request->tools) > 0) {
        rc |= json_object_set_new(body, "tools", json_deep_copy(request->tools));
        rc |= json_object_set_new(body, "tool_choice", json_string("auto"));
    }
    if (request->json_mode) {
        rf = json_pack("{s:s}", "type", "json_object");
        rc |= json_object_set_new(body, "response_format", rf);
    }
    if (request->temperature >= 0) {
        rc |= json_object_set_new(body, "temperature", json_real(request->temperature));
    }
    if (request->max_tokens > 0) {
        rc |= json_object_set_new(body, "max_tokens", json_integer(request->max_tokens));
    }
    if (rc != 0) {
        json_decref(body);
        return WEFT_ENOMEM;
    }
    rc = json_dump_callback(body, dump_to_buf, &sink, JSON_COMPACT);
    json_decref(body);
    if (rc != 0) {
        return sink.err != WEFT_OK ? sink.err : WEFT_ENOMEM;
    }
    return WEFT_OK;
}

/* Copy @p src into @p dst (at most @p cap bytes with the NUL) with every occurrence of the API
 * key replaced and control characters made visible, so that an error text a server sends
 * back cannot leak the key or break a log line. */
static void
copy_scrubbed(const struct openai *x, char *dst, size_t cap, const char *src)
{
    size_t key_len = 0;
    const char *key = api_key(x, &key_len);
    size_t o = 0;

    while (*src != '\0' && o + 1 < cap) {
        if (key != NULL && strncmp(src, key, key_len) == 0) {
            static const char mask[] = "[redacted]";
            size_t n = sizeof(mask) - 1;

            if (o + n >= cap) {
                break;
            }
            memcpy(dst + o, mask, n);
            o += n;
            src += key_len;
            continue;
        }
        dst[o++] = ((unsigned char)*src < 0x20 || *src == 0x7f) ? ' ' : *src;
        src++;
    }
    dst[o] = '\0';
}

/* Final HTTP status: type "http_<status>", message with the server's error.message if any. */
static void
http_error(const struct openai *x, long status, unsigned attempts, struct llm_error *error)
{
    json_t *root = NULL;
    const char *detail = NULL;
    char text[200] = "";

    if (x->response.body.len > 0) {
        root = json_loadb(x->response.body.data, x->response.body.len, 0, NULL);
    }
    detail = json_string_value(json_object_get(json_object_get(root, "error"), "message"));
    if (detail == NULL) {
        /* Some compatible servers send {"error": "text"} or {"message": "text"}. */
        detail = json_string_value(json_object_get(root, "error"));
    }
    if (detail == NULL) {
        detail = json_string_value(json_object_get(root, "message"));
    }
    if (detail != NULL) {
        copy_scrubbed(x, text, sizeof(text), detail);
    }
    json_decref(root);
    snprintf(error->type, sizeof(error->type), "http_%ld", status);
    if (text[0] != '\0') {
        snprintf(error->message, sizeof(error->message), "HTTP %ld after %u attempt%s: %s", status,
                 attempts, attempts == 1 ? "" : "s", text);
    } else {
        snprintf(error->message, sizeof(error->message), "HTTP %ld after %u attempt%s", status,
                 attempts, attempts == 1 ? "" : "s");
    }
}

/* A member that must be a string, or null or absent (*out NULL then). @p path names it in
 * the error. @return WEFT_OK, WEFT_EPARSE (error set), WEFT_ENOMEM. */
static weft_err
opt_string(const json_t *obj, const char *key, const char *path, char **out, struct llm_error *e)
{
    const json_t *v = json_object_get(obj, key);

    *out = NULL;
    if (v == NULL || json_is_null(v)) {
        return WEFT_OK;
    }
    if (!json_is_string(v)) {
        set_error(e, "invalid_response", "response: %s: expected string or null, got %s", path,
                  weft__json_type_name(v));
        return WEFT_EPARSE;
    }
    *out = weft__strdup(json_string_value(v));
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

/* Largest token count believed: far beyond any context window, far below int64 overflow
 * when counts are summed over a run. */
#define MAX_TOKENS 1000000000000LL

/* usage.<key>: a non-negative integer, or null or absent (-1). */
static weft_err
token_count(const json_t *usage, const char *key, int64_t *out, struct llm_error *e)
{
    const json_t *v = json_object_get(usage, key);

    *out = -1;
    if (v == NULL || json_is_null(v)) {
        return WEFT_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > MAX_TOKENS) {
        if (json_is_integer(v)) {
            set_error(e, "invalid_response",
                      "response: usage.%s: expected an integer in [0, 10^12], got %lld", key,
                      (long long)json_integer_value(v));
        } else {
            set_error(e, "invalid_response",
                      "response: usage.%s: expected a non-negative integer, got %s", key,
                      weft__json_type_name(v));
        }
        return WEFT_EPARSE;
    }
    *out = (int64_t)json_integer_value(v);
    return WEFT_OK;
}

/* Parse tool call @p i into @p call. @return WEFT_OK, WEFT_EPARSE (error set), WEFT_ENOMEM. */
static weft_err
parse_tool_call(const json_t *c,
                size_t i,
                uint64_t *generated_ids,
                struct llm_tool_call *call,
                struct llm_error *e)
{
    const json_t *fn = json_object_get(c, "function");
    const json_t *args = json_object_get(fn, "arguments");
    const json_t *id = json_object_get(c, "id");
    const json_t *name = json_object_get(fn, "name");
    char generated[40];
    const char *id_text = NULL;

    if (!json_is_object(c)) {
        set_error(e, "invalid_response",
                  "response: choices[0].message.tool_calls[%zu]: expected object, got %s", i,
                  weft__json_type_name(c));
        return WEFT_EPARSE;
    }
    if (!json_is_object(fn)) {
        set_error(e, "invalid_response",
                  "response: choices[0].message.tool_calls[%zu].function: expected object, got %s",
                  i, fn == NULL ? "nothing" : weft__json_type_name(fn));
        return WEFT_EPARSE;
    }
    if (!json_is_string(name) || json_string_length(name) == 0) {
        set_error(e, "invalid_response",
                  "response: choices[0].message.tool_calls[%zu].function.name: expected a "
                  "non-empty string, got %s",
                  i, name == NULL ? "nothing" : weft__json_type_name(name));
        return WEFT_EPARSE;
    }
    if (id != NULL && !json_is_null(id) && !json_is_string(id)) {
        set_error(e, "invalid_response",
                  "response: choices[0].message.tool_calls[%zu].id: expected string, got %s", i,
                  weft__json_type_name(id));
        return WEFT_EPARSE;
    }
    /* Text, as the API sends it; some compatible servers send an object instead, which is
     * taken as the text it stands for. Anything else is not a set of arguments. */
    if (args != NULL && !json_is_null(args) && !json_is_string(args) && !json_is_object(args)) {
        set_error(e, "invalid_response",
                  "response: choices[0].message.tool_calls[%zu].function.arguments: expected "
                  "string, got %s",
                  i, weft__json_type_name(args));
        return WEFT_EPARSE;
    }
    id_text = json_string_value(id);
    if (id_text == NULL || id_text[0] == '\0') {
        snprintf(generated, sizeof(generated), "call_%llu", (unsigned long long)++*generated_ids);
        id_text = generated;
    }
    call->id = weft__strdup(id_text);
    call->name = weft__strdup(json_string_value(name));
    if (json_is_string(args)) {
        call->arguments = weft__strdup(json_string_value(args));
    } else if (args == NULL || json_is_null(args)) {
        call->arguments = weft__strdup("{}");
    } else {
        char *text = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);

        call->arguments = text == NULL ? NULL : weft__strdup(text);
        free(text); /* jansson's default allocator */
    }
    if (call->id == NULL || call->name == NULL || call->arguments == NULL) {
        return WEFT_ENOMEM;
    }
    return WEFT_OK;
}

/* Turn a 2xx answer into @p out, checking the type of every member it uses: an answer with a
 * wrong type is not taken as an empty one. On failure @p out holds what was parsed so far
 * (the caller cleans it up). @return WEFT_OK, WEFT_EPARSE, WEFT_ENOMEM. */
weft_err
weft__llm_openai_parse(const char *data,
                       size_t len,
                       uint64_t *generated_ids,
                       struct llm_response *out,
                       struct llm_error *error)
{
    json_t *root = NULL;
    const json_t *choices = NULL;
    const json_t *choice = NULL;
    const json_t *message = NULL;
    const json_t *calls = NULL;
    const json_t *usage = NULL;
    weft_err err = WEFT_OK;

    if (len > 0) {
        root = json_loadb(data, len, 0, NULL);
    }
    if (!json_is_object(root)) {
        set_error(error, "invalid_response", "the answer is not a JSON object (%zu bytes)", len);
        err = WEFT_EPARSE;
        goto out;
    }
    choices = json_object_get(root, "choices");
    if (!json_is_array(choices) || json_array_size(choices) == 0) {
        set_error(error, "invalid_response",
                  "response: choices: expected a non-empty array, got %s",
                  choices == NULL          ? "nothing"
                  : json_is_array(choices) ? "[]"
                                           : weft__json_type_name(choices));
        err = WEFT_EPARSE;
        goto out;
    }
    choice = json_array_get(choices, 0);
    message = json_object_get(choice, "message");
    if (!json_is_object(choice) || !json_is_object(message)) {
        set_error(error, "invalid_response",
                  "response: choices[0].message: expected object, got %s",
                  !json_is_object(choice) ? weft__json_type_name(choice)
                  : message == NULL       ? "nothing"
                                          : weft__json_type_name(message));
        err = WEFT_EPARSE;
        goto out;
    }
    err = opt_string(message, "content", "choices[0].message.content", &out->content, error);
    if (err == WEFT_OK) {
        err = opt_string(choice, "finish_reason", "choices[0].finish_reason", &out->finish_reason,
                         error);
    }
    if (err == WEFT_OK) {
        err = opt_string(root, "model", "model", &out->response_model, error);
    }
    if (err == WEFT_OK) {
        err = opt_string(root, "id", "id", &out->response_id, error);
    }
    if (err != WEFT_OK) {
        goto out;
    }
    usage = json_object_get(root, "usage");
    if (usage != NULL && !json_is_null(usage) && !json_is_object(usage)) {
        set_error(error, "invalid_response", "response: usage: expected object or null, got %s",
                  weft__json_type_name(usage));
        err = WEFT_EPARSE;
        goto out;
    }
    err = token_count(usage, "prompt_tokens", &out->input_tokens, error);
    if (err == WEFT_OK) {
        err = token_count(usage, "completion_tokens", &out->output_tokens, error);
    }
    if (err != WEFT_OK) {
        goto out;
    }
    calls = json_object_get(message, "tool_calls");
    if (calls != NULL && !json_is_null(calls) && !json_is_array(calls)) {
        set_error(error, "invalid_response",
                  "response: choices[0].message.tool_calls: expected array or null, got %s",
                  weft__json_type_name(calls));
        err = WEFT_EPARSE;
        goto out;
    }
    if (json_array_size(calls) > 0) {
        out->tool_calls = weft__calloc(json_array_size(calls), sizeof(*out->tool_calls));
        if (out->tool_calls == NULL) {
            err = WEFT_ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < json_array_size(calls); i++) {
            /* Count the slot first: a half-filled call is still freed by the cleanup. */
            out->tool_call_count++;
            err = parse_tool_call(json_array_get(calls, i), i, generated_ids, &out->tool_calls[i],
                                  error);
            if (err != WEFT_OK) {
                goto out;
            }
        }
    }
out:
    json_decref(root);
    return err;
}

/* A failed attempt that will be retried: said at DEBUG only (the engine reports failures). */
static void
on_retry(void *user_data, const struct weft__http_response *r, uint64_t wait_ms)
{
    const struct openai *x = user_data;
    unsigned max_retries = x->max_retries;

    if (r->failure == WEFT__HTTP_FAIL_NONE) {
        WEFT_LOG(WEFT_LOG_DEBUG, "%s: HTTP %ld, retry %u of %u in %llu ms", x->provider_name,
                 r->status, r->attempts, max_retries, (unsigned long long)wait_ms);
    } else {
        WEFT_LOG(WEFT_LOG_DEBUG, "%s: %s, retry %u of %u in %llu ms", x->provider_name, r->error,
                 r->attempts, max_retries, (unsigned long long)wait_ms);
    }
}

/* The error of a call whose last attempt did not bring a usable 2xx. */
static weft_err
call_error(const struct openai *x,
           const struct llm_request *request,
           uint64_t deadline,
           weft_err err,
           struct llm_error *error)
{
    const struct weft__http_response *r = &x->response;
    unsigned attempts = r->attempts;
    const char *s = attempts == 1 ? "" : "s";

    if (err == WEFT_ENOMEM) {
        set_error(error, "out_of_memory", "could not store the answer");
        return WEFT_ENOMEM;
    }
    if (err == WEFT_ELIMIT) {
        set_error(error, "invalid_response", "the answer is over %u bytes", MAX_RESPONSE_BYTES);
        return WEFT_EPARSE;
    }
    if ((r->failure == WEFT__HTTP_FAIL_TIMEOUT && deadline != 0 &&
         weft__monotonic_ns() + 1000000u >= deadline) ||
        (attempts == 0 && r->stop == WEFT__HTTP_STOP_DEADLINE)) {
        set_error(error, "timeout", "no answer within %u ms (%u attempt%s)",
                  (unsigned)request->timeout_ms, attempts, s);
        return WEFT_ETIMEDOUT;
    }
    if (err != WEFT_OK && !r->is_retryable) {
        set_error(error, "connection", "%s (not retried)", r->error);
        return WEFT_EIO;
    }
    if (err == WEFT_OK && !r->is_retryable) {
        http_error(x, r->status, attempts, error);
        return WEFT_EHTTP;
    }
    if (r->stop == WEFT__HTTP_STOP_DEADLINE) {
        /* Waiting would have taken us past the deadline: given up now rather than then. */
        if (err == WEFT_OK) {
            set_error(error, "timeout",
                      "HTTP %ld and no time left to retry within %u ms (%u attempt%s)", r->status,
                      (unsigned)request->timeout_ms, attempts, s);
        } else {
            set_error(error, "timeout", "%s and no time left to retry within %u ms", r->error,
                      (unsigned)request->timeout_ms);
        }
        return WEFT_ETIMEDOUT;
    }
    if (err != WEFT_OK) {
        set_error(error, "connection", "%s after %u attempts", r->error, attempts);
        return WEFT_EIO;
    }
    http_error(x, r->status, attempts, error);
    return WEFT_EHTTP;
}

static weft_err
openai_complete(void *self,
                const struct llm_request *request,
                struct llm_response *response,
                struct llm_error *error)
{
    struct openai *x = self;
    struct weft__http_client_request req;
    struct weft__http_retry retry;
    struct llm_response parsed;
    weft_err err = WEFT_OK;

    memset(response, 0, sizeof(*response));
    response->input_tokens = -1;
    response->output_tokens = -1;
    memset(&parsed, 0, sizeof(parsed));
    if (request == NULL || request->model == NULL || request->model[0] == '\0' ||
        !json_is_array(request->messages)) {
        set_error(error, "invalid_request", "a request needs a model and a messages array");
        return WEFT_EINVAL;
    }
    err = build_body(x, request);
    if (err != WEFT_OK) {
        set_error(error, err == WEFT_ELIMIT ? "request_too_large" : "out_of_memory",
                  "could not encode the request: %s", weft_strerror(err));
        return err;
    }
    memset(&req, 0, sizeof(req));
    req.url = x->url;
    req.headers = &x->headers;
    req.body = x->request.data;
    req.body_len = x->request.len;
    req.has_body = true;
    req.user_agent = "weft/" WEFT_VERSION;
    req.max_response_bytes = MAX_RESPONSE_BYTES;
    req.is_keepalive = true;
    /* Retried on 429, 500, 502, 503, 504 and transport failures; each attempt gets only the
     * time left before the request's overall timeout. */
    memset(&retry, 0, sizeof(retry));
    retry.max_attempts = x->max_retries + 1;
    retry.initial_backoff_ms = x->initial_backoff_ms;
    retry.max_backoff_ms = x->max_backoff_ms;
    retry.is_500_retryable = true;
    retry.on_retry = on_retry;
    retry.user_data = x;
    if (request->timeout_ms != 0) {
        retry.deadline_ns = weft__monotonic_ns() + (uint64_t)request->timeout_ms * 1000000u;
    }
    err = weft__http_client_perform(x->http, &req, &retry, &x->response);
    if (err != WEFT_OK || x->response.status < 200 || x->response.status >= 300) {
        return call_error(x, request, retry.deadline_ns, err, error);
    }
    err = weft__llm_openai_parse(x->response.body.data, x->response.body.len, &x->generated_ids,
                                 &parsed, error);
    if (err != WEFT_OK) {
        weft__llm_response_cleanup(&parsed);
        if (err == WEFT_ENOMEM) {
            set_error(error, "out_of_memory", "could not store the answer");
        }
        return err;
    }
    parsed.attempts = x->response.attempts;
    *response = parsed;
    return WEFT_OK;
}

static void
openai_free(void *self)
{
    struct openai *x = self;

    if (x == NULL) {
        return;
    }
    weft__http_client_free(x->http);
    weft__http_headers_cleanup(&x->headers);
    weft__buf_cleanup(&x->request);
    weft__http_response_cleanup(&x->response);
    weft__free(x->url);
    weft__free(x->provider_name);
    weft__free(x);
}

static const struct llm_provider_ops openai_ops = {
    .complete = openai_complete,
    .free = openai_free,
};

static weft_err
configure(struct openai *x, const struct llm_openai_options *o)
{
    size_t base_len = strlen(o->base_url);
    struct weft__buf url;
    weft_err err = WEFT_OK;

    if (base_len > 0 && o->base_url[base_len - 1] == '/') {
        base_len--;
    }
    weft__buf_init(&url, 0);
    err = weft__buf_append(&url, o->base_url, base_len);
    if (err == WEFT_OK) {
        err = weft__buf_append_str(&url, "/chat/completions");
    }
    if (err != WEFT_OK) {
        weft__buf_cleanup(&url);
        return err;
    }
    x->url = url.data;
    x->provider_name = weft__strdup(o->provider_name != NULL ? o->provider_name : "openai");
    if (x->provider_name == NULL) {
        return WEFT_ENOMEM;
    }
    x->max_retries = o->max_retries != 0 ? o->max_retries : DEFAULT_MAX_RETRIES;
    x->initial_backoff_ms =
        o->initial_backoff_ms != 0 ? o->initial_backoff_ms : DEFAULT_INITIAL_BACKOFF_MS;
    x->max_backoff_ms = o->max_backoff_ms != 0 ? o->max_backoff_ms : DEFAULT_MAX_BACKOFF_MS;
    if (x->max_backoff_ms < x->initial_backoff_ms) {
        x->max_backoff_ms = x->initial_backoff_ms;
    }

    err = weft__http_headers_add(&x->headers, "Content-Type: application/json");
    if (err == WEFT_OK) {
        err = weft__http_headers_add(&x->headers, "Accept: application/json");
    }
    if (err == WEFT_OK) {
        /* "Expect: 100-continue" would cost a round trip on every large request. */
        err = weft__http_headers_add(&x->headers, "Expect:");
    }
    if (err == WEFT_OK && o->api_key != NULL && o->api_key[0] != '\0') {
        err = weft__http_headers_add_bearer(&x->headers, o->api_key);
    }
    if (err != WEFT_OK) {
        return err;
    }
    /* Redirects are not followed (the client's default): one would resend the body and the
     * key somewhere the user did not configure. */
    return weft__http_client_new(&x->http);
}

weft_err
weft__llm_openai_new(const struct llm_openai_options *options, struct llm_provider **out)
{
    struct openai *x = NULL;
    struct llm_provider *p = NULL;
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (options == NULL || options->base_url == NULL ||
        (strncasecmp(options->base_url, "http://", 7) != 0 &&
         strncasecmp(options->base_url, "https://", 8) != 0)) {
        return WEFT_EINVAL;
    }
    if (!weft__http_global_init()) {
        return WEFT_EIO;
    }
    x = weft__calloc(1, sizeof(*x));
    p = weft__calloc(1, sizeof(*p));
    if (x == NULL || p == NULL) {
        err = WEFT_ENOMEM;
        goto fail;
    }
    weft__buf_init(&x->request, MAX_REQUEST_BYTES);
    weft__http_response_init(&x->response);
    err = configure(x, options);
    if (err != WEFT_OK) {
        goto fail;
    }
    p->ops = &openai_ops;
    p->self = x;
    p->provider_name = x->provider_name;
    *out = p;
    return WEFT_OK;
fail:
    openai_free(x);
    weft__free(p);
    return err;
}
