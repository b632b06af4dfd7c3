/* tracing/processor.c - span processors: the batch processor (bounded lock-free queue and one
 * export thread) and the simple processor (synchronous, for tests and debugging).
 *
 * The batch queue is sharded: up to SHARDS bounded MPMC rings (ring.h) whose capacities add
 * up to max_queue_size. A recording thread pushes into the shard of its stripe index (threads
 * get consecutive indexes), so two threads recording at once do not write one cache line per
 * span (a single ring's tail bounced between cores on every span and cost more than the
 * span itself). A push claims a slot with one CAS and never waits; when its shard is full it
 * tries the others, so the queue's bound stays max_queue_size for any number of threads, and
 * a span is dropped (and counted) only when every shard is full. The export thread pops the
 * shards in turn; spans of different threads are exported in no particular order relative to
 * each other. The queue holds no per-thread state: a thread that exits leaves nothing behind
 * that flush or shutdown could miss.
 *
 * Producers wake the export thread through a semaphore only when a full batch is waiting
 * and the thread is asleep, and only once until it runs again (the `kicked` flag). The fill
 * is summed over the shards only when a producer's shard crosses a multiple of its share of
 * a batch, so the common enqueue is one CAS and one release store.
 *
 * Flush and shutdown are requests handled by the export thread itself, so the exporter is
 * only ever called from that thread; the caller waits on a condition variable with a bound.
 */
#include "base/env.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "exporter.h"
#include "ring.h"
#include "sdk.h"

#include <errno.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define DEFAULT_QUEUE       2048
#define DEFAULT_BATCH       512
#define DEFAULT_DELAY_MS    5000
#define DEFAULT_TIMEOUT_MS  30000
#define SHUTDOWN_DEFAULT_MS 30000

void
weft_batch_options_from_env(struct weft_batch_options *out)
{
    if (out == NULL) {
        return;
    }
    out->max_queue_size = weft__env_u64("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_QUEUE, 1, 1u << 24);
    out->max_export_batch_size =
        weft__env_u64("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_BATCH, 1, 1u << 24);
    out->schedule_delay_ms =
        (uint32_t)weft__env_u64("OTEL_BSP_SCHEDULE_DELAY", DEFAULT_DELAY_MS, 0, UINT32_MAX);
    out->export_timeout_ms =
        (uint32_t)weft__env_u64("OTEL_BSP_EXPORT_TIMEOUT", DEFAULT_TIMEOUT_MS, 0, UINT32_MAX);
    if (out->max_export_batch_size > out->max_queue_size) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=%zu is larger than OTEL_BSP_MAX_QUEUE_SIZE=%zu; "
                 "using %zu",
                 out->max_export_batch_size, out->max_queue_size, out->max_queue_size);
        out->max_export_batch_size = out->max_queue_size;
    }
}

static uint64_t
export_deadline(uint32_t timeout_ms, uint64_t bound)
{
    uint64_t d = timeout_ms == 0 ? 0 : weft__monotonic_ns() + (uint64_t)timeout_ms * 1000000u;

    if (bound != 0 && (d == 0 || bound < d)) {
        d = bound;
    }
    return d;
}

static void
exporter_destroy(struct weft_exporter *exporter)
{
    if (exporter == NULL) {
        return;
    }
    if (exporter->ops->destroy != NULL) {
        exporter->ops->destroy(exporter->self);
    }
    weft__free(exporter);
}

/* Keep the exporter's description of a failure (or the code's text) for
 * weft_processor_last_error(). Called on the thread that ran the export. */
static void
record_failure(struct weft_processor *proc, weft_err err, size_t span_count)
{
    struct weft_exporter *exporter = proc->exporter;
    char text[sizeof(proc->last_error)];

    text[0] = '\0';
    if (exporter->ops->last_error == NULL ||
        exporter->ops->last_error(exporter->self, text, sizeof(text)) == 0) {
        snprintf(text, sizeof(text), "%s", weft_strerror(err));
    }
    pthread_mutex_lock(&proc->error_lock);
    memcpy(proc->last_error, text, sizeof(text));
    pthread_mutex_unlock(&proc->error_lock);
    WEFT_LOG(WEFT_LOG_WARN, "exporter %s: %zu spans failed: %s", weft_exporter_name(exporter),
             span_count, text);
}

