/* tracing/provider.c - the tracer provider: configuration from options and the OTEL_*
 * environment, tracers per instrumentation scope, processor registration, flush, shutdown
 * and the telemetry counters.
 *
 * Processors are published into a fixed array with a release store of the count, so the hot
 * path (weft_span_end) reads them without a lock; they are only removed at free time, when no
 * span may be live.
 */
#include "base/env.h"
#include "base/mem.h"
#include "base/time.h"
#include "ids.h"
#include "sdk.h"
#include "span.h"

#include <string.h>

#define DEFAULT_LIMIT 128

static atomic_uint next_stripe;
_Thread_local unsigned weft__tls_stripe WEFT__TLS_HOT;

void
weft__stripe_assign(void)
{
    weft__tls_stripe =
        atomic_fetch_add_explicit(&next_stripe, 1, memory_order_relaxed) % WEFT__STRIPES;
}

uint64_t
weft__counter_read(const struct weft__counter *c)
{
    uint64_t sum = 0;

    for (size_t i = 0; i < WEFT__STRIPES; i++) {
        sum += atomic_load_explicit(&c->stripe[i].v, memory_order_relaxed);
    }
    return sum;
}

static size_t
env_limit(const char *specific, const char *general, size_t def)
{
    const char *name = weft__env(specific) != NULL ? specific : general;

    if (name == NULL) {
        return def;
    }
    return (size_t)weft__env_u64(name, def, 0, UINT32_MAX);
}

void
weft_span_limits_from_env(struct weft_span_limits *out)
{
    if (out == NULL) {
        return;
    }
    out->attr_count =
        env_limit("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT", DEFAULT_LIMIT);
    out->attr_value_length = env_limit("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
                                       "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", WEFT_LIMIT_NONE);
    out->event_count = env_limit("OTEL_SPAN_EVENT_COUNT_LIMIT", NULL, DEFAULT_LIMIT);
    out->link_count = env_limit("OTEL_SPAN_LINK_COUNT_LIMIT", NULL, DEFAULT_LIMIT);
    out->attrs_per_event = env_limit("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", NULL, DEFAULT_LIMIT);
    out->attrs_per_link = env_limit("OTEL_LINK_ATTRIBUTE_COUNT_LIMIT", NULL, DEFAULT_LIMIT);
}

weft_err
weft_provider_new(const struct weft_provider_options *opts, struct weft_provider **out)
{
    struct weft_provider *provider = NULL;
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (opts != NULL &&
        (opts->sampler == WEFT_SAMPLER_TRACEIDRATIO ||
         opts->sampler == WEFT_SAMPLER_PARENTBASED_TRACEIDRATIO) &&
        !(opts->sampler_ratio >= 0.0 && opts->sampler_ratio <= 1.0)) {
        return WEFT_EINVAL;
    }
    if (opts != NULL && opts->resource_attr_count > 0 && opts->resource_attrs == NULL) {
        return WEFT_EINVAL;
    }
    provider = weft__calloc(1, sizeof(*provider));
    if (provider == NULL) {
        return WEFT_ENOMEM;
    }
    pthread_mutex_init(&provider->lock, NULL);
    provider->is_disabled =
        (opts != NULL && opts->disabled) || weft__env_bool_otel("OTEL_SDK_DISABLED", false);
    weft__sampler_configure(provider, opts);
    if (opts != NULL && opts->limits != NULL) {
        provider->limits = *opts->limits;
    } else {
        weft_span_limits_from_env(&provider->limits);
    }
    provider->builtin_redaction = opts == NULL || !opts->no_builtin_redaction;
    if (opts != NULL) {
        provider->redact = opts->redact;
        provider->redact_user_data = opts->redact_user_data;
        provider->id_seed = opts->id_seed;
    }
    provider->samples_every_root = provider->sampler == WEFT_SAMPLER_ALWAYS_ON ||
                                   provider->sampler == WEFT_SAMPLER_PARENTBASED_ALWAYS_ON;
    provider->strings_plain =
        provider->limits.attr_value_length == WEFT_LIMIT_NONE && provider->redact == NULL;
    provider->attr_fast_max =
        provider->limits.attr_count < INLINE_ATTRS ? provider->limits.attr_count : INLINE_ATTRS;
    provider->string_fast_max = provider->strings_plain ? provider->attr_fast_max : 0;
    if (provider->id_seed != 0) {
        struct weft__rng rng;

        weft__rng_seed(&rng, provider->id_seed);
        memcpy(provider->seeded_rng_state, rng.s, sizeof(rng.s));
    }
    err = weft__resource_build(provider, opts);
    if (err != WEFT_OK) {
        pthread_mutex_destroy(&provider->lock);
        weft__free(provider);
        return err;
    }
    *out = provider;
    return WEFT_OK;
}

weft_err
weft_provider_add_processor_take(struct weft_provider *provider, struct weft_processor *processor)
{
    size_t count = 0;
    weft_err err = WEFT_OK;

    if (provider == NULL || processor == NULL) {
        weft_processor_free(processor);
        return WEFT_EINVAL;
    }
    pthread_mutex_lock(&provider->lock);
    count = atomic_load_explicit(&provider->processor_count, memory_order_relaxed);
    if (atomic_load(&provider->is_shut_down)) {
        err = WEFT_ESTATE;
    } else if (count == WEFT__MAX_PROCESSORS) {
        err = WEFT_ELIMIT;
    } else {
        provider->processors[count] = processor;
        atomic_store_explicit(&provider->processor_count, count + 1, memory_order_release);
    }
    pthread_mutex_unlock(&provider->lock);
    if (err != WEFT_OK) {
        weft_processor_free(processor);
    }
    return err;
}

