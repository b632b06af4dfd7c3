/* include/weft/export.h - the exporter interface and weft's built-in exporters.
 *
 * An exporter receives batches of ended spans from a processor's export thread through three
 * calls (as the OTel SpanExporter): export a batch, force a flush, shut down. Spans are
 * handed over as read-only views (struct weft_span_data) that stay valid only for the call.
 *
 * Thread-safety: a processor calls its exporter from one thread at a time (its export
 * thread, or the ending thread for the simple processor); exporters need no locking of
 * their own for export_batch. weft_exporter_free() must not race with any other call.
 */
#ifndef WEFT_EXPORT_H
#define WEFT_EXPORT_H

#include <weft/trace.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The resource spans belong to. Immutable for the provider's lifetime. */
struct weft_resource {
    const struct weft_attr *attrs;
    size_t attr_count;
    uint32_t dropped_attrs;
    const char *schema_url; /**< may be NULL */
};

/** The instrumentation scope (one per tracer). Immutable for the provider's lifetime. */
struct weft_scope {
    const char *name;
    const char *version;    /**< may be NULL */
    const char *schema_url; /**< may be NULL */
    const struct weft_attr *attrs;
    size_t attr_count;
};

/** One span event. */
struct weft_event_data {
    uint64_t time_ns;
    const char *name;
    const struct weft_attr *attrs;
    size_t attr_count;
    uint32_t dropped_attrs;
};

/** One span link. */
struct weft_link_data {
    uint8_t trace_id[WEFT_TRACE_ID_SIZE];
    uint8_t span_id[WEFT_SPAN_ID_SIZE];
    const char *trace_state; /**< may be NULL */
    uint8_t trace_flags;
    bool is_remote;
    const struct weft_attr *attrs;
    size_t attr_count;
    uint32_t dropped_attrs;
};

/** A read-only view of an ended span. Every string is NUL-terminated. Spans of one provider
 * share @c resource; spans of one tracer share @c scope (compare pointers to group them). */
struct weft_span_data {
    uint8_t trace_id[WEFT_TRACE_ID_SIZE];
    uint8_t span_id[WEFT_SPAN_ID_SIZE];
    uint8_t parent_span_id[WEFT_SPAN_ID_SIZE]; /**< all zero for a root span */
    bool has_parent;
    bool parent_is_remote;
    uint8_t trace_flags;
    const char *trace_state; /**< may be NULL */
    const char *name;
    weft_span_kind kind;
    uint64_t start_time_ns;
    uint64_t end_time_ns;
    const struct weft_attr *attrs;
    size_t attr_count;
    uint32_t dropped_attrs;
    const struct weft_event_data *events;
    size_t event_count;
    uint32_t dropped_events;
    const struct weft_link_data *links;
    size_t link_count;
    uint32_t dropped_links;
    weft_status_code status_code;
    const char *status_message; /**< may be NULL */
    const struct weft_resource *resource;
    const struct weft_scope *scope;
};

/** Look up an attribute of a span by key. @return borrowed value or NULL.
 * Ownership: borrowed from @p span; valid while the span data is. */
WEFT_API const struct weft_value *weft_span_data_attr(const struct weft_span_data *span,
                                                      const char *key);

/** What an export call reports beyond its return code. */
struct weft_export_result {
    /** Spans the receiver rejected although the call succeeded (OTLP partial_success). */
    uint64_t rejected;
    /** Spans of a successful call that were not delivered but written to the exporter's
     * on-disk spool, to be sent when the endpoint answers again (the processor counts them
     * as spooled, not exported). */
    uint64_t spooled;
};

/** Counters of an exporter's on-disk spool (docs/spool.md). Requests whose retries gave up go
 * there and are sent again, oldest first, when the endpoint answers. Every span that leaves
 * the spool unsent is counted in one of dropped, rejected, corrupt or lost. */
struct weft_spool_stats {
    bool is_enabled;           /**< the exporter has a spool (opened and locked) */
    uint64_t requests_spooled; /**< requests written to the spool since start */
    uint64_t spans_spooled;    /**< their spans */
    uint64_t requests_drained; /**< spooled requests the endpoint accepted later */
    uint64_t spans_drained;    /**< their spans (spooled by this process or one before it) */
    uint64_t requests_dropped; /**< requests deleted unsent to stay under the cap, oldest first */
    uint64_t spans_dropped;    /**< their spans */
    uint64_t spans_rejected;   /**< spooled spans the endpoint refused for good when resent */
    uint64_t files_corrupt;    /**< files that failed their checks (torn, damaged): deleted */
    uint64_t spans_corrupt;    /**< their spans, when the header was still readable */
    uint64_t spans_lost;       /**< spans that could not be written (disk full, I/O error) */
    uint64_t bytes;            /**< on disk now */
    uint64_t files;            /**< requests waiting now */
    uint64_t spans;            /**< spans waiting now */
};

