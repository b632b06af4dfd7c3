/* include/weft/trace.h - the weft tracing SDK: provider, tracers, spans, context, samplers,
 * limits, redaction and span processors.
 *
 * The model follows the OpenTelemetry tracing specification. A provider owns the resource,
 * the sampler, the limits, the redaction rules and the processors; tracers are cheap handles
 * for an instrumentation scope; spans are started by a tracer and ended exactly once.
 *
 * Thread-safety:
 * - struct weft_provider: every function is thread-safe.
 * - struct weft_tracer: thread-safe; owned by its provider.
 * - struct weft_span: confine a span to one thread while it is being recorded (setting
 *   attributes, events, status); weft_span_context_of() may be called from any thread that
 *   holds a reference. After weft_span_end() the caller's pointer is invalid unless it holds
 *   a reference taken with weft_span_ref().
 * - The current-span context is thread-local.
 *
 * Hot path: weft_span_start(), the weft_span_set_*() setters and weft_span_end() never block
 * and never touch the network. When a processor's queue is full the span is dropped and
 * counted (weft_provider_get_stats()). For the cheapest attributes, intern fixed keys once
 * with weft_key_intern() and set them with the inline weft_span_set_*_k() setters; the common
 * string-key setters and weft_span_end() are also inlined (macros over the exported functions)
 * so that a span that records nothing costs a test.
 */
#ifndef WEFT_TRACE_H
#define WEFT_TRACE_H

#include <string.h>
#include <weft/common.h>

