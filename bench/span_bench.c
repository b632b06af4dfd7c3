/* bench/span_bench.c - measures the tracing hot path and the OTLP encoder.
 *
 * Prints one machine-readable line per case:
 *   span_bench case=attrs5 threads=1 ns_per_span=87.3 spans_per_sec=... dropped=0 runs=5
 * Cases:
 *   attrs5     start + 5 attributes (2 strings, 2 int64, 1 string) + end, through the batch
 *              processor into an exporter that discards; 1 and 2 threads; median of runs.
 *   disabled   the same with the SDK disabled (OTEL_SDK_DISABLED).
 *   encode     OTLP protobuf encoding of 512-span batches (spans/s, bytes/span).
 *   encode_gzip  the same plus gzip.
 * Usage: span_bench [spans_per_run] [runs]   (defaults 1000000 and 5)
 * A benchmark, not a test: it asserts nothing about speed.
 */
#include "base/buf.h"
#include "exporters/gzip.h"
#include "exporters/otlp_encode.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

static weft_err
discard_export(void *self,
               const struct weft_span_data *const *spans,
               size_t count,
               uint64_t deadline_ns,
               struct weft_export_result *result)
{
    (void)self;
    (void)spans;
    (void)count;
    (void)deadline_ns;
    (void)result;
    return WEFT_OK;
}

static const struct weft_exporter_ops discard_ops = {
    .name = "discard",
    .export_batch = discard_export,
};

struct run {
    struct weft_tracer *tracer;
    size_t spans;
};

static void *
record_spans(void *arg)
{
    struct run *r = arg;

    for (size_t i = 0; i < r->spans; i++) {
        struct weft_span *s = weft_span_start(r->tracer, "invoke_agent planner", NULL);

        weft_span_set_str(s, "gen_ai.operation.name", "invoke_agent");
        weft_span_set_str(s, "gen_ai.agent.name", "planner");
        weft_span_set_int(s, "weft.step.id", (int64_t)i);
        weft_span_set_int(s, "weft.step.attempt", 1);
        weft_span_set_str(s, "weft.step.status", "completed");
        weft_span_end(s, 0);
    }
    return NULL;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return (x > y) - (x < y);
}

/* One timed run: @p threads threads each record @p per_thread spans. Returns wall ns. */
static double
timed_run(bool disabled, int threads, size_t per_thread, uint64_t *dropped)
{
    struct weft_provider_options popts = {.disabled = disabled, .service_name = "span_bench"};
    struct weft_batch_options bopts = {.max_queue_size = 1u << 16,
                                       .max_export_batch_size = 512,
                                       .schedule_delay_ms = 10,
                                       .export_timeout_ms = 30000};
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_exporter *exporter = NULL;
    struct weft_processor *proc = NULL;
    struct weft_trace_stats st;
    pthread_t tids[8];
    struct run run;
    uint64_t start = 0;
    uint64_t elapsed = 0;

    if (weft_provider_new(&popts, &provider) != WEFT_OK ||
        weft_provider_get_tracer(provider, "span_bench", WEFT_VERSION, &tracer) != WEFT_OK ||
        weft_exporter_new(&discard_ops, NULL, &exporter) != WEFT_OK ||
        weft_batch_processor_new(exporter, &bopts, &proc) != WEFT_OK ||
        weft_provider_add_processor_take(provider, proc) != WEFT_OK) {
        fprintf(stderr, "span_bench: set-up failed\n");
        exit(1);
    }
    run.tracer = tracer;
    run.spans = per_thread;
    start = weft_monotonic_ns();
    for (int t = 0; t < threads; t++) {
        pthread_create(&tids[t], NULL, record_spans, &run);
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(tids[t], NULL);
    }
    elapsed = weft_monotonic_ns() - start;
    weft_provider_shutdown(provider, 30000);
    weft_provider_get_stats(provider, &st);
    *dropped = st.spans_dropped;
    weft_provider_free(provider);
    return (double)elapsed;
}

static void
bench_hot_path(const char *name, bool disabled, int threads, size_t spans, int runs)
{
    double ns_per_span[32];
    uint64_t dropped = 0;
    uint64_t dropped_total = 0;
    size_t per_thread = spans / (size_t)threads;
    double median = 0;

    for (int r = 0; r < runs; r++) {
        double wall = timed_run(disabled, threads, per_thread, &dropped);

        /* Per-thread cost of one span: wall time over the spans each thread recorded. */
        ns_per_span[r] = wall / (double)per_thread;
        dropped_total += dropped;
    }
    qsort(ns_per_span, (size_t)runs, sizeof(double), cmp_double);
    median = ns_per_span[runs / 2];
    printf("span_bench case=%s threads=%d ns_per_span=%.1f spans_per_sec=%.0f dropped=%llu "
           "runs=%d spans_per_run=%zu\n",
           name, threads, median, 1e9 / median * threads, (unsigned long long)dropped_total, runs,
           per_thread * (size_t)threads);
    fflush(stdout);
}

