/* store/payload.c - content-addressed payloads (payload.h): cut, hash, compress, put back.
 *
 * Chunking is a gear rolling hash (the one FastCDC builds on): each byte shifts a 64-bit
 * fingerprint left and adds a fixed pseudo-random number for the byte, so the fingerprint
 * depends on the last 64 bytes only, and a cut falls where its top bits are zero. Cut points
 * therefore follow the content, not the offset: text inserted or appended moves only the
 * cuts next to it, and a growing conversation shares every chunk of its earlier history.
 * Chunks are at least CHUNK_MIN bytes (no cut is looked for before), about CHUNK_MIN + 1 KiB
 * on average, and at most CHUNK_MAX. The table of numbers and the three sizes are part of the
 * stored format's identity: changing them keeps old records readable but stops new texts
 * from sharing chunks with them.
 *
 * Compression is raw DEFLATE through libdeflate, whose one-shot calls fit: the text is in
 * memory, and the reader knows each chunk's length, so it inflates straight into place. The
 * compressor is built once per thread and level and kept (building one costs several
 * page-sized allocations; a span store writer compresses on its export thread); the OTLP
 * exporters' gzip uses the same ones (weft__deflate_compressor()). Its memory comes from libc's
 * malloc, not weft__malloc: libdeflate 1.14 (Debian 12) has only a process-wide allocator
 * hook, which would change it for every other user of libdeflate in the process.
 */
#include "store/payload.h"

#include "base/env.h"
#include "base/mem.h"

#include <libdeflate.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_MIN  256
#define CHUNK_MAX  8192
#define CHUNK_MASK 0xFFC0000000000000ull /* top 10 bits: a cut every ~1 KiB past CHUNK_MIN */
#define LEVEL      6                     /* libdeflate's default, as zlib's */

/* ------------------------------------------------------------------------------------------ */
/* Hashes                                                                                      */

static void
to_hex(const unsigned char *bin, char hex[WEFT__PAYLOAD_HEX_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < WEFT__PAYLOAD_HASH_LEN; i++) {
        hex[2 * i] = digits[bin[i] >> 4];
        hex[2 * i + 1] = digits[bin[i] & 15];
    }
    hex[WEFT__PAYLOAD_HEX_LEN] = '\0';
}

bool
weft__payload_enabled(void)
{
    return weft__env_bool("WEFT_PAYLOADS", true);
}

void
weft__payload_hash(const void *data, size_t len, char hex[WEFT__PAYLOAD_HEX_LEN + 1])
{
    unsigned char bin[WEFT__PAYLOAD_HASH_LEN];

    (void)SHA256(data, len, bin);
    to_hex(bin, hex);
}

bool
weft__payload_is_ref(const char *s)
{
    size_t i = 0;

    if (s == NULL) {
        return false;
    }
    for (i = 0; i < WEFT__PAYLOAD_HEX_LEN; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return false;
        }
    }
    return s[i] == '\0';
}

/* ------------------------------------------------------------------------------------------ */
/* Cut points                                                                                  */

static uint64_t gear[256];
static pthread_once_t gear_once = PTHREAD_ONCE_INIT;

/* splitmix64 from a fixed seed: any fixed table of well-mixed numbers serves; this one is
 * written down in four lines instead of 256 constants. */
static void
gear_init(void)
{
    uint64_t x = 0x7765667470796c64ull; /* "weftpyld" */

    for (size_t i = 0; i < 256; i++) {
        uint64_t z = (x += 0x9E3779B97F4A7C15ull);

        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        gear[i] = z ^ (z >> 31);
    }
}

/* Length of the chunk that starts at @p p (@p len bytes left). */
static size_t
cut(const unsigned char *p, size_t len)
{
    uint64_t fp = 0;
    size_t end = len < CHUNK_MAX ? len : CHUNK_MAX;

    if (len <= CHUNK_MIN) {
        return len;
    }
    /* The fingerprint forgets bytes after 64 shifts: start it 64 bytes before the first
     * place a cut may fall, so the cut depends on the content there, not on this chunk's
     * start. */
    for (size_t i = CHUNK_MIN - 64; i < end; i++) {
        fp = (fp << 1) + gear[p[i]];
        if (i >= CHUNK_MIN && (fp & CHUNK_MASK) == 0) {
            return i + 1;
        }
    }
    return end;
}

/* ------------------------------------------------------------------------------------------ */
/* Compression                                                                                 */

/* One compressor per thread and level in use, kept for the thread's life: this writer and the
 * OTLP exporters' gzip (exporters/gzip.c) share them. The thread-exit destructor gets the
 * thread's array (the key's value) and frees what it holds. */