struct weft_processor *
weft_provider_processor(struct weft_provider *provider, size_t index)
{
    if (provider == NULL ||
        index >= atomic_load_explicit(&provider->processor_count, memory_order_acquire)) {
        return NULL;
    }
    return provider->processors[index];
}

static uint64_t
deadline_after(uint32_t timeout_ms)
{
    return weft__monotonic_ns() + (uint64_t)timeout_ms * 1000000u;
}

weft_err
weft_provider_force_flush(struct weft_provider *provider, uint32_t timeout_ms)
{
    uint64_t deadline = 0;
    size_t count = 0;
    weft_err result = WEFT_OK;

    if (provider == NULL) {
        return WEFT_EINVAL;
    }
    deadline = deadline_after(timeout_ms);
    count = atomic_load_explicit(&provider->processor_count, memory_order_acquire);
    for (size_t i = 0; i < count; i++) {
        struct weft_processor *proc = provider->processors[i];
        weft_err err = proc->vt->force_flush(proc, deadline);

        if (err != WEFT_OK && result == WEFT_OK) {
            result = err;
        }
    }
    return result;
}

weft_err
weft_provider_shutdown(struct weft_provider *provider, uint32_t timeout_ms)
{
    uint64_t deadline = 0;
    size_t count = 0;
    weft_err result = WEFT_OK;

    if (provider == NULL) {
        return WEFT_EINVAL;
    }
    if (atomic_exchange(&provider->is_shut_down, true)) {
        return WEFT_ESTATE;
    }
    deadline = deadline_after(timeout_ms);
    pthread_mutex_lock(&provider->lock);
    count = atomic_load_explicit(&provider->processor_count, memory_order_acquire);
    pthread_mutex_unlock(&provider->lock);
    for (size_t i = 0; i < count; i++) {
        struct weft_processor *proc = provider->processors[i];
        weft_err err = proc->vt->shutdown(proc, deadline);

        if (err != WEFT_OK && result == WEFT_OK) {
            result = err;
        }
    }
    return result;
}

void
weft_provider_free(struct weft_provider *provider)
{
    struct weft_tracer *t = NULL;
    size_t count = 0;

    if (provider == NULL) {
        return;
    }
    if (!atomic_load(&provider->is_shut_down)) {
        weft_provider_shutdown(provider, 30000);
    }
    count = atomic_load(&provider->processor_count);
    for (size_t i = 0; i < count; i++) {
        weft_processor_free(provider->processors[i]);
    }
    t = provider->tracers;
    while (t != NULL) {
        struct weft_tracer *next = t->next;
        weft__free(t);
        t = next;
    }
    weft__resource_cleanup(provider);
    pthread_mutex_destroy(&provider->lock);
    weft__free(provider);
}

bool
weft_provider_is_disabled(const struct weft_provider *provider)
{
    return provider == NULL || provider->is_disabled;
}

weft_sampler_kind
weft_provider_sampler(const struct weft_provider *provider, double *ratio)
{
    if (provider == NULL) {
        return WEFT_SAMPLER_FROM_ENV;
    }
    if (ratio != NULL) {
        *ratio = provider->sampler_ratio;
    }
    return provider->sampler;
}

void
weft_provider_limits(const struct weft_provider *provider, struct weft_span_limits *out)
{
    if (provider != NULL && out != NULL) {
        *out = provider->limits;
    }
}

void
weft_provider_get_stats(const struct weft_provider *provider, struct weft_trace_stats *out)
{
    size_t count = 0;

    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof(*out));
    if (provider == NULL) {
        return;
    }
    out->spans_started = weft__counter_read(&provider->started);
    out->spans_ended = weft__counter_read(&provider->ended);
    out->spans_sampled_out = weft__counter_read(&provider->sampled_out);
    out->spans_dropped = weft__counter_read(&provider->lost);
    out->context_overflows =
        atomic_load_explicit(&provider->context_overflows, memory_order_relaxed);
    count = atomic_load_explicit(&provider->processor_count, memory_order_acquire);
    for (size_t i = 0; i < count; i++) {
        struct weft_processor_stats ps;

        weft_processor_get_stats(provider->processors[i], &ps);
        out->spans_exported += ps.exported;
        out->spans_dropped += ps.dropped;
        out->spans_failed += ps.failed;
        out->spans_spooled += ps.spooled;
    }
}

static bool
same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

weft_err
weft_provider_get_tracer(struct weft_provider *provider,
                         const char *scope_name,
                         const char *scope_version,
                         struct weft_tracer **out)
{
    struct weft_tracer *t = NULL;
    size_t name_len = 0;
    size_t version_len = 0;
    char *p = NULL;

    if (out != NULL) {
        *out = NULL;
    }
    if (provider == NULL || scope_name == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    pthread_mutex_lock(&provider->lock);
    for (t = provider->tracers; t != NULL; t = t->next) {
        if (same_str(t->scope.name, scope_name) && same_str(t->scope.version, scope_version)) {
            *out = t;
            pthread_mutex_unlock(&provider->lock);
            return WEFT_OK;
        }
    }
    name_len = strlen(scope_name) + 1;
    version_len = scope_version == NULL ? 0 : strlen(scope_version) + 1;
    t = weft__calloc(1, sizeof(*t) + name_len + version_len);
    if (t == NULL) {
        pthread_mutex_unlock(&provider->lock);
        return WEFT_ENOMEM;
    }
    p = (char *)(t + 1);
    memcpy(p, scope_name, name_len);
    t->scope.name = p;
    if (scope_version != NULL) {
        memcpy(p + name_len, scope_version, version_len);
        t->scope.version = p + name_len;
    }
    t->provider = provider;
    t->next = provider->tracers;
    provider->tracers = t;
    pthread_mutex_unlock(&provider->lock);
    *out = t;
    return WEFT_OK;
}
