/* serve/rows_cache.c - view=rows's outlines kept between parts (rows_cache.h): a list from
 * the most to the least recently used, looked up by walking it (it holds a few large views,
 * not many small ones: 64 MiB is about six 100,000-span traces), under one mutex.
 */
#include "rows_cache.h"

#include "base/mem.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct weft__rows_cache {
    pthread_mutex_t lock;
    struct weft__rows_view *newest;
    struct weft__rows_view *oldest;
    size_t max_bytes;
    struct weft__rows_cache_stats st;
};

weft_err
weft__rows_cache_new(size_t max_bytes, struct weft__rows_cache **out)
{
    struct weft__rows_cache *c = weft__calloc(1, sizeof(*c));

    *out = NULL;
    if (c == NULL) {
        return WEFT_ENOMEM;
    }
    pthread_mutex_init(&c->lock, NULL);
    c->max_bytes = max_bytes;
    *out = c;
    return WEFT_OK;
}

static void
view_free(struct weft__rows_view *v)
{
    weft_trace_rows_free(v->rows);
    free(v->crit);
    weft__free(v);
}

/* Take @p v out of the list's links (the lock held); its counts and references unchanged. */
static void
detach(struct weft__rows_cache *c, struct weft__rows_view *v)
{
    if (v->newer != NULL) {
        v->newer->older = v->older;
    } else {
        c->newest = v->older;
    }
    if (v->older != NULL) {
        v->older->newer = v->newer;
    } else {
        c->oldest = v->newer;
    }
    v->newer = v->older = NULL;
}

/* Take @p v out of the cache (the lock held); freed when no request uses it. */
static void
unlink_view(struct weft__rows_cache *c, struct weft__rows_view *v)
{
    detach(c, v);
    v->is_cached = false;
    c->st.bytes -= v->bytes;
    c->st.entries--;
    if (--v->refs == 0) {
        view_free(v);
    }
}

static void
link_newest(struct weft__rows_cache *c, struct weft__rows_view *v)
{
    v->older = c->newest;
    v->newer = NULL;
    if (c->newest != NULL) {
        c->newest->newer = v;
    } else {
        c->oldest = v;
    }
    c->newest = v;
}

void
weft__rows_cache_free(struct weft__rows_cache *cache)
{
    if (cache == NULL) {
        return;
    }
    while (cache->newest != NULL) {
        unlink_view(cache, cache->newest);
    }
    pthread_mutex_destroy(&cache->lock);
    weft__free(cache);
}

static bool
same_stamp(const struct weft_trace_stamp *a, const struct weft_trace_stamp *b)
{
    return a->span_count == b->span_count && a->error_count == b->error_count &&
           a->start_ns == b->start_ns && a->end_ns == b->end_ns;
}

struct weft__rows_view *
weft__rows_cache_get(struct weft__rows_cache *cache,
                     const char *trace_id,
                     const struct weft_trace_stamp *stamp)
{
    struct weft__rows_view *v = NULL;

    if (cache == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&cache->lock);
    for (v = cache->newest; v != NULL && strcmp(v->trace_id, trace_id) != 0; v = v->older) {
    }
    if (v != NULL && !same_stamp(&v->stamp, stamp)) {
        unlink_view(cache, v); /* the trace has grown: read it again */
        v = NULL;
    }
    if (v != NULL) {
        if (v != cache->newest) {
            detach(cache, v);
            link_newest(cache, v);
        }
        v->refs++;
        cache->st.hits++;
    } else {
        cache->st.misses++;
    }
    pthread_mutex_unlock(&cache->lock);
    return v;
}

void
weft__rows_cache_put(struct weft__rows_cache *cache, struct weft__rows_view *view)
{
    struct weft__rows_view *v = NULL;

    if (cache == NULL || view == NULL || view->bytes > cache->max_bytes) {
        return;
    }
    pthread_mutex_lock(&cache->lock);
    for (v = cache->newest; v != NULL && strcmp(v->trace_id, view->trace_id) != 0; v = v->older) {
    }
    if (v != NULL) {
        unlink_view(cache, v); /* an older read of the same trace */
    }
    while (cache->oldest != NULL && cache->st.bytes + view->bytes > cache->max_bytes) {
        unlink_view(cache, cache->oldest);
        cache->st.evictions++;
    }
    view->refs++;
    view->is_cached = true;
    cache->st.bytes += view->bytes;
    cache->st.entries++;
    link_newest(cache, view);
    pthread_mutex_unlock(&cache->lock);
}

void
weft__rows_view_release(struct weft__rows_cache *cache, struct weft__rows_view *view)
{
    bool is_last = false;

    if (view == NULL) {
        return;
    }
    if (cache != NULL) {
        pthread_mutex_lock(&cache->lock);
    }
    is_last = --view->refs == 0;
    if (cache != NULL) {
        pthread_mutex_unlock(&cache->lock);
    }
    if (is_last) {
        view_free(view);
    }
}

void
weft__rows_cache_stats(struct weft__rows_cache *cache, struct weft__rows_cache_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (cache == NULL) {
        return;
    }
    pthread_mutex_lock(&cache->lock);
    *out = cache->st;
    pthread_mutex_unlock(&cache->lock);
}