#define LEVELS 13 /* libdeflate's 0..12 */

static pthread_key_t compressor_key;
static pthread_once_t compressor_once = PTHREAD_ONCE_INIT;
static bool compressor_key_ready;
static _Thread_local struct libdeflate_compressor *thread_compressors[LEVELS];

static void
compressors_destroy(void *array)
{
    struct libdeflate_compressor **c = array;

    for (int i = 0; i < LEVELS; i++) {
        libdeflate_free_compressor(c[i]);
        c[i] = NULL;
    }
}

static void
compressor_key_init(void)
{
    compressor_key_ready = pthread_key_create(&compressor_key, compressors_destroy) == 0;
}

struct libdeflate_compressor *
weft__deflate_compressor(int level, bool *owned)
{
    struct libdeflate_compressor *c = NULL;

    *owned = false;
    level = level < 0 ? LEVEL : level >= LEVELS ? LEVELS - 1 : level;
    if (thread_compressors[level] != NULL) {
        return thread_compressors[level];
    }
    pthread_once(&compressor_once, compressor_key_init);
    c = libdeflate_alloc_compressor(level);
    if (c == NULL) {
        return NULL;
    }
    if (!compressor_key_ready ||
        pthread_setspecific(compressor_key, (void *)thread_compressors) != 0) {
        *owned = true;
        return c;
    }
    thread_compressors[level] = c;
    return c;
}

