/* store/payload_batch.c - the payload records of one batch of spans (store.h): collected while
 * the attribute columns are written, each record once, then written by the backend in the
 * batch's transaction; and the reader's side, references in an attributes object replaced by
 * their text.
 *
 * Why collected rather than written as they come: the columns of a batch may be built before
 * the writer holds its transaction (OTLP ingest builds them in parallel, exporters/ingest.c),
 * and a record must be in the same transaction as the first span that refers to it, or
 * collection could take it in between.
 */
#include "store.h"

#include "base/log.h"
#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
weft__store_payloads_init(struct weft__store_payloads *pl)
{
    memset(pl, 0, sizeof(*pl));
    weft__buf_init(&pl->data, 0);
    pl->is_enabled = weft__payload_enabled();
}

void
weft__store_payloads_reset(struct weft__store_payloads *pl)
{
    weft__buf_reset(&pl->data);
    pl->count = 0;
    if (pl->index != NULL) {
        memset(pl->index, 0, pl->index_cap * sizeof(*pl->index));
    }
}

void
weft__store_payloads_cleanup(struct weft__store_payloads *pl)
{
    weft__buf_cleanup(&pl->data);
    weft__free(pl->recs);
    weft__free(pl->index);
    memset(pl, 0, sizeof(*pl));
}

/* The hash's first 8 hex digits as a number: already uniform. */
static size_t
slot_of(const char *hash, size_t cap)
{
    size_t h = 0;

    for (int i = 0; i < 8; i++) {
        h = h * 16 + (size_t)(hash[i] <= '9' ? hash[i] - '0' : hash[i] - 'a' + 10);
    }
    return h & (cap - 1);
}

/* The slot of @p hash in the index: where it is, or the empty slot where it would go. */
static size_t
find_slot(const struct weft__store_payloads *pl, const char *hash)
{
    size_t at = slot_of(hash, pl->index_cap);

    while (pl->index[at] != 0 && strcmp(pl->recs[pl->index[at] - 1].hash, hash) != 0) {
        at = (at + 1) & (pl->index_cap - 1);
    }
    return at;
}

/* Room for one more record, the index kept under half full. */
static weft_err
reserve_one(struct weft__store_payloads *pl)
{
    if (pl->count == pl->cap) {
        size_t cap = pl->cap == 0 ? 64 : 2 * pl->cap;
        struct weft__store_payload_rec *recs = NULL;

        /* The index holds i + 1 in 32 bits: refuse before reallocating, since a successful
         * realloc may have moved (and freed) the old array. */
        if (cap > UINT32_MAX / 2) {
            return WEFT_ENOMEM;
        }
        recs = weft__realloc(pl->recs, cap * sizeof(*recs));
        if (recs == NULL) {
            return WEFT_ENOMEM;
        }
        pl->recs = recs;
        pl->cap = cap;
    }
    if (2 * (pl->count + 1) > pl->index_cap) {
        size_t cap = pl->index_cap == 0 ? 256 : 2 * pl->index_cap;
        uint32_t *index = weft__calloc(cap, sizeof(*index));

        if (index == NULL) {
            return WEFT_ENOMEM;
        }
        weft__free(pl->index);
        pl->index = index;
        pl->index_cap = cap;
        for (size_t i = 0; i < pl->count; i++) {
            pl->index[find_slot(pl, pl->recs[i].hash)] = (uint32_t)(i + 1);
        }
    }
    return WEFT_OK;
}

static bool
batch_has(void *user, const char *hash)
{
    struct weft__store_payloads *pl = user;

    return pl->index_cap > 0 && pl->index[find_slot(pl, hash)] != 0;
}

