/* store/retention.c - retention on a thread of its own (`weft serve --retention 14d
 * --max-store-size 2G`, store.h): weft_store_gc() at start and then every interval, with a
 * hook for what follows the traces out (the runs: cli/serve_cmd.c), counted for /metrics.
 * After each pass it also reads what the store holds (gc.c's weft__store_shape(): PostgreSQL's
 * partitions, the earliest trace start), so that a scrape never queries the store.
 *
 * The thread sleeps on a condition variable, so stopping it never waits out an interval; a
 * pass that fails is logged, counted and tried again at the next interval.
 */
#include "store.h"

#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <weft/metrics.h>

struct weft__store_retention {
    struct weft__store_retention_config cfg;
    char *location;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool is_stopping;                         /* under lock */
    struct weft__store_retention_stats stats; /* under lock */
};

/* One pass: the traces, then the hook. */
static void
pass(struct weft__store_retention *r)
{
    struct weft_store_gc_report rep;
    uint64_t now = weft__now_ns();
    uint64_t cutoff =
        r->cfg.max_age_ns > 0 && now > r->cfg.max_age_ns ? now - r->cfg.max_age_ns : 0;
    char error[512] = "";
    weft_err err =
        weft_store_gc(r->location, cutoff, r->cfg.max_bytes, false, &rep, error, sizeof(error));
    bool is_ok = err == WEFT_OK || err == WEFT_ENOTFOUND; /* nothing stored yet */
    int64_t partitions = -1;
    int64_t oldest_ns = 0;
    weft_err shape_err = WEFT_EIO;

    if (is_ok && r->cfg.hook != NULL && cutoff > 0) {
        is_ok = r->cfg.hook(r->cfg.hook_data, cutoff, error, sizeof(error)) == WEFT_OK;
    }
    if (!is_ok) {
        WEFT_LOG(WEFT_LOG_ERROR, "retention: %s", error[0] != '\0' ? error : weft_strerror(err));
    } else if (rep.traces > 0) {
        WEFT_LOG(WEFT_LOG_INFO,
                 "retention: %zu trace(s) deleted (%zu spans, %zu partitions, %zu payload"
                 " records)",
                 rep.traces, rep.spans, rep.partitions, rep.payloads);
    }
    if (err == WEFT_OK) {
        /* What the store holds now, for the gauges; a failure leaves them unknown until the
         * next pass (logged at DEBUG: the pass itself went well). */
        shape_err = weft__store_shape(r->location, &partitions, &oldest_ns);
    }
    pthread_mutex_lock(&r->lock);
    r->stats.partitions = shape_err == WEFT_OK ? partitions : -1;
    r->stats.oldest_start_ns = shape_err == WEFT_OK ? oldest_ns : 0;
    r->stats.passes_ok += is_ok ? 1 : 0;
    r->stats.passes_failed += is_ok ? 0 : 1;
    if (err == WEFT_OK) {
        r->stats.traces_deleted += rep.traces;
        r->stats.spans_deleted += rep.spans;
        r->stats.partitions_dropped += rep.partitions;
        r->stats.payloads_deleted += rep.payloads;
        r->stats.store_bytes = rep.bytes_after;
    }
    pthread_mutex_unlock(&r->lock);
}

