/* runtime/engine/parallel.c - plan steps that are ready at once run at once, and a step that ends
 * makes room for the next ready one at once.
 *
 * The engine (engine.c run_parallel()) keeps deciding while steps run: each decision hands the
 * steps it picked to this pool, and as soon as one ends the engine may decide again and fill
 * the free thread, so the in-flight window stays full instead of draining at the end of every
 * batch. The threads share the run under its lock, which the executor releases around LLM
 * calls, tools and a remote executor's waits, so the steps overlap while they wait on I/O and
 * everything else stays as simple as on one thread. The engine changes the plan's shape
 * (correction mode, loop-back requests, the watchdog's routes) only when no step runs.
 *
 * Each thread has its own condition variable and takes one step at a time: a step handed over
 * wakes exactly the thread that runs it, not all of them. Threads are created the first time a
 * step needs one (a 3-step plan with a width of 64 makes 3) and live until the pool stops.
 * Invariants: running == the number of slots with has_step; done_count <= width.
 */
#include "runtime/engine/parallel.h"

#include "base/mem.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

struct slot {
    struct weft__rt_pool *pool;
    int index; /* the thread's worker index: its own OpenAI clients (engine.c provider_for) */
    pthread_t thread;
    pthread_cond_t wake;
    bool is_started;
    bool has_step;
    size_t step;
};

struct weft__rt_pool {
    struct run *run;
    size_t width;
    size_t running;
    bool is_stopping;
    pthread_cond_t changed; /* a step finished */
    size_t done_count;
    size_t *done; /* [width]: finished, not yet reported */
    struct slot *slots;
};

/* Run lock held. */
static void
finish(struct weft__rt_pool *pool, struct slot *slot)
{
    pool->done[pool->done_count++] = slot->step;
    slot->has_step = false;
    pool->running--;
    pthread_cond_signal(&pool->changed);
}

static void *
slot_main(void *arg)
{
    struct slot *slot = arg;
    struct weft__rt_pool *pool = slot->pool;
    struct run *run = pool->run;

    weft__rt_set_worker_index(slot->index);
    weft__rt_lock(run);
    for (;;) {
        while (!slot->has_step && !pool->is_stopping) {
            run->svc->cond_wait(run->svc->ctx, &slot->wake);
        }
        if (!slot->has_step) {
            break;
        }
        rt_execute_step(run, slot->step); /* releases the lock around blocking work */
        finish(pool, slot);
    }
    weft__rt_unlock(run);
    return NULL;
}

weft_err
weft__rt_pool_start(struct run *run, size_t width, struct weft__rt_pool **out)
{
    struct weft__rt_pool *pool = NULL;

    *out = NULL;
    if (width == 0 || width > WEFT__RT_MAX_PARALLEL) {
        return WEFT_EINVAL;
    }
    pool = weft__calloc(1, sizeof(*pool));
    if (pool != NULL) {
        pool->done = weft__calloc(width, sizeof(*pool->done));
        pool->slots = weft__calloc(width, sizeof(*pool->slots));
    }
    if (pool == NULL || pool->done == NULL || pool->slots == NULL) {
        if (pool != NULL) {
            weft__free(pool->done);
            weft__free(pool->slots);
        }
        weft__free(pool);
        return WEFT_ENOMEM;
    }
    pool->run = run;
    pool->width = width;
    pthread_cond_init(&pool->changed, NULL);
    for (size_t i = 0; i < width; i++) {
        pool->slots[i].pool = pool;
        pool->slots[i].index = (int)i;
        pthread_cond_init(&pool->slots[i].wake, NULL);
    }
    run->svc->set_parallel(run->svc->ctx, true);
    weft__rt_lock(run);
    *out = pool;
    return WEFT_OK;
}

size_t
weft__rt_pool_running(const struct weft__rt_pool *pool)
{
    return pool->running;
}

void
weft__rt_pool_submit(struct weft__rt_pool *pool, size_t step)
{
    struct slot *slot = NULL;

    for (size_t i = 0; i < pool->width && slot == NULL; i++) {
        if (!pool->slots[i].has_step) {
            slot = &pool->slots[i];
        }
    }
    if (slot == NULL) {
        return; /* the caller broke the contract; nothing runs */
    }
    slot->step = step;
    slot->has_step = true;
    pool->running++;
    if (!slot->is_started) {
        slot->is_started = pthread_create(&slot->thread, NULL, slot_main, slot) == 0;
    }
    if (slot->is_started) {
        pthread_cond_signal(&slot->wake);
        return;
    }
    /* No thread: the step runs here, as the slot's worker would have run it. */
    {
        int prev = weft__rt_worker_index();
        weft__rt_set_worker_index(slot->index);
        rt_execute_step(pool->run, step);
        weft__rt_set_worker_index(prev);
        finish(pool, slot);
    }
}

static int
by_index(const void *a, const void *b)
{
    size_t x = *(const size_t *)a;
    size_t y = *(const size_t *)b;

    return x < y ? -1 : x > y;
}

size_t
weft__rt_pool_wait(struct weft__rt_pool *pool, size_t *steps, size_t cap)
{
    size_t n = 0;

    while (pool->done_count == 0 && pool->running > 0) {
        pool->run->svc->cond_wait(pool->run->svc->ctx, &pool->changed);
    }
    n = pool->done_count < cap ? pool->done_count : cap;
    for (size_t i = 0; i < n; i++) {
        steps[i] = pool->done[i];
    }
    for (size_t i = n; i < pool->done_count; i++) {
        pool->done[i - n] = pool->done[i];
    }
    pool->done_count -= n;
    /* Plan order: the same steps ending together are handled the same way on every run. */
    qsort(steps, n, sizeof(*steps), by_index);
    return n;
}

void
weft__rt_pool_stop(struct weft__rt_pool *pool)
{
    struct run *run = NULL;

    if (pool == NULL) {
        return;
    }
    run = pool->run;
    while (pool->running > 0) {
        run->svc->cond_wait(run->svc->ctx, &pool->changed);
    }
    pool->is_stopping = true;
    for (size_t i = 0; i < pool->width; i++) {
        pthread_cond_signal(&pool->slots[i].wake);
    }
    weft__rt_unlock(run);
    for (size_t i = 0; i < pool->width; i++) {
        if (pool->slots[i].is_started) {
            pthread_join(pool->slots[i].thread, NULL);
        }
        pthread_cond_destroy(&pool->slots[i].wake);
    }
    run->svc->set_parallel(run->svc->ctx, false);
    pthread_cond_destroy(&pool->changed);
    weft__free(pool->done);
    weft__free(pool->slots);
    weft__free(pool);
}
