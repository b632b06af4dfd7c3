/* runtime/state/state_payloads.c - storing the state's long texts as payloads and collecting the
 * records a deleted run leaves behind (state_payloads.h).
 *
 * Collection starts from the deleted run's own references, not from the whole table: only a
 * record one of them reaches can have lost its last referrer, so the work grows with the run,
 * not with the store. A reference stays when a row of another run holds it. One that does not
 * goes; if it is a list (CHUNKS), its chunks become candidates too, and so does a one-chunk
 * text, which may also be a chunk of some longer text. A candidate chunk stays when a row holds
 * it or any list that stays names it; telling that takes one scan of the lists, made only when
 * there are candidates. Lists hold 32 bytes per ~1 KiB of text, so the scan reads about 3 % of
 * the texts' length. Records no candidate reaches (left by a write that
 * failed before its transaction could roll them back) are not looked for.
 */
#include "runtime/state/state_payloads.h"

#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

void
weft__hash_set_init(struct weft__hash_set *set)
{
    memset(set, 0, sizeof(*set));
}

void
weft__hash_set_cleanup(struct weft__hash_set *set)
{
    if (set == NULL) {
        return;
    }
    weft__free(set->hashes);
    memset(set, 0, sizeof(*set));
}

weft_err
weft__hash_set_add(struct weft__hash_set *set, const char *hash)
{
    if (!weft__payload_is_ref(hash)) {
        return WEFT_OK;
    }
    if (set->count == set->cap) {
        size_t cap = set->cap == 0 ? 16 : set->cap * 2;
        void *grown = weft__realloc(set->hashes, cap * sizeof(*set->hashes));

        if (grown == NULL) {
            return WEFT_ENOMEM;
        }
        set->hashes = grown;
        set->cap = cap;
    }
    memcpy(set->hashes[set->count++], hash, WEFT__PAYLOAD_HEX_LEN + 1);
    set->is_sorted = false;
    return WEFT_OK;
}

static int
hash_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void
hash_set_sort(struct weft__hash_set *set)
{
    size_t kept = 0;

    if (set->is_sorted) {
        return;
    }
    if (set->count > 0) {
        qsort(set->hashes, set->count, sizeof(*set->hashes), hash_cmp);
    }
    for (size_t i = 0; i < set->count; i++) {
        if (kept == 0 || strcmp(set->hashes[i], set->hashes[kept - 1]) != 0) {
            memmove(set->hashes[kept++], set->hashes[i], sizeof(*set->hashes));
        }
    }
    set->count = kept;
    set->is_sorted = true;
}

/* The index of @p hash in the sorted set, or SIZE_MAX. */
static size_t
hash_set_find(struct weft__hash_set *set, const char *hash)
{
    char(*hit)[WEFT__PAYLOAD_HEX_LEN + 1] = NULL;

    hash_set_sort(set);
    if (set->count == 0) {
        return SIZE_MAX;
    }
    hit = bsearch(hash, set->hashes, set->count, sizeof(*set->hashes), hash_cmp);
    return hit != NULL ? (size_t)(hit - set->hashes) : SIZE_MAX;
}

bool
weft__hash_set_has(struct weft__hash_set *set, const char *hash)
{
    return hash_set_find(set, hash) != SIZE_MAX;
}