/* A realistic agent span: 5 attributes, names and values of typical length. */
static void
fill_spans(struct weft_span_data *spans,
           struct weft_attr *attrs,
           size_t n,
           const struct weft_resource *res,
           const struct weft_scope *scope)
{
    for (size_t i = 0; i < n; i++) {
        struct weft_span_data *s = &spans[i];
        struct weft_attr *a = &attrs[i * 5];

        memset(s, 0, sizeof(*s));
        for (int b = 0; b < 16; b++) {
            s->trace_id[b] = (uint8_t)(i * 31 + (size_t)b * 7 + 1);
        }
        for (int b = 0; b < 8; b++) {
            s->span_id[b] = (uint8_t)(i * 17 + (size_t)b * 3 + 1);
            s->parent_span_id[b] = (uint8_t)(i * 13 + (size_t)b + 1);
        }
        s->has_parent = true;
        s->trace_flags = 1;
        s->name = "invoke_agent planner";
        s->kind = WEFT_SPAN_KIND_INTERNAL;
        s->start_time_ns = 1700000000000000000ull + i * 1000;
        s->end_time_ns = s->start_time_ns + 123456;
        a[0] = weft_attr_str("gen_ai.operation.name", "invoke_agent");
        a[1] = weft_attr_str("gen_ai.agent.name", "planner");
        a[2] = weft_attr_int("weft.step.id", (int64_t)i);
        a[3] = weft_attr_int("weft.step.attempt", 1);
        a[4] = weft_attr_str("weft.step.status", "completed");
        s->attrs = a;
        s->attr_count = 5;
        s->status_code = WEFT_STATUS_OK;
        s->resource = res;
        s->scope = scope;
    }
}

static void
bench_encode(int runs)
{
    enum { N = 512, ITER = 400 };
    static struct weft_span_data spans[N];
    static struct weft_attr attrs[N * 5];
    const struct weft_span_data *views[N];
    struct weft_attr res_attrs[1] = {weft_attr_str("service.name", "span_bench")};
    struct weft_resource res = {.attrs = res_attrs, .attr_count = 1};
    struct weft_scope scope = {.name = "weft", .version = WEFT_VERSION};
    struct weft__buf buf;
    struct weft__buf gz;
    double proto_rate[32];
    double gzip_rate[32];
    size_t proto_bytes = 0;
    size_t gzip_bytes = 0;

    fill_spans(spans, attrs, N, &res, &scope);
    for (size_t i = 0; i < N; i++) {
        views[i] = &spans[i];
    }
    weft__buf_init(&buf, 0);
    weft__buf_init(&gz, 0);
    for (int r = 0; r < runs; r++) {
        uint64_t start = weft_monotonic_ns();

        for (int it = 0; it < ITER; it++) {
            weft__buf_reset(&buf);
            if (weft__otlp_encode_proto(views, N, &buf) != WEFT_OK) {
                fprintf(stderr, "span_bench: encode failed\n");
                exit(1);
            }
        }
        proto_rate[r] = (double)N * ITER / ((double)(weft_monotonic_ns() - start) / 1e9);
        proto_bytes = buf.len;

        start = weft_monotonic_ns();
        for (int it = 0; it < ITER / 4; it++) {
            weft__buf_reset(&buf);
            weft__buf_reset(&gz);
            if (weft__otlp_encode_proto(views, N, &buf) != WEFT_OK ||
                weft__gzip_compress(buf.data, buf.len, 1, &gz) != WEFT_OK) {
                fprintf(stderr, "span_bench: encode+gzip failed\n");
                exit(1);
            }
        }
        gzip_rate[r] = (double)N * (ITER / 4) / ((double)(weft_monotonic_ns() - start) / 1e9);
        gzip_bytes = gz.len;
    }
    qsort(proto_rate, (size_t)runs, sizeof(double), cmp_double);
    qsort(gzip_rate, (size_t)runs, sizeof(double), cmp_double);
    printf("span_bench case=encode format=protobuf batch=%d spans_per_sec=%.0f "
           "bytes_per_span=%.1f runs=%d\n",
           N, proto_rate[runs / 2], (double)proto_bytes / N, runs);
    printf("span_bench case=encode_gzip format=protobuf batch=%d spans_per_sec=%.0f "
           "bytes_per_span=%.1f runs=%d\n",
           N, gzip_rate[runs / 2], (double)gzip_bytes / N, runs);
    weft__buf_cleanup(&buf);
    weft__buf_cleanup(&gz);
}

int
main(int argc, char **argv)
{
    size_t spans = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 1000000;
    int runs = argc > 2 ? atoi(argv[2]) : 5;

    if (spans < 2 || runs < 1 || runs > 31) {
        fprintf(stderr, "usage: span_bench [spans_per_run >= 2] [runs 1..31]\n");
        return 2;
    }
    bench_hot_path("attrs5", false, 1, spans, runs);
    bench_hot_path("attrs5", false, 2, spans, runs);
    bench_hot_path("disabled", true, 1, spans, runs);
    bench_hot_path("disabled", true, 2, spans, runs);
    bench_encode(runs);
    return 0;
}
