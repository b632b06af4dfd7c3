/* runtime/dist/sign.c - HMAC-SHA256 message signatures (sign.h).
 *
 * The canonical form is produced by one function that feeds its pieces to a sink: the MAC
 * (EVP_MAC, streamed, so a 16 MiB body is never copied) or a buffer (tests, and anyone who
 * wants to see what is signed). One definition, so what is tested is what is signed.
 */
#include "runtime/dist/sign.h"

#include "base/env.h"
#include "base/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAC_LEN 32

const char *
weft__verify_reason(weft__verify_result v)
{
    switch (v) {
    case WEFT__VERIFY_OK:
        return "ok";
    case WEFT__VERIFY_UNSIGNED:
        return "unsigned";
    case WEFT__VERIFY_MALFORMED:
        return "malformed_signature";
    case WEFT__VERIFY_UNKNOWN_KEY:
        return "unknown_key";
    case WEFT__VERIFY_FORGED:
        return "forged";
    }
    return "forged";
}

/* ------------------------------------------------------------------------------------------ */
/* Keys                                                                                        */

static void
key_cleanup(struct weft__dist_key *k)
{
    if (k->secret != NULL) {
        OPENSSL_cleanse(k->secret, k->len);
        weft__free(k->secret);
    }
    memset(k, 0, sizeof(*k));
}

static weft_err
key_set(struct weft__dist_key *k,
        const char *what,
        const void *secret,
        size_t len,
        char *err,
        size_t err_len)
{
    unsigned char digest[SHA256_DIGEST_LENGTH];

    if (len < WEFT__SIGN_KEY_MIN || len > WEFT__SIGN_KEY_MAX) {
        snprintf(err, err_len, "%s: expected %u to %u bytes, got %zu", what, WEFT__SIGN_KEY_MIN,
                 WEFT__SIGN_KEY_MAX, len);
        return WEFT_EINVAL;
    }
    k->secret = weft__malloc(len);
    if (k->secret == NULL) {
        return WEFT_ENOMEM;
    }
    memcpy(k->secret, secret, len);
    k->len = len;
    (void)SHA256(secret, len, digest);
    snprintf(k->id, sizeof(k->id), "%02x%02x%02x%02x", digest[0], digest[1], digest[2], digest[3]);
    return WEFT_OK;
}

weft_err
weft__dist_keys_set(struct weft__dist_keys *keys,
                    const void *current,
                    size_t current_len,
                    const void *previous,
                    size_t previous_len,
                    char *err,
                    size_t err_len)
{
    struct weft__dist_keys k;
    weft_err e = WEFT_OK;

    memset(&k, 0, sizeof(k));
    e = key_set(&k.current, "WEFT_DIST_KEY", current, current_len, err, err_len);
    if (e == WEFT_OK && previous != NULL) {
        e = key_set(&k.previous, "WEFT_DIST_KEY_PREVIOUS", previous, previous_len, err, err_len);
    }
    if (e != WEFT_OK) {
        weft__dist_keys_cleanup(&k);
        return e;
    }
    weft__dist_keys_cleanup(keys);
    *keys = k;
    return WEFT_OK;
}

/* Read the key file @p path (named by @p var) into @p out (weft__malloc'd, *len bytes): one
 * trailing newline is dropped, as editors and `echo` add one. The file must be a regular file
 * that only its owner may access: a key others can read signs for them too. */
