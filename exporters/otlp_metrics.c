/* exporters/otlp_metrics.c - the periodic OTLP/HTTP metrics reader (see metrics.h).
 *
 * One thread per reader: it sleeps until the interval elapses, a flush is asked for or the
 * reader stops, then collects the meter (cumulative temporality), encodes one
 * ExportMetricsServiceRequest and sends it through the shared transport (otlp_transport.c:
 * OTEL_EXPORTER_OTLP_METRICS_* then OTEL_EXPORTER_OTLP_*, gzip, retries). Recording threads
 * never meet this thread: collection reads the meter's atomics.
 *
 * A flush is a generation counter: force_flush bumps `wanted` and waits until `done` reaches
 * it, so concurrent flushes share one export and a flush never returns on an older export.
 */
#include "base/buf.h"
#include "base/env.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "otlp_encode.h"
#include "otlp_transport.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_REQUEST_BYTES   (64u << 20)
#define DEFAULT_INTERVAL_MS 60000u
#define DEFAULT_TIMEOUT_MS  30000u

struct weft_metric_reader {
    struct weft_meter *meter;
    struct weft__otlp_transport *transport;
    struct weft_instrument *exports; /* weft.metrics.exports{outcome} */
    uint32_t interval_ms;
    uint32_t timeout_ms;
    struct weft__buf body;

    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;      /* the thread waits here */
    pthread_cond_t done_cond; /* flushes wait here */
    bool is_stopping;
    uint64_t wanted; /* flush generations asked for */
    uint64_t done;   /* flush generations served */
    weft_err last_err;

    atomic_uint_fast64_t n_exports;
    atomic_uint_fast64_t n_failures;
    atomic_uint_fast64_t n_points;
};

/* A deadline @p ms from now on CLOCK_MONOTONIC, as pthread_cond_timedwait wants it (the
 * condition variables are created with that clock). */
static struct timespec
deadline_in(uint64_t ms)
{
    struct timespec ts;
    uint64_t ns = 0;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ns = (uint64_t)ts.tv_nsec + (ms % 1000u) * 1000000u;
    ts.tv_sec += (time_t)(ms / 1000u + ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    return ts;
}

/* Collect, encode and send once. WEFT_OK also when there was nothing to send. */
static weft_err
export_once(struct weft_metric_reader *r)
{
    struct weft_attr outcome;
    size_t points = 0;
    weft_err err = WEFT_OK;

    weft__buf_reset(&r->body);
    err = weft__otlp_transport_is_json(r->transport)
              ? weft__otlp_metrics_encode_json(r->meter, &r->body, &points)
              : weft__otlp_metrics_encode_proto(r->meter, &r->body, &points);
    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "OTLP metrics: cannot encode the metrics: %s", weft_strerror(err));
    } else if (points == 0) {
        return WEFT_OK; /* nothing recorded yet: no empty requests */
    } else {
        atomic_fetch_add(&r->n_exports, 1);
        err = weft__otlp_transport_send(r->transport, r->body.data, r->body.len,
                                        weft__monotonic_ns() + (uint64_t)r->timeout_ms * 1000000u,
                                        NULL);
    }
    if (err == WEFT_OK) {
        atomic_fetch_add(&r->n_points, points);
    } else {
        atomic_fetch_add(&r->n_failures, 1);
        WEFT_LOG(WEFT_LOG_WARN, "OTLP metrics: export to %s failed: %s",
                 weft__otlp_transport_url(r->transport), weft_strerror(err));
    }
    outcome = weft_attr_str("outcome", err == WEFT_OK ? "success" : "failure");
    (void)weft_counter_add(r->exports, 1, &outcome, 1);
    return err;
}

