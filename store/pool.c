/* store/pool.c - a bounded pool of open read handles of one span store
 * (weft_store_pool_*(), include/weft/store.h), for servers that read the store per request
 * (`weft serve`'s API, `weft mcp serve`'s tools).
 *
 * Opening a store is a libpq connection on PostgreSQL (TCP, authentication and a backend
 * process forked by the server: milliseconds, and a connection slot) and a schema check on
 * SQLite; a pooled handle skips both. The idle handles are a stack under one mutex (libmicrohttpd
 * serves requests on several threads): the most recently released is handed out first, so a
 * quiet server keeps using one warm connection. Opening and closing happen outside the mutex.
 *
 * Invariants: idle_count <= max_idle; an idle handle is outside any transaction, so its next
 * read sees every commit (PostgreSQL: READ COMMITTED statements; SQLite: WAL readers start a
 * snapshot per read); a handle is either idle here or held by exactly one caller.
 * A handle whose connection broke is closed on release rather than kept (the backend's
 * is_reusable()); one that broke while idle (the server restarted) is found so on acquire, or
 * makes its connection again on its first read (pg_read.c), whichever comes first.
 */
#include "store.h"

#include "base/mem.h"

#include <pthread.h>
#include <string.h>

struct weft_store_pool {
    pthread_mutex_t lock;
    char *location; /* NULL: the default, looked up at each open */
    size_t max_idle;
    struct weft_store **idle; /* max_idle slots; [0, idle_count) in use, under lock */
    size_t idle_count;
    struct weft_store_pool_stats stats; /* under lock (idle: computed on read) */
};

weft_err
weft_store_pool_new(const char *location, size_t max_idle, struct weft_store_pool **out)
{
    struct weft_store_pool *pool = NULL;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    max_idle = max_idle > 0 ? max_idle : WEFT_STORE_POOL_DEFAULT_IDLE;
    pool = weft__calloc(1, sizeof(*pool));
    if (pool == NULL) {
        return WEFT_ENOMEM;
    }
    pool->max_idle = max_idle;
    pool->idle = weft__calloc(max_idle, sizeof(*pool->idle));
    pool->location = location != NULL ? weft__strdup(location) : NULL;
    if (pool->idle == NULL || (location != NULL && pool->location == NULL)) {
        weft__free(pool->idle);
        weft__free(pool->location);
        weft__free(pool);
        return WEFT_ENOMEM;
    }
    pthread_mutex_init(&pool->lock, NULL);
    *out = pool;
    return WEFT_OK;
}

weft_err
weft_store_pool_acquire(struct weft_store_pool *pool, struct weft_store **out)
{
    struct weft_store *store = NULL;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (pool == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    for (;;) {
        bool is_reusable = false;

        pthread_mutex_lock(&pool->lock);
        store = pool->idle_count > 0 ? pool->idle[--pool->idle_count] : NULL;
        pthread_mutex_unlock(&pool->lock);
        if (store == NULL) {
            break;
        }
        is_reusable = weft__store_is_reusable(store);
        pthread_mutex_lock(&pool->lock);
        pool->stats.reused += is_reusable ? 1 : 0;
        pool->stats.discarded += is_reusable ? 0 : 1;
        pthread_mutex_unlock(&pool->lock);
        if (is_reusable) {
            *out = store;
            return WEFT_OK;
        }
        weft_store_close(store); /* lost while idle: the next one, or a new one */
    }
    err = weft_store_open(pool->location, &store);
    if (err != WEFT_OK) {
        return err;
    }
    pthread_mutex_lock(&pool->lock);
    pool->stats.opened++;
    pthread_mutex_unlock(&pool->lock);
    *out = store;
    return WEFT_OK;
}

void
weft_store_pool_release(struct weft_store_pool *pool, struct weft_store *store)
{
    bool is_kept = false;
    bool is_reusable = false;

    if (store == NULL) {
        return;
    }
    if (pool == NULL) {
        weft_store_close(store);
        return;
    }
    is_reusable = weft__store_is_reusable(store);
    pthread_mutex_lock(&pool->lock);
    if (is_reusable && pool->idle_count < pool->max_idle) {
        pool->idle[pool->idle_count++] = store;
        is_kept = true;
    }
    pool->stats.discarded += is_reusable ? 0 : 1;
    pthread_mutex_unlock(&pool->lock);
    if (!is_kept) {
        weft_store_close(store);
    }
}

void
weft_store_pool_stats(struct weft_store_pool *pool, struct weft_store_pool_stats *out)
{
    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof(*out));
    if (pool == NULL) {
        return;
    }
    pthread_mutex_lock(&pool->lock);
    *out = pool->stats;
    out->idle = pool->idle_count;
    pthread_mutex_unlock(&pool->lock);
}

void
weft_store_pool_free(struct weft_store_pool *pool)
{
    if (pool == NULL) {
        return;
    }
    for (size_t i = 0; i < pool->idle_count; i++) {
        weft_store_close(pool->idle[i]);
    }
    pthread_mutex_destroy(&pool->lock);
    weft__free(pool->idle);
    weft__free(pool->location);
    weft__free(pool);
}
