/* tracing/span_keys.c - interned attribute keys (weft_key_intern()) and the span setters that
 * take them.
 *
 * A string setter measures its key, computes the key's lookup tag, classifies it for the
 * built-in redaction rules and copies it into the span: work that depends on the key alone and
 * that instrumentation repeats with the same few semantic-convention names on every span. An
 * interned key has all of that done once per process: the setters below take the tag, the
 * filter bit and the redaction verdict from the handle and store the interned string itself
 * as the attribute's key (it is never freed, so exporters may read it after the span ends).
 * What depends on the value - the value-length limit, the redaction of secret-shaped values,
 * the user's callback - is unchanged: any case that needs it goes through the same string
 * path as weft_span_set_string_n(), so redaction behaves exactly as with the string setters.
 *
 * The table is static storage (no allocation, nothing to free at exit) and bounded
 * (WEFT_KEY_INTERN_MAX keys, KEY_BYTES bytes of key text): interning is for the fixed keys of
 * instrumentation, not for keys built from data. Interning takes a mutex; it runs once per key
 * and call site, never per span. Handles are immutable once published, so the setters read
 * them without synchronisation (the caller got the handle through the mutex or from a thread
 * that did).
 */
#include "base/log.h"
#include "span.h"

#include <pthread.h>
#include <string.h>

#define KEY_BYTES  (64 * WEFT_KEY_INTERN_MAX) /* 64 KiB of key text: 64 bytes a key on average */
#define HASH_SLOTS (2 * WEFT_KEY_INTERN_MAX)  /* a power of two, at most half full */

static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
static struct weft_attr_key keys[WEFT_KEY_INTERN_MAX]; /* under intern_lock until published */
static unsigned short slots[HASH_SLOTS];               /* index in keys + 1; 0: empty */
static char key_bytes[KEY_BYTES];
static size_t key_count;
static size_t bytes_used;
static bool full_logged;

static uint64_t
hash_key(const char *key, size_t len)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325); /* FNV-1a */

    for (size_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char)key[i]) * UINT64_C(0x100000001b3);
    }
    return h;
}

weft_err
weft_key_intern(const char *key, const struct weft_attr_key **out)
{
    size_t len = 0;
    size_t slot = 0;
    struct weft_attr_key *k = NULL;
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (key == NULL) {
        return WEFT_EINVAL;
    }
    len = strnlen(key, WEFT_KEY_MAX_LEN + 1);
    if (len == 0 || len > WEFT_KEY_MAX_LEN) {
        return WEFT_EINVAL;
    }
    slot = (size_t)hash_key(key, len) & (HASH_SLOTS - 1);
    pthread_mutex_lock(&intern_lock);
    /* Linear probing; the table is at most half full, so an empty slot ends every search. */
    for (; slots[slot] != 0; slot = (slot + 1) & (HASH_SLOTS - 1)) {
        k = &keys[slots[slot] - 1];
        if (k->len == len && memcmp(k->name, key, len) == 0) {
            *out = k;
            goto out;
        }
    }
    if (key_count == WEFT_KEY_INTERN_MAX || bytes_used + len + 1 > KEY_BYTES) {
        err = WEFT_ELIMIT;
        if (!full_logged) {
            full_logged = true;
            WEFT_LOG(WEFT_LOG_WARN,
                     "interned attribute keys: table full (%d keys); \"%.64s\" and later keys "
                     "are refused (use the string setters for them)",
                     WEFT_KEY_INTERN_MAX, key);
        }
        goto out;
    }
    k = &keys[key_count];
    memcpy(key_bytes + bytes_used, key, len);
    key_bytes[bytes_used + len] = '\0';
    k->name = key_bytes + bytes_used;
    k->len = len;
    k->tag = key_tag(k->name, len);
    k->bit = tag_bit(k->tag);
    /* The verdict every string setter would reach on this key: with it set, values take the
     * full redaction path (weft__span_set_string()), which replaces them whole. */
    k->may_secret = weft__may_need_redaction(k->name, len, "", 0);
    bytes_used += len + 1;
    key_count++;
    slots[slot] = (unsigned short)key_count;
    *out = k;
out:
    pthread_mutex_unlock(&intern_lock);
    return err;
}

