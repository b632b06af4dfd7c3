/* runtime/memory/embed.c - the OpenAI-compatible embeddings client (embed.h).
 *
 * Invariants:
 * - One HTTP client (net/http_client) per embedder, used under the embedder's mutex, so
 *   consecutive calls reuse the connection and two threads never share a transfer.
 * - The API key is only in the header list ("Authorization: Bearer ..."), built in an exactly
 *   sized buffer that is wiped once the list has its copy; the list is wiped before it is freed.
 * - Answers are capped at MAX_RESPONSE_BYTES (a 8,192-float vector is about 200 KB of JSON).
 * - Error messages hold the status and libcurl's error text only: a server that echoes the key
 *   in its error body cannot get it into a log or a span.
 * - Without a configured length, the first vector fixes the length for the client's life: a
 *   later vector of another length is an error (the endpoint changed its model behind the
 *   name), never compared with the others.
 */
#include "runtime/memory/embed.h"

#include "net/http_client.h"

#include "base/buf.h"
#include "base/mem.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <weft/weft.h>

#define MAX_RESPONSE_BYTES (4u << 20)
#define DEFAULT_TIMEOUT_MS 10000u

struct rt_embedder {
    pthread_mutex_t lock;
    struct weft__http_client *http;
    struct weft__http_headers headers; /* the only place the API key is kept */
    char *url;                         /* {base_url}/embeddings */
    char *endpoint;                    /* url without user, password or query: for logs */
    char *host;
    unsigned port;
    char *model;
    uint32_t timeout_ms;
    size_t dimensions; /* configured, or fixed by the first answer; 0: not yet */
    bool is_configured_dims;
    struct weft__buf request;
    struct weft__http_response response;
};