static weft_err
read_key_file(const char *var, const char *path, char **out, size_t *len, char *err, size_t err_len)
{
    struct stat st;
    char *data = NULL;
    ssize_t n = 0;
    size_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

    *out = NULL;
    if (fd < 0) {
        snprintf(err, err_len, "%s %s: cannot open: %s", var, path, strerror(errno));
        return WEFT_EINVAL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, err_len, "%s %s: not a regular file", var, path);
        close(fd);
        return WEFT_EINVAL;
    }
    if ((st.st_mode & 077) != 0) {
        snprintf(err, err_len,
                 "%s %s: group or others may access it (mode %03o); the key must be readable by "
                 "its owner alone: chmod 600 %s",
                 var, path, (unsigned)(st.st_mode & 0777), path);
        close(fd);
        return WEFT_EINVAL;
    }
    data = weft__malloc(WEFT__SIGN_KEY_MAX + 3);
    if (data == NULL) {
        close(fd);
        return WEFT_ENOMEM;
    }
    while (got < WEFT__SIGN_KEY_MAX + 2) {
        n = read(fd, data + got, WEFT__SIGN_KEY_MAX + 2 - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    if (n < 0) {
        snprintf(err, err_len, "%s %s: cannot read: %s", var, path, strerror(errno));
        OPENSSL_cleanse(data, WEFT__SIGN_KEY_MAX + 3);
        weft__free(data);
        return WEFT_EINVAL;
    }
    if (got > 0 && data[got - 1] == '\n') {
        got--;
        if (got > 0 && data[got - 1] == '\r') {
            got--;
        }
    }
    *out = data;
    *len = got;
    return WEFT_OK;
}

/* The secret named by @p var or @p var_file ("WEFT_DIST_KEY", "WEFT_DIST_KEY_FILE"). *out is
 * NULL when neither is set. */
static weft_err
key_from_env(
    const char *var, const char *var_file, char **out, size_t *len, char *err, size_t err_len)
{
    const char *value = weft__env(var);
    const char *path = weft__env(var_file);

    *out = NULL;
    *len = 0;
    if (value != NULL && path != NULL) {
        snprintf(err, err_len, "%s and %s are both set: set one", var, var_file);
        return WEFT_EINVAL;
    }
    if (path != NULL) {
        return read_key_file(var_file, path, out, len, err, err_len);
    }
    if (value != NULL) {
        *len = strlen(value);
        *out = weft__malloc(*len + 1);
        if (*out == NULL) {
            return WEFT_ENOMEM;
        }
        memcpy(*out, value, *len + 1);
    }
    return WEFT_OK;
}

static void
secret_free(char *s, size_t len)
{
    if (s != NULL) {
        OPENSSL_cleanse(s, len);
        weft__free(s);
    }
}

weft_err
weft__dist_keys_from_env(struct weft__dist_keys *keys, char *err, size_t err_len)
{
    char *cur = NULL, *prev = NULL;
    size_t cur_len = 0, prev_len = 0;
    weft_err e = WEFT_OK;

    memset(keys, 0, sizeof(*keys));
    e = key_from_env("WEFT_DIST_KEY", "WEFT_DIST_KEY_FILE", &cur, &cur_len, err, err_len);
    if (e == WEFT_OK) {
        e = key_from_env("WEFT_DIST_KEY_PREVIOUS", "WEFT_DIST_KEY_PREVIOUS_FILE", &prev, &prev_len,
                         err, err_len);
    }
    if (e == WEFT_OK && cur == NULL && prev != NULL) {
        snprintf(err, err_len,
                 "WEFT_DIST_KEY_PREVIOUS is set without WEFT_DIST_KEY: the previous key only "
                 "verifies; set the current key too");
        e = WEFT_EINVAL;
    }
    if (e == WEFT_OK && cur != NULL) {
        e = weft__dist_keys_set(keys, cur, cur_len, prev, prev_len, err, err_len);
    }
    secret_free(cur, cur_len);
    secret_free(prev, prev_len);
    return e;
}

void
weft__dist_keys_cleanup(struct weft__dist_keys *keys)
{
    if (keys == NULL) {
        return;
    }
    key_cleanup(&keys->current);
    key_cleanup(&keys->previous);
}

bool
weft__dist_keys_enabled(const struct weft__dist_keys *keys)
{
    return keys != NULL && keys->current.secret != NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Canonical form                                                                              */

typedef int (*feed_fn)(void *sink, const void *data, size_t len); /* 0: ok */

static int
feed_item(feed_fn feed, void *sink, const char *name, const char *value)
{
    char head[48];
    int n = snprintf(head, sizeof(head), "%zu:%s=", strlen(name) + 1 + strlen(value), name);

    if (n < 0 || (size_t)n >= sizeof(head)) {
        return -1;
    }
    return feed(sink, head, (size_t)n) != 0 || feed(sink, value, strlen(value)) != 0 ||
                   feed(sink, "\n", 1) != 0
               ? -1
               : 0;
}

static int
feed_int(feed_fn feed, void *sink, const char *name, int64_t value)
{
    char text[24];

    snprintf(text, sizeof(text), "%lld", (long long)value);
    return feed_item(feed, sink, name, text);
}

/* The fields in name order; an absent field is left out (its name is inside the length-prefixed
 * item, so an absent field and an empty one differ). Integers are present when > 0, as
 * weft__broker_publish writes them. */
static int
canonical(
    const struct weft__broker_msg *m, const void *body, size_t body_len, feed_fn feed, void *sink)
{
    char head[32];
    int rc = feed(sink, "weft-sig-v1\n", 12);

    if (rc == 0 && m->attempt > 0) {
        rc = feed_int(feed, sink, "attempt", m->attempt);
    }
    if (rc == 0 && m->correlation_id != NULL) {
        rc = feed_item(feed, sink, "correlation_id", m->correlation_id);
    }
    if (rc == 0 && m->message_id != NULL) {
        rc = feed_item(feed, sink, "message_id", m->message_id);
    }
    if (rc == 0 && m->reply_to != NULL) {
        rc = feed_item(feed, sink, "reply_to", m->reply_to);
    }
    if (rc == 0 && m->timestamp_ms > 0) {
        rc = feed_int(feed, sink, "sent_ms", (int64_t)m->timestamp_ms);
    }
    if (rc == 0 && m->traceparent != NULL) {
        rc = feed_item(feed, sink, "traceparent", m->traceparent);
    }
    /* weft__broker_publish leaves an empty tracestate out: so does the signature. */
    if (rc == 0 && m->tracestate != NULL && m->tracestate[0] != '\0') {
        rc = feed_item(feed, sink, "tracestate", m->tracestate);
    }
    if (rc == 0 && m->type != NULL) {
        rc = feed_item(feed, sink, "type", m->type);
    }
    if (rc == 0) {
        snprintf(head, sizeof(head), "%zu:", body_len);
        rc = feed(sink, head, strlen(head));
    }
    if (rc == 0 && body_len > 0) {
        rc = feed(sink, body, body_len);
    }
    return rc;
}

static int
buf_feed(void *sink, const void *data, size_t len)
{
    return weft__buf_append(sink, data, len) == WEFT_OK ? 0 : -1;
}

weft_err
weft__dist_canonical(const struct weft__broker_msg *msg,
                     const void *body,
                     size_t body_len,
                     struct weft__buf *out)
{
    size_t before = out->len;

    if (canonical(msg, body, body_len, buf_feed, out) != 0) {
        weft__buf_truncate(out, before);
        return WEFT_ENOMEM;
    }
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* MAC                                                                                         */

static int
mac_feed(void *sink, const void *data, size_t len)
{
    return EVP_MAC_update(sink, data, len) == 1 ? 0 : -1;
}

static weft_err
mac(const struct weft__dist_key *k,
    const struct weft__broker_msg *msg,
    const void *body,
    size_t body_len,
    unsigned char out[MAC_LEN])
{
    EVP_MAC *alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = alg != NULL ? EVP_MAC_CTX_new(alg) : NULL;
    OSSL_PARAM params[2];
    size_t len = 0;
    weft_err e = WEFT_ENOMEM;

    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
    params[1] = OSSL_PARAM_construct_end();
    if (ctx != NULL && EVP_MAC_init(ctx, k->secret, k->len, params) == 1 &&
        canonical(msg, body, body_len, mac_feed, ctx) == 0 &&
        EVP_MAC_final(ctx, out, &len, MAC_LEN) == 1 && len == MAC_LEN) {
        e = WEFT_OK;
    }
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(alg);
    return e;
}

weft_err
weft__dist_sign(const struct weft__dist_keys *keys,
                struct weft__broker_msg *msg,
                const void *body,
                size_t body_len,
                char out[WEFT__SIGN_LEN])
{
    unsigned char m[MAC_LEN];
    char *p = out;
    weft_err e = WEFT_OK;

    if (!weft__dist_keys_enabled(keys)) {
        return WEFT_EINVAL;
    }
    msg->signature = NULL; /* never part of what it signs */
    e = mac(&keys->current, msg, body, body_len, m);
    if (e != WEFT_OK) {
        return e;
    }
    p += snprintf(p, WEFT__SIGN_LEN, "v1=%s:", keys->current.id);
    for (size_t i = 0; i < MAC_LEN; i++) {
        p += snprintf(p, 3, "%02x", m[i]);
    }
    msg->signature = out;
    return WEFT_OK;
}

static int
hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1; /* weft writes lower case only: anything else is not ours */
}

/* Parse "v1=<8 hex>:<64 hex>". */
static bool
parse_signature(const char *s, char id[9], unsigned char m[MAC_LEN])
{
    if (strlen(s) != WEFT__SIGN_LEN - 1 || strncmp(s, "v1=", 3) != 0 || s[11] != ':') {
        return false;
    }
    for (size_t i = 0; i < 8; i++) {
        if (hex_value(s[3 + i]) < 0) {
            return false;
        }
        id[i] = s[3 + i];
    }
    id[8] = '\0';
    for (size_t i = 0; i < MAC_LEN; i++) {
        int hi = hex_value(s[12 + 2 * i]);
        int lo = hex_value(s[13 + 2 * i]);
        if (hi < 0 || lo < 0) {
            return false;
        }
        m[i] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}

weft__verify_result
weft__dist_verify(const struct weft__dist_keys *keys,
                  const struct weft__broker_msg *msg,
                  const void *body,
                  size_t body_len)
{
    const struct weft__dist_key *k = NULL;
    unsigned char want[MAC_LEN], got[MAC_LEN];
    char id[9];
    struct weft__broker_msg m;

    if (!weft__dist_keys_enabled(keys)) {
        return WEFT__VERIFY_OK;
    }
    if (msg->signature == NULL) {
        return WEFT__VERIFY_UNSIGNED;
    }
    if (!parse_signature(msg->signature, id, got)) {
        return WEFT__VERIFY_MALFORMED;
    }
    if (strcmp(id, keys->current.id) == 0) {
        k = &keys->current;
    } else if (keys->previous.secret != NULL && strcmp(id, keys->previous.id) == 0) {
        k = &keys->previous;
    } else {
        return WEFT__VERIFY_UNKNOWN_KEY;
    }
    m = *msg;
    m.signature = NULL;
    if (mac(k, &m, body, body_len, want) != WEFT_OK) {
        return WEFT__VERIFY_FORGED; /* cannot tell: never accept */
    }
    return CRYPTO_memcmp(want, got, MAC_LEN) == 0 ? WEFT__VERIFY_OK : WEFT__VERIFY_FORGED;
}