/* Put one TEXT record: @p len bytes of @p text under @p hash. */
static weft_err
put_text(const struct weft__payload_sink *sink, const char *hash, const char *text, size_t len)
{
    struct weft__payload_record rec = {.kind = WEFT__PAYLOAD_TEXT, .raw_len = len};
    struct libdeflate_compressor *c = NULL;
    unsigned char *z = NULL;
    bool owned = false;
    size_t bound = 0;
    weft_err err = WEFT_OK;

    if (sink->has != NULL && sink->has(sink->user, hash)) {
        return WEFT_OK;
    }
    c = weft__deflate_compressor(LEVEL, &owned);
    if (c == NULL) {
        return WEFT_ENOMEM;
    }
    bound = libdeflate_deflate_compress_bound(c, len);
    z = weft__malloc(bound);
    if (z == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    rec.len = libdeflate_deflate_compress(c, text, len, z, bound);
    if (rec.len == 0) {
        err = WEFT_ENOMEM; /* cannot happen with the bound's room; never store a broken record */
        goto out;
    }
    memcpy(rec.hash, hash, sizeof(rec.hash));
    rec.data = z;
    err = sink->put(sink->user, &rec);
out:
    weft__free(z);
    if (owned) {
        libdeflate_free_compressor(c);
    }
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Storing                                                                                     */

weft_err
weft__payload_put(const char *text,
                  size_t len,
                  const struct weft__payload_sink *sink,
                  char ref[WEFT__PAYLOAD_HEX_LEN + 1])
{
    const unsigned char *p = (const unsigned char *)text;
    struct weft__payload_record list = {.kind = WEFT__PAYLOAD_CHUNKS, .raw_len = len};
    unsigned char *hashes = NULL;
    size_t count = 0;
    size_t first = 0;
    weft_err err = WEFT_OK;

    ref[0] = '\0';
    if (text == NULL || sink == NULL || sink->put == NULL || len < WEFT__PAYLOAD_MIN ||
        len > WEFT__PAYLOAD_MAX) {
        return WEFT_EINVAL;
    }
    weft__payload_hash(text, len, ref);
    if (sink->has != NULL && sink->has(sink->user, ref)) {
        return WEFT_OK; /* the whole text is there: nothing to cut */
    }
    pthread_once(&gear_once, gear_init);
    first = cut(p, len);
    if (first == len) {
        return put_text(sink, ref, text, len);
    }
    /* At most one hash per CHUNK_MIN bytes, plus the last. */
    hashes = weft__malloc((len / CHUNK_MIN + 1) * WEFT__PAYLOAD_HASH_LEN);
    if (hashes == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t off = 0, n = first; off < len;
         off += n, n = off < len ? cut(p + off, len - off) : 0) {
        unsigned char *bin = hashes + count * WEFT__PAYLOAD_HASH_LEN;
        char hex[WEFT__PAYLOAD_HEX_LEN + 1];

        (void)SHA256(p + off, n, bin);
        to_hex(bin, hex);
        count++;
        err = put_text(sink, hex, text + off, n);
        if (err != WEFT_OK) {
            goto out;
        }
    }
    memcpy(list.hash, ref, sizeof(list.hash));
    list.data = hashes;
    list.len = count * WEFT__PAYLOAD_HASH_LEN;
    err = sink->put(sink->user, &list);
out:
    weft__free(hashes);
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Reading                                                                                     */

void
weft__payload_chunks_each(const struct weft__payload_record *rec,
                          bool (*fn)(const char *hash, void *user),
                          void *user)
{
    char hex[WEFT__PAYLOAD_HEX_LEN + 1];

    if (rec->kind != WEFT__PAYLOAD_CHUNKS) {
        return;
    }
    for (size_t off = 0; off + WEFT__PAYLOAD_HASH_LEN <= rec->len; off += WEFT__PAYLOAD_HASH_LEN) {
        to_hex(rec->data + off, hex);
        if (!fn(hex, user)) {
            return;
        }
    }
}

/* Inflate TEXT record @p rec into @p dst, which has room for exactly rec->raw_len bytes. */
static weft_err
inflate_into(const struct weft__payload_record *rec, char *dst)
{
    struct libdeflate_decompressor *d = NULL;
    size_t got = 0;
    enum libdeflate_result rc;

    if (rec->kind != WEFT__PAYLOAD_TEXT) {
        return WEFT_EIO;
    }
    d = libdeflate_alloc_decompressor(); /* small: a few KiB, no per-thread cache needed */
    if (d == NULL) {
        return WEFT_ENOMEM;
    }
    rc = libdeflate_deflate_decompress(d, rec->data, rec->len, dst, rec->raw_len, &got);
    libdeflate_free_decompressor(d);
    return rc == LIBDEFLATE_SUCCESS && got == rec->raw_len ? WEFT_OK : WEFT_EIO;
}

/* A chunk of the list, sorted by hash so that an arriving record finds its places by binary
 * search (a text may list a quarter of a million chunks). */
struct slot {
    char hex[WEFT__PAYLOAD_HEX_LEN + 1];
    size_t index;
};

/* What a read of one text collects: the top record, then its chunks by position. */
struct gather {
    const char *want; /* the top record's hash, while it is looked for */
    char *dst;        /* where the text goes: raw_len bytes */
    size_t raw_len;
    bool is_found;
    unsigned char *list; /* a CHUNKS record's hashes (copied) */
    size_t count;
    struct slot *slots; /* count of them, by hash, once is_sorted */
    bool is_sorted;
    char **texts; /* chunk i's inflated text, owned at the first place it stands */
    size_t *lens; /* chunk i's length; SIZE_MAX until found */
};

static weft_err
on_top(const struct weft__payload_record *rec, void *user)
{
    struct gather *g = user;

    if (g->is_found || strcmp(rec->hash, g->want) != 0) {
        return WEFT_OK;
    }
    g->is_found = true;
    g->raw_len = rec->raw_len;
    if (rec->raw_len > WEFT__PAYLOAD_MAX) {
        return WEFT_EIO;
    }
    if (rec->kind == WEFT__PAYLOAD_CHUNKS) {
        if (rec->len == 0 || rec->len % WEFT__PAYLOAD_HASH_LEN != 0) {
            return WEFT_EIO;
        }
        g->list = weft__malloc(rec->len);
        if (g->list == NULL) {
            return WEFT_ENOMEM;
        }
        memcpy(g->list, rec->data, rec->len);
        g->count = rec->len / WEFT__PAYLOAD_HASH_LEN;
        return WEFT_OK;
    }
    g->dst = weft__malloc(rec->raw_len + 1);
    if (g->dst == NULL) {
        return WEFT_ENOMEM;
    }
    return inflate_into(rec, g->dst);
}

static int
slot_cmp(const void *a, const void *b)
{
    const struct slot *x = a;
    const struct slot *y = b;
    int c = strcmp(x->hex, y->hex);

    if (c != 0) {
        return c;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

/* A chunk arrived: it may stand at several places of the list (a repeated passage), which
 * share one inflated text, owned by the first. Chunks are inflated into texts of their own,
 * since they may arrive in any order and where a chunk lands depends on the lengths of the
 * chunks before it. */
static weft_err
on_chunk(const struct weft__payload_record *rec, void *user)
{
    struct gather *g = user;
    size_t lo = 0;
    size_t hi = g->count;
    char *text = NULL;
    weft_err err = WEFT_OK;

    while (lo < hi) { /* the first slot whose hash is not below rec's */
        size_t mid = lo + (hi - lo) / 2;

        if (strcmp(g->slots[mid].hex, rec->hash) < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == g->count || strcmp(g->slots[lo].hex, rec->hash) != 0 ||
        g->lens[g->slots[lo].index] != SIZE_MAX) {
        return WEFT_OK; /* not asked for, or a second answer for the same hash */
    }
    text = weft__malloc(rec->raw_len + 1);
    if (text == NULL) {
        return WEFT_ENOMEM;
    }
    err = inflate_into(rec, text);
    if (err != WEFT_OK) {
        weft__free(text);
        return err;
    }
    g->texts[g->slots[lo].index] = text; /* the lowest index: slots sort by index second */
    for (size_t i = lo; i < g->count && strcmp(g->slots[i].hex, rec->hash) == 0; i++) {
        g->lens[g->slots[i].index] = rec->raw_len;
        if (i > lo) {
            g->texts[g->slots[i].index] = text; /* borrowed from the first */
        }
    }
    return WEFT_OK;
}

/* Fetch the chunks of @p g's list and lay them out in order into g->dst. */
static weft_err
gather_chunks(struct gather *g, const struct weft__payload_source *src)
{
    const char **want = NULL;
    size_t wanted = 0;
    size_t at = 0;
    weft_err err = WEFT_ENOMEM;

    g->slots = weft__malloc(g->count * sizeof(*g->slots));
    g->lens = weft__malloc(g->count * sizeof(*g->lens));
    g->texts = weft__calloc(g->count, sizeof(*g->texts));
    want = weft__malloc(g->count * sizeof(*want));
    if (g->slots == NULL || g->lens == NULL || g->texts == NULL || want == NULL) {
        goto out;
    }
    for (size_t i = 0; i < g->count; i++) {
        to_hex(g->list + i * WEFT__PAYLOAD_HASH_LEN, g->slots[i].hex);
        g->slots[i].index = i;
        g->lens[i] = SIZE_MAX;
    }
    qsort(g->slots, g->count, sizeof(*g->slots), slot_cmp);
    g->is_sorted = true;
    for (size_t i = 0; i < g->count; i++) { /* each hash asked for once */
        if (i == 0 || strcmp(g->slots[i].hex, g->slots[i - 1].hex) != 0) {
            want[wanted++] = g->slots[i].hex;
        }
    }
    err = src->get(src->user, want, wanted, on_chunk, g);
    if (err != WEFT_OK) {
        goto out;
    }
    g->dst = weft__malloc(g->raw_len + 1);
    if (g->dst == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < g->count; i++) {
        if (g->lens[i] == SIZE_MAX) {
            err = WEFT_ENOTFOUND;
            goto out;
        }
        if (g->lens[i] > g->raw_len - at) {
            err = WEFT_EIO;
            goto out;
        }
        memcpy(g->dst + at, g->texts[i], g->lens[i]);
        at += g->lens[i];
    }
    err = at == g->raw_len ? WEFT_OK : WEFT_EIO;
out:
    weft__free(want);
    return err;
}

/* Free what a read collected; a chunk text is freed at the first place it stands. */
static void
gather_cleanup(struct gather *g)
{
    for (size_t i = 0; g->is_sorted && i < g->count; i++) {
        if (i == 0 || strcmp(g->slots[i].hex, g->slots[i - 1].hex) != 0) {
            weft__free(g->texts[g->slots[i].index]);
        }
    }
    weft__free(g->dst);
    weft__free(g->list);
    weft__free(g->slots);
    weft__free(g->lens);
    weft__free(g->texts);
}

weft_err
weft__payload_get(const char *ref, const struct weft__payload_source *src, struct weft__buf *out)
{
    struct gather g = {.want = ref};
    char check[WEFT__PAYLOAD_HEX_LEN + 1];
    weft_err err = WEFT_OK;

    if (!weft__payload_is_ref(ref) || src == NULL || src->get == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    err = src->get(src->user, &ref, 1, on_top, &g);
    if (err == WEFT_OK && !g.is_found) {
        err = WEFT_ENOTFOUND;
    }
    if (err == WEFT_OK && g.list != NULL) {
        err = gather_chunks(&g, src);
    }
    if (err == WEFT_OK) {
        weft__payload_hash(g.dst, g.raw_len, check);
        err = strcmp(check, ref) == 0 ? WEFT_OK : WEFT_EIO;
    }
    if (err == WEFT_OK) {
        err = weft__buf_append(out, g.dst, g.raw_len);
    }
    gather_cleanup(&g);
    return err;
}