/** Exporter operations. @c export_batch must return within the batch deadline.
 * - export_batch: WEFT_OK (delivered; result->rejected may be non-zero) or an error (the
 *   whole batch failed for good; the processor counts it as failed and does not retry:
 *   retries are the exporter's job).
 * - force_flush: deliver anything the exporter buffers itself. May be NULL.
 * - shutdown: release connections; later export calls fail. May be NULL.
 * - destroy: free @p self. May be NULL.
 * - last_error: copy a one-line description of the last failure (what happened and where,
 *   never credentials) into @p buf and return its length, 0 when there is none. Called from
 *   the export thread after a failed export_batch. May be NULL (the processor then reports
 *   the error code).
 * - idle, spool_stats: see below; both may be NULL. */
struct weft_exporter_ops {
    const char *name;
    weft_err (*export_batch)(void *self,
                             const struct weft_span_data *const *spans,
                             size_t count,
                             uint64_t deadline_ns,
                             struct weft_export_result *result);
    weft_err (*force_flush)(void *self, uint64_t deadline_ns);
    weft_err (*shutdown)(void *self, uint64_t deadline_ns);
    void (*destroy)(void *self);
    size_t (*last_error)(void *self, char *buf, size_t len);
    /** Background work when the batch processor has nothing to export (called from its
     * export thread after a schedule delay passed without a full batch, and again at once
     * while it returns true): the OTLP exporters send their spool here. May be NULL. */
    bool (*idle)(void *self, uint64_t deadline_ns);
    /** Fill @p out with the spool's counters (any thread). May be NULL: no spool. */
    void (*spool_stats)(void *self, struct weft_spool_stats *out);
};

/** Wrap an implementation in an exporter handle. Deadlines passed to the ops are
 * CLOCK_MONOTONIC ns (weft_monotonic_ns()); 0 means none.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_ENOMEM (then @p self is destroyed through ops->destroy).
 * Ownership: takes @p self; @p ops must outlive the exporter (use a static struct). */
WEFT_API weft_err weft_exporter_new(const struct weft_exporter_ops *ops,
                                    void *self,
                                    struct weft_exporter **out);

/** Free an exporter that was not handed to a processor. NULL is a no-op.
 * Errors: none. Ownership: takes @p exporter (frees it and what it owns). */
WEFT_API void weft_exporter_free(struct weft_exporter *exporter);

/** The ops name ("otlp", "file", ...). Never NULL.
 * "unknown" for NULL. Errors: none. Ownership: returns a static string. */
WEFT_API const char *weft_exporter_name(const struct weft_exporter *exporter);

/** Read the spool counters of @p exporter into @p out (zeroed, is_enabled false, when it is
 * NULL or has no spool). Thread-safe. Errors: none. Ownership: none; @p out is the caller's. */
WEFT_API void weft_exporter_spool_stats(const struct weft_exporter *exporter,
                                        struct weft_spool_stats *out);

/** The same for the exporter behind @p processor (its spool once the processor owns it).
 * Thread-safe. Errors: none. Ownership: none; @p out is the caller's. */
WEFT_API void weft_processor_spool_stats(const struct weft_processor *processor,
                                         struct weft_spool_stats *out);

/** CLOCK_MONOTONIC in ns, the clock of export deadlines.
 * Errors: none. Ownership: none. */
WEFT_API uint64_t weft_monotonic_ns(void);

/* ------------------------------------------------------------------------------------------ */
/* OTLP/HTTP                                                                                   */

typedef enum weft_otlp_protocol {
    WEFT_OTLP_HTTP_PROTOBUF = 0,
    WEFT_OTLP_HTTP_JSON = 1
} weft_otlp_protocol;

/** OTLP/HTTP exporter options. Zero-initialise; zero/NULL fields come from the
 * OTEL_EXPORTER_OTLP_* environment (REFERENCE.md rules), else the OTLP defaults. */