#ifdef __cplusplus
extern "C" {
#endif

struct weft_provider;
struct weft_tracer;
struct weft_span;
struct weft_processor;
struct weft_exporter;
struct weft_attr_key;

/* weft_span_start() never returns NULL; telling the compiler lets the inline setters below drop
 * their NULL test. */
#if defined(__GNUC__) || defined(__clang__)
#define WEFT__RETURNS_NONNULL __attribute__((returns_nonnull))
#else
#define WEFT__RETURNS_NONNULL
#endif

/* ------------------------------------------------------------------------------------------ */
/* Values and attributes                                                                       */

/** OTLP span kinds (values are the OTLP enum numbers). */
typedef enum weft_span_kind {
    WEFT_SPAN_KIND_UNSPECIFIED = 0,
    WEFT_SPAN_KIND_INTERNAL = 1,
    WEFT_SPAN_KIND_SERVER = 2,
    WEFT_SPAN_KIND_CLIENT = 3,
    WEFT_SPAN_KIND_PRODUCER = 4,
    WEFT_SPAN_KIND_CONSUMER = 5
} weft_span_kind;

/** OTLP status codes (values are the OTLP enum numbers). */
typedef enum weft_status_code {
    WEFT_STATUS_UNSET = 0,
    WEFT_STATUS_OK = 1,
    WEFT_STATUS_ERROR = 2
} weft_status_code;

/** Attribute value types: every type OTLP attributes may hold. */
typedef enum weft_value_type {
    WEFT_VALUE_STRING = 0,
    WEFT_VALUE_BOOL = 1,
    WEFT_VALUE_INT = 2,
    WEFT_VALUE_DOUBLE = 3,
    WEFT_VALUE_STRING_ARRAY = 4,
    WEFT_VALUE_BOOL_ARRAY = 5,
    WEFT_VALUE_INT_ARRAY = 6,
    WEFT_VALUE_DOUBLE_ARRAY = 7
} weft_value_type;

/** A typed value. @c len is the byte length of a string (strings need not be NUL-terminated
 * when given to the SDK; strings handed to exporters always are) or the element count of an
 * array. String-array elements are NUL-terminated. */
struct weft_value {
    weft_value_type type;
    size_t len;
    union {
        const char *str;
        bool b;
        int64_t i;
        double d;
        const char *const *strs;
        const bool *bools;
        const int64_t *ints;
        const double *doubles;
    } u;
};

/** A key and its value. Keys are NUL-terminated and non-empty. */
struct weft_attr {
    const char *key;
    struct weft_value value;
};

/** Build attributes for arrays (events, links, start options). Ownership: nothing is copied
 * until the attribute is handed to the SDK; the pointers must outlive that call.
 * Errors: none. */
WEFT_API struct weft_attr weft_attr_str(const char *key, const char *value);
WEFT_API struct weft_attr weft_attr_bool(const char *key, bool value);
WEFT_API struct weft_attr weft_attr_int(const char *key, int64_t value);
WEFT_API struct weft_attr weft_attr_double(const char *key, double value);
/** A string attribute whose value has a known length (@p len bytes, which may hold NUL bytes
 * or invalid UTF-8; NULL only with len 0). The key stays NUL-terminated. Ownership: as
 * weft_attr_str(). Errors: none. */
WEFT_API struct weft_attr weft_attr_strn(const char *key, const char *value, size_t len);

/* ------------------------------------------------------------------------------------------ */
/* Span context and W3C trace context                                                          */

#define WEFT_TRACE_ID_SIZE       16
#define WEFT_SPAN_ID_SIZE        8
#define WEFT_TRACE_FLAG_SAMPLED  0x01u
#define WEFT_TRACE_FLAG_RANDOM   0x02u
#define WEFT_TRACEPARENT_LEN     55  /**< characters of a version-00 traceparent */
#define WEFT_TRACESTATE_MAX_LEN  512 /**< longest tracestate weft keeps (W3C minimum) */
#define WEFT_TRACESTATE_MAX_KEYS 32

/** The propagated identity of a span. @c trace_state is a W3C tracestate header value or
 * NULL; it is borrowed (see the function that filled the struct for its lifetime). */
struct weft_span_context {
    uint8_t trace_id[WEFT_TRACE_ID_SIZE];
    uint8_t span_id[WEFT_SPAN_ID_SIZE];
    uint8_t trace_flags;
    bool is_remote;
    const char *trace_state;
};

/** True when neither id is all zeros.
 * False for NULL. Errors: none. Ownership: borrows @p ctx. */
WEFT_API bool weft_span_context_is_valid(const struct weft_span_context *ctx);

/** Parse a W3C traceparent header and, optionally, its tracestate.
 * Version 00 must be exactly 55 characters; later versions (not ff) may carry more fields
 * after a '-'. Hex must be lowercase; all-zero ids and version ff are invalid.
 * An invalid tracestate (more than 32 members, a bad key or value, over 512 characters) is
 * ignored and the traceparent is still used, as the W3C specification says.
 * @param traceparent header value; leading and trailing spaces and tabs are ignored.
 * @param tracestate header value or NULL.
 * @param out filled on success with is_remote = true; untouched on error.
 * @return WEFT_OK, WEFT_EINVAL (NULL argument), WEFT_EPARSE (invalid header: ignore it whole).
 * Ownership: out->trace_state borrows @p tracestate (NULL when absent or invalid). */
WEFT_API weft_err weft_traceparent_parse(const char *traceparent,
                                         const char *tracestate,
                                         struct weft_span_context *out);

/** Format @p ctx as a version-00 traceparent into @p buf (at least WEFT_TRACEPARENT_LEN + 1
 * bytes). @return WEFT_OK, WEFT_EINVAL (NULL, short buffer or invalid context).
 * Ownership: borrows @p ctx; writes into the caller's @p buf. */
WEFT_API weft_err weft_traceparent_format(const struct weft_span_context *ctx,
                                          char *buf,
                                          size_t buf_len);

/** Validate a W3C tracestate value. @return WEFT_OK or WEFT_EPARSE.
 * Ownership: borrows @p tracestate for the call. */
WEFT_API weft_err weft_tracestate_validate(const char *tracestate);

/** Lowercase hex of an id into @p out (2 * @p len + 1 bytes, NUL-terminated).
 * Errors: none (arguments are not checked). Ownership: writes into the caller's @p out. */
WEFT_API void weft_hex_encode(const uint8_t *id, size_t len, char *out);

/* ------------------------------------------------------------------------------------------ */
/* Samplers, limits, redaction                                                                 */

/** Built-in samplers (OTEL_TRACES_SAMPLER names). WEFT_SAMPLER_FROM_ENV reads the
 * environment and falls back to parentbased_always_on. */
typedef enum weft_sampler_kind {
    WEFT_SAMPLER_FROM_ENV = 0,
    WEFT_SAMPLER_ALWAYS_ON = 1,
    WEFT_SAMPLER_ALWAYS_OFF = 2,
    WEFT_SAMPLER_TRACEIDRATIO = 3,
    WEFT_SAMPLER_PARENTBASED_ALWAYS_ON = 4,
    WEFT_SAMPLER_PARENTBASED_ALWAYS_OFF = 5,
    WEFT_SAMPLER_PARENTBASED_TRACEIDRATIO = 6
} weft_sampler_kind;

/** Name of a sampler kind as OTEL_TRACES_SAMPLER spells it. Never NULL.
 * Errors: none. Ownership: returns a static string. */
WEFT_API const char *weft_sampler_name(weft_sampler_kind kind);

/** Value meaning "no limit" for weft_span_limits fields. */
#define WEFT_LIMIT_NONE SIZE_MAX

/** Span limits (OTel specification "Span Limits"). */
struct weft_span_limits {
    size_t attr_count;        /**< OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, default 128 */
    size_t attr_value_length; /**< OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT, default none */
    size_t event_count;       /**< OTEL_SPAN_EVENT_COUNT_LIMIT, default 128 */
    size_t link_count;        /**< OTEL_SPAN_LINK_COUNT_LIMIT, default 128 */
    size_t attrs_per_event;   /**< OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT, default 128 */
    size_t attrs_per_link;    /**< OTEL_LINK_ATTRIBUTE_COUNT_LIMIT, default 128 */
};

/** Fill @p out from the OTEL_* environment variables (the span-specific variable wins over
 * the general OTEL_ATTRIBUTE_* one; bad values log a warning and keep the default).
 * NULL @p out is a no-op. Errors: none. Ownership: @p out is the caller's. */
WEFT_API void weft_span_limits_from_env(struct weft_span_limits *out);

/** A redaction callback, applied to every string attribute value (span, event and link
 * attributes) before it is stored. Return NULL to keep @p value, or a replacement string
 * (which may be written into @p scratch, @p scratch_len bytes) that the SDK copies at once.
 * It runs on the recording thread; it must be fast and must not call back into weft. */
typedef const char *(*weft_redact_fn)(const char *key,
                                      const char *value,
                                      size_t len,
                                      char *scratch,
                                      size_t scratch_len,
                                      void *user_data);

/** The marker the built-in rules put in place of a secret. */
#define WEFT_REDACTED "[REDACTED]"

/** Apply weft's built-in redaction rules to one value: values of keys that name a secret
 * (…authorization, …api_key, …password, …secret, …token, …cookie) are replaced whole;
 * inside other strings, "Bearer <token>", "Basic <credentials>", "sk-…" style API keys and
 * AWS access key ids are replaced by WEFT_REDACTED.
 * @return NULL when nothing matched, else the redacted string written into @p scratch
 * (truncated to @p scratch_len - 1 bytes when longer).
 * Errors: none. Ownership: borrows @p key and @p value; the result is @p scratch
 * (the caller's) or NULL. */
WEFT_API const char *weft_redact_builtin(
    const char *key, const char *value, size_t len, char *scratch, size_t scratch_len);

/* ------------------------------------------------------------------------------------------ */
/* Provider                                                                                    */

/** Provider options. Zero-initialise, then set what you need: every zero field means "from
 * the environment, else the OTel default". */
struct weft_provider_options {
    /** service.name; wins over OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. */
    const char *service_name;
    /** Extra resource attributes; they win over OTEL_RESOURCE_ATTRIBUTES. */
    const struct weft_attr *resource_attrs;
    size_t resource_attr_count;
    /** Sampler and its ratio (used by the *traceidratio kinds; [0,1]). */
    weft_sampler_kind sampler;
    double sampler_ratio;
    /** Span limits; NULL means weft_span_limits_from_env(). */
    const struct weft_span_limits *limits;
    /** Extra redaction applied after the built-in rules. */
    weft_redact_fn redact;
    void *redact_user_data;
    /** Turn the built-in redaction rules off (they are on by default). */
    bool no_builtin_redaction;
    /** Seed for the id generator; 0 seeds from the OS. Tests use a fixed seed. */
    uint64_t id_seed;
    /** Force the SDK off (as OTEL_SDK_DISABLED=true does). */
    bool disabled;
};

/** Create a provider. With OTEL_SDK_DISABLED=true (or opts->disabled) the provider is a
 * no-op: tracers hand out a shared non-recording span and processors are never called.
 * @param opts NULL means all defaults.
 * @return WEFT_OK, WEFT_EINVAL (bad ratio), WEFT_ENOMEM; *out is NULL on failure.
 * Ownership: caller owns *out; release with weft_provider_free(). Strings and attributes in
 * @p opts are copied. */
WEFT_API weft_err weft_provider_new(const struct weft_provider_options *opts,
                                    struct weft_provider **out);

/** Add a span processor. Processors receive every sampled span when it ends, in the order
 * they were added; at most 8.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_ELIMIT (already 8), WEFT_ESTATE (shut down).
 * Ownership: takes @p processor, even on failure. */
WEFT_API weft_err weft_provider_add_processor_take(struct weft_provider *provider,
                                                   struct weft_processor *processor);

/** Deliver everything ended so far through every processor, waiting at most @p timeout_ms.
 * @return WEFT_OK, WEFT_ETIMEDOUT, WEFT_EIO (an exporter failed), WEFT_EINVAL.
 * Ownership: none; borrows @p provider for the call. */
WEFT_API weft_err weft_provider_force_flush(struct weft_provider *provider, uint32_t timeout_ms);

/** Flush and shut every processor down within @p timeout_ms in total; later spans are not
 * recorded. Calling it twice returns WEFT_ESTATE.
 * @return WEFT_OK, WEFT_ETIMEDOUT, WEFT_EIO, WEFT_ESTATE, WEFT_EINVAL.
 * Ownership: none; the provider stays the caller's (weft_provider_free()). */
WEFT_API weft_err weft_provider_shutdown(struct weft_provider *provider, uint32_t timeout_ms);

/** Shut down (30 s bound) if not yet done, then free. NULL is a no-op. Every span must have
 * ended before.
 * Errors: none. Ownership: takes @p provider with its processors and exporters. */
WEFT_API void weft_provider_free(struct weft_provider *provider);

/** True when the provider is a no-op (OTEL_SDK_DISABLED).
 * True for NULL. Errors: none. Ownership: none. */
WEFT_API bool weft_provider_is_disabled(const struct weft_provider *provider);

/** The sampler in use after reading the environment.
 * WEFT_SAMPLER_FROM_ENV for NULL; *@p ratio (may be NULL) receives the ratio.
 * Errors: none. Ownership: none. */
WEFT_API weft_sampler_kind weft_provider_sampler(const struct weft_provider *provider,
                                                 double *ratio);

/** The limits in use after reading the environment.
 * NULL arguments are a no-op. Errors: none. Ownership: @p out is the caller's. */
WEFT_API void weft_provider_limits(const struct weft_provider *provider,
                                   struct weft_span_limits *out);

/** Look up a resource attribute. @return borrowed value valid until weft_provider_free(), or
 * NULL when absent.
 * Errors: none. Ownership: borrowed (see above); @p key is borrowed for the call. */
WEFT_API const struct weft_value *weft_provider_resource_get(const struct weft_provider *provider,
                                                             const char *key);

/** Telemetry counters. Span counts are since the provider was created; exported, dropped and
 * failed are summed over the processors (a span sent to two exporters counts twice). */
struct weft_trace_stats {
    uint64_t spans_started;     /**< recording spans started */
    uint64_t spans_ended;       /**< recording spans ended */
    uint64_t spans_sampled_out; /**< spans the sampler did not record */
    uint64_t spans_exported;    /**< accepted by an exporter */
    uint64_t spans_dropped;     /**< lost before export: queue full or after shutdown */
    uint64_t spans_failed;      /**< an exporter failed for good or rejected them */
    uint64_t spans_spooled;     /**< kept in an exporter's on-disk spool, sent later */
    uint64_t context_overflows; /**< weft_context_attach() calls beyond the depth bound */
};

/** Read the counters. Thread-safe; values are each atomic, not a snapshot of all.
 * @p out is zeroed for a NULL provider. Errors: none. Ownership: @p out is the caller's. */
WEFT_API void weft_provider_get_stats(const struct weft_provider *provider,
                                      struct weft_trace_stats *out);

/** Get the tracer for an instrumentation scope (created on first use, then cached).
 * @return WEFT_OK, WEFT_EINVAL, WEFT_ENOMEM. Ownership: the provider owns *out; it lives
 * until weft_provider_free(). Strings are copied. */
WEFT_API weft_err weft_provider_get_tracer(struct weft_provider *provider,
                                           const char *scope_name,
                                           const char *scope_version,
                                           struct weft_tracer **out);

/* ------------------------------------------------------------------------------------------ */
/* Spans                                                                                       */

/** A link to add at span start. */
struct weft_link_spec {
    struct weft_span_context context;
    const struct weft_attr *attrs;
    size_t attr_count;
};

/** Span start options. Zero-initialise; NULL options mean all defaults. */
struct weft_span_start_options {
    weft_span_kind kind; /**< 0 (unspecified) is recorded as INTERNAL */
    /** Explicit parent span (borrowed for the call). Wins over @c parent_context. */
    const struct weft_span *parent;
    /** Explicit parent context, e.g. from weft_traceparent_parse(). */
    const struct weft_span_context *parent_context;
    /** Start a new trace even when a span is current. */
    bool is_root;
    /** Start time in ns since the Unix epoch; 0 means now. */
    uint64_t start_time_ns;
    /** Attributes known at start, visible to the sampler. */
    const struct weft_attr *attrs;
    size_t attr_count;
    const struct weft_link_spec *links;
    size_t link_count;
};

/** Start a span. Without an explicit parent the current span of this thread is the parent.
 * Never returns NULL: when the SDK is disabled, shut down or out of memory it returns a
 * non-recording span on which every call is a no-op (memory failures are counted as drops).
 * Ownership: the caller owns the span until weft_span_end(). @p name is copied.
 * Errors: none (see above). */
WEFT_API WEFT__RETURNS_NONNULL struct weft_span *weft_span_start(
    struct weft_tracer *tracer, const char *name, const struct weft_span_start_options *opts);

/** End the span at @p end_time_ns (ns since the Unix epoch; 0 means now) and hand it to the
 * processors. Never blocks. A second call is a no-op.
 * Ownership: releases the caller's reference.
 * Errors: none. NULL is a no-op. */
WEFT_API void weft_span_end(struct weft_span *span, uint64_t end_time_ns);

/** Take an extra reference so the span object stays valid after weft_span_end() (to read
 * its context or use it as a parent). Release with weft_span_unref().
 * @return @p span (NULL for NULL). Errors: none.
 * Ownership: new reference; weft_span_unref() (also NULL-safe) releases one. */
WEFT_API struct weft_span *weft_span_ref(struct weft_span *span);
WEFT_API void weft_span_unref(struct weft_span *span);

/** True if the span records (sampled, SDK enabled, not yet ended).
 * False for NULL. Errors: none. Ownership: none. */
WEFT_API bool weft_span_is_recording(const struct weft_span *span);

/** Copy the span's context. Ownership: out->trace_state borrows from the span (valid while
 * the caller holds a reference).
 * Zeroed for NULL and for the no-op span of a disabled or shut-down SDK. Errors: none. */
WEFT_API void weft_span_context_of(const struct weft_span *span, struct weft_span_context *out);

/** Set an attribute (a later value for the same key replaces the earlier one).
 * Strings are truncated to the value-length limit and pass through redaction.
 * @return WEFT_OK (also on a non-recording span), WEFT_ELIMIT (attribute limit reached:
 * dropped and counted in dropped_attributes_count), WEFT_EINVAL, WEFT_ENOMEM (dropped and
 * counted). Ownership: copies key and value. */
WEFT_API weft_err weft_span_set_attr(struct weft_span *span, const struct weft_attr *attr);
WEFT_API weft_err weft_span_set_str(struct weft_span *span, const char *key, const char *value);
WEFT_API weft_err weft_span_set_strn(struct weft_span *span,
                                     const char *key,
                                     const char *value,
                                     size_t len);
WEFT_API weft_err weft_span_set_bool(struct weft_span *span, const char *key, bool value);
WEFT_API weft_err weft_span_set_int(struct weft_span *span, const char *key, int64_t value);
WEFT_API weft_err weft_span_set_double(struct weft_span *span, const char *key, double value);

/** Set a string attribute from a key and a value of known lengths: the length-carrying form
 * of weft_span_set_str() for hot paths (no strlen of either; pass sizeof("literal") - 1).
 * @param span the span (a non-recording span accepts the call and records nothing)
 * @param key @p key_len bytes, not necessarily NUL-terminated; must be non-empty and hold no
 *        NUL byte
 * @param key_len length of @p key in bytes
 * @param value @p value_len bytes, copied as given: they may hold NUL bytes and need not be
 *        valid UTF-8 (exporters replace invalid sequences); NULL is allowed when value_len is 0
 * @param value_len length of @p value in bytes; the value-length limit truncates it to whole
 *        UTF-8 characters (an invalid byte counts as one character)
 * @return WEFT_OK (also on a non-recording span), WEFT_EINVAL (NULL span, a NULL key, an
 * empty key or one holding a NUL byte, NULL value with a non-zero length), WEFT_ELIMIT
 * (attribute limit reached: dropped and counted), WEFT_ENOMEM (dropped and counted).
 * Ownership: copies key and value; both are borrowed for the call only.
 * Thread-safety: as the other setters (one thread records a span at a time). */
WEFT_API weft_err weft_span_set_string_n(
    struct weft_span *span, const char *key, size_t key_len, const char *value, size_t value_len);
/** The length-carrying forms of weft_span_set_bool(), _int() and _double(): @p key is
 * @p key_len bytes, non-empty, without NUL bytes, and need not be NUL-terminated.
 * @return as weft_span_set_string_n(). Ownership: copies the key. */
WEFT_API weft_err weft_span_set_bool_n(struct weft_span *span,
                                       const char *key,
                                       size_t key_len,
                                       bool value);
WEFT_API weft_err weft_span_set_int_n(struct weft_span *span,
                                      const char *key,
                                      size_t key_len,
                                      int64_t value);
WEFT_API weft_err weft_span_set_double_n(struct weft_span *span,
                                         const char *key,
                                         size_t key_len,
                                         double value);
WEFT_API weft_err weft_span_set_str_array(struct weft_span *span,
                                          const char *key,
                                          const char *const *values,
                                          size_t count);
WEFT_API weft_err weft_span_set_bool_array(struct weft_span *span,
                                           const char *key,
                                           const bool *values,
                                           size_t count);
WEFT_API weft_err weft_span_set_int_array(struct weft_span *span,
                                          const char *key,
                                          const int64_t *values,
                                          size_t count);
WEFT_API weft_err weft_span_set_double_array(struct weft_span *span,
                                             const char *key,
                                             const double *values,
                                             size_t count);

/* ------------------------------------------------------------------------------------------ */
/* Interned attribute keys                                                                     */

/** Most distinct keys weft_key_intern() holds in one process (interned keys are never freed). */
#define WEFT_KEY_INTERN_MAX 1024
/** Longest key weft_key_intern() accepts, in bytes. */
#define WEFT_KEY_MAX_LEN 255

/** Intern an attribute key: copy it and classify it for the built-in redaction rules once for
 * the whole process, so that the weft_span_set_*_k() setters record an attribute without
 * measuring, copying or scanning its key again. Interning the same string again returns the
 * same handle. Meant for the fixed keys of instrumentation (semantic-convention names): intern
 * each key once (at set-up, or on first use, keeping the handle) and pass the handle on every
 * span. Do not intern keys built from data: the table is bounded and never shrinks.
 * @param key NUL-terminated, non-empty, at most WEFT_KEY_MAX_LEN bytes
 * @param out receives the handle; NULL on failure
 * @return WEFT_OK, WEFT_EINVAL (NULL @p out, NULL or empty key, or one longer than
 * WEFT_KEY_MAX_LEN), WEFT_ELIMIT (the table is full: WEFT_KEY_INTERN_MAX distinct keys are
 * interned already; logged once at WARN; keep using the string setters for this key).
 * Ownership: copies @p key; the handle is borrowed and valid for the life of the process
 * (across providers, and after weft_provider_free()).
 * Thread-safety: thread-safe; a handle may be used on any thread. */
WEFT_API weft_err weft_key_intern(const char *key, const struct weft_attr_key **out);

/** The string of an interned key, NUL-terminated; "" for NULL.
 * Errors: none. Ownership: borrowed, valid for the life of the process. Thread-safe. */
WEFT_API const char *weft_key_name(const struct weft_attr_key *key);

/** Not API: the bodies of the inline weft_span_set_*_k() setters below, for a recording span
 * and a non-NULL key only. Call the setters instead.
 * @return as the setter that calls them. Ownership: as the setter that calls them. */
WEFT_API weft_err weft__span_set_string_k(struct weft_span *span,
                                          const struct weft_attr_key *key,
                                          const char *value,
                                          size_t value_len);
WEFT_API weft_err weft__span_set_int_k(struct weft_span *span,
                                       const struct weft_attr_key *key,
                                       int64_t value);
WEFT_API weft_err weft__span_set_double_k(struct weft_span *span,
                                          const struct weft_attr_key *key,
                                          double value);
WEFT_API weft_err weft__span_set_bool_k(struct weft_span *span,
                                        const struct weft_attr_key *key,
                                        bool value);

/** Add an event at @p time_ns (0 means now) with attributes (limited per event).
 * @return WEFT_OK, WEFT_ELIMIT (event limit: dropped and counted), WEFT_EINVAL, WEFT_ENOMEM.
 * Ownership: copies everything. */
WEFT_API weft_err weft_span_add_event(struct weft_span *span,
                                      const char *name,
                                      const struct weft_attr *attrs,
                                      size_t attr_count,
                                      uint64_t time_ns);

/** Add a link to another span context (invalid contexts are ignored and return WEFT_EINVAL).
 * @return WEFT_OK, WEFT_ELIMIT, WEFT_EINVAL, WEFT_ENOMEM. Ownership: copies everything. */
WEFT_API weft_err weft_span_add_link(struct weft_span *span,
                                     const struct weft_span_context *context,
                                     const struct weft_attr *attrs,
                                     size_t attr_count);

/** Set the status. Per the OTel rules OK is final, ERROR replaces UNSET, and a message is
 * kept only with ERROR. @return WEFT_OK, WEFT_EINVAL. Ownership: copies @p message. */
WEFT_API weft_err weft_span_set_status(struct weft_span *span,
                                       weft_status_code code,
                                       const char *message);

/** Record an exception as the event "exception" with exception.type, exception.message and
 * exception.stacktrace (NULL ones are left out), and set the status to ERROR with the message.
 * @return as weft_span_add_event().
 * Ownership: copies the three strings. */
WEFT_API weft_err weft_span_record_exception(struct weft_span *span,
                                             const char *type,
                                             const char *message,
                                             const char *stacktrace);

/** Rename the span. @return WEFT_OK, WEFT_EINVAL, WEFT_ENOMEM.
 * WEFT_OK without effect on a non-recording span. Ownership: copies @p name. */
WEFT_API weft_err weft_span_update_name(struct weft_span *span, const char *name);

/* ------------------------------------------------------------------------------------------ */
/* Thread-local current span                                                                   */

/** Make @p span current on this thread (it becomes the default parent) and take a reference.
 * @return a token for weft_context_detach(). Attaching more than 64 deep is counted and
 * ignored (the returned token still detaches correctly).
 * Errors: none. Ownership: takes a new reference to @p span, released by
 * weft_context_detach(). */
WEFT_API size_t weft_context_attach(struct weft_span *span);

/** Restore the current span to what it was when @p token was returned, releasing the
 * references taken since.
 * Errors: none. Ownership: releases the references weft_context_attach() took. */
WEFT_API void weft_context_detach(size_t token);

/** The current span of this thread, or NULL. Ownership: borrowed until detached.
 * Errors: none. */
WEFT_API struct weft_span *weft_context_current(void);

/* ------------------------------------------------------------------------------------------ */
/* Span processors                                                                             */

/** Batch processor options (OTEL_BSP_* names). */
struct weft_batch_options {
    size_t max_queue_size;        /**< default 2048 */
    size_t max_export_batch_size; /**< default 512, clamped to the queue size */
    uint32_t schedule_delay_ms;   /**< default 5000 */
    uint32_t export_timeout_ms;   /**< default 30000; bounds one export with its retries */
};

/** Fill @p out from OTEL_BSP_* (bad values warn and keep the default).
 * NULL @p out is a no-op. Errors: none. Ownership: @p out is the caller's. */
WEFT_API void weft_batch_options_from_env(struct weft_batch_options *out);

/** Create a batch processor: a bounded lock-free queue and one export thread that sends a
 * batch when max_export_batch_size spans wait or schedule_delay_ms passes.
 * @param opts NULL means weft_batch_options_from_env().
 * @return WEFT_OK, WEFT_EINVAL, WEFT_ENOMEM, WEFT_EIO (thread creation failed).
 * Ownership: takes @p exporter, even on failure; caller owns *out until handed to
 * weft_provider_add_processor_take() or freed with weft_processor_free(). */
WEFT_API weft_err weft_batch_processor_new(struct weft_exporter *exporter,
                                           const struct weft_batch_options *opts,
                                           struct weft_processor **out);

/** Create a simple processor that exports each span synchronously when it ends (on the
 * ending thread). For tests and debugging only: it blocks the caller on the exporter.
 * Ownership: as weft_batch_processor_new().
 * @return WEFT_OK, WEFT_EINVAL (NULL argument), WEFT_ENOMEM; *out is NULL on failure. */
WEFT_API weft_err weft_simple_processor_new(struct weft_exporter *exporter,
                                            struct weft_processor **out);

/** Per-processor counters. */
struct weft_processor_stats {
    uint64_t enqueued; /**< spans accepted into the queue */
    uint64_t exported; /**< spans the exporter accepted */
    uint64_t dropped;  /**< spans lost: queue full, or ended after shutdown */
    uint64_t failed;   /**< spans in failed exports, plus spans rejected (partial success) */
    uint64_t batches;  /**< export calls made */
    size_t queue_len;  /**< spans waiting now */
    size_t queue_cap;  /**< queue capacity */
    /** Export calls that failed (batch processor; 0 for the simple one). */
    uint64_t failed_batches;
    /** Time spent in export calls, in ns (batch processor; 0 for the simple one). */
    uint64_t export_ns;
    /** Spans the exporter wrote to its on-disk spool instead of delivering them (its
     * endpoint was down); weft_processor_spool_stats() says what became of them. */
    uint64_t spooled;
};

/** Read a processor's counters. @return WEFT_OK, WEFT_EINVAL.
 * Ownership: none; @p out is the caller's. */
WEFT_API weft_err weft_processor_get_stats(const struct weft_processor *processor,
                                           struct weft_processor_stats *out);

/** The name of the exporter behind @p processor ("otlp", "store", ...; "unknown" for NULL).
 * Ownership: borrowed; valid until the processor is freed. Thread-safe.
 * Errors: none. */
WEFT_API const char *weft_processor_exporter_name(const struct weft_processor *processor);

/** Copy a one-line description of the processor's last failed export into @p buf: the
 * exporter's own words when it gives them ("connection refused by
 * http://127.0.0.1:4318/v1/traces", "no answer from ... within 10000 ms", "HTTP 500 from ...:
 * excerpt"), else the error code's text. Kept after later successes; "" when no export failed.
 * Thread-safe; never waits on an export in progress.
 * @return the length of the description (0 when none, or for NULL arguments).
 * Ownership: writes into the caller's @p buf (truncated to @p len). */
WEFT_API size_t weft_processor_last_error(const struct weft_processor *processor,
                                          char *buf,
                                          size_t len);

/** Deliver everything @p processor holds through its exporter, waiting at most
 * @p timeout_ms: what weft_provider_force_flush() does, for one processor (e.g. only the local
 * store at a run's checkpoints, never a network exporter). Thread-safe.
 * @return WEFT_OK, WEFT_ETIMEDOUT, WEFT_EIO (the exporter failed), WEFT_ESTATE (shut down),
 * WEFT_EINVAL (NULL).
 * Ownership: none; borrows @p processor for the call. */
WEFT_API weft_err weft_processor_force_flush(struct weft_processor *processor, uint32_t timeout_ms);

/** Shut down and free a processor that was never added to a provider. NULL is a no-op.
 * Errors: none. Ownership: takes @p processor with its exporter. */
WEFT_API void weft_processor_free(struct weft_processor *processor);

/** Processor @p index (0-based, in the order added) of @p provider, or NULL.
 * Ownership: borrowed; owned by the provider.
 * Errors: none (NULL for a NULL provider or an index out of range). */
WEFT_API struct weft_processor *weft_provider_processor(struct weft_provider *provider,
                                                        size_t index);

/** Current time in ns since the Unix epoch (CLOCK_REALTIME).
 * Errors: none. Ownership: none. */
WEFT_API uint64_t weft_now_ns(void);

/* ------------------------------------------------------------------------------------------ */
/* Inline fast paths                                                                           */

/* Not API: the first member of every struct weft_span, so that the inline functions below
 * return at once, without a call, on a span that records nothing (a disabled SDK, a span the
 * sampler dropped, an ended span). */
struct weft__span_head {
    bool is_recording; /* sampled, SDK enabled, not yet ended */
    bool has_ended;    /* ended, or the shared no-op span: weft_span_end() has nothing to do */
};

static inline const struct weft__span_head *
weft__span_head(const struct weft_span *span)
{
    return (const struct weft__span_head *)(const void *)span;
}

/** Set a string attribute under an interned key (weft_key_intern()): the hot-path form of
 * weft_span_set_string_n(). The key is neither measured, copied nor scanned again (its
 * redaction verdict was taken when it was interned); the value still passes the value-length
 * limit and redaction exactly as with weft_span_set_str(), and a key that names a secret still
 * has its value replaced. Inline: on a non-recording span it costs a test and a branch.
 * @param span the span (a non-recording span accepts the call and records nothing)
 * @param key an interned key
 * @param value @p value_len bytes, copied as given (they may hold NUL bytes); NULL is allowed
 *        when @p value_len is 0
 * @param value_len length of @p value in bytes
 * @return WEFT_OK (also on a non-recording span), WEFT_EINVAL (NULL span or key, NULL value
 * with a non-zero length), WEFT_ELIMIT (attribute limit reached: dropped and counted),
 * WEFT_ENOMEM (dropped and counted).
 * Ownership: copies the value; the key handle is borrowed (it lives as long as the process).
 * Thread-safety: as the other setters (one thread records a span at a time). */
static inline weft_err
weft_span_set_string_k(struct weft_span *span,
                       const struct weft_attr_key *key,
                       const char *value,
                       size_t value_len)
{
    if (span == NULL || key == NULL || (value == NULL && value_len > 0)) {
        return WEFT_EINVAL;
    }
    if (!weft__span_head(span)->is_recording) {
        return WEFT_OK;
    }
    return weft__span_set_string_k(span, key, value == NULL ? "" : value, value_len);
}

/** weft_span_set_string_k() with a NUL-terminated @p value.
 * @return as weft_span_set_string_k(); WEFT_EINVAL for a NULL @p value.
 * Ownership: as weft_span_set_string_k(). */
static inline weft_err
weft_span_set_str_k(struct weft_span *span, const struct weft_attr_key *key, const char *value)
{
    if (span == NULL || key == NULL || value == NULL) {
        return WEFT_EINVAL;
    }
    if (!weft__span_head(span)->is_recording) {
        return WEFT_OK;
    }
    return weft__span_set_string_k(span, key, value, strlen(value));
}

/** Set an int, double or bool attribute under an interned key: the hot-path forms of
 * weft_span_set_int(), _double() and _bool(), inline as weft_span_set_string_k().
 * @return WEFT_OK (also on a non-recording span), WEFT_EINVAL (NULL span or key), WEFT_ELIMIT
 * (attribute limit reached: dropped and counted), WEFT_ENOMEM (dropped and counted).
 * Ownership: the key handle is borrowed (it lives as long as the process).
 * Thread-safety: as the other setters. */
static inline weft_err
weft_span_set_int_k(struct weft_span *span, const struct weft_attr_key *key, int64_t value)
{
    if (span == NULL || key == NULL) {
        return WEFT_EINVAL;
    }
    if (!weft__span_head(span)->is_recording) {
        return WEFT_OK;
    }
    return weft__span_set_int_k(span, key, value);
}

static inline weft_err
weft_span_set_double_k(struct weft_span *span, const struct weft_attr_key *key, double value)
{
    if (span == NULL || key == NULL) {
        return WEFT_EINVAL;
    }
    if (!weft__span_head(span)->is_recording) {
        return WEFT_OK;
    }
    return weft__span_set_double_k(span, key, value);
}

static inline weft_err
weft_span_set_bool_k(struct weft_span *span, const struct weft_attr_key *key, bool value)
{
    if (span == NULL || key == NULL) {
        return WEFT_EINVAL;
    }
    if (!weft__span_head(span)->is_recording) {
        return WEFT_OK;
    }
    return weft__span_set_bool_k(span, key, value);
}

/* The common setters and weft_span_end() are also inlined into their callers, through macros
 * over the exported functions (which stay, for bindings and function pointers; call one as
 * (weft_span_end)(span, 0) to bypass the macro). The inline part only returns early on a span
 * that records nothing, with exactly the checks and results of the function; everything else
 * calls it. Define WEFT_NO_INLINE_SETTERS before including weft to turn the macros off. */
#if !defined(WEFT_NO_INLINE_SETTERS) && !defined(WEFT__BUILDING_SPAN)
static inline weft_err
weft__span_set_str_inline(struct weft_span *span, const char *key, const char *value)
{
    if (span != NULL && key != NULL && value != NULL && !weft__span_head(span)->is_recording) {
        return WEFT_OK;
    }
    return (weft_span_set_str)(span, key, value);
}

static inline weft_err
weft__span_set_int_inline(struct weft_span *span, const char *key, int64_t value)
{
    if (span != NULL && key != NULL && !weft__span_head(span)->is_recording) {
        return WEFT_OK;
    }
    return (weft_span_set_int)(span, key, value);
}

static inline weft_err
weft__span_set_double_inline(struct weft_span *span, const char *key, double value)
{
    if (span != NULL && key != NULL && !weft__span_head(span)->is_recording) {
        return WEFT_OK;
    }
    return (weft_span_set_double)(span, key, value);
}

static inline weft_err
weft__span_set_bool_inline(struct weft_span *span, const char *key, bool value)
{
    if (span != NULL && key != NULL && !weft__span_head(span)->is_recording) {
        return WEFT_OK;
    }
    return (weft_span_set_bool)(span, key, value);
}

static inline void
weft__span_end_inline(struct weft_span *span, uint64_t end_time_ns)
{
    if (span == NULL || weft__span_head(span)->has_ended) {
        return;
    }
    (weft_span_end)(span, end_time_ns);
}

#define weft_span_set_str(span, key, value)    weft__span_set_str_inline(span, key, value)
#define weft_span_set_int(span, key, value)    weft__span_set_int_inline(span, key, value)
#define weft_span_set_double(span, key, value) weft__span_set_double_inline(span, key, value)
#define weft_span_set_bool(span, key, value)   weft__span_set_bool_inline(span, key, value)
#define weft_span_end(span, end_time_ns)       weft__span_end_inline(span, end_time_ns)
#endif

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TRACE_H */
