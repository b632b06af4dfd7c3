/* tests/support/embed_server.c - a fake OpenAI-compatible embeddings server (embed_server.h).
 * The synonym table is the whole "model": small enough to reason about in a test. */
#include "embed_server.h"

#include "http_server.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REQUESTS 256

struct recorded {
    char path[512];
    char auth[256];
    json_t *body;
};

struct embed_server {
    struct http_server *http;
    pthread_mutex_t lock;
    embed_mode mode;
    char *key;
    struct recorded req[MAX_REQUESTS];
    size_t count;
};

/* word -> concept dimension; synonyms share one. */
static const struct {
    const char *word;
    int dim;
} concepts[] = {
    {"compute", 0},  {"calculate", 0}, {"fibonacci", 1}, {"fib", 1},      {"series", 2},
    {"sequence", 2}, {"sort", 3},      {"order", 3},     {"list", 4},     {"array", 4},
    {"write", 5},    {"create", 5},    {"file", 6},      {"document", 6}, {"number", 7},
    {"numbers", 7},  {"paint", 8},     {"fence", 9},     {"blue", 10},
};

static int
dim_of(const char *word)
{
    unsigned h = 2166136261u;

    if (strcmp(word, "the") == 0 || strcmp(word, "a") == 0 || strcmp(word, "of") == 0) {
        return -1;
    }
    for (size_t i = 0; i < sizeof(concepts) / sizeof(concepts[0]); i++) {
        if (strcmp(concepts[i].word, word) == 0) {
            return concepts[i].dim;
        }
    }
    for (const char *p = word; *p != '\0'; p++) {
        h = (h ^ (unsigned char)*p) * 16777619u;
    }
    return 16 + (int)(h % 16u);
}

/* The vector of @p text; returns its word count. */
static int
vector_of(const char *text, float *out)
{
    char word[64];
    size_t len = 0;
    int words = 0;

    memset(out, 0, EMBED_SERVER_DIMS * sizeof(float));
    for (const char *p = text;; p++) {
        if (*p != '\0' && isalnum((unsigned char)*p)) {
            if (len + 1 < sizeof(word)) {
                word[len++] = (char)tolower((unsigned char)*p);
            }
            continue;
        }
        if (len > 0) {
            int d = 0;
            word[len] = '\0';
            d = dim_of(word);
            out[d >= 0 ? d : 0] += d >= 0 ? 1.0f : 0.0f;
            words++;
            len = 0;
        }
        if (*p == '\0') {
            break;
        }
    }
    return words;
}

void
embed_server_vector(const char *text, float *out)
{
    (void)vector_of(text, out);
}