static void *
reader_main(void *arg)
{
    struct weft_metric_reader *r = arg;
    struct timespec next = deadline_in(r->interval_ms);

    pthread_mutex_lock(&r->lock);
    for (;;) {
        uint64_t serving = 0;
        bool is_last = false;
        weft_err err = WEFT_OK;
        int rc = 0;

        while (!r->is_stopping && r->wanted == r->done && rc != ETIMEDOUT) {
            rc = pthread_cond_timedwait(&r->wake, &r->lock, &next);
        }
        serving = r->wanted;
        is_last = r->is_stopping;
        pthread_mutex_unlock(&r->lock);

        err = export_once(r);
        if (rc == ETIMEDOUT || serving != r->done) {
            next = deadline_in(r->interval_ms); /* the interval restarts after an export */
        }

        pthread_mutex_lock(&r->lock);
        r->last_err = err;
        r->done = serving;
        pthread_cond_broadcast(&r->done_cond);
        if (is_last) {
            break;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

static weft_err
cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int rc = 0;

    if (pthread_condattr_init(&attr) != 0) {
        return WEFT_ENOMEM;
    }
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0) {
        rc = pthread_cond_init(cond, &attr);
    }
    pthread_condattr_destroy(&attr);
    return rc == 0 ? WEFT_OK : WEFT_ENOMEM;
}

static uint32_t
option_ms(uint32_t given, const char *env, uint32_t def)
{
    if (given != 0) {
        return given;
    }
    return (uint32_t)weft__env_u64(env, def, 1, 24u * 3600u * 1000u);
}

weft_err
weft_otlp_metric_reader_start(struct weft_meter *meter,
                              const struct weft_metric_reader_options *options,
                              struct weft_metric_reader **out)
{
    struct weft__otlp_transport_config cfg = {
        .signal = "METRICS",
        .path = "v1/metrics",
        .log_name = "OTLP metrics",
        .parse_partial_success = true,
    };
    const struct weft_otlp_options *otlp = options != NULL ? options->otlp : NULL;
    struct weft_metric_reader *r = NULL;
    const char *temporality = NULL;
    weft_err err = WEFT_OK;

    if (meter == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    temporality = weft__env("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE");
    if (temporality != NULL && strcasecmp(temporality, "cumulative") != 0) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=%.40s: weft sends cumulative "
                 "temporality only (a backend that needs delta must convert, as the "
                 "collector's cumulativetodelta processor does)",
                 temporality);
    }
    r = weft__calloc(1, sizeof(*r));
    if (r == NULL) {
        return WEFT_ENOMEM;
    }
    r->meter = meter;
    r->interval_ms = option_ms(options != NULL ? options->interval_ms : 0,
                               "OTEL_METRIC_EXPORT_INTERVAL", DEFAULT_INTERVAL_MS);
    r->timeout_ms = option_ms(options != NULL ? options->timeout_ms : 0,
                              "OTEL_METRIC_EXPORT_TIMEOUT", DEFAULT_TIMEOUT_MS);
    weft__buf_init(&r->body, MAX_REQUEST_BYTES);
    cfg.signal_endpoint = otlp != NULL ? otlp->metrics_endpoint : NULL;
    err = weft__otlp_transport_new(&cfg, otlp, &r->transport);
    if (err == WEFT_OK) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "weft.metrics.exports",
                                    "{export}", "OTLP metrics exports by outcome", NULL, 0,
                                    &r->exports);
    }
    if (err != WEFT_OK) {
        weft__otlp_transport_free(r->transport);
        weft__buf_cleanup(&r->body);
        weft__free(r);
        return err;
    }
    pthread_mutex_init(&r->lock, NULL);
    err = cond_init_monotonic(&r->wake);
    if (err == WEFT_OK) {
        err = cond_init_monotonic(&r->done_cond);
        if (err != WEFT_OK) {
            pthread_cond_destroy(&r->wake);
        }
    }
    if (err == WEFT_OK && pthread_create(&r->thread, NULL, reader_main, r) != 0) {
        pthread_cond_destroy(&r->wake);
        pthread_cond_destroy(&r->done_cond);
        err = WEFT_EIO;
    }
    if (err != WEFT_OK) {
        pthread_mutex_destroy(&r->lock);
        weft__otlp_transport_free(r->transport);
        weft__buf_cleanup(&r->body);
        weft__free(r);
        return err;
    }
    *out = r;
    return WEFT_OK;
}

weft_err
weft_metric_reader_force_flush(struct weft_metric_reader *r, uint32_t timeout_ms)
{
    struct timespec until = deadline_in(timeout_ms);
    uint64_t gen = 0;
    weft_err err = WEFT_OK;
    int rc = 0;

    if (r == NULL) {
        return WEFT_EINVAL;
    }
    pthread_mutex_lock(&r->lock);
    gen = ++r->wanted;
    pthread_cond_signal(&r->wake);
    while (r->done < gen && rc != ETIMEDOUT) {
        rc = pthread_cond_timedwait(&r->done_cond, &r->lock, &until);
    }
    err = r->done >= gen ? r->last_err : WEFT_ETIMEDOUT;
    pthread_mutex_unlock(&r->lock);
    return err;
}

void
weft_metric_reader_get_stats(const struct weft_metric_reader *r,
                             struct weft_metric_reader_stats *out)
{
    struct weft_otlp_stats t;

    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof(*out));
    if (r == NULL) {
        return;
    }
    out->exports = atomic_load(&r->n_exports);
    out->failures = atomic_load(&r->n_failures);
    out->points = atomic_load(&r->n_points);
    weft__otlp_transport_stats(r->transport, &t);
    out->last_http_status = t.last_http_status;
}

void
weft_metric_reader_stop(struct weft_metric_reader *r)
{
    if (r == NULL) {
        return;
    }
    pthread_mutex_lock(&r->lock);
    r->is_stopping = true;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL); /* the final export is bounded by timeout_ms */
    pthread_cond_destroy(&r->wake);
    pthread_cond_destroy(&r->done_cond);
    pthread_mutex_destroy(&r->lock);
    weft__otlp_transport_free(r->transport);
    weft__buf_cleanup(&r->body);
    weft__free(r);
}