struct weft_otlp_options {
    const char *endpoint;        /**< base URL; "/v1/traces" is appended */
    const char *traces_endpoint; /**< full URL, used as given (wins over endpoint) */
    bool protocol_set;           /**< use @c protocol instead of the environment */
    weft_otlp_protocol protocol;
    int compression;             /**< 0 from env, 1 none, 2 gzip */
    const char *headers;         /**< "k=v,k2=v2", values percent-decoded; added to env headers */
    uint32_t timeout_ms;         /**< per request; 0 from env (default 10000) */
    const char *ca_file;         /**< PEM CA bundle; NULL from OTEL_EXPORTER_OTLP_CERTIFICATE */
    const char *client_cert;     /**< PEM client certificate (mTLS) */
    const char *client_key;      /**< PEM client key (mTLS) */
    bool insecure_skip_verify;   /**< never from the environment; for local tests only */
    uint32_t max_retry_ms;       /**< total retry budget; 0 means bounded by the deadline only */
    uint32_t initial_backoff_ms; /**< default 1000 (first retry waits up to this) */
    uint32_t max_backoff_ms;     /**< default 5000 */
    const char *user_agent;      /**< default "weft/<version> (OTLP)" */
    /** Metrics only: full URL, used as given (wins over endpoint and
     * OTEL_EXPORTER_OTLP_METRICS_ENDPOINT). */
    const char *metrics_endpoint;
    /** The on-disk spool (traces only; docs/spool.md): 0 from WEFT_EXPORT_SPOOL (default off),
     * 1 off, 2 on. On: a request whose retries give up (endpoint down, refusing with 429/502/
     * 503/504, or unreachable) is kept in a file and sent, oldest first, once the endpoint
     * answers; also by the next process with the same spool directory. */
    int spool;
    /** The spool's root directory; NULL from WEFT_EXPORT_SPOOL_DIR, else $WEFT_HOME/spool.
     * Each exporter uses its own subdirectory (named by its kind and a hash of its URL). */
    const char *spool_dir;
    /** The spool's cap in bytes; 0 from WEFT_EXPORT_SPOOL_MAX_BYTES, default 256 MiB. When
     * full, the oldest requests are deleted and their spans counted. */
    uint64_t spool_max_bytes;
};

/** Create an OTLP/HTTP trace exporter (libcurl; connection reused across exports).
 * Retries 429, 502, 503, 504 and connection failures with exponential backoff and jitter,
 * honouring Retry-After (seconds or HTTP-date); other answers are final. A 200 carrying
 * partial_success reports its rejected count.
 * @return WEFT_OK, WEFT_EINVAL (bad URL or option, logged with the variable name),
 * WEFT_ENOMEM. Ownership: strings are copied; caller owns *out. */
WEFT_API weft_err weft_otlp_exporter_new(const struct weft_otlp_options *opts,
                                         struct weft_exporter **out);

/** Counters of an OTLP exporter (NULL-safe; zeros for other exporters). A 200 whose body is
 * neither empty nor an ExportTraceServiceResponse in the encoding its Content-Type names (for
 * instance an HTML page) fails the export: the spans did not reach an OTLP receiver. */
struct weft_otlp_stats {
    uint64_t requests;       /**< HTTP requests sent, retries included */
    uint64_t retries;        /**< requests that were retries */
    uint64_t bytes_sent;     /**< body bytes after compression */
    uint64_t spans_rejected; /**< partial_success rejected_spans summed */
    long last_http_status;   /**< 0 when the last attempt got no HTTP answer */
};
/** Read the OTLP exporter's counters into @p out (zeroed when @p exporter is NULL or not an
 * OTLP exporter). Errors: none. Ownership: none; @p out is the caller's. */
WEFT_API void weft_otlp_exporter_stats(const struct weft_exporter *exporter,
                                       struct weft_otlp_stats *out);

/* ------------------------------------------------------------------------------------------ */
/* Langfuse                                                                                    */

/** Langfuse exporter options. Zero-initialise; zero/NULL fields come from the environment,
 * then the defaults. */
