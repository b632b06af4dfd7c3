/* tracing/span.h - the span object and the attribute helpers shared by span recording
 * (tracing/span.c) and the interned-key setters (tracing/span_keys.c). Private to tracing/.
 *
 * One allocation per span holds the span, eight attribute slots and a 384-byte arena for
 * copied strings; larger spans grow into arena chunks (WEFT__SPAN_ARENA_MAX in all). The
 * helpers are inline because they are the hot path: the setters and span start are measured
 * in instructions (docs/PERFORMANCE.md), and a call per layer cost a sixth of a span.
 *
 * Invariants: data.attr_count <= limits.attr_count; every attribute value a span points to
 * lives in its arena, and every key either there or in the process-wide table of interned
 * keys (never freed); after end, nothing in the span changes (exporters read it from another
 * thread).
 */
#ifndef WEFT_TRACING_SPAN_H
#define WEFT_TRACING_SPAN_H

#include "sdk.h"

#include <string.h>

#define INLINE_ATTRS         8
#define INLINE_ARENA         384
#define CHUNK_MIN            1024
#define WEFT__SPAN_ARENA_MAX (4u * 1024 * 1024)

/* The attribute setters are layered (public entry, string or scalar path, slot lookup,
 * commit) for clarity; at -O2 the compiler kept each layer a call, and the calls cost about a
 * sixth of a span's instructions. So the layers below the string and scalar paths are forced
 * inline into them (HOT_INLINE, sdk.h), and only the thin entry points (argument checks, the
 * non-recording early return) stay separate (NO_INLINE). */

struct chunk {
    struct chunk *next;
    size_t size;
    _Alignas(8) char data[];
};

struct weft_span {
    /* First: the inline functions of include/weft/trace.h read it (weft__span_head()). */
    struct weft__span_head head;
    bool is_static;
    atomic_uint refs;
    struct weft_span_data data; /* exporters receive &span->data */
    struct weft_provider *provider;
    struct weft_attr *attrs; /* == inline_attrs until it grows */
    uint64_t *key_tags;      /* key_tag() of attrs[i].key; same allocation as attrs */
    uint64_t tag_filter;     /* bit tag_bit(t) set for the tag t of every key (a Bloom filter) */
    size_t attr_cap;
    size_t attr_fast_max;   /* min(attr_cap, limits.attr_count): below it a new key fits as is */
    size_t string_fast_max; /* attr_fast_max, or 0 when string values need the value-length limit
                               or the redaction callback (provider->strings_plain false): the
                               string fast path tests both with one comparison */
    struct weft_event_data *events;
    size_t event_cap;
    struct weft_link_data *links;
    size_t link_cap;
    char *arena;
    size_t arena_left;
    size_t arena_used;  /* bytes in chunks, for the cap */
    uint64_t start_tsc; /* span clock reading at start; 0 when the start came from elsewhere */
    struct chunk *chunks;
    /* Not initialised on reuse: everything from here on is written before it is read. */
    struct weft_span *pool_next;   /* while pooled: next span of the bundle or thread cache */
    struct weft_span *bundle_next; /* while pooled as a bundle's head: the next bundle */
    size_t pool_count;             /* while pooled: spans in the bundle this span heads */
    uint64_t inline_tags[INLINE_ATTRS];
    struct weft_attr inline_attrs[INLINE_ATTRS];
    _Alignas(8) char inline_arena[INLINE_ARENA];
};

/* An interned key (tracing/span_keys.c): the string, and what the setters would otherwise
 * compute from it on every call. Immutable once published. */
struct weft_attr_key {
    const char *name; /* NUL-terminated, in the intern table's storage (never freed) */
    size_t len;
    uint64_t tag;    /* key_tag(name, len) */
    uint64_t bit;    /* tag_bit(tag) */
    bool may_secret; /* weft__may_need_redaction(name, len, "", 0): the key's verdict */
};

/* The slow half of arena_alloc(): open a new chunk. @return NULL past the cap or without
 * memory. */
void *weft__span_arena_grow(struct weft_span *span, size_t size);
/* Double the attribute array (up to the count limit). @return WEFT_OK or WEFT_ENOMEM. */
weft_err weft__span_grow_attrs(struct weft_span *span);
/* The string setter of every string-key entry point, on a recording span: @p key is
 * @p klen bytes (KEY_CSTR: NUL-terminated, measured here). Truncates, redacts and stores. */
#define KEY_CSTR SIZE_MAX
weft_err weft__span_set_string(
    struct weft_span *span, const char *key, size_t klen, const char *value, size_t len);
/* Index of @p key among the span's attributes, or attr_count when absent; the caller has
 * tested the span's key filter. */
size_t
weft__span_find_attr_slow(const struct weft_span *span, const char *key, size_t klen, uint64_t tag);

static HOT_INLINE void *
arena_alloc(struct weft_span *span, size_t size)
{
    void *p = NULL;

    /* Larger than the whole cap: refuse before the rounding below could overflow. */
    if (size > WEFT__SPAN_ARENA_MAX) {
        return NULL;
    }
    size = (size + 7) & ~(size_t)7;
    if (size > span->arena_left) {
        return weft__span_arena_grow(span, size);
    }
    p = span->arena;
    span->arena += size;
    span->arena_left -= size;
    return p;
}

/* Attribute setters are the hottest code in the SDK (a typical span sets five to ten), so
 * the common cases - one string or one scalar - take dedicated paths: the key is measured
 * once (or was measured when interned), looked up through a tag array, and a new key and its
 * string value share one arena allocation (an interned key is not copied at all). Only arrays
 * go through the general store_value().
 *
 * A key's tag packs its length with its first, middle and last bytes. Semantic-convention
 * keys share prefixes ("gen_ai.", "http.request.") but rarely length and final bytes, so the
 * lookup compares one integer per attribute and runs memcmp only on a real candidate. The
 * tag holds the exact length (keys shorter than 2^40 bytes, i.e. every key that fits in
 * memory), so a tag match means equal lengths and memcmp never reads past either key. */
static HOT_INLINE uint64_t
key_tag(const char *key, size_t klen)
{
    return (uint64_t)klen << 24 | (uint64_t)(unsigned char)key[0] << 16 |
           (uint64_t)(unsigned char)key[klen / 2] << 8 | (uint64_t)(unsigned char)key[klen - 1];
}

/* One bit of the span's key filter per tag: a clear bit proves the key is new, which is
 * the common case (a span sets each key once), so the lookup scans nothing. */
static HOT_INLINE uint64_t
tag_bit(uint64_t tag)
{
    return UINT64_C(1) << ((tag ^ (tag >> 8) ^ (tag >> 24)) & 63);
}

/* memcpy for the short strings typical of keys and values, without a call: two fixed-size
 * copies that overlap in the middle. Only bytes inside [src, src + n) are read. */
static HOT_INLINE void
copy_bytes(char *dst, const char *src, size_t n)
{
    if (n >= 8 && n <= 16) {
        memcpy(dst, src, 8);
        memcpy(dst + n - 8, src + n - 8, 8);
    } else if (n > 16 && n <= 32) {
        memcpy(dst, src, 16);
        memcpy(dst + n - 16, src + n - 16, 16);
    } else {
        memcpy(dst, src, n);
    }
}

#endif /* WEFT_TRACING_SPAN_H */