static void
base_init(struct weft_processor *proc,
          const struct weft__processor_vtable *vt,
          struct weft_exporter *exporter)
{
    proc->vt = vt;
    proc->exporter = exporter;
    pthread_mutex_init(&proc->error_lock, NULL);
    proc->last_error[0] = '\0';
}

static void
exporter_shutdown(struct weft_exporter *exporter, uint64_t deadline)
{
    if (exporter->ops->shutdown != NULL) {
        exporter->ops->shutdown(exporter->self, deadline);
    }
}

/* ---- batch processor ------------------------------------------------------------------ */

#define SHARDS     8
#define SHARD_TURN 64 /* spans dequeue() takes from one shard before it moves on */

struct batch {
    struct weft_processor base;
    struct weft_batch_options opts;
    struct weft__ring *shards; /* shard_count rings, capacities summing to max_queue_size */
    size_t shard_count;
    size_t kick_mask;  /* a shard checks the total fill every kick_mask + 1 pushes (2^k) */
    size_t next_shard; /* export thread only: where dequeue() starts */
    _Alignas(64) atomic_bool kicked;
    atomic_bool sleeping;
    _Alignas(64) sem_t wake;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* flush_done or thread_done changed */
    uint64_t flush_requested;
    uint64_t flush_done;
    weft_err flush_err;
    bool is_failed_since_flush; /* an export failed since the last flush (export thread only) */
    bool thread_done;
    atomic_bool stopping;
    atomic_uint_fast64_t shutdown_deadline;
    pthread_t thread;
    bool has_thread;
    struct weft__counter dropped;
    atomic_uint_fast64_t exported;
    atomic_uint_fast64_t failed;
    atomic_uint_fast64_t batches;
    atomic_uint_fast64_t failed_batches;
    atomic_uint_fast64_t export_ns; /* time spent in export calls */
    atomic_uint_fast64_t spooled;   /* spans the exporter wrote to its spool */
    bool is_idle_busy;              /* the exporter's idle op has more to do (export thread only) */
    struct weft_span **spans;       /* export-thread scratch, max batch size */
    const struct weft_span_data **views; /* same, as exporter views */
};

static size_t
queue_len(struct batch *b)
{
    size_t n = 0;

    for (size_t i = 0; i < b->shard_count; i++) {
        n += weft__ring_len(&b->shards[i]);
    }
    return n;
}

/* A push landed at position @p pos of its shard. Every kick_mask + 1 pushes into a shard, see
 * whether a batch is waiting in all of them while the export thread sleeps. The fence pairs
 * with the export thread's seq_cst store of `sleeping` and its reading of the fill: one of the
 * two sees the other. */
static void
maybe_kick(struct batch *b, size_t pos)
{
    if (((pos + 1) & b->kick_mask) != 0) {
        return;
    }
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&b->sleeping, memory_order_relaxed) &&
        !atomic_load_explicit(&b->kicked, memory_order_relaxed) &&
        queue_len(b) >= b->opts.max_export_batch_size &&
        !atomic_exchange_explicit(&b->kicked, true, memory_order_relaxed)) {
        sem_post(&b->wake);
    }
}

/* batch_on_end() when the first attempt on its thread's shard did not take the span: shut
 * down (drop), or contended or full (push with retries into the home shard, then into the
 * others; drop when all are full, never wait). */
static NO_INLINE void
on_end_slow(struct batch *b, struct weft_span *span)
{
    size_t home = weft__stripe_index() & (b->shard_count - 1);
    size_t pos = 0;

    if (!atomic_load_explicit(&b->base.is_shut_down, memory_order_relaxed)) {
        for (size_t k = 0; k < b->shard_count; k++) {
            size_t i = home + k < b->shard_count ? home + k : home + k - b->shard_count;

            if (weft__ring_push(&b->shards[i], span, &pos)) {
                maybe_kick(b, pos);
                return;
            }
        }
    }
    weft_span_unref(span);
    weft__counter_add(&b->dropped, 1);
}