static char *
ok_body(const char *model, const char *input, size_t dims)
{
    float v[EMBED_SERVER_DIMS];
    int words = vector_of(input, v);
    json_t *vec = json_array();
    char *text = NULL;
    json_t *root = NULL;

    if (words == 0) {
        v[31] = 1.0f; /* OpenAI never answers an all-zero vector */
    }
    for (size_t i = 0; i < dims; i++) {
        json_array_append_new(vec, json_real(v[i]));
    }
    root = json_pack("{s:s, s:[{s:s, s:i, s:o}], s:s, s:{s:i, s:i}}", "object", "list", "data",
                     "object", "embedding", "index", 0, "embedding", vec, "model", model, "usage",
                     "prompt_tokens", words, "total_tokens", words);
    text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

static void
answer(struct embed_server *s, const struct recorded *r, struct http_server_response *out)
{
    const char *model = json_string_value(json_object_get(r->body, "model"));
    const char *input = json_string_value(json_object_get(r->body, "input"));
    char want[300];

    snprintf(want, sizeof(want), "Bearer %s", s->key != NULL ? s->key : "");
    out->content_type = strdup("application/json");
    if (s->key != NULL && strcmp(r->auth, want) != 0) {
        out->status = 401;
        out->body = strdup("{\"error\":{\"message\":\"Incorrect API key provided\","
                           "\"type\":\"invalid_request_error\",\"code\":\"invalid_api_key\"}}");
    } else if (strcmp(r->path, "/v1/embeddings") != 0 || model == NULL || input == NULL) {
        out->status = 400;
        out->body =
            strdup("{\"error\":{\"message\":\"bad request\",\"type\":\"invalid_request_error\"}}");
    } else if (s->mode == EMBED_MODE_500) {
        out->status = 500;
        out->body = strdup("{\"error\":{\"message\":\"The server had an error\",\"type\":"
                           "\"server_error\"}}");
    } else if (s->mode == EMBED_MODE_GARBAGE) {
        out->body = strdup("<html>not json</html>");
    } else {
        out->body =
            ok_body(model, input,
                    s->mode == EMBED_MODE_WRONG_DIMS ? EMBED_SERVER_DIMS / 2 : EMBED_SERVER_DIMS);
    }
    out->body_len = out->body != NULL ? strlen(out->body) : 0;
}

static void
on_request(void *user_data, struct http_server_request *in, struct http_server_response *out)
{
    struct embed_server *s = user_data;
    struct recorded r;

    memset(&r, 0, sizeof(r));
    snprintf(r.path, sizeof(r.path), "%s", in->path);
    (void)http_header_copy(in->headers, "Authorization", r.auth, sizeof(r.auth));
    r.body = json_loadb(in->body != NULL ? in->body : "", in->body_len, 0, NULL);
    pthread_mutex_lock(&s->lock);
    answer(s, &r, out);
    if (s->count < MAX_REQUESTS) {
        s->req[s->count++] = r;
    } else {
        json_decref(r.body);
    }
    pthread_mutex_unlock(&s->lock);
}

int
embed_server_start(struct embed_server **out)
{
    struct embed_server *s = calloc(1, sizeof(*s));

    if (s == NULL) {
        return -1;
    }
    pthread_mutex_init(&s->lock, NULL);
    if (http_server_start(on_request, s, &s->http) != 0) {
        pthread_mutex_destroy(&s->lock);
        free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void
embed_server_stop(struct embed_server *s)
{
    if (s == NULL) {
        return;
    }
    http_server_stop(s->http);
    for (size_t i = 0; i < s->count; i++) {
        json_decref(s->req[i].body);
    }
    free(s->key);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

const char *
embed_server_base_url(const struct embed_server *s, char *buf, size_t len)
{
    snprintf(buf, len, "http://127.0.0.1:%u/v1", (unsigned)http_server_port(s->http));
    return buf;
}

void
embed_server_expect_key(struct embed_server *s, const char *key)
{
    pthread_mutex_lock(&s->lock);
    free(s->key);
    s->key = key != NULL ? strdup(key) : NULL;
    pthread_mutex_unlock(&s->lock);
}

void
embed_server_set_mode(struct embed_server *s, embed_mode mode)
{
    pthread_mutex_lock(&s->lock);
    s->mode = mode;
    pthread_mutex_unlock(&s->lock);
}

size_t
embed_server_request_count(struct embed_server *s)
{
    size_t n = 0;

    pthread_mutex_lock(&s->lock);
    n = s->count;
    pthread_mutex_unlock(&s->lock);
    return n;
}

const json_t *
embed_server_request_body(struct embed_server *s, size_t i)
{
    const json_t *body = NULL;

    pthread_mutex_lock(&s->lock);
    body = i < s->count ? s->req[i].body : NULL;
    pthread_mutex_unlock(&s->lock);
    return body;
}

const char *
embed_server_request_path(struct embed_server *s, size_t i, char *buf, size_t len)
{
    pthread_mutex_lock(&s->lock);
    snprintf(buf, len, "%s", i < s->count ? s->req[i].path : "");
    pthread_mutex_unlock(&s->lock);
    return buf;
}

const char *
embed_server_request_auth(struct embed_server *s, size_t i, char *buf, size_t len)
{
    pthread_mutex_lock(&s->lock);
    snprintf(buf, len, "%s", i < s->count ? s->req[i].auth : "");
    pthread_mutex_unlock(&s->lock);
    return buf;
}