struct weft_langfuse_options {
    const char *host;        /**< LANGFUSE_HOST (or LANGFUSE_BASE_URL); default the EU cloud,
                                  https://cloud.langfuse.com */
    const char *public_key;  /**< LANGFUSE_PUBLIC_KEY */
    const char *secret_key;  /**< LANGFUSE_SECRET_KEY; never logged, never on a span */
    const char *environment; /**< LANGFUSE_ENVIRONMENT (or LANGFUSE_TRACING_ENVIRONMENT);
                                  at most 40 of [a-z0-9-_]; NULL: none sent */
    const char *release;     /**< LANGFUSE_RELEASE; NULL: none sent */
    bool sample_rate_set;    /**< use @c sample_rate instead of LANGFUSE_SAMPLE_RATE */
    double sample_rate;      /**< share of traces sent, decided per trace id; default 1 */
    bool protocol_json;     /**< OTLP JSON instead of protobuf (WEFT_LANGFUSE_PROTOCOL=http/json) */
    bool disable_scores;    /**< no scores (or WEFT_LANGFUSE_SCORES=false) */
    size_t max_value_bytes; /**< longer string values are cut with a marker; 0:
                                 WEFT_LANGFUSE_MAX_VALUE_BYTES, default 32768 */
    size_t max_request_bytes;    /**< a request's body before gzip; 0:
                                      WEFT_LANGFUSE_MAX_REQUEST_BYTES, default 3 MiB */
    size_t max_spans_per_trace;  /**< longer runs are split into several traces; 0:
                                      WEFT_LANGFUSE_MAX_SPANS_PER_TRACE, default 10000 */
    uint32_t timeout_ms;         /**< per request; default 10000 */
    uint32_t max_retry_ms;       /**< retry budget per batch; 0: bounded by the deadline */
    uint32_t initial_backoff_ms; /**< default 1000 */
    int spool;                   /**< on-disk spool of span requests, as weft_otlp_options */
    const char *spool_dir;       /**< as weft_otlp_options */
    uint64_t spool_max_bytes;    /**< as weft_otlp_options */
};

/** Create a Langfuse exporter: spans over Langfuse's OTLP endpoint
 * ({host}/api/public/otel/v1/traces, gzip, Basic auth, x-langfuse-ingestion-version: 4) with
 * the Langfuse attribute mapping added to every span, and scores (reflection verdicts, run
 * outcome, reward, loop counts, stuck loops) through {host}/api/public/scores. Give it its own
 * batch processor so that Langfuse never delays another exporter. docs/langfuse.md has the
 * mapping. A 401 or 403 stops the exporter for good (one clear log line; later spans fail and
 * are counted).
 * @return WEFT_OK, WEFT_EINVAL (missing or partial credentials, bad host, environment or rate:
 * one log line naming what is wrong), WEFT_EIO, WEFT_ENOMEM. Ownership: caller owns *out. */
WEFT_API weft_err weft_langfuse_exporter_new(const struct weft_langfuse_options *opts,
                                             struct weft_exporter **out);

/** True when LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY or LANGFUSE_HOST is set: the user
 * asked for Langfuse (and weft_langfuse_exporter_new() says what is missing, if anything).
 * Errors: none. Ownership: none. */
WEFT_API bool weft_langfuse_configured(void);

/** Counters of a Langfuse exporter (zeros for other exporters). */
struct weft_langfuse_stats {
    uint64_t spans_sent;        /**< spans in accepted requests */
    uint64_t spans_sampled_out; /**< spans of traces LANGFUSE_SAMPLE_RATE left out */
    uint64_t spans_dropped;     /**< spans lost: failed requests, over the size limit, stopped */
    uint64_t values_truncated;  /**< string values cut to max_value_bytes */
    uint64_t traces_split;      /**< extra traces created by splitting long runs */
    uint64_t requests;          /**< span requests, retries included */
    uint64_t scores_sent;
    uint64_t scores_failed;
    bool is_stopped; /**< a 401/403 stopped the exporter */
};
/** Read the Langfuse exporter's counters into @p out (zeroed when @p exporter is NULL or
 * not a Langfuse exporter). Errors: none. Ownership: none; @p out is the caller's. */
WEFT_API void weft_langfuse_exporter_stats(const struct weft_exporter *exporter,
                                           struct weft_langfuse_stats *out);

/* ------------------------------------------------------------------------------------------ */
/* Local exporters                                                                             */

/** File exporter: appends one OTLP JSON ExportTraceServiceRequest per line to @p path
 * (created with mode 0600, parent directories created), flushed after every batch.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_EIO (cannot open; logged with the path), WEFT_ENOMEM.
 * Ownership: copies @p path; caller owns *out (hand it to a processor, or
 * weft_exporter_free()); *out is NULL on failure. */