weft_err
weft__state_payload_put(const char *text,
                        const struct weft__payload_sink *sink,
                        char ref[WEFT__PAYLOAD_HEX_LEN + 1],
                        bool *is_ref)
{
    size_t len = text != NULL ? strlen(text) : 0;
    weft_err err = WEFT_OK;

    *is_ref = false;
    ref[0] = '\0';
    if (len < WEFT__PAYLOAD_MIN || len > WEFT__PAYLOAD_MAX || !weft__payload_enabled()) {
        return WEFT_OK;
    }
    err = weft__payload_put(text, len, sink, ref);
    *is_ref = err == WEFT_OK;
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Collection                                                                                  */

/* One record looked up by hash: its kind, and a list's chunks added to a set. */
struct probe {
    const char *want;
    bool is_found;
    weft__payload_kind kind;
    struct weft__hash_set *chunks;
    weft_err err;
};

static bool
probe_chunk(const char *hash, void *user)
{
    struct probe *p = user;

    p->err = weft__hash_set_add(p->chunks, hash);
    return p->err == WEFT_OK;
}

static weft_err
on_probe(const struct weft__payload_record *rec, void *user)
{
    struct probe *p = user;

    if (p->is_found || strcmp(rec->hash, p->want) != 0) {
        return WEFT_OK;
    }
    p->is_found = true;
    p->kind = rec->kind;
    weft__payload_chunks_each(rec, probe_chunk, p);
    return p->err;
}

/* The scan of the lists: each chunk a list that stays names is marked as kept. */
struct scan {
    struct weft__hash_set *dead;    /* lists that go: what they name does not count */
    struct weft__hash_set *pending; /* candidate chunks, sorted */
    bool *is_kept;                  /* by index into pending */
};

static bool
scan_chunk(const char *hash, void *user)
{
    struct scan *s = user;
    size_t i = hash_set_find(s->pending, hash);

    if (i != SIZE_MAX) {
        s->is_kept[i] = true;
    }
    return true;
}

static weft_err
on_list(const struct weft__payload_record *rec, void *user)
{
    struct scan *s = user;

    if (rec->kind == WEFT__PAYLOAD_CHUNKS && !weft__hash_set_has(s->dead, rec->hash)) {
        weft__payload_chunks_each(rec, scan_chunk, s);
    }
    return WEFT_OK;
}

weft_err
weft__state_payloads_collect(const struct weft__state_payload_gc *gc,
                             struct weft__hash_set *refs,
                             bool is_dry_run,
                             uint64_t *records)
{
    struct weft__hash_set dead;
    struct weft__hash_set chunks;
    struct weft__hash_set pending;
    struct scan scan = {.dead = &dead, .pending = &pending};
    bool is_live = false;
    weft_err err = WEFT_OK;

    *records = 0;
    weft__hash_set_init(&dead);
    weft__hash_set_init(&chunks);
    weft__hash_set_init(&pending);
    hash_set_sort(refs);
    for (size_t i = 0; err == WEFT_OK && i < refs->count; i++) {
        struct probe p = {.want = refs->hashes[i], .chunks = &chunks};
        const char *want = refs->hashes[i];

        err = gc->is_referenced(gc->user, want, &is_live);
        if (err != WEFT_OK || is_live) {
            continue;
        }
        err = gc->source.get(gc->source.user, &want, 1, on_probe, &p);
        if (err != WEFT_OK || !p.is_found) {
            continue; /* an error, or collected already */
        }
        /* A list is only ever a text's reference; a one-chunk text may be a chunk as well. */
        err = p.kind == WEFT__PAYLOAD_CHUNKS ? weft__hash_set_add(&dead, want)
                                             : weft__hash_set_add(&chunks, want);
    }
    hash_set_sort(&chunks);
    for (size_t i = 0; err == WEFT_OK && i < chunks.count; i++) {
        err = gc->is_referenced(gc->user, chunks.hashes[i], &is_live);
        if (err == WEFT_OK && !is_live) {
            err = weft__hash_set_add(&pending, chunks.hashes[i]);
        }
    }
    hash_set_sort(&pending);
    hash_set_sort(&dead);
    if (err == WEFT_OK && pending.count > 0) {
        scan.is_kept = weft__calloc(pending.count, sizeof(*scan.is_kept));
        err = scan.is_kept == NULL ? WEFT_ENOMEM : gc->lists_each(gc->user, on_list, &scan);
    }
    for (size_t i = 0; err == WEFT_OK && i < pending.count; i++) {
        if (!scan.is_kept[i]) {
            err = weft__hash_set_add(&dead, pending.hashes[i]);
        }
    }
    hash_set_sort(&dead);
    for (size_t i = 0; err == WEFT_OK && i < dead.count; i++) {
        err = is_dry_run ? WEFT_OK : gc->del(gc->user, dead.hashes[i]);
        *records += err == WEFT_OK ? 1 : 0;
    }
    if (err != WEFT_OK) {
        *records = 0;
    }
    weft__free(scan.is_kept);
    weft__hash_set_cleanup(&dead);
    weft__hash_set_cleanup(&chunks);
    weft__hash_set_cleanup(&pending);
    return err;
}