static void *
retention_main(void *arg)
{
    struct weft__store_retention *r = arg;

    pthread_mutex_lock(&r->lock);
    while (!r->is_stopping) {
        struct timespec until;
        uint64_t at = 0;

        pthread_mutex_unlock(&r->lock);
        pass(r);
        pthread_mutex_lock(&r->lock);
        clock_gettime(CLOCK_MONOTONIC, &until);
        at = (uint64_t)until.tv_sec * 1000000000u + (uint64_t)until.tv_nsec +
             r->cfg.interval_ms * 1000000u;
        until.tv_sec = (time_t)(at / 1000000000u);
        until.tv_nsec = (long)(at % 1000000000u);
        while (!r->is_stopping && pthread_cond_timedwait(&r->wake, &r->lock, &until) == 0) {
        }
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

weft_err
weft__store_retention_start(const char *location,
                            const struct weft__store_retention_config *cfg,
                            struct weft__store_retention **out)
{
    struct weft__store_retention *r = NULL;
    pthread_condattr_t attr;
    char path[4096];

    *out = NULL;
    if (cfg->max_age_ns == 0 && cfg->max_bytes == 0) {
        return WEFT_OK; /* nothing to keep in bounds */
    }
    if (location == NULL) {
        if (weft_store_default_path(path, sizeof(path)) != WEFT_OK) {
            return WEFT_EINVAL;
        }
        location = path;
    }
    r = weft__calloc(1, sizeof(*r));
    if (r == NULL || (r->location = weft__strdup(location)) == NULL) {
        weft__free(r);
        return WEFT_ENOMEM;
    }
    r->cfg = *cfg;
    if (r->cfg.interval_ms == 0) {
        r->cfg.interval_ms = 3600000u; /* hourly */
    }
    /* the size from the start, so a scrape before the first pass sees it */
    r->stats.store_bytes = weft__store_is_pg_url(location) ? -1 : weft__store_file_bytes(location);
    r->stats.partitions = -1; /* PostgreSQL: known after the first pass */
    if (!weft__store_is_pg_url(location)) {
        /* SQLite answers at once (a file): the oldest start from the start too. A PostgreSQL
         * that does not answer yet must not hold the server's start, so it waits for the pass. */
        int64_t partitions = -1;
        int64_t oldest = 0;
        if (weft__store_shape(location, &partitions, &oldest) == WEFT_OK) {
            r->stats.oldest_start_ns = oldest;
        }
    }
    pthread_mutex_init(&r->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&r->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&r->thread, NULL, retention_main, r) != 0) {
        pthread_cond_destroy(&r->wake);
        pthread_mutex_destroy(&r->lock);
        weft__free(r->location);
        weft__free(r);
        return WEFT_ENOMEM;
    }
    *out = r;
    return WEFT_OK;
}

void
weft__store_retention_stats(struct weft__store_retention *r,
                            struct weft__store_retention_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->store_bytes = -1;
    out->partitions = -1;
    if (r == NULL) {
        return;
    }
    pthread_mutex_lock(&r->lock);
    *out = r->stats;
    pthread_mutex_unlock(&r->lock);
}

weft_err
weft__store_retention_observe(struct weft__store_retention *r, struct weft_meter *meter)
{
    struct weft__store_retention_stats st;
    struct weft_instrument *passes = NULL;
    struct weft_instrument *deleted = NULL;
    struct weft_instrument *dropped = NULL;
    struct weft_instrument *payloads = NULL;
    struct weft_instrument *bytes = NULL;
    struct weft_instrument *limit = NULL;
    struct weft_instrument *partitions = NULL;
    struct weft_instrument *oldest = NULL;
    struct weft_attr attr;
    uint64_t now = weft__now_ns();
    weft_err err = WEFT_OK;

    if (r == NULL) {
        return WEFT_OK;
    }
    weft__store_retention_stats(r, &st);
    err = weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "weft.store.retention.passes",
                                "{pass}", "Retention passes over the span store, by outcome", NULL,
                                0, &passes);
    if (err == WEFT_OK) {
        err = weft_meter_instrument(
            meter, WEFT_INSTRUMENT_COUNTER, "weft.store.retention.traces_deleted", "{trace}",
            "Traces retention deleted (past --retention or the size cap)", NULL, 0, &deleted);
    }
    if (err == WEFT_OK) {
        err = weft_meter_instrument(
            meter, WEFT_INSTRUMENT_COUNTER, "weft.store.retention.partitions_dropped",
            "{partition}", "PostgreSQL span partitions retention dropped", NULL, 0, &dropped);
    }
    if (err == WEFT_OK) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER,
                                    "weft.store.retention.payloads_deleted", "{record}",
                                    "Payload records (long texts stored once by content hash)"
                                    " retention deleted once no span referred to them",
                                    NULL, 0, &payloads);
    }
    if (err == WEFT_OK && st.store_bytes >= 0) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.store.size", "By",
                                    "Bytes of the SQLite span store (with its WAL) after the last"
                                    " retention pass",
                                    NULL, 0, &bytes);
    }
    if (err == WEFT_OK && r->cfg.max_bytes > 0) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.store.size_limit", "By",
                                    "The SQLite span store's size cap (--max-store-size)", NULL, 0,
                                    &limit);
    }
    if (err == WEFT_OK && st.partitions >= 0) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.store.partitions",
                                    "{partition}",
                                    "Partitions of the PostgreSQL span store (weft_spans, the"
                                    " default one included) after the last retention pass",
                                    NULL, 0, &partitions);
    }
    if (err == WEFT_OK && st.oldest_start_ns > 0) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.store.oldest_span_age", "s",
                                    "Age of the earliest trace start in the span store (as of"
                                    " the last retention pass)",
                                    NULL, 0, &oldest);
    }
    if (err != WEFT_OK) {
        return err;
    }
    if (partitions != NULL) {
        (void)weft_gauge_set(partitions, (double)st.partitions, NULL, 0);
    }
    if (oldest != NULL) {
        /* the age at the scrape: it grows between passes, as the data does */
        uint64_t start = (uint64_t)st.oldest_start_ns;
        (void)weft_gauge_set(oldest, now > start ? (double)(now - start) / 1e9 : 0.0, NULL, 0);
    }
    if (limit != NULL) {
        (void)weft_gauge_set(limit, (double)r->cfg.max_bytes, NULL, 0);
    }
    attr = weft_attr_str("outcome", "ok");
    (void)weft_counter_add(passes, (double)st.passes_ok, &attr, 1);
    attr = weft_attr_str("outcome", "failed");
    (void)weft_counter_add(passes, (double)st.passes_failed, &attr, 1);
    (void)weft_counter_add(deleted, (double)st.traces_deleted, NULL, 0);
    (void)weft_counter_add(dropped, (double)st.partitions_dropped, NULL, 0);
    (void)weft_counter_add(payloads, (double)st.payloads_deleted, NULL, 0);
    if (bytes != NULL) {
        (void)weft_gauge_set(bytes, (double)st.store_bytes, NULL, 0);
    }
    return WEFT_OK;
}

void
weft__store_retention_stop(struct weft__store_retention *r)
{
    if (r == NULL) {
        return;
    }
    pthread_mutex_lock(&r->lock);
    r->is_stopping = true;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->lock);
    weft__free(r->location);
    weft__free(r);
}
