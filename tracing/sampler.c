/* tracing/sampler.c - the built-in samplers of the OTel specification.
 *
 * traceidratio compares the trace id's 56 least significant bits (the bits W3C Trace
 * Context level 2 requires to be random) against ratio * 2^56, so every service that samples
 * a trace at the same ratio makes the same decision. The parent-based samplers follow the
 * parent's sampled flag and use the root sampler only for root spans.
 */
#include "base/env.h"
#include "base/log.h"
#include "sdk.h"

#include <string.h>
#include <strings.h>

const char *
weft_sampler_name(weft_sampler_kind kind)
{
    switch (kind) {
    case WEFT_SAMPLER_ALWAYS_ON:
        return "always_on";
    case WEFT_SAMPLER_ALWAYS_OFF:
        return "always_off";
    case WEFT_SAMPLER_TRACEIDRATIO:
        return "traceidratio";
    case WEFT_SAMPLER_FROM_ENV:
    case WEFT_SAMPLER_PARENTBASED_ALWAYS_ON:
        return "parentbased_always_on";
    case WEFT_SAMPLER_PARENTBASED_ALWAYS_OFF:
        return "parentbased_always_off";
    case WEFT_SAMPLER_PARENTBASED_TRACEIDRATIO:
        return "parentbased_traceidratio";
    }
    return "unknown";
}

static bool
uses_ratio(weft_sampler_kind kind)
{
    return kind == WEFT_SAMPLER_TRACEIDRATIO || kind == WEFT_SAMPLER_PARENTBASED_TRACEIDRATIO;
}

static weft_sampler_kind
sampler_from_env(void)
{
    static const weft_sampler_kind kinds[] = {
        WEFT_SAMPLER_ALWAYS_ON,
        WEFT_SAMPLER_ALWAYS_OFF,
        WEFT_SAMPLER_TRACEIDRATIO,
        WEFT_SAMPLER_PARENTBASED_ALWAYS_ON,
        WEFT_SAMPLER_PARENTBASED_ALWAYS_OFF,
        WEFT_SAMPLER_PARENTBASED_TRACEIDRATIO,
    };
    const char *v = weft__env("OTEL_TRACES_SAMPLER");

    if (v == NULL) {
        return WEFT_SAMPLER_PARENTBASED_ALWAYS_ON;
    }
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (strcasecmp(v, weft_sampler_name(kinds[i])) == 0) {
            return kinds[i];
        }
    }
    WEFT_LOG(WEFT_LOG_WARN,
             "OTEL_TRACES_SAMPLER=%s: expected always_on, always_off, traceidratio, "
             "parentbased_always_on, parentbased_always_off or parentbased_traceidratio; "
             "using parentbased_always_on",
             v);
    return WEFT_SAMPLER_PARENTBASED_ALWAYS_ON;
}

void
weft__sampler_configure(struct weft_provider *provider, const struct weft_provider_options *opts)
{
    weft_sampler_kind kind = opts != NULL ? opts->sampler : WEFT_SAMPLER_FROM_ENV;
    double ratio = 1.0;

    if (kind == WEFT_SAMPLER_FROM_ENV) {
        kind = sampler_from_env();
        if (uses_ratio(kind)) {
            ratio = weft__env_double("OTEL_TRACES_SAMPLER_ARG", 1.0, 0.0, 1.0);
        }
    } else if (uses_ratio(kind)) {
        ratio = opts->sampler_ratio;
    }
    provider->sampler = kind;
    provider->sampler_ratio = ratio;
    /* ratio * 2^56, computed in double: exact enough for any ratio a person would choose,
     * and 1.0 maps to 2^56 so that every id is sampled. */
    provider->ratio_bound = (uint64_t)(ratio * 72057594037927936.0);
}

static bool
ratio_sample(const struct weft_provider *provider, const uint8_t trace_id[WEFT_TRACE_ID_SIZE])
{
    uint64_t low = 0;

    for (int i = 9; i < 16; i++) {
        low = low << 8 | trace_id[i];
    }
    return low < provider->ratio_bound;
}

bool
weft__sampler_should_sample(const struct weft_provider *provider,
                            const uint8_t trace_id[WEFT_TRACE_ID_SIZE],
                            bool has_parent,
                            bool parent_is_remote,
                            bool parent_sampled)
{
    (void)parent_is_remote; /* the default parent-based delegates treat both alike */
    switch (provider->sampler) {
    case WEFT_SAMPLER_ALWAYS_ON:
        return true;
    case WEFT_SAMPLER_ALWAYS_OFF:
        return false;
    case WEFT_SAMPLER_TRACEIDRATIO:
        return ratio_sample(provider, trace_id);
    case WEFT_SAMPLER_FROM_ENV:
    case WEFT_SAMPLER_PARENTBASED_ALWAYS_ON:
        return has_parent ? parent_sampled : true;
    case WEFT_SAMPLER_PARENTBASED_ALWAYS_OFF:
        return has_parent ? parent_sampled : false;
    case WEFT_SAMPLER_PARENTBASED_TRACEIDRATIO:
        return has_parent ? parent_sampled : ratio_sample(provider, trace_id);
    }
    return true;
}
