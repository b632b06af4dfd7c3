/* tracing/sdk.h - private structures shared by the provider, spans and processors.
 *
 * Span memory: one allocation holds the span, room for eight attributes and a small arena
 * for copied strings; larger spans grow into extra arena chunks (layout: span.h). The
 * exporter-facing view (struct weft_span_data) is a member, so processors hand &span->data to
 * exporters without copying (weft__span_data()). Spans are reference counted: the owner holds one
 * reference until weft_span_end(), each processor queue holds one until the export finishes, and
 * the thread-local context holds one while the span is current.
 */
#ifndef WEFT_TRACING_SDK_H
#define WEFT_TRACING_SDK_H

#include "base/buf.h"
#include "ids.h"

#include <pthread.h>
#include <stdatomic.h>
#include <weft/export.h>

/* Inlining control for the span hot path (span.c, span_keys.c, processor.c): HOT_INLINE
 * forces a helper into its caller, NO_INLINE keeps a slow path or a body behind an early
 * return out of its caller, so that the caller saves no registers for it. */
#if defined(__GNUC__) || defined(__clang__)
#define HOT_INLINE inline __attribute__((always_inline))
#define NO_INLINE  __attribute__((noinline))
#else
#define HOT_INLINE inline
#define NO_INLINE
#endif

/* A counter striped over cache lines so that threads recording at once do not bounce one
 * line between cores. Readers sum the stripes. A thread's stripe (also its home shard in the
 * batch queue) is assigned on its first span start (span.c), where the thread's id generator
 * is seeded anyway: the hot path then reads it without testing for "not yet assigned" (9
 * instructions a counter with the test, 4 without). Threads that never start a span - export
 * threads counting drops, a thread ending spans another started - share stripe 0, which costs
 * them only contention. */
#define WEFT__STRIPES 16
struct weft__counter {
    struct {
        _Alignas(64) atomic_uint_fast64_t v;
    } stripe[WEFT__STRIPES];
};
extern _Thread_local unsigned weft__tls_stripe WEFT__TLS_HOT; /* 0 until assigned */
/* Give this thread the next stripe (threads get consecutive indexes mod WEFT__STRIPES). */
void weft__stripe_assign(void);
static inline unsigned
weft__stripe_index(void)
{
    return weft__tls_stripe;
}
static inline void
weft__counter_add(struct weft__counter *c, uint64_t n)
{
    atomic_fetch_add_explicit(&c->stripe[weft__stripe_index()].v, n, memory_order_relaxed);
}
uint64_t weft__counter_read(const struct weft__counter *c);

/* Metrics SDK: add a collected histogram series (bound_count + 1 buckets, sum, min, max) to
 * the series of @p attrs. @return as weft_histogram_record(); WEFT_EINVAL on a bucket-count
 * mismatch. */
struct weft_instrument;
weft_err weft__histogram_merge(struct weft_instrument *histogram,
                               const struct weft_attr *attrs,
                               size_t attr_count,
                               const uint64_t *buckets,
                               size_t bucket_count,
                               double sum,
                               double min,
                               double max);

/* Processor internals: the provider calls on_end for each ended recording span, handing it
 * one reference that on_end keeps (until its export) or releases (weft_span_unref). */
struct weft__processor_vtable {
    void (*on_end)(struct weft_processor *proc, struct weft_span *span);
    weft_err (*force_flush)(struct weft_processor *proc, uint64_t deadline_ns);
    weft_err (*shutdown)(struct weft_processor *proc, uint64_t deadline_ns);
    void (*destroy)(struct weft_processor *proc);
    void (*stats)(const struct weft_processor *proc, struct weft_processor_stats *out);
};

struct weft_processor {
    const struct weft__processor_vtable *vt;
    struct weft_exporter *exporter;
    atomic_bool is_shut_down;
    /* The last failed export, described by the exporter (weft_processor_last_error()); its own
     * lock, so that a reader never waits on an export in progress. */
    pthread_mutex_t error_lock;
    char last_error[320];
};

