/* runtime/common/secrets.c - the process-wide registry of secret values and the scrub that removes
 * them from text (include/weft/secrets.h).
 *
 * Why a registry of values rather than patterns: the built-in redaction (tracing/attrs.c)
 * recognises credential shapes ("sk-...", "Bearer ..."), but a key a local server accepts, a
 * Langfuse public key or an OTLP header value has no recognisable shape. What weft can know is
 * the values it was configured with, so it scrubs exactly those, whatever text carries them.
 *
 * Invariants:
 * - The table is append-only: entries [0, published) are complete and never change until
 *   weft_secrets_clear(). Writers take add_lock and publish an entry with a release store of
 *   the count; readers load the count with acquire and scan without a lock, so a scrub never
 *   waits on a registration.
 * - At most WEFT_SECRETS_MAX entries; each value is WEFT_SECRET_MIN_LEN to MAX_VALUE bytes.
 * - A scrub costs one memmem per entry over the text when nothing matches (the common case).
 */
#define _GNU_SOURCE /* memmem */

#include "runtime/common/secrets.h"

#include "runtime/workflow/workflow.h"

#include "base/buf.h"
#include "base/env.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/str.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VALUE (16u * 1024u)
#define MAX_NAME  47u

struct secret {
    char *value;
    size_t len;
    char marker[MAX_NAME + 13]; /* "[REDACTED:" NAME "]" */
    size_t marker_len;
};

static struct secret table[WEFT_SECRETS_MAX];
static atomic_size_t published;
static pthread_mutex_t add_lock = PTHREAD_MUTEX_INITIALIZER;
static bool is_full_logged;

static bool
valid_name(const char *name)
{
    size_t len = name != NULL ? strlen(name) : 0;

    if (len == 0 || len > MAX_NAME) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.' || c == ':';
        if (!ok) {
            return false;
        }
    }
    return true;
}

