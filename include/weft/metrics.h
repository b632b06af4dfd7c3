/* include/weft/metrics.h - the weft metrics SDK: counters, up-down counters, gauges and
 * explicit-bucket histograms with attributes, aggregated in memory with cumulative temporality,
 * and read back by exporters (Prometheus text, OTLP metrics).
 *
 * Recording is lock-free for a series that exists: the series is found through an
 * open-addressing table of atomic slots and updated with atomic operations. Creating a new
 * series (a new attribute set) takes the instrument's lock once. Each instrument holds at most
 * max_series series; past that, measurements go to one series with the single attribute
 * otel.metric.overflow=true, as the OTel specification prescribes, and are counted.
 *
 * Histograms keep an exemplar per bucket: the value, time and trace/span id of the latest
 * measurement recorded inside a sampled span, so a dashboard can jump from a slow bucket to a
 * trace.
 *
 * Thread-safety: every function is thread-safe. Instruments live as long as their meter.
 */
#ifndef WEFT_METRICS_H
#define WEFT_METRICS_H

#include <weft/export.h>
#include <weft/trace.h>

#ifdef __cplusplus
extern "C" {
#endif

struct weft_meter;      /* a set of instruments with one resource */
struct weft_instrument; /* one named instrument */

typedef enum weft_instrument_kind {
    WEFT_INSTRUMENT_COUNTER = 0,        /**< monotonic sum */
    WEFT_INSTRUMENT_UPDOWN_COUNTER = 1, /**< non-monotonic sum */
    WEFT_INSTRUMENT_GAUGE = 2,          /**< last value set */
    WEFT_INSTRUMENT_HISTOGRAM = 3       /**< explicit buckets, sum, count, min, max */
} weft_instrument_kind;

/** Meter options. Zero-initialise; NULL options mean the defaults. */
struct weft_meter_options {
    size_t max_series;        /**< per instrument, overflow series included; default 2000 */
    const char *service_name; /**< service.name of the resource; default "weft" */
    const struct weft_attr *resource_attrs; /**< more resource attributes (copied) */
    size_t resource_attr_count;
};

/** Create a meter. @return WEFT_OK, WEFT_EINVAL, WEFT_ENOMEM.
 * Ownership: caller owns *out; free with weft_meter_free(). */
WEFT_API weft_err weft_meter_new(const struct weft_meter_options *options, struct weft_meter **out);

/** Free a meter and its instruments. NULL is a no-op. No recording may be in flight.
 * Errors: none. Ownership: takes @p meter; every instrument pointer from it dies with it. */
WEFT_API void weft_meter_free(struct weft_meter *meter);

/** Get or create an instrument. A second call with the same name returns the same instrument
 * when kind, unit and bounds match, else WEFT_EINVAL.
 * @param name OTel instrument name ([A-Za-z][A-Za-z0-9_.-/]*, at most 255 characters).
 * @param unit UCUM unit ("s", "By", "1", "{token}") or NULL.
 * @param bounds histograms: strictly increasing bucket bounds (NULL with 0 means the OTel
 * default bounds); ignored for other kinds.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_ELIMIT (more than 1024 instruments), WEFT_ENOMEM.
 * Ownership: strings and bounds are copied; the meter owns *out. */
WEFT_API weft_err weft_meter_instrument(struct weft_meter *meter,
                                        weft_instrument_kind kind,
                                        const char *name,
                                        const char *unit,
                                        const char *description,
                                        const double *bounds,
                                        size_t bound_count,
                                        struct weft_instrument **out);

/** A callback gauge: @p fn is called at each collection and reports values through
 * weft_gauge_observe(). */
typedef void (*weft_gauge_fn)(struct weft_instrument *gauge, void *user_data);

/** Register @p fn on a gauge instrument (replacing an earlier one). @return WEFT_OK,
 * WEFT_EINVAL (not a gauge). Ownership: @p user_data is borrowed while the meter lives. */
WEFT_API weft_err weft_gauge_set_callback(struct weft_instrument *gauge,
                                          weft_gauge_fn fn,
                                          void *user_data);

/** Add @p value to a counter (must be >= 0; negative values are dropped and counted) or an
 * up-down counter. @return WEFT_OK, WEFT_EINVAL, WEFT_ELIMIT (went to the overflow series),
 * WEFT_ENOMEM (dropped and counted). Ownership: attributes are copied when a series is new. */
WEFT_API weft_err weft_counter_add(struct weft_instrument *counter,
                                   double value,
                                   const struct weft_attr *attrs,
                                   size_t attr_count);

/** Record @p value into a histogram; inside a sampled span (the thread's current span) the
 * bucket's exemplar is updated. @return as weft_counter_add().
 * Ownership: copies the attributes of a new series; borrows them for the call. */
WEFT_API weft_err weft_histogram_record(struct weft_instrument *histogram,
                                        double value,
                                        const struct weft_attr *attrs,
                                        size_t attr_count);

/** Set a gauge's value. @return as weft_counter_add().
 * Ownership: copies the attributes of a new series; borrows them for the call. */
WEFT_API weft_err weft_gauge_set(struct weft_instrument *gauge,
                                 double value,
                                 const struct weft_attr *attrs,
                                 size_t attr_count);

/** Same as weft_gauge_set(), for use inside a gauge callback.
 * @return as weft_gauge_set(). Ownership: as weft_gauge_set(). */
WEFT_API weft_err weft_gauge_observe(struct weft_instrument *gauge,
                                     double value,
                                     const struct weft_attr *attrs,
                                     size_t attr_count);

/** weft's own health as callback gauges on @p meter, read from @p provider at each collection:
 * weft.spans.ended (unlabelled), weft.spans.exported, weft.spans.dropped and weft.spans.failed
 * per exporter (label exporter: the exporter's name; spans the provider lost before any
 * processor are dropped{exporter="provider"}), all cumulative counts since the provider
 * started (observed, hence gauges); and weft.exporter.queue.size, .capacity and .utilization,
 * weft.exporter.exports, .export.failures and .export.time (cumulative seconds in export
 * calls) per batch processor (label exporter). Telemetry that was lost is visible where the alerts
 * look. @return WEFT_OK, WEFT_EINVAL, WEFT_ENOMEM.
 * Ownership: @p provider is borrowed while the meter lives. */
WEFT_API weft_err weft_meter_observe_provider(struct weft_meter *meter,
                                              struct weft_provider *provider);

/* ------------------------------------------------------------------------------------------ */
/* Reading (for exporters)                                                                     */

/** An exemplar of a histogram bucket. */
struct weft_exemplar {
    double value;
    uint64_t time_ns;
    uint8_t trace_id[WEFT_TRACE_ID_SIZE];
    uint8_t span_id[WEFT_SPAN_ID_SIZE];
};

/** One series at collection time. Every pointer is borrowed for the visitor call. */
struct weft_series_view {
    const struct weft_attr *attrs; /**< sorted by key; string, bool, int or double values */
    size_t attr_count;
    double value; /**< sums and gauges */
    /* histograms */
    uint64_t count;
    double sum;
    double min;
    double max;
    const uint64_t *bucket_counts;         /**< bound_count + 1 buckets: (b[i-1], b[i]] */
    const struct weft_exemplar *exemplars; /**< one per bucket; time_ns 0 when none */
};

/** One instrument at collection time. */
struct weft_instrument_view {
    const char *name;
    const char *unit;        /**< "" when none */
    const char *description; /**< "" when none */
    weft_instrument_kind kind;
    const double *bounds;
    size_t bound_count;
    uint64_t start_time_ns; /**< when the meter was created (cumulative temporality) */
    uint64_t time_ns;       /**< collection time */
    uint64_t dropped;       /**< measurements dropped (invalid or out of memory) */
    uint64_t overflowed;    /**< measurements that went to the overflow series */
};

/** Visitor: called once per instrument (series NULL, series_count the number to follow), then
 * once per series of it. Return false to stop. */
typedef bool (*weft_metric_visit_fn)(const struct weft_instrument_view *instrument,
                                     const struct weft_series_view *series,
                                     void *user_data);

/** Run the gauge callbacks, then visit every instrument in creation order (also instruments
 * without series yet, so every family is listed from the start) and its series.
 * @return WEFT_OK, WEFT_EINVAL.
 * Ownership: everything passed to @p fn is borrowed for that call only. */
WEFT_API weft_err weft_meter_collect(struct weft_meter *meter,
                                     weft_metric_visit_fn fn,
                                     void *user_data);

/** The meter's resource attributes (service.name first). Ownership: borrowed.
 * Errors: none (NULL, *count untouched, when @p meter or @p count is NULL). */
WEFT_API const struct weft_attr *weft_meter_resource(const struct weft_meter *meter, size_t *count);

/** Render every instrument in the Prometheus text exposition format 0.0.4 following the OTel
 * to Prometheus compatibility rules: names sanitised, unit suffixes (_seconds, _bytes, ...),
 * _total on monotonic counters, _bucket/_sum/_count with le on histograms, HELP and TYPE for
 * every family (also before its first measurement), and target_info from the resource.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_EIO (writing failed), WEFT_ENOMEM.
 * Ownership: *out is new (free() it); *len its length. */
WEFT_API weft_err weft_prometheus_render(struct weft_meter *meter, char **out, size_t *len);

/* ------------------------------------------------------------------------------------------ */
/* Serving /metrics                                                                            */

struct weft_metrics_server;

/** Serve GET /metrics (the meter in Prometheus text) and GET /healthz on @p addr
 * ("HOST:PORT", IPv4; NULL means 127.0.0.1:9464; port 0 picks a free one) from a thread of
 * its own. @return WEFT_OK, WEFT_EINVAL (bad address), WEFT_EIO (cannot listen), WEFT_ENOMEM.
 * Ownership: @p meter is borrowed until weft_metrics_server_stop(); caller owns *out. */
WEFT_API weft_err weft_metrics_server_start(struct weft_meter *meter,
                                            const char *addr,
                                            struct weft_metrics_server **out);

/** Produce the /metrics body (Prometheus text 0.0.4) on each scrape, from the server's thread.
 * @return WEFT_OK with *out new (free() it) and *len its length, or an error (the scrape gets
 * a 500). */
typedef weft_err (*weft_metrics_source_fn)(void *user_data, char **out, size_t *len);

/** As weft_metrics_server_start(), with /metrics produced by @p source (`weft serve` builds
 * it from the state store at each scrape). Ownership: @p user_data is borrowed until stop.
 * @return WEFT_OK, WEFT_EINVAL (NULL or malformed argument), WEFT_EIO (cannot
 * bind: logged), WEFT_ENOMEM; *out is NULL on failure. Caller owns *out
 * (weft_metrics_server_stop()). */
WEFT_API weft_err weft_metrics_server_start_source(weft_metrics_source_fn source,
                                                   void *user_data,
                                                   const char *addr,
                                                   struct weft_metrics_server **out);

/** The port the server listens on.
 * Errors: none. Ownership: none. */
WEFT_API unsigned short weft_metrics_server_port(const struct weft_metrics_server *server);

/** Stop the server (waits for a scrape in progress). NULL is a no-op.
 * Errors: none. Ownership: takes @p server (frees it). */
WEFT_API void weft_metrics_server_stop(struct weft_metrics_server *server);

/* ------------------------------------------------------------------------------------------ */
/* OTLP metrics export                                                                         */

struct weft_metric_reader;

/** Periodic reader options. Zero-initialise; zero/NULL fields come from the environment. */
struct weft_metric_reader_options {
    /** Transport: endpoint (base, "v1/metrics" appended) or metrics_endpoint (exact), protocol,
     * compression, headers, TLS, timeouts and retry budget as for traces; zero/NULL fields come
     * from OTEL_EXPORTER_OTLP_METRICS_* then OTEL_EXPORTER_OTLP_*. NULL: all from the env. */
    const struct weft_otlp_options *otlp;
    uint32_t interval_ms; /**< 0: OTEL_METRIC_EXPORT_INTERVAL, default 60000 */
    uint32_t timeout_ms;  /**< one export with its retries; 0: OTEL_METRIC_EXPORT_TIMEOUT, 30000 */
};

/** Start a periodic OTLP/HTTP metrics reader: a thread of its own collects @p meter every
 * interval (cumulative temporality) and sends one ExportMetricsServiceRequest (protobuf or
 * JSON, gzip optional) with the trace exporter's retry rules. Nothing is sent while the meter
 * has no data points. Every export is counted on @p meter as weft.metrics.exports{outcome}.
 * @return WEFT_OK, WEFT_EINVAL (bad option, logged with its name), WEFT_EIO (no thread or no
 * libcurl), WEFT_ENOMEM. Ownership: @p meter is borrowed until weft_metric_reader_stop();
 * caller owns *out. */
WEFT_API weft_err weft_otlp_metric_reader_start(struct weft_meter *meter,
                                                const struct weft_metric_reader_options *options,
                                                struct weft_metric_reader **out);

/** Export now (on the reader's thread) and wait for it at most @p timeout_ms.
 * @return WEFT_OK (sent or nothing to send), WEFT_ETIMEDOUT, or the export's error.
 * Ownership: none; borrows @p reader for the call. */
WEFT_API weft_err weft_metric_reader_force_flush(struct weft_metric_reader *reader,
                                                 uint32_t timeout_ms);

/** Reader counters. */
struct weft_metric_reader_stats {
    uint64_t exports;      /**< export attempts that had data (retries not counted) */
    uint64_t failures;     /**< exports that failed for good */
    uint64_t points;       /**< data points in successful exports */
    long last_http_status; /**< of the last HTTP answer; 0 when none */
};
/** Read the reader's counters into @p out (zeroed for a NULL reader). Thread-safe.
 * Errors: none. Ownership: none; @p out is the caller's. */
WEFT_API void weft_metric_reader_get_stats(const struct weft_metric_reader *reader,
                                           struct weft_metric_reader_stats *out);

/** Export one last time (bounded by the export timeout), stop the thread and free the reader.
 * NULL is a no-op.
 * Errors: none. Ownership: takes @p reader (frees it). */
WEFT_API void weft_metric_reader_stop(struct weft_metric_reader *reader);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_METRICS_H */