/* on_end owns one reference: the queue keeps it, or it is dropped. The common case - this
 * thread's shard takes the span at the first attempt, no batch to announce - is straight-line
 * code with no call, so that it needs no stack frame: everything else is a tail call. */
static void
batch_on_end(struct weft_processor *proc, struct weft_span *span)
{
    struct batch *b = (struct batch *)proc;
    struct weft__ring *home = &b->shards[weft__stripe_index() & (b->shard_count - 1)];
    size_t pos = 0;

    if (atomic_load_explicit(&proc->is_shut_down, memory_order_relaxed) ||
        !weft__ring_try_push(home, span, &pos)) {
        on_end_slow(b, span);
        return;
    }
    if (((pos + 1) & b->kick_mask) == 0) {
        maybe_kick(b, pos);
    }
}

/* Pop up to @p max spans into b->spans. Only the export thread calls this. */
static size_t
dequeue(struct batch *b, size_t max)
{
    size_t n = 0;
    size_t empty = 0; /* shards in a row found empty */
    size_t here = 0;  /* spans taken from the current shard */

    /* Round robin over the shards, at most SHARD_TURN spans from one before the next, so that
     * a busy thread cannot starve another's spans, while a single busy shard still costs one
     * pop per span. An empty pop also covers a slot claimed but not yet filled: it is taken
     * next time. */
    while (n < max && empty < b->shard_count) {
        struct weft_span *span = weft__ring_pop(&b->shards[b->next_shard]);

        if (span != NULL) {
            empty = 0;
            b->spans[n++] = span;
        } else {
            empty++;
        }
        if (span == NULL || ++here == SHARD_TURN) {
            here = 0;
            b->next_shard = b->next_shard + 1 < b->shard_count ? b->next_shard + 1 : 0;
        }
    }
    return n;
}

static void
export_spans(struct batch *b, size_t n)
{
    struct weft_exporter *exporter = b->base.exporter;
    struct weft_export_result result = {0};
    uint64_t deadline =
        export_deadline(b->opts.export_timeout_ms, atomic_load(&b->shutdown_deadline));
    weft_err err = WEFT_OK;
    uint64_t t0 = 0;

    for (size_t i = 0; i < n; i++) {
        b->views[i] = weft__span_data(b->spans[i]);
    }
    t0 = weft__monotonic_ns();
    err = exporter->ops->export_batch(exporter->self, b->views, n, deadline, &result);
    atomic_fetch_add_explicit(&b->export_ns, weft__monotonic_ns() - t0, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->batches, 1, memory_order_relaxed);
    if (err == WEFT_OK) {
        uint64_t rejected = result.rejected > n ? n : result.rejected;
        uint64_t spooled = result.spooled > n - rejected ? n - rejected : result.spooled;

        atomic_fetch_add_explicit(&b->exported, n - rejected - spooled, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->failed, rejected, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->spooled, spooled, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&b->failed, n, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->failed_batches, 1, memory_order_relaxed);
        b->is_failed_since_flush = true;
        record_failure(&b->base, err, n);
    }
    weft__span_unref_batch(b->spans, n);
}

/* Export everything queued now, batch by batch. @return the spans exported. */
static size_t
drain(struct batch *b)
{
    size_t n = 0;
    size_t total = 0;

    while ((n = dequeue(b, b->opts.max_export_batch_size)) > 0) {
        export_spans(b, n);
        total += n;
    }
    return total;
}

