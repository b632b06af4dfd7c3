/* runtime/llm/prompts.c - Langfuse prompt management for agent instructions (see prompts.h).
 *
 * One GET per cache miss through net/http_client, with Basic auth built by libcurl from the project
 * keys (never logged). The answer is checked for the fields weft needs (type, prompt, version); a
 * malformed answer is a failed fetch, so the cached text or the fallback is used.
 */
#include "runtime/llm/prompts.h"

#include "net/http_client.h"

#include "base/buf.h"
#include "base/env.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define CACHE_SLOTS      64
#define DEFAULT_TTL_S    60
#define FETCH_TIMEOUT_MS 5000u
#define MAX_ANSWER_BYTES (1u << 20)
#define DEFAULT_HOST     "https://cloud.langfuse.com"

struct cached {
    char *key; /* "name\nlabel" or "name\n#version"; NULL when the slot is free */
    char *text;
    int64_t version;
    uint64_t fetched_ns;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cached cache[CACHE_SLOTS];

void
weft__rt_prompt_cleanup(struct rt_prompt *p)
{
    if (p != NULL) {
        weft__free(p->text);
        memset(p, 0, sizeof(*p));
    }
}

void
weft__rt_prompt_ref_cleanup(struct rt_prompt_ref *ref)
{
    if (ref != NULL) {
        weft__free(ref->name);
        weft__free(ref->label);
        weft__free(ref->fallback);
        memset(ref, 0, sizeof(*ref));
    }
}

void
weft__rt_prompt_cache_clear(void)
{
    pthread_mutex_lock(&cache_lock);
    for (size_t i = 0; i < CACHE_SLOTS; i++) {
        weft__free(cache[i].key);
        weft__free(cache[i].text);
        memset(&cache[i], 0, sizeof(cache[i]));
    }
    pthread_mutex_unlock(&cache_lock);
}

/* Look @p key up: a copy of the text when present (fresh or not per @p max_age_ns; 0 means
 * any age). */
static bool
cache_get(const char *key, uint64_t max_age_ns, struct rt_prompt *out)
{
    uint64_t now = weft__monotonic_ns();
    bool is_hit = false;

    pthread_mutex_lock(&cache_lock);
    for (size_t i = 0; i < CACHE_SLOTS; i++) {
        struct cached *c = &cache[i];
        if (c->key != NULL && strcmp(c->key, key) == 0 &&
            (max_age_ns == 0 || now - c->fetched_ns <= max_age_ns)) {
            out->text = weft__strdup(c->text);
            out->version = c->version;
            out->is_fallback = false;
            is_hit = out->text != NULL;
            break;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    return is_hit;
}

static void
cache_put(const char *key, const char *text, int64_t version)
{
    struct cached *slot = NULL;
    char *k = weft__strdup(key);
    char *t = weft__strdup(text);

    if (k == NULL || t == NULL) {
        weft__free(k);
        weft__free(t);
        return; /* not cached: the next call fetches again */
    }
    pthread_mutex_lock(&cache_lock);
    for (size_t i = 0; i < CACHE_SLOTS && slot == NULL; i++) {
        if (cache[i].key != NULL && strcmp(cache[i].key, key) == 0) {
            slot = &cache[i];
        }
    }
    for (size_t i = 0; i < CACHE_SLOTS && slot == NULL; i++) {
        if (cache[i].key == NULL) {
            slot = &cache[i];
        }
    }
    if (slot == NULL) { /* full: replace the oldest fetch */
        slot = &cache[0];
        for (size_t i = 1; i < CACHE_SLOTS; i++) {
            if (cache[i].fetched_ns < slot->fetched_ns) {
                slot = &cache[i];
            }
        }
    }
    weft__free(slot->key);
    weft__free(slot->text);
    slot->key = k;
    slot->text = t;
    slot->version = version;
    slot->fetched_ns = weft__monotonic_ns();
    pthread_mutex_unlock(&cache_lock);
}

/* The text of a prompt object: a text prompt's string, or a chat prompt's contents. */
static char *
prompt_text(json_t *answer)
{
    json_t *prompt = json_object_get(answer, "prompt");
    struct weft__buf b;
    size_t i = 0;
    json_t *msg = NULL;

    if (json_is_string(prompt)) {
        return weft__strdup(json_string_value(prompt));
    }
    if (!json_is_array(prompt) || json_array_size(prompt) == 0) {
        return NULL;
    }
    weft__buf_init(&b, 0);
    json_array_foreach(prompt, i, msg)
    {
        const char *content = json_string_value(json_object_get(msg, "content"));
        if (content != NULL) {
            weft__buf_printf(&b, "%s%s", b.len > 0 ? "\n\n" : "", content);
        }
    }
    return b.data;
}

weft_err
weft__prompt_parse_answer(const char *data, size_t len, struct rt_prompt *out)
{
    json_t *doc = json_loadb(data != NULL ? data : "", len, 0, NULL);
    weft_err err = WEFT_EPARSE;

    out->text = doc != NULL ? prompt_text(doc) : NULL;
    if (out->text == NULL || !json_is_integer(json_object_get(doc, "version"))) {
        weft__free(out->text);
        out->text = NULL;
        goto out;
    }
    out->version = json_integer_value(json_object_get(doc, "version"));
    out->is_fallback = false;
    err = WEFT_OK;
out:
    json_decref(doc);
    return err;
}

static weft_err
fetch(const struct rt_prompt_ref *ref, struct rt_prompt *out, char *err, size_t err_len)
{
    const char *host = weft__env("LANGFUSE_HOST");
    const char *pk = weft__env("LANGFUSE_PUBLIC_KEY");
    const char *sk = weft__env("LANGFUSE_SECRET_KEY");
    char *name = NULL;
    char *label = NULL;
    struct weft__buf url;
    struct weft__http_client_request req;
    struct weft__http_response answer;
    weft_err result = WEFT_EIO;

    if (host == NULL) {
        host = weft__env("LANGFUSE_BASE_URL");
    }
    if (pk == NULL || sk == NULL) {
        snprintf(err, err_len,
                 "prompt '%s': Langfuse is not configured (LANGFUSE_PUBLIC_KEY and "
                 "LANGFUSE_SECRET_KEY)",
                 ref->name);
        return WEFT_EINVAL;
    }
    weft__buf_init(&url, 0);
    weft__http_response_init(&answer);
    name = weft__http_escape(ref->name);
    if (ref->version == 0) {
        label = weft__http_escape(ref->label != NULL ? ref->label : "production");
    }
    {
        const char *h = host != NULL ? host : DEFAULT_HOST;
        size_t hl = strlen(h);
        while (hl > 0 && h[hl - 1] == '/') {
            hl--;
        }
        if (ref->version != 0) {
            weft__buf_printf(&url, "%.*s/api/public/v2/prompts/%s?version=%lld", (int)hl, h,
                             name != NULL ? name : "", (long long)ref->version);
        } else {
            weft__buf_printf(&url, "%.*s/api/public/v2/prompts/%s?label=%s", (int)hl, h,
                             name != NULL ? name : "", label != NULL ? label : "");
        }
    }
    if (url.data == NULL || name == NULL || (ref->version == 0 && label == NULL)) {
        result = WEFT_ENOMEM;
        goto out;
    }
    memset(&req, 0, sizeof(req));
    req.url = url.data;
    req.basic_user = pk;
    req.basic_password = sk;
    req.timeout_ms = FETCH_TIMEOUT_MS;
    req.max_response_bytes = MAX_ANSWER_BYTES;
    req.user_agent = "weft/" WEFT_VERSION_STRING " (prompts)";
    if (weft__http_perform(&req, NULL, &answer) != WEFT_OK) {
        snprintf(err, err_len, "prompt '%s': cannot fetch it from Langfuse: %s", ref->name,
                 answer.error[0] != '\0' ? answer.error : "out of memory");
        goto out;
    }
    if (answer.status != 200) {
        snprintf(err, err_len, "prompt '%s' (%s %s): Langfuse answered HTTP %ld", ref->name,
                 ref->version != 0 ? "version" : "label",
                 ref->version != 0 ? "given" : (ref->label != NULL ? ref->label : "production"),
                 answer.status);
        result = answer.status == 404 ? WEFT_ENOTFOUND : WEFT_EHTTP;
        goto out;
    }
    result = weft__prompt_parse_answer(answer.body.data, answer.body.len, out);
    if (result == WEFT_EPARSE) {
        snprintf(err, err_len,
                 "prompt '%s': Langfuse's answer has no text prompt or chat messages and version",
                 ref->name);
    }
out:
    weft__free(name);
    weft__free(label);
    weft__buf_cleanup(&url);
    weft__http_response_cleanup(&answer);
    return result;
}

weft_err
weft__rt_prompt_resolve(const struct rt_prompt_ref *ref,
                        struct rt_prompt *out,
                        char *err,
                        size_t err_len)
{
    uint64_t ttl_ns =
        weft__env_u64("WEFT_LANGFUSE_PROMPT_TTL_S", DEFAULT_TTL_S, 0, 86400) * 1000000000u;
    char key[512];
    weft_err rc = WEFT_OK;

    if (ref == NULL || ref->name == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    if (ref->version != 0) {
        snprintf(key, sizeof(key), "%s\n#%lld", ref->name, (long long)ref->version);
    } else {
        snprintf(key, sizeof(key), "%s\n%s", ref->name,
                 ref->label != NULL ? ref->label : "production");
    }
    if (ttl_ns > 0 && cache_get(key, ttl_ns, out)) {
        return WEFT_OK;
    }
    rc = fetch(ref, out, err, err_len);
    if (rc == WEFT_OK) {
        cache_put(key, out->text, out->version);
        return WEFT_OK;
    }
    if (rc == WEFT_ENOMEM) {
        return rc;
    }
    /* The fetch failed: a stale copy beats the fallback, the fallback beats failing. */
    if (cache_get(key, 0, out)) {
        WEFT_LOG(WEFT_LOG_WARN, "%s; using the cached version %lld", err, (long long)out->version);
        return WEFT_OK;
    }
    if (ref->fallback != NULL) {
        WEFT_LOG(WEFT_LOG_WARN, "%s; using the workflow's fallback text", err);
        out->text = weft__strdup(ref->fallback);
        out->version = 0;
        out->is_fallback = true;
        return out->text != NULL ? WEFT_OK : WEFT_ENOMEM;
    }
    return rc;
}
