/* serve/rows_cache.h - the ordered outline of a trace that `view=rows` answers from
 * (api_rows.c), kept between the parts a page asks for: without it every later part read and
 * ordered the whole trace again (docs/PERFORMANCE.md, "The explorer").
 *
 * An entry is keyed by the trace's id and its stamp (weft_store_trace_stamp(), read before
 * the trace): a trace a writer has stored spans of since is read again, not served stale.
 * The cache is bounded by bytes (the entries' estimated size), least recently used out first;
 * a view larger than the bound is not kept. Thread-safe: one mutex around the lookups; an
 * entry in use is counted (refs) and freed by the last release, so an eviction never frees
 * a view a request is still writing from. Internal to serve/.
 */
#ifndef WEFT_SERVE_ROWS_CACHE_H
#define WEFT_SERVE_ROWS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/store.h>

/* What view=rows writes every part from: the rows in tree order and what is computed over the
 * whole trace (api_rows.c, weft__api_rows_view()). */
struct weft__rows_view {
    struct weft_trace_rows *rows; /* owned */
    const struct weft_trace_row *r;
    size_t n;
    bool *crit;    /* on the critical path, per row (owned) */
    uint64_t t0;   /* the trace's first start, ns */
    uint64_t end;  /* its last end, in the rows' unit after t0 */
    size_t errors; /* rows with status ERROR */
    size_t bytes;  /* about what it holds */
    /* The cache's (rows_cache.c). */
    char trace_id[WEFT_TRACE_ID_HEX_LEN + 1];
    struct weft_trace_stamp stamp;
    unsigned refs;
    bool is_cached;
    struct weft__rows_view *newer;
    struct weft__rows_view *older;
};

struct weft__rows_cache;

struct weft__rows_cache_stats {
    uint64_t hits;      /* parts answered from a kept view */
    uint64_t misses;    /* parts that read the trace (none kept, or its stamp changed) */
    uint64_t evictions; /* views dropped to stay under the bound */
    size_t bytes;       /* what the kept views hold, about */
    size_t entries;
};

/* A cache of at most @p max_bytes. @return WEFT_OK or WEFT_ENOMEM (*out NULL). */
weft_err weft__rows_cache_new(size_t max_bytes, struct weft__rows_cache **out);

/* Free @p cache and the views it keeps (none may be in use). NULL is a no-op. */
void weft__rows_cache_free(struct weft__rows_cache *cache);

/* The view kept for @p trace_id at @p stamp, counted in use (give it back with
 * weft__rows_view_release()); NULL when none (a miss; a view of another stamp is dropped).
 * NULL @p cache: NULL, nothing counted. */
struct weft__rows_view *weft__rows_cache_get(struct weft__rows_cache *cache,
                                             const char *trace_id,
                                             const struct weft_trace_stamp *stamp);

/* Keep @p view (its trace_id and stamp set, in use by the caller, who still releases it) as
 * the most recent; it replaces a view of the same trace and evicts the least recent ones
 * beyond the bound. A view over the bound alone, or a NULL @p cache: not kept. */
void weft__rows_cache_put(struct weft__rows_cache *cache, struct weft__rows_view *view);

/* Give back a view from weft__rows_cache_get(), weft__rows_cache_put() or a new one (refs 1,
 * never kept: @p cache may be NULL); the last user of a view no longer kept frees it. */
void weft__rows_view_release(struct weft__rows_cache *cache, struct weft__rows_view *view);

/* The counters and size, read under the lock. NULL @p cache: zeros. */
void weft__rows_cache_stats(struct weft__rows_cache *cache, struct weft__rows_cache_stats *out);

#endif /* WEFT_SERVE_ROWS_CACHE_H */