static weft_err
batch_put(void *user, const struct weft__payload_record *rec)
{
    struct weft__store_payloads *pl = user;
    struct weft__store_payload_rec *r = NULL;
    size_t off = pl->data.len;
    weft_err err = reserve_one(pl);

    if (err != WEFT_OK) {
        return err;
    }
    if (pl->index[find_slot(pl, rec->hash)] != 0) {
        return WEFT_OK;
    }
    err = weft__buf_append(&pl->data, rec->data, rec->len);
    if (err != WEFT_OK) {
        return err;
    }
    r = &pl->recs[pl->count];
    memcpy(r->hash, rec->hash, sizeof(r->hash));
    r->kind = rec->kind;
    r->raw_len = rec->raw_len;
    r->off = off;
    r->len = rec->len;
    pl->index[find_slot(pl, rec->hash)] = (uint32_t)(pl->count + 1);
    pl->count++;
    return WEFT_OK;
}

weft_err
weft__store_payloads_add(struct weft__store_payloads *pl,
                         const char *text,
                         size_t len,
                         char ref[WEFT__PAYLOAD_HEX_LEN + 1])
{
    struct weft__payload_sink sink = {batch_has, batch_put, pl};

    return weft__payload_put(text, len, &sink, ref);
}

static int
rec_cmp(const void *a, const void *b)
{
    return strcmp(((const struct weft__store_payload_rec *)a)->hash,
                  ((const struct weft__store_payload_rec *)b)->hash);
}

void
weft__store_payloads_sort(struct weft__store_payloads *pl)
{
    if (pl->count > 1) {
        qsort(pl->recs, pl->count, sizeof(*pl->recs), rec_cmp);
        memset(pl->index, 0, pl->index_cap * sizeof(*pl->index));
        for (size_t i = 0; i < pl->count; i++) {
            pl->index[find_slot(pl, pl->recs[i].hash)] = (uint32_t)(i + 1);
        }
    }
}

const unsigned char *
weft__store_payloads_data(const struct weft__store_payloads *pl, size_t i)
{
    return (const unsigned char *)pl->data.data + pl->recs[i].off;
}

/* ------------------------------------------------------------------------------------------ */
/* Reading                                                                                     */

/* The reference of @p value when it is {"type":"payload","value":REF}, else NULL. */
static const char *
ref_of(const json_t *value)
{
    const char *type = json_string_value(json_object_get(value, "type"));
    const char *ref = json_string_value(json_object_get(value, "value"));

    if (!json_is_object(value) || type == NULL || strcmp(type, "payload") != 0) {
        return NULL;
    }
    return ref;
}

weft_err
weft__store_resolve_payloads(json_t *attrs,
                             const struct weft__payload_source *src,
                             const bool *is_db_failed,
                             const char *where)
{
    const char *key = NULL;
    json_t *value = NULL;
    struct weft__buf text;
    weft_err err = WEFT_OK;

    if (!json_is_object(attrs)) {
        return WEFT_OK;
    }
    weft__buf_init(&text, WEFT__PAYLOAD_MAX);
    json_object_foreach(attrs, key, value)
    {
        const char *ref = ref_of(value);
        json_t *str = NULL;
        weft_err got = WEFT_OK;

        if (ref == NULL) {
            continue;
        }
        weft__buf_reset(&text);
        got = weft__payload_get(ref, src, &text);
        if (got == WEFT_OK) {
            str = json_stringn(text.data, text.len);
        } else if (got == WEFT_ENOMEM) {
            err = WEFT_ENOMEM;
            break;
        } else if (is_db_failed != NULL && *is_db_failed) {
            err = WEFT_EIO; /* the database failed, not the record: the read fails */
            break;
        } else {
            char msg[160];
            const char *what = got == WEFT_ENOTFOUND ? "missing from" : "damaged in";

            snprintf(msg, sizeof(msg), "(weft: payload %.64s is %s the store)", ref, what);
            WEFT_LOG(WEFT_LOG_WARN, "store %s: attribute %s: payload %.64s is %s the store", where,
                     key, ref, what);
            str = json_string(msg);
        }
        if (str == NULL || json_object_set_new(attrs, key, str) != 0) {
            err = WEFT_ENOMEM;
            break;
        }
    }
    weft__buf_cleanup(&text);
    return err;
}