WEFT_API weft_err weft_file_exporter_new(const char *path, struct weft_exporter **out);

/** Console exporter: prints each finished trace as an indented tree (name, duration, status,
 * key attributes) to @p stream (NULL means stdout). Spans are held until their root ends
 * (at most 10000 spans held; older traces are printed incomplete rather than dropped).
 * @return WEFT_OK, WEFT_EINVAL (NULL @p out), WEFT_ENOMEM; *out is NULL on failure.
 * Ownership: borrows @p stream for the exporter's life (not closed); caller owns *out. */
WEFT_API weft_err weft_console_exporter_new(void *stream, struct weft_exporter **out);

/** Span store exporter: writes spans into the store at @p db_path (NULL means
 * weft_store_default_path()), one transaction per batch: a SQLite file (WAL mode), or
 * PostgreSQL when @p db_path is a postgresql:// (postgres://) URL (time-partitioned tables, a
 * span sent twice stored once; docs/fleet.md).
 * @return WEFT_OK, WEFT_EINVAL, WEFT_EIO (logged with the location, never a password, and the
 * database's message).
 * Ownership: copies @p db_path; caller owns *out (hand it to a processor, or
 * weft_exporter_free()); *out is NULL on failure. */
WEFT_API weft_err weft_store_exporter_new(const char *db_path, struct weft_exporter **out);

/** The default span store location: WEFT_TRACE_STORE_URL when set (a path or a
 * postgresql:// URL); else WEFT_STATE_URL when that is a PostgreSQL URL (runs and their spans
 * in one database); else $WEFT_HOME/weft.db, or ./.weft/weft.db. Ownership: writes into
 * @p buf; @return WEFT_OK or WEFT_EINVAL (buffer too small). */
WEFT_API weft_err weft_store_default_path(char *buf, size_t buf_len);

/* ------------------------------------------------------------------------------------------ */
/* Environment set-up                                                                          */

/** Build processors from OTEL_TRACES_EXPORTER (comma list of otlp, langfuse, console, file,
 * store, none; @p default_exporters when unset, e.g. "store"), plus the Langfuse exporter
 * whenever LANGFUSE_* is set, and add them to @p provider, each
 * behind its own batch processor (console behind a simple one), so a slow collector never
 * stalls the local store. The file exporter writes WEFT_TRACES_FILE (default
 * $WEFT_HOME/traces.jsonl). Unknown names are logged and skipped.
 * @return WEFT_OK, WEFT_EINVAL, or the first exporter's creation error (the others are
 * still added).
 * Ownership: borrows both arguments for the call; the processors and exporters it
 * creates belong to @p provider. */
WEFT_API weft_err weft_provider_add_env_exporters(struct weft_provider *provider,
                                                  const char *default_exporters);

/** One environment variable an exporter of the registry reads. */
struct weft_exporter_env {
    const char *name;          /**< e.g. "OTEL_EXPORTER_OTLP_ENDPOINT" */
    const char *default_value; /**< what applies when it is unset; NULL when nothing does */
    const char *meaning;       /**< one short sentence */
};

/** One name OTEL_TRACES_EXPORTER accepts: the registry that
 * weft_provider_add_env_exporters() chooses from and `weft exporters` prints. */
struct weft_exporter_info {
    const char *name;        /**< "otlp", "langfuse", "console", "file", "store" or "none" */
    const char *description; /**< one short sentence */
    /** "batch" or "simple": the processor the exporter is put behind; NULL for "none". */
    const char *processor;
    const struct weft_exporter_env *env; /**< the variables it reads (env_count of them) */
    size_t env_count;
};

/** Entry @p index of the exporter registry, in a fixed order (the order of the docs), or NULL
 * past the last one: iterate from 0 until NULL.
 * Ownership: returns borrowed static data, valid for the life of the process.
 * Errors: none (NULL past the last entry).
 * Thread-safety: the registry is immutable; call from any thread. */
WEFT_API const struct weft_exporter_info *weft_exporter_info_at(size_t index);

/** The registry entry named @p name (exact, case-sensitive, as OTEL_TRACES_EXPORTER is read),
 * or NULL when @p name is NULL or not a known name.
 * Ownership: returns borrowed static data. Errors: none (NULL for an unknown name).
 * Thread-safety: any thread. */
WEFT_API const struct weft_exporter_info *weft_exporter_info_find(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_EXPORT_H */