#define WEFT__MAX_PROCESSORS 8

struct weft_tracer {
    struct weft_provider *provider;
    struct weft_scope scope;
    struct weft_tracer *next;
};

struct weft_provider {
    bool is_disabled;
    atomic_bool is_shut_down;
    weft_sampler_kind sampler;
    double sampler_ratio;
    uint64_t ratio_bound; /* sample when the trace id's low 56 bits are below this */
    struct weft_span_limits limits;
    bool builtin_redaction;
    weft_redact_fn redact;
    void *redact_user_data;
    uint64_t id_seed;
    /* Derived once from the above for span start (span.c), so that it copies rather than
     * computes them on every span: */
    bool samples_every_root; /* the sampler keeps every root span (always on, parent-based) */
    bool strings_plain;      /* no value-length limit and no redaction callback */
    size_t attr_fast_max;    /* min(limits.attr_count, a span's inline attribute slots) */
    size_t string_fast_max;  /* attr_fast_max if strings_plain, else 0 (span.h) */

    struct weft_resource resource;
    struct weft_attr *resource_attrs; /* owned; resource.attrs points here */

    pthread_mutex_t lock; /* tracers list, processor registration, seeded rng */
    struct weft_tracer *tracers;
    struct weft_processor *processors[WEFT__MAX_PROCESSORS];
    atomic_size_t processor_count;
    uint64_t seeded_rng_state[4];

    struct weft__counter started;
    struct weft__counter ended;
    struct weft__counter sampled_out;
    struct weft__counter lost; /* spans lost before any processor: out of memory */
    atomic_uint_fast64_t context_overflows;
};

/* Called by processors after an export attempt so stats stay per processor. */
void weft__span_unref_batch(struct weft_span *const *spans, size_t count);
const struct weft_span_data *weft__span_data(const struct weft_span *span);

/* Value helpers (tracing/attrs.c). */
/* Apply the provider's redaction to a string value; returns NULL to keep it, else a
 * replacement written into @p out (which the caller resets). */
const char *weft__redact(const struct weft_provider *provider,
                         const char *key,
                         const char *value,
                         size_t len,
                         struct weft__buf *out);
/* Cheap test: could the built-in rules change this value of @p key (@p key_len bytes)?
 * (false means certainly not) */
bool weft__may_need_redaction(const char *key, size_t key_len, const char *value, size_t len);
/* The value half of weft__may_need_redaction(), for keys classified in advance (interned).
 * Values shorter than WEFT__SECRET_MIN_LEN never can: callers test the length inline. */
#define WEFT__SECRET_MIN_LEN 14
bool weft__value_may_hold_secret(const char *value, size_t len);

/* Resource (tracing/resource.c). */
weft_err weft__resource_build(struct weft_provider *provider,
                              const struct weft_provider_options *opts);
void weft__resource_cleanup(struct weft_provider *provider);
/* Parse an OTEL_RESOURCE_ATTRIBUTES value as weft__resource_build() does (a value that fails
 * to decode is ignored whole: *count 0). @return WEFT_OK, WEFT_ENOMEM. Ownership: *out is new
 * (weft__free), NULL when *count is 0. */
weft_err weft__resource_parse_env(const char *value, struct weft_attr **out, size_t *count);
/* Deep copy of attributes into one allocation per attribute list. */
weft_err weft__attrs_copy(const struct weft_attr *in, size_t count, struct weft_attr **out);

/* Sampler (tracing/sampler.c). */
void weft__sampler_configure(struct weft_provider *provider,
                             const struct weft_provider_options *opts);
bool weft__sampler_should_sample(const struct weft_provider *provider,
                                 const uint8_t trace_id[WEFT_TRACE_ID_SIZE],
                                 bool has_parent,
                                 bool parent_is_remote,
                                 bool parent_sampled);

#endif /* WEFT_TRACING_SDK_H */