const char *
weft_key_name(const struct weft_attr_key *key)
{
    return key == NULL ? "" : key->name;
}

/* Where a setter writes @p key: *i is its index, == attr_count for a new key, after the count
 * limit. @return WEFT_OK or WEFT_ELIMIT (counted). */
static HOT_INLINE weft_err
find_slot(struct weft_span *span, const struct weft_attr_key *key, size_t *i)
{
    size_t n = span->data.attr_count;

    *i = n;
    if ((span->tag_filter & key->bit) != 0) {
        *i = weft__span_find_attr_slow(span, key->name, key->len, key->tag);
    }
    if (*i == n && n >= span->provider->limits.attr_count) {
        span->data.dropped_attrs++;
        return WEFT_ELIMIT;
    }
    return WEFT_OK;
}

/* Store @p value at index @p i (see find_slot()). Called after every allocation of the setter:
 * only growing the attribute array can still fail, and then nothing visible has changed. */
static HOT_INLINE weft_err
commit(struct weft_span *span,
       const struct weft_attr_key *key,
       size_t i,
       const struct weft_value *value)
{
    struct weft_attr *a = NULL;

    if (i == span->data.attr_count) {
        if (i == span->attr_cap && weft__span_grow_attrs(span) != WEFT_OK) {
            span->data.dropped_attrs++;
            return WEFT_ENOMEM;
        }
        span->attrs[i].key = key->name; /* interned: lives as long as the process */
        span->key_tags[i] = key->tag;
        span->tag_filter |= key->bit;
        span->data.attr_count = i + 1;
    }
    a = &span->attrs[i];
    a->value = *value;
    return WEFT_OK;
}

/* The general case of weft__span_set_string_k(): any length, any key, any provider. */
static NO_INLINE weft_err
set_string_k_slow(struct weft_span *span,
                  const struct weft_attr_key *key,
                  const char *value,
                  size_t value_len)
{
    const struct weft_provider *provider = span->provider;
    struct weft_value v;
    size_t i = 0;
    char *p = NULL;
    weft_err err = WEFT_OK;

    /* A length limit, a callback, a secret-named key or a secret-shaped value: the string
     * setters' path, so that truncation and redaction are exactly theirs. */
    if (!provider->strings_plain ||
        (provider->builtin_redaction &&
         (key->may_secret || weft__value_may_hold_secret(value, value_len)))) {
        return weft__span_set_string(span, key->name, key->len, value, value_len);
    }
    err = find_slot(span, key, &i);
    if (err != WEFT_OK) {
        return err;
    }
    if (value_len < WEFT__SPAN_ARENA_MAX) {
        p = arena_alloc(span, value_len + 1);
    }
    if (p == NULL) {
        span->data.dropped_attrs++;
        return WEFT_ENOMEM;
    }
    memcpy(p, value, value_len);
    p[value_len] = '\0';
    v.type = WEFT_VALUE_STRING;
    v.len = value_len;
    v.u.str = p;
    return commit(span, key, i, &v);
}

/* Store a new key at index @p n (the caller checked the key filter and attr_fast_max). */
static HOT_INLINE struct weft_value *
append_key(struct weft_span *span, const struct weft_attr_key *key, size_t n)
{
    struct weft_attr *a = &span->attrs[n];

    a->key = key->name; /* interned: lives as long as the process */
    span->key_tags[n] = key->tag;
    span->tag_filter |= key->bit;
    span->data.attr_count = n + 1;
    return &a->value;
}

/* The setters' fast paths hold no call, so that the compiler saves no register on them: what
 * does not fit - a key set before (its filter bit is set), a full inline attribute array, a
 * value that could hold a secret or needs the value-length limit, a full arena - tail-calls
 * the general case. A short value (below WEFT__SECRET_MIN_LEN, so no secret shape fits in it)
 * under an ordinary key is copied here; longer ones take the general case, which scans them. */