/* Add one value under @p name unless it is there already. */
static weft_err
add_one(const char *name, const char *value, size_t len)
{
    size_t n = 0;
    char *copy = NULL;
    weft_err err = WEFT_OK;

    if (len < WEFT_SECRET_MIN_LEN || len > MAX_VALUE) {
        return WEFT_EINVAL;
    }
    pthread_mutex_lock(&add_lock);
    n = atomic_load_explicit(&published, memory_order_relaxed);
    for (size_t i = 0; i < n; i++) {
        if (table[i].len == len && memcmp(table[i].value, value, len) == 0) {
            goto out;
        }
    }
    if (n == WEFT_SECRETS_MAX) {
        if (!is_full_logged) {
            is_full_logged = true;
            WEFT_LOG(WEFT_LOG_WARN,
                     "secrets: the registry holds %u values; %s and later ones are not scrubbed",
                     (unsigned)WEFT_SECRETS_MAX, name);
        }
        err = WEFT_ELIMIT;
        goto out;
    }
    copy = weft__malloc(len + 1);
    if (copy == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    memcpy(copy, value, len);
    copy[len] = '\0';
    table[n].value = copy;
    table[n].len = len;
    table[n].marker_len =
        (size_t)snprintf(table[n].marker, sizeof(table[n].marker), "[REDACTED:%s]", name);
    atomic_store_explicit(&published, n + 1, memory_order_release);
out:
    pthread_mutex_unlock(&add_lock);
    return err;
}

/* Standard base64 with padding of @p len bytes into a new string; NULL when out of memory. */
static char *
base64(const char *data, size_t len)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = (const unsigned char *)data;
    char *out = weft__malloc((len + 2) / 3 * 4 + 1);
    size_t o = 0;

    if (out == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        size_t left = len - i;

        if (left > 1) {
            v |= (uint32_t)p[i + 1] << 8;
        }
        if (left > 2) {
            v |= p[i + 2];
        }
        out[o++] = alphabet[(v >> 18) & 63];
        out[o++] = alphabet[(v >> 12) & 63];
        out[o++] = left > 1 ? alphabet[(v >> 6) & 63] : '=';
        out[o++] = left > 2 ? alphabet[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

/* The JSON string form of @p value when it differs (quotes, backslashes, control characters),
 * so that a belt scrub over serialised JSON still finds it; NULL when it does not differ or
 * out of memory. */
static char *
json_escaped(const char *value, size_t len)
{
    struct weft__buf b;
    bool differs = false;

    weft__buf_init(&b, 0);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)value[i];
        weft_err err = WEFT_OK;

        if (c == '"' || c == '\\') {
            differs = true;
            err = weft__buf_append_byte(&b, '\\');
            if (err == WEFT_OK) {
                err = weft__buf_append_byte(&b, c);
            }
        } else if (c < 0x20) {
            differs = true;
            err = weft__buf_printf(&b, "\\u%04x", c);
        } else {
            err = weft__buf_append_byte(&b, c);
        }
        if (err != WEFT_OK) {
            differs = false;
            break;
        }
    }
    if (!differs) {
        weft__buf_cleanup(&b);
        return NULL;
    }
    return b.data;
}

weft_err
weft_secrets_add(const char *name, const char *value)
{
    size_t len = value != NULL ? strlen(value) : 0;
    char *encoded = NULL;
    weft_err err = WEFT_OK;

    if (!valid_name(name) || value == NULL || len < WEFT_SECRET_MIN_LEN || len > MAX_VALUE) {
        return WEFT_EINVAL;
    }
    err = add_one(name, value, len);
    if (err != WEFT_OK) {
        return err;
    }
    /* Encodings a model, a tool or a header may carry the value in. Best effort: the value
     * itself is registered, and a failure here is logged by add_one when the table is full. */
    encoded = base64(value, len);
    if (encoded != NULL) {
        (void)add_one(name, encoded, strlen(encoded));
        weft__free(encoded);
    }
    encoded = json_escaped(value, len);
    if (encoded != NULL) {
        (void)add_one(name, encoded, strlen(encoded));
        weft__free(encoded);
    }
    return WEFT_OK;
}

size_t
weft_secrets_count(void)
{
    return atomic_load_explicit(&published, memory_order_acquire);
}

void
weft_secrets_clear(void)
{
    size_t n = 0;

    pthread_mutex_lock(&add_lock);
    n = atomic_load_explicit(&published, memory_order_relaxed);
    atomic_store_explicit(&published, 0, memory_order_release);
    for (size_t i = 0; i < n; i++) {
        weft__wipe(table[i].value, table[i].len);
        weft__free(table[i].value);
        memset(&table[i], 0, sizeof(table[i]));
    }
    is_full_logged = false;
    pthread_mutex_unlock(&add_lock);
}

/* Replace every occurrence of entry @p s in @p in (@p len bytes) into @p out. */
static weft_err
replace_all(const struct secret *s, const char *in, size_t len, struct weft__buf *out)
{
    size_t pos = 0;
    weft_err err = WEFT_OK;

    weft__buf_reset(out);
    while (err == WEFT_OK && pos < len) {
        const char *hit = memmem(in + pos, len - pos, s->value, s->len);
        size_t until = hit != NULL ? (size_t)(hit - in) : len;

        err = weft__buf_append(out, in + pos, until - pos);
        if (err == WEFT_OK && hit != NULL) {
            err = weft__buf_append(out, s->marker, s->marker_len);
            until += s->len;
        }
        pos = until;
    }
    if (err == WEFT_OK && out->data == NULL) {
        err = weft__buf_append(out, "", 0); /* an empty result still gets a string */
    }
    return err;
}

weft_err
weft_secrets_scrub(const char *text, size_t len, char **out)
{
    size_t n = atomic_load_explicit(&published, memory_order_acquire);
    size_t hits[WEFT_SECRETS_MAX];
    size_t hit_count = 0;
    struct weft__buf a;
    struct weft__buf b;
    const char *cur = text;
    size_t cur_len = len;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (text == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (table[i].len <= len && memmem(text, len, table[i].value, table[i].len) != NULL) {
            /* Longest first (insertion sort of at most 64): a value that contains another is
             * replaced whole, so no tail of it survives. */
            size_t k = hit_count++;
            while (k > 0 && table[hits[k - 1]].len < table[i].len) {
                hits[k] = hits[k - 1];
                k--;
            }
            hits[k] = i;
        }
    }
    if (hit_count == 0) {
        return WEFT_OK;
    }
    weft__buf_init(&a, 0);
    weft__buf_init(&b, 0);
    for (size_t h = 0; h < hit_count && err == WEFT_OK; h++) {
        struct weft__buf *dst = (h % 2 == 0) ? &a : &b;

        err = replace_all(&table[hits[h]], cur, cur_len, dst);
        cur = dst->data;
        cur_len = dst->len;
    }
    if (err != WEFT_OK) {
        weft__buf_cleanup(&a);
        weft__buf_cleanup(&b);
        return WEFT_ENOMEM;
    }
    /* The last pass wrote into a when hit_count is odd, else into b. */
    if (hit_count % 2 == 1) {
        *out = a.data;
        weft__buf_cleanup(&b);
    } else {
        *out = b.data;
        weft__buf_cleanup(&a);
    }
    return WEFT_OK;
}

void
weft_secrets_text_free(char *text)
{
    weft__free(text);
}

weft_err
weft__rt_secrets_scrub_owned(char **text)
{
    char *scrubbed = NULL;
    weft_err err = WEFT_OK;

    if (text == NULL || *text == NULL) {
        return WEFT_OK;
    }
    err = weft_secrets_scrub(*text, strlen(*text), &scrubbed);
    if (err != WEFT_OK) {
        weft__free(*text);
        *text = NULL;
        return WEFT_ENOMEM;
    }
    if (scrubbed != NULL) {
        weft__free(*text);
        *text = scrubbed;
    }
    return WEFT_OK;
}

void
weft__rt_secrets_scrub_fixed(char *buf, size_t cap)
{
    char *scrubbed = NULL;

    if (buf == NULL || cap == 0) {
        return;
    }
    if (weft_secrets_scrub(buf, strlen(buf), &scrubbed) != WEFT_OK) {
        snprintf(buf, cap, "%s", "[REDACTED]");
        return;
    }
    if (scrubbed != NULL) {
        snprintf(buf, cap, "%s", scrubbed);
        weft__free(scrubbed);
    }
}

/* ---- filling the registry from the configuration --------------------------------------- */

/* A credential value whole, and the credential after an auth scheme ("Bearer xyz" -> "xyz"). */
static void
add_credential(const char *name, const char *value, size_t len)
{
    const char *space = NULL;
    char *copy = weft__strndup(value, len);

    if (copy == NULL) {
        return;
    }
    (void)weft_secrets_add(name, copy);
    space = strrchr(copy, ' ');
    if (space != NULL && space[1] != '\0') {
        (void)weft_secrets_add(name, space + 1);
    }
    weft__free(copy);
}

/* "k1=v1,k2=v2" as OTEL_EXPORTER_OTLP_HEADERS has it: every value, raw and percent-decoded. */
static void
add_header_list(const char *var)
{
    const char *list = weft__env(var);

    while (list != NULL && *list != '\0') {
        const char *end = strchr(list, ',');
        const char *eq = NULL;
        size_t len = end != NULL ? (size_t)(end - list) : strlen(list);

        eq = memchr(list, '=', len);
        if (eq != NULL) {
            const char *v = eq + 1;
            size_t vlen = len - (size_t)(v - list);
            char *decoded = NULL;

            weft__trim(&v, &vlen);
            add_credential(var, v, vlen);
            decoded = weft__percent_decode(v, vlen);
            if (decoded != NULL) {
                add_credential(var, decoded, strlen(decoded));
                weft__free(decoded);
            }
        }
        list = end != NULL ? end + 1 : NULL;
    }
}

static void
add_env(const char *var)
{
    const char *v = weft__env(var);

    if (v != NULL) {
        (void)weft_secrets_add(var, v);
    }
}

void
weft__rt_secrets_load(const struct weft_workflow *wf)
{
    static const char *const header_vars[] = {
        "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_EXPORTER_OTLP_METRICS_HEADERS", "OTEL_EXPORTER_OTLP_LOGS_HEADERS"};
    const char *pk = weft__env("LANGFUSE_PUBLIC_KEY");
    const char *sk = weft__env("LANGFUSE_SECRET_KEY");
    const char *auth = weft__env("WEFT_WATCHDOG_WEBHOOK_AUTHORIZATION");

    for (size_t i = 0; wf != NULL && i < wf->model_count; i++) {
        if (wf->models[i].api_key_env != NULL) {
            add_env(wf->models[i].api_key_env);
        }
    }
    if (wf != NULL && wf->memory.embeddings.api_key_env != NULL) {
        add_env(wf->memory.embeddings.api_key_env);
    }
    for (size_t i = 0; i < sizeof(header_vars) / sizeof(header_vars[0]); i++) {
        add_header_list(header_vars[i]);
    }
    add_env("LANGFUSE_PUBLIC_KEY");
    add_env("LANGFUSE_SECRET_KEY");
    if (pk != NULL && sk != NULL) {
        /* What Langfuse's Basic authentication sends: base64("pk:sk"). */
        struct weft__buf pair;
        char *b64 = NULL;

        weft__buf_init(&pair, 0);
        if (weft__buf_printf(&pair, "%s:%s", pk, sk) == WEFT_OK) {
            b64 = base64(pair.data, pair.len);
        }
        if (b64 != NULL) {
            (void)add_one("LANGFUSE_SECRET_KEY", b64, strlen(b64));
        }
        weft__free(b64);
        if (pair.data != NULL) {
            memset(pair.data, 0, pair.len);
        }
        weft__buf_cleanup(&pair);
    }
    if (auth != NULL) {
        add_credential("WEFT_WATCHDOG_WEBHOOK_AUTHORIZATION", auth, strlen(auth));
    }
}
