/* bench/bench_util.h - what several benchmarks share: the median of their runs and one
 * 512-span batch of OTLP-shaped span views (ten attributes a span, an event on every eighth),
 * the batch ingest_bench and spool_bench encode. Static functions: each bench is one file. */
#ifndef WEFT_BENCH_UTIL_H
#define WEFT_BENCH_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

#define BATCH 512

static inline int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static inline double
median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

/* One batch of spans to encode: fixed content, ids varied by @p seq. */
struct fixture {
    struct weft_attr res_attr;
    struct weft_resource resource;
    struct weft_scope scope;
    struct weft_attr attrs[10];
    struct weft_attr ev_attr;
    struct weft_event_data event;
    struct weft_span_data spans[BATCH];
    const struct weft_span_data *views[BATCH];
};

static inline void
fixture_init(struct fixture *f)
{
    memset(f, 0, sizeof(*f));
    f->res_attr = weft_attr_str("service.name", "bench-service");
    f->resource.attrs = &f->res_attr;
    f->resource.attr_count = 1;
    f->scope.name = "bench";
    f->scope.version = "1.0.0";
    f->attrs[0] = weft_attr_str("gen_ai.operation.name", "chat");
    f->attrs[1] = weft_attr_str("gen_ai.request.model", "gpt-4o-mini");
    f->attrs[2] = weft_attr_str("gen_ai.provider.name", "openai");
    f->attrs[3] = weft_attr_int("gen_ai.usage.input_tokens", 1234);
    f->attrs[4] = weft_attr_int("gen_ai.usage.output_tokens", 567);
    f->attrs[5] = weft_attr_double("weft.cost.usd", 0.00123);
    f->attrs[6] = weft_attr_bool("weft.cache.hit", false);
    f->attrs[7] = weft_attr_str("weft.step.id", "step-0042");
    f->attrs[8] = weft_attr_int("weft.step.attempt", 1);
    f->attrs[9] = weft_attr_str("http.url", "https://api.example.com/v1/chat/completions");
    f->ev_attr = weft_attr_str("weft.note", "retry after 429");
    f->event.name = "weft.retry";
    f->event.attrs = &f->ev_attr;
    f->event.attr_count = 1;
    for (size_t i = 0; i < BATCH; i++) {
        struct weft_span_data *s = &f->spans[i];

        s->name = i == 0 ? "invoke_workflow bench" : "chat gpt-4o-mini";
        s->kind = i == 0 ? WEFT_SPAN_KIND_INTERNAL : WEFT_SPAN_KIND_CLIENT;
        s->attrs = f->attrs;
        s->attr_count = 10;
        s->resource = &f->resource;
        s->scope = &f->scope;
        s->trace_flags = 1;
        s->events = i % 8 == 7 ? &f->event : NULL;
        s->event_count = i % 8 == 7 ? 1 : 0;
        f->views[i] = s;
    }
}

/* Give batch @p seq its own trace id and span ids. */
static inline void
fixture_ids(struct fixture *f, uint32_t seq)
{
    for (size_t i = 0; i < BATCH; i++) {
        struct weft_span_data *s = &f->spans[i];

        memset(s->trace_id, 0, sizeof(s->trace_id));
        memcpy(s->trace_id, &seq, sizeof(seq));
        /* Bytes 8..15 as random as a W3C trace id's (a share sampler reads them). */
        for (int b = 8; b < 16; b++) {
            uint64_t z = ((uint64_t)seq + 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;

            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            s->trace_id[b] = (uint8_t)((z ^ (z >> 31)) >> (8 * (b - 8)));
        }
        memset(s->span_id, 0, sizeof(s->span_id));
        s->span_id[0] = (uint8_t)(i >> 8);
        s->span_id[1] = (uint8_t)i;
        s->span_id[7] = 1;
        s->has_parent = i > 0;
        memset(s->parent_span_id, 0, sizeof(s->parent_span_id));
        if (i > 0) {
            s->parent_span_id[7] = 1; /* span 0 */
        }
        s->start_time_ns = 1700000000000000000ull + (uint64_t)seq * 1000000000ull + i * 1000u;
        s->end_time_ns = s->start_time_ns + 500000u;
    }
}

#endif