weft_err
weft__span_set_string_k(struct weft_span *span,
                        const struct weft_attr_key *key,
                        const char *value,
                        size_t value_len)
{
    size_t n = span->data.attr_count;
    size_t size = (value_len + 8) & ~(size_t)7; /* value_len + 1, rounded as arena_alloc() */
    struct weft_value *v = NULL;
    char *p = NULL;

    if (value_len >= WEFT__SECRET_MIN_LEN || key->may_secret ||
        (span->tag_filter & key->bit) != 0 || n >= span->string_fast_max ||
        size > span->arena_left) {
        return set_string_k_slow(span, key, value, value_len);
    }
    p = span->arena;
    span->arena += size;
    span->arena_left -= size;
    /* Fewer than 16 bytes: overlapping fixed-size copies, no memcpy call. */
    if (value_len >= 8) {
        memcpy(p, value, 8);
        memcpy(p + value_len - 8, value + value_len - 8, 8);
    } else if (value_len >= 4) {
        memcpy(p, value, 4);
        memcpy(p + value_len - 4, value + value_len - 4, 4);
    } else if (value_len > 0) {
        p[0] = value[0];
        p[value_len / 2] = value[value_len / 2];
        p[value_len - 1] = value[value_len - 1];
    }
    p[value_len] = '\0';
    v = append_key(span, key, n);
    v->type = WEFT_VALUE_STRING;
    v->len = value_len;
    v->u.str = p;
    return WEFT_OK;
}

/* The general case of the scalar setters. */
static NO_INLINE weft_err
set_scalar_k_slow(struct weft_span *span, const struct weft_attr_key *key, struct weft_value v)
{
    size_t i = 0;
    weft_err err = find_slot(span, key, &i);

    if (err != WEFT_OK) {
        return err;
    }
    return commit(span, key, i, &v);
}

/* Whether the scalar fast path applies: a new key, and room without growing. */
static HOT_INLINE bool
scalar_fits(const struct weft_span *span, const struct weft_attr_key *key)
{
    return (span->tag_filter & key->bit) == 0 && span->data.attr_count < span->attr_fast_max;
}

/* The three scalar setters are written out rather than sharing a helper that takes a struct
 * weft_value: with the value passed as a struct, gcc 12 builds and copies it on the fast path
 * (callgrind, attrs5_k: 637 -> 664 instructions a span). */
weft_err
weft__span_set_int_k(struct weft_span *span, const struct weft_attr_key *key, int64_t value)
{
    struct weft_value *v = NULL;
    struct weft_value general;

    if (!scalar_fits(span, key)) {
        general.type = WEFT_VALUE_INT;
        general.len = 0;
        general.u.i = value;
        return set_scalar_k_slow(span, key, general);
    }
    v = append_key(span, key, span->data.attr_count);
    v->type = WEFT_VALUE_INT;
    v->len = 0;
    v->u.i = value;
    return WEFT_OK;
}

weft_err
weft__span_set_double_k(struct weft_span *span, const struct weft_attr_key *key, double value)
{
    struct weft_value *v = NULL;
    struct weft_value general;

    if (!scalar_fits(span, key)) {
        general.type = WEFT_VALUE_DOUBLE;
        general.len = 0;
        general.u.d = value;
        return set_scalar_k_slow(span, key, general);
    }
    v = append_key(span, key, span->data.attr_count);
    v->type = WEFT_VALUE_DOUBLE;
    v->len = 0;
    v->u.d = value;
    return WEFT_OK;
}

weft_err
weft__span_set_bool_k(struct weft_span *span, const struct weft_attr_key *key, bool value)
{
    struct weft_value *v = NULL;
    struct weft_value general;

    if (!scalar_fits(span, key)) {
        general.type = WEFT_VALUE_BOOL;
        general.len = 0;
        general.u.b = value;
        return set_scalar_k_slow(span, key, general);
    }
    v = append_key(span, key, span->data.attr_count);
    v->type = WEFT_VALUE_BOOL;
    v->len = 0;
    v->u.b = value;
    return WEFT_OK;
}