static void set_error(struct rt_embed_error *e, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
set_error(struct rt_embed_error *e, const char *type, const char *fmt, ...)
{
    va_list ap;

    snprintf(e->type, sizeof(e->type), "%s", type);
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
}

void
weft__rt_embedding_cleanup(struct rt_embedding *v)
{
    if (v == NULL) {
        return;
    }
    weft__free(v->values);
    memset(v, 0, sizeof(*v));
}

/* data[0].embedding as floats into @p out (checked: numbers, finite, 1..DIMS_MAX, not all 0). */
static weft_err
parse_vector(const json_t *vec, struct rt_embedding *out, struct rt_embed_error *error)
{
    size_t n = json_array_size(vec);
    double norm = 0.0;

    if (!json_is_array(vec) || n == 0 || n > WEFT_EMBED_DIMS_MAX) {
        set_error(error, "invalid_response", "data[0].embedding is not an array of 1 to %u numbers",
                  WEFT_EMBED_DIMS_MAX);
        return WEFT_EPARSE;
    }
    out->values = weft__malloc(n * sizeof(float));
    if (out->values == NULL) {
        set_error(error, "out_of_memory", "could not store the vector");
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(vec, i);
        double d = json_number_value(x);

        if (!json_is_number(x) || !isfinite(d) || fabs(d) > 1e30) {
            set_error(error, "invalid_response", "data[0].embedding[%zu] is not a finite number",
                      i);
            weft__rt_embedding_cleanup(out);
            return WEFT_EPARSE;
        }
        out->values[i] = (float)d;
        norm += d * d;
    }
    if (norm == 0.0) {
        set_error(error, "invalid_response", "data[0].embedding is all zeros");
        weft__rt_embedding_cleanup(out);
        return WEFT_EPARSE;
    }
    out->dims = n;
    return WEFT_OK;
}

weft_err
weft__rt_embed_parse(const char *data,
                     size_t len,
                     struct rt_embedding *out,
                     struct rt_embed_error *error)
{
    json_t *root = NULL;
    const json_t *tokens = NULL;
    weft_err err = WEFT_OK;

    memset(out, 0, sizeof(*out));
    out->input_tokens = -1;
    root = data != NULL ? json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
    if (!json_is_object(root)) {
        set_error(error, "invalid_response", "the answer is not a JSON object");
        json_decref(root);
        return WEFT_EPARSE;
    }
    err = parse_vector(
        json_object_get(json_array_get(json_object_get(root, "data"), 0), "embedding"), out, error);
    tokens = json_object_get(json_object_get(root, "usage"), "prompt_tokens");
    if (err == WEFT_OK && tokens != NULL &&
        (!json_is_integer(tokens) || json_integer_value(tokens) < 0)) {
        set_error(error, "invalid_response", "usage.prompt_tokens is not a count");
        weft__rt_embedding_cleanup(out);
        err = WEFT_EPARSE;
    }
    if (err == WEFT_OK) {
        out->input_tokens = tokens != NULL ? (int64_t)json_integer_value(tokens) : -1;
    }
    json_decref(root);
    if (err != WEFT_OK) {
        out->input_tokens = 0;
    }
    return err;
}

/* The request body into e->request. */
static weft_err
build_body(struct rt_embedder *e, const char *text)
{
    json_t *body =
        json_pack("{s:s, s:s, s:s}", "model", e->model, "input", text, "encoding_format", "float");
    char *dump = NULL;
    weft_err err = WEFT_ENOMEM;

    if (body == NULL) {
        return WEFT_EINVAL; /* jansson refuses text that is not UTF-8 */
    }
    if (e->is_configured_dims) {
        json_object_set_new(body, "dimensions", json_integer((json_int_t)e->dimensions));
    }
    dump = json_dumps(body, JSON_COMPACT);
    weft__buf_reset(&e->request);
    if (dump != NULL) {
        err = weft__buf_append(&e->request, dump, strlen(dump) + 1);
    }
    free(dump);
    json_decref(body);
    return err;
}

/* A 2xx answer: parsed, and its length checked against the configured or first one. */
static weft_err
take_answer(struct rt_embedder *e, struct rt_embedding *out, struct rt_embed_error *error)
{
    weft_err err = weft__rt_embed_parse(e->response.body.data, e->response.body.len, out, error);

    if (err != WEFT_OK) {
        return err;
    }
    if (e->dimensions != 0 && out->dims != e->dimensions) {
        set_error(error, "dimension_mismatch", "a vector of %zu numbers, expected %zu", out->dims,
                  e->dimensions);
        weft__rt_embedding_cleanup(out);
        return WEFT_EPARSE;
    }
    e->dimensions = out->dims;
    return WEFT_OK;
}

static weft_err
perform(struct rt_embedder *e, struct rt_embedding *out, struct rt_embed_error *error)
{
    struct weft__http_client_request req;
    weft_err err = WEFT_OK;

    memset(&req, 0, sizeof(req));
    req.url = e->url;
    req.headers = &e->headers;
    req.body = e->request.data;
    req.body_len = e->request.len - 1;
    req.has_body = true;
    req.user_agent = "weft/" WEFT_VERSION;
    req.timeout_ms = e->timeout_ms;
    req.max_response_bytes = MAX_RESPONSE_BYTES;
    err = weft__http_client_perform(e->http, &req, NULL, &e->response);
    if (err == WEFT_ELIMIT || err == WEFT_ENOMEM) {
        set_error(error, err == WEFT_ENOMEM ? "out_of_memory" : "invalid_response",
                  "the answer is over %u bytes or could not be stored", MAX_RESPONSE_BYTES);
        return err == WEFT_ENOMEM ? WEFT_ENOMEM : WEFT_EPARSE;
    }
    if (err == WEFT_ETIMEDOUT) {
        set_error(error, "timeout", "no answer within %u ms", (unsigned)e->timeout_ms);
        return WEFT_ETIMEDOUT;
    }
    if (err != WEFT_OK) {
        set_error(error, "connection", "%s", e->response.error);
        return WEFT_EIO;
    }
    if (e->response.status < 200 || e->response.status >= 300) {
        char type[16];

        snprintf(type, sizeof(type), "%ld", e->response.status);
        set_error(error, type, "HTTP %ld", e->response.status);
        return WEFT_EHTTP;
    }
    return take_answer(e, out, error);
}

weft_err
weft__rt_embed(struct rt_embedder *e,
               const char *text,
               struct rt_embedding *out,
               struct rt_embed_error *error)
{
    weft_err err = WEFT_OK;

    if (out != NULL) {
        memset(out, 0, sizeof(*out));
    }
    if (e == NULL || text == NULL || out == NULL || error == NULL) {
        return WEFT_EINVAL;
    }
    pthread_mutex_lock(&e->lock);
    err = build_body(e, text);
    if (err != WEFT_OK) {
        set_error(error, err == WEFT_EINVAL ? "invalid_request" : "out_of_memory",
                  "could not encode the request");
    } else {
        err = perform(e, out, error);
    }
    pthread_mutex_unlock(&e->lock);
    return err;
}

/* e->url, and from it the host, the port and the endpoint without credentials or query. */
static weft_err
set_url(struct rt_embedder *e, const char *base)
{
    size_t len = strlen(base);
    struct weft__http_url u;
    struct weft__buf b;
    weft_err err = WEFT_ENOMEM;

    memset(&u, 0, sizeof(u));
    len -= len > 0 && base[len - 1] == '/' ? 1 : 0;
    weft__buf_init(&b, 0);
    if (weft__buf_printf(&b, "%.*s/embeddings", (int)len, base) == WEFT_OK) {
        e->url = b.data;
        err = weft__http_url_parse(e->url, false, &u);
    }
    if (err == WEFT_OK &&
        (u.scheme == NULL || u.host == NULL || u.path == NULL || u.port == NULL)) {
        err = WEFT_EINVAL;
    }
    if (err == WEFT_OK) {
        struct weft__buf ep;

        weft__buf_init(&ep, 0);
        e->port = (unsigned)strtoul(u.port, NULL, 10);
        e->host = weft__strdup(u.host);
        err = weft__buf_printf(&ep, "%s://%s:%u%s", u.scheme, u.host, e->port, u.path);
        e->endpoint = ep.data;
        err = e->host == NULL || e->endpoint == NULL ? WEFT_ENOMEM : err;
    }
    weft__http_url_cleanup(&u);
    return err;
}

static weft_err
configure(struct rt_embedder *e, const struct rt_embedder_options *o)
{
    weft_err err = set_url(e, o->base_url);

    e->model = err == WEFT_OK ? weft__strdup(o->model) : NULL;
    err = err == WEFT_OK && e->model == NULL ? WEFT_ENOMEM : err;
    e->timeout_ms = o->timeout_ms != 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
    e->dimensions = o->dimensions;
    e->is_configured_dims = o->dimensions != 0;
    if (err == WEFT_OK) {
        err = weft__http_headers_add(&e->headers, "Content-Type: application/json");
    }
    if (err == WEFT_OK) {
        err = weft__http_headers_add(&e->headers, "Expect:");
    }
    if (err == WEFT_OK && o->api_key != NULL && o->api_key[0] != '\0') {
        err = weft__http_headers_add_bearer(&e->headers, o->api_key);
    }
    if (err == WEFT_OK) {
        /* Redirects are not followed (the client's default): one would resend the text and
         * the key somewhere the user did not configure. */
        err = weft__http_client_new(&e->http);
    }
    return err;
}

weft_err
weft__rt_embedder_new(const struct rt_embedder_options *o, struct rt_embedder **out)
{
    struct rt_embedder *e = NULL;
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (o == NULL || o->model == NULL || o->model[0] == '\0' || o->base_url == NULL ||
        (strncasecmp(o->base_url, "http://", 7) != 0 &&
         strncasecmp(o->base_url, "https://", 8) != 0)) {
        return WEFT_EINVAL;
    }
    if (!weft__http_global_init()) {
        return WEFT_EIO;
    }
    e = weft__calloc(1, sizeof(*e));
    if (e == NULL) {
        return WEFT_ENOMEM;
    }
    pthread_mutex_init(&e->lock, NULL);
    weft__buf_init(&e->request, 0);
    weft__http_response_init(&e->response);
    err = configure(e, o);
    if (err != WEFT_OK) {
        weft__rt_embedder_free(e);
        return err;
    }
    *out = e;
    return WEFT_OK;
}

void
weft__rt_embedder_free(struct rt_embedder *e)
{
    if (e == NULL) {
        return;
    }
    weft__http_client_free(e->http);
    weft__http_headers_cleanup(&e->headers);
    weft__buf_cleanup(&e->request);
    weft__http_response_cleanup(&e->response);
    weft__free(e->url);
    weft__free(e->endpoint);
    weft__free(e->host);
    weft__free(e->model);
    pthread_mutex_destroy(&e->lock);
    weft__free(e);
}

const char *
weft__rt_embedder_endpoint(const struct rt_embedder *e)
{
    return e->endpoint;
}

const char *
weft__rt_embedder_host(const struct rt_embedder *e)
{
    return e->host;
}

unsigned
weft__rt_embedder_port(const struct rt_embedder *e)
{
    return e->port;
}

const char *
weft__rt_embedder_model(const struct rt_embedder *e)
{
    return e->model;
}