static void
wait_for_work(struct batch *b)
{
    struct timespec ts;
    uint64_t ns = 0;

    if (queue_len(b) >= b->opts.max_export_batch_size || b->is_idle_busy) {
        return;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    ns = (uint64_t)ts.tv_nsec + (uint64_t)b->opts.schedule_delay_ms * 1000000u;
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    /* Producers post only while `sleeping` is set. Set it before the last look at the fill
     * (seq_cst on both sides), so a batch completed in between is either seen here or
     * posted by its producer. */
    atomic_store(&b->sleeping, true);
    atomic_thread_fence(memory_order_seq_cst);
    if (queue_len(b) < b->opts.max_export_batch_size) {
        while (sem_timedwait(&b->wake, &ts) != 0 && errno == EINTR) {
        }
    }
    atomic_store(&b->sleeping, false);
}

static void *
export_thread(void *arg)
{
    struct batch *b = arg;

    for (;;) {
        uint64_t target = 0;
        bool stopping = false;

        wait_for_work(b);
        atomic_store_explicit(&b->kicked, false, memory_order_relaxed);
        pthread_mutex_lock(&b->lock);
        target = b->flush_requested;
        pthread_mutex_unlock(&b->lock);
        stopping = atomic_load(&b->stopping);

        if (drain(b) == 0 && !stopping && target <= b->flush_done &&
            b->base.exporter->ops->idle != NULL) {
            /* Nothing to export: the exporter's background work (an OTLP exporter sends its
             * spool), again at once while it has more and no batch waits. */
            struct weft_exporter *exporter = b->base.exporter;

            b->is_idle_busy = exporter->ops->idle(
                exporter->self,
                export_deadline(b->opts.export_timeout_ms, atomic_load(&b->shutdown_deadline)));
        } else {
            b->is_idle_busy = false;
        }

        if (target > b->flush_done || stopping) {
            weft_err err = WEFT_OK;
            struct weft_exporter *exporter = b->base.exporter;

            if (exporter->ops->force_flush != NULL) {
                err = exporter->ops->force_flush(
                    exporter->self,
                    export_deadline(b->opts.export_timeout_ms, atomic_load(&b->shutdown_deadline)));
            }
            if (err == WEFT_OK && b->is_failed_since_flush) {
                err = WEFT_EIO; /* the flush could not deliver everything */
            }
            b->is_failed_since_flush = false;
            pthread_mutex_lock(&b->lock);
            b->flush_done = target;
            b->flush_err = err;
            pthread_cond_broadcast(&b->changed);
            pthread_mutex_unlock(&b->lock);
        }
        if (stopping) {
            break;
        }
    }
    pthread_mutex_lock(&b->lock);
    b->thread_done = true;
    pthread_cond_broadcast(&b->changed);
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

/* Wait on b->changed until @p done is true or the monotonic @p deadline passes. */
static bool
wait_until(struct batch *b, bool (*done)(struct batch *, uint64_t), uint64_t arg, uint64_t deadline)
{
    struct timespec ts;
    bool ok = false;

    ts.tv_sec = (time_t)(deadline / 1000000000u);
    ts.tv_nsec = (long)(deadline % 1000000000u);
    pthread_mutex_lock(&b->lock);
    while (!(ok = done(b, arg))) {
        if (pthread_cond_timedwait(&b->changed, &b->lock, &ts) == ETIMEDOUT) {
            ok = done(b, arg);
            break;
        }
    }
    pthread_mutex_unlock(&b->lock);
    return ok;
}

static bool
flush_reached(struct batch *b, uint64_t target)
{
    return b->flush_done >= target || b->thread_done;
}

static bool
thread_finished(struct batch *b, uint64_t unused)
{
    (void)unused;
    return b->thread_done;
}

static weft_err
batch_force_flush(struct weft_processor *proc, uint64_t deadline)
{
    struct batch *b = (struct batch *)proc;
    uint64_t target = 0;
    weft_err err = WEFT_OK;

    pthread_mutex_lock(&b->lock);
    if (b->thread_done) {
        pthread_mutex_unlock(&b->lock);
        return WEFT_ESTATE;
    }
    target = ++b->flush_requested;
    pthread_mutex_unlock(&b->lock);
    sem_post(&b->wake);
    if (!wait_until(b, flush_reached, target, deadline)) {
        return WEFT_ETIMEDOUT;
    }
    pthread_mutex_lock(&b->lock);
    err = b->flush_done >= target ? b->flush_err : WEFT_ESTATE;
    pthread_mutex_unlock(&b->lock);
    return err == WEFT_OK ? WEFT_OK : WEFT_EIO;
}

static void
drop_remaining(struct batch *b)
{
    size_t n = 0;

    while ((n = dequeue(b, b->opts.max_export_batch_size)) > 0) {
        weft__counter_add(&b->dropped, n);
        weft__span_unref_batch(b->spans, n);
    }
}

static weft_err
batch_shutdown(struct weft_processor *proc, uint64_t deadline)
{
    struct batch *b = (struct batch *)proc;
    weft_err err = WEFT_OK;

    if (atomic_exchange(&proc->is_shut_down, true)) {
        return WEFT_ESTATE;
    }
    atomic_store(&b->shutdown_deadline, deadline);
    atomic_store(&b->stopping, true);
    sem_post(&b->wake);
    if (!wait_until(b, thread_finished, 0, deadline)) {
        /* The exporter is still busy past the bound: shutting it down cuts its retries short
         * (exporters must allow this one call from another thread), then the join is quick. */
        err = WEFT_ETIMEDOUT;
        exporter_shutdown(proc->exporter, deadline);
    }
    pthread_join(b->thread, NULL);
    b->has_thread = false;
    if (err == WEFT_OK) {
        exporter_shutdown(proc->exporter, deadline);
        if (b->flush_err != WEFT_OK) {
            err = WEFT_EIO;
        }
    }
    drop_remaining(b);
    return err;
}

static void
batch_stats(const struct weft_processor *proc, struct weft_processor_stats *out)
{
    struct batch *b = (struct batch *)(uintptr_t)proc;

    out->enqueued = 0;
    out->queue_cap = 0;
    for (size_t i = 0; i < b->shard_count; i++) {
        out->enqueued += atomic_load_explicit(&b->shards[i].tail, memory_order_relaxed);
        out->queue_cap += b->shards[i].cap;
    }
    out->exported = atomic_load_explicit(&b->exported, memory_order_relaxed);
    out->failed = atomic_load_explicit(&b->failed, memory_order_relaxed);
    out->batches = atomic_load_explicit(&b->batches, memory_order_relaxed);
    out->failed_batches = atomic_load_explicit(&b->failed_batches, memory_order_relaxed);
    out->export_ns = atomic_load_explicit(&b->export_ns, memory_order_relaxed);
    out->spooled = atomic_load_explicit(&b->spooled, memory_order_relaxed);
    out->dropped = weft__counter_read(&b->dropped);
    out->queue_len = queue_len(b);
}

static void
batch_destroy(struct weft_processor *proc)
{
    struct batch *b = (struct batch *)proc;

    if (b->has_thread) {
        batch_shutdown(proc, weft__monotonic_ns() + (uint64_t)SHUTDOWN_DEFAULT_MS * 1000000u);
    }
    exporter_destroy(proc->exporter);
    pthread_mutex_destroy(&proc->error_lock);
    sem_destroy(&b->wake);
    pthread_cond_destroy(&b->changed);
    pthread_mutex_destroy(&b->lock);
    for (size_t i = 0; i < b->shard_count; i++) {
        weft__ring_cleanup(&b->shards[i]);
    }
    weft__free(b->shards);
    weft__free(b->spans);
    weft__free(b->views);
    weft__free(b);
}

/* Split @p cap slots over the shards (the first ones take the remainder). On failure the
 * shards initialised so far are cleaned up. */
static weft_err
shards_init(struct batch *b, size_t cap)
{
    for (size_t i = 0; i < b->shard_count; i++) {
        size_t n = cap / b->shard_count + (i < cap % b->shard_count ? 1 : 0);

        if (weft__ring_init(&b->shards[i], n) != WEFT_OK) {
            while (i-- > 0) {
                weft__ring_cleanup(&b->shards[i]);
            }
            return WEFT_ENOMEM;
        }
    }
    return WEFT_OK;
}

static const struct weft__processor_vtable batch_vtable = {
    .on_end = batch_on_end,
    .force_flush = batch_force_flush,
    .shutdown = batch_shutdown,
    .destroy = batch_destroy,
    .stats = batch_stats,
};

weft_err
weft_batch_processor_new(struct weft_exporter *exporter,
                         const struct weft_batch_options *opts,
                         struct weft_processor **out)
{
    struct weft_batch_options o;
    struct batch *b = NULL;
    pthread_condattr_t attr;

    if (out != NULL) {
        *out = NULL;
    }
    if (exporter == NULL || out == NULL) {
        exporter_destroy(exporter);
        return WEFT_EINVAL;
    }
    if (opts != NULL) {
        o = *opts;
    } else {
        weft_batch_options_from_env(&o);
    }
    if (o.max_queue_size == 0 || o.max_export_batch_size == 0) {
        exporter_destroy(exporter);
        return WEFT_EINVAL;
    }
    if (o.max_export_batch_size > o.max_queue_size) {
        o.max_export_batch_size = o.max_queue_size;
    }
    b = weft__calloc(1, sizeof(*b));
    if (b == NULL) {
        exporter_destroy(exporter);
        return WEFT_ENOMEM;
    }
    b->spans = weft__calloc(o.max_export_batch_size, sizeof(*b->spans));
    b->views = weft__calloc(o.max_export_batch_size, sizeof(*b->views));
    /* A power of two, with at least two slots per shard: the ring needs two to tell a full
     * slot from an empty one. */
    b->shard_count = SHARDS;
    while (b->shard_count > 1 && b->shard_count * 2 > o.max_queue_size) {
        b->shard_count /= 2;
    }
    b->shards = weft__calloc(b->shard_count, sizeof(*b->shards));
    if (b->spans == NULL || b->views == NULL || b->shards == NULL ||
        shards_init(b, o.max_queue_size) != WEFT_OK) {
        weft__free(b->shards);
        weft__free(b->spans);
        weft__free(b->views);
        weft__free(b);
        exporter_destroy(exporter);
        return WEFT_ENOMEM;
    }
    /* The largest power of two not above a shard's share of a batch: with one recording
     * thread, the check runs exactly when the queue reaches a full batch (512 = 8 x 64). */
    b->kick_mask = 1;
    while (b->kick_mask * 2 <= o.max_export_batch_size / b->shard_count) {
        b->kick_mask *= 2;
    }
    b->kick_mask -= 1;
    base_init(&b->base, &batch_vtable, exporter);
    b->opts = o;
    sem_init(&b->wake, 0, 0);
    pthread_mutex_init(&b->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&b->changed, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&b->thread, NULL, export_thread, b) != 0) {
        b->has_thread = false;
        batch_destroy(&b->base);
        return WEFT_EIO;
    }
    b->has_thread = true;
    *out = &b->base;
    return WEFT_OK;
}

/* ---- simple processor ----------------------------------------------------------------- */

struct simple {
    struct weft_processor base;
    pthread_mutex_t lock; /* the exporter is called by one thread at a time */
    atomic_uint_fast64_t exported;
    atomic_uint_fast64_t failed;
    atomic_uint_fast64_t dropped;
    atomic_uint_fast64_t batches;
    atomic_uint_fast64_t spooled;
};

static void
simple_on_end(struct weft_processor *proc, struct weft_span *span)
{
    struct simple *s = (struct simple *)proc;
    const struct weft_span_data *view = weft__span_data(span);
    struct weft_export_result result = {0};
    weft_err err = WEFT_OK;

    pthread_mutex_lock(&s->lock);
    if (atomic_load(&proc->is_shut_down)) {
        pthread_mutex_unlock(&s->lock);
        atomic_fetch_add(&s->dropped, 1);
        weft_span_unref(span); /* on_end owns one reference */
        return;
    }
    err = proc->exporter->ops->export_batch(proc->exporter->self, &view, 1,
                                            export_deadline(DEFAULT_TIMEOUT_MS, 0), &result);
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_add(&s->batches, 1);
    if (err == WEFT_OK && result.rejected == 0 && result.spooled > 0) {
        atomic_fetch_add(&s->spooled, 1);
    } else if (err == WEFT_OK && result.rejected == 0) {
        atomic_fetch_add(&s->exported, 1);
    } else {
        atomic_fetch_add(&s->failed, 1);
        if (err != WEFT_OK) {
            record_failure(proc, err, 1);
        }
    }
    weft_span_unref(span); /* on_end owns one reference */
}

static weft_err
simple_force_flush(struct weft_processor *proc, uint64_t deadline)
{
    struct simple *s = (struct simple *)proc;
    weft_err err = WEFT_OK;

    pthread_mutex_lock(&s->lock);
    if (proc->exporter->ops->force_flush != NULL) {
        err = proc->exporter->ops->force_flush(proc->exporter->self, deadline);
    }
    pthread_mutex_unlock(&s->lock);
    return err == WEFT_OK ? WEFT_OK : WEFT_EIO;
}

static weft_err
simple_shutdown(struct weft_processor *proc, uint64_t deadline)
{
    struct simple *s = (struct simple *)proc;
    weft_err err = WEFT_OK;

    if (atomic_exchange(&proc->is_shut_down, true)) {
        return WEFT_ESTATE;
    }
    pthread_mutex_lock(&s->lock);
    if (proc->exporter->ops->force_flush != NULL) {
        err = proc->exporter->ops->force_flush(proc->exporter->self, deadline);
    }
    exporter_shutdown(proc->exporter, deadline);
    pthread_mutex_unlock(&s->lock);
    return err == WEFT_OK ? WEFT_OK : WEFT_EIO;
}

static void
simple_destroy(struct weft_processor *proc)
{
    struct simple *s = (struct simple *)proc;

    if (!atomic_load(&proc->is_shut_down)) {
        simple_shutdown(proc, weft__monotonic_ns() + (uint64_t)SHUTDOWN_DEFAULT_MS * 1000000u);
    }
    exporter_destroy(proc->exporter);
    pthread_mutex_destroy(&proc->error_lock);
    pthread_mutex_destroy(&s->lock);
    weft__free(s);
}

static void
simple_stats(const struct weft_processor *proc, struct weft_processor_stats *out)
{
    struct simple *s = (struct simple *)(uintptr_t)proc;

    out->exported = atomic_load(&s->exported);
    out->failed = atomic_load(&s->failed);
    out->dropped = atomic_load(&s->dropped);
    out->batches = atomic_load(&s->batches);
    out->spooled = atomic_load(&s->spooled);
    out->enqueued = out->batches;
    out->queue_len = 0;
    out->queue_cap = 0;
}

static const struct weft__processor_vtable simple_vtable = {
    .on_end = simple_on_end,
    .force_flush = simple_force_flush,
    .shutdown = simple_shutdown,
    .destroy = simple_destroy,
    .stats = simple_stats,
};

weft_err
weft_simple_processor_new(struct weft_exporter *exporter, struct weft_processor **out)
{
    struct simple *s = NULL;

    if (out != NULL) {
        *out = NULL;
    }
    if (exporter == NULL || out == NULL) {
        exporter_destroy(exporter);
        return WEFT_EINVAL;
    }
    s = weft__calloc(1, sizeof(*s));
    if (s == NULL) {
        exporter_destroy(exporter);
        return WEFT_ENOMEM;
    }
    base_init(&s->base, &simple_vtable, exporter);
    pthread_mutex_init(&s->lock, NULL);
    *out = &s->base;
    return WEFT_OK;
}

/* ---- common --------------------------------------------------------------------------- */

weft_err
weft_processor_get_stats(const struct weft_processor *processor, struct weft_processor_stats *out)
{
    if (processor == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    processor->vt->stats(processor, out);
    return WEFT_OK;
}

const char *
weft_processor_exporter_name(const struct weft_processor *processor)
{
    return weft_exporter_name(processor == NULL ? NULL : processor->exporter);
}

void
weft_processor_spool_stats(const struct weft_processor *processor, struct weft_spool_stats *out)
{
    weft_exporter_spool_stats(processor == NULL ? NULL : processor->exporter, out);
}

size_t
weft_processor_last_error(const struct weft_processor *processor, char *buf, size_t len)
{
    struct weft_processor *proc = (struct weft_processor *)(uintptr_t)processor;
    size_t n = 0;

    if (proc == NULL || buf == NULL || len == 0) {
        return 0;
    }
    pthread_mutex_lock(&proc->error_lock);
    n = strlen(proc->last_error);
    snprintf(buf, len, "%s", proc->last_error);
    pthread_mutex_unlock(&proc->error_lock);
    return n;
}

void
weft_processor_free(struct weft_processor *processor)
{
    if (processor != NULL) {
        processor->vt->destroy(processor);
    }
}

weft_err
weft_processor_force_flush(struct weft_processor *processor, uint32_t timeout_ms)
{
    if (processor == NULL) {
        return WEFT_EINVAL;
    }
    return processor->vt->force_flush(processor,
                                      weft__monotonic_ns() + (uint64_t)timeout_ms * 1000000u);
}
