/* bench/span_bench.c - measures the tracing hot path and the OTLP export encoders.
 *
 * Prints one JSON object per line (JSON Lines), for example
 *   {"bench":"span_bench","case":"attrs5","threads":1,"ns_per_span":58.1,...}
 * Cases:
 *   attrs5       span start + 5 attributes (string, int, double, bool, string) + end, through a
 *                batch processor (queue 65536, batch 512, delay 10 ms) into an exporter that
 *                discards; 1, 2 and 4 recording threads. ns_per_span is the median over the
 *                runs of (wall time / spans each thread recorded); cpu_ns_per_span the median
 *                of the recording threads' CPU time (CLOCK_THREAD_CPUTIME_ID) per span, which
 *                a shared machine disturbs less than wall time; spans_per_sec is the median
 *                aggregate over all threads; scaling is spans_per_sec over the 1-thread figure;
 *                allocs_per_span counts weft allocations (weft_set_allocator) during the timed
 *                part, after each thread's warm-up; dropped sums the spans the queue refused.
 *   attrs5_n     the same with the length-carrying setters (weft_span_set_string_n & co.).
 *   attrs5_k     the same with interned keys (weft_key_intern() once at set-up, then the inline
 *                weft_span_set_*_k() setters): the path the runtime is meant to use.
 *   disabled     the attrs5 calls with the SDK disabled (OTEL_SDK_DISABLED).
 *   disabled_k   the attrs5_k calls with the SDK disabled.
 * Each thread's warm-up runs the case's own span body (record_one, record_one_n or
 * record_one_k), so under callgrind --toggle-collect=<body> counts warm-up + timed spans.
 *   export       OTLP protobuf encoding of 512-span batches, alone ("none") and followed by
 *                whole-batch gzip at level 1 with zlib and with libdeflate (when built with it):
 *                spans/s end to end and bytes per span.
 * Usage: span_bench [spans_per_run] [runs] [only]   (defaults 1000000, 5, every case)
 *   only: run just one case, "case:threads" (attrs5:1, attrs5_n:2, attrs5_k:1, disabled:1) or
 *   "export"; handy under valgrind --tool=callgrind --toggle-collect=record_one (record_one_k
 *   for attrs5_k and disabled_k, record_one_n for attrs5_n).
 * A benchmark, not a test: it asserts nothing about speed.
 */
#include "base/buf.h"
#include "exporters/gzip.h"
#include "exporters/otlp_encode.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/weft.h>

#define MAX_THREADS 8
#define MAX_RUNS    31

/* ---- counting allocator --------------------------------------------------------------- */

static atomic_uint_fast64_t alloc_count;

static void *
count_malloc(size_t n)
{
    atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
    return malloc(n);
}

static void *
count_realloc(void *p, size_t n)
{
    atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
    return realloc(p, n);
}

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

/* ---- hot path ------------------------------------------------------------------------- */

/* Which setters a case calls: string keys, keys with lengths, or interned keys. */
enum variant { PLAIN, LENGTHS, INTERNED };

struct run {
    struct weft_tracer *tracer;
    size_t spans;
    size_t warmup;
    enum variant variant;
    pthread_barrier_t *ready;    /* threads + main: warm-up done */
    pthread_barrier_t *go;       /* threads + main: start timing */
    atomic_uint_fast64_t cpu_ns; /* sum over threads of their CPU time in the timed part */
};

static uint64_t
thread_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Not inlined, so that callgrind can count one span's instructions (--toggle-collect). */
#if defined(__GNUC__) || defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

static NOINLINE void
record_one(struct weft_tracer *tracer, size_t i)
{
    struct weft_span *s = weft_span_start(tracer, "invoke_agent planner", NULL);

    weft_span_set_str(s, "gen_ai.operation.name", "invoke_agent");
    weft_span_set_int(s, "weft.step.id", (int64_t)i);
    weft_span_set_double(s, "weft.step.score", 0.75);
    weft_span_set_bool(s, "weft.step.final", true);
    weft_span_set_str(s, "weft.step.status", "completed");
    weft_span_end(s, 0);
}

#define LIT(s) s, sizeof(s) - 1

static NOINLINE void
record_one_n(struct weft_tracer *tracer, size_t i)
{
    struct weft_span *s = weft_span_start(tracer, "invoke_agent planner", NULL);

    weft_span_set_string_n(s, LIT("gen_ai.operation.name"), LIT("invoke_agent"));
    weft_span_set_int_n(s, LIT("weft.step.id"), (int64_t)i);
    weft_span_set_double_n(s, LIT("weft.step.score"), 0.75);
    weft_span_set_bool_n(s, LIT("weft.step.final"), true);
    weft_span_set_string_n(s, LIT("weft.step.status"), LIT("completed"));
    weft_span_end(s, 0);
}

/* The interned keys of record_one_k(), set up once (intern_keys()), as an instrumented
 * module would at start. */
static const struct weft_attr_key *k_operation;
static const struct weft_attr_key *k_step_id;
static const struct weft_attr_key *k_score;
static const struct weft_attr_key *k_final;
static const struct weft_attr_key *k_status;

static void
intern_keys(void)
{
    if (weft_key_intern("gen_ai.operation.name", &k_operation) != WEFT_OK ||
        weft_key_intern("weft.step.id", &k_step_id) != WEFT_OK ||
        weft_key_intern("weft.step.score", &k_score) != WEFT_OK ||
        weft_key_intern("weft.step.final", &k_final) != WEFT_OK ||
        weft_key_intern("weft.step.status", &k_status) != WEFT_OK) {
        fprintf(stderr, "span_bench: weft_key_intern failed\n");
        exit(1);
    }
}

static NOINLINE void
record_one_k(struct weft_tracer *tracer, size_t i)
{
    struct weft_span *s = weft_span_start(tracer, "invoke_agent planner", NULL);

    weft_span_set_string_k(s, k_operation, LIT("invoke_agent"));
    weft_span_set_int_k(s, k_step_id, (int64_t)i);
    weft_span_set_double_k(s, k_score, 0.75);
    weft_span_set_bool_k(s, k_final, true);
    weft_span_set_string_k(s, k_status, LIT("completed"));
    weft_span_end(s, 0);
}

static void
record_n(enum variant variant, struct weft_tracer *tracer, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (variant) {
        case LENGTHS:
            record_one_n(tracer, i);
            break;
        case INTERNED:
            record_one_k(tracer, i);
            break;
        default:
            record_one(tracer, i);
            break;
        }
    }
}

static void *
record_spans(void *arg)
{
    struct run *r = arg;
    uint64_t cpu0 = 0;

    record_n(r->variant, r->tracer, r->warmup);
    pthread_barrier_wait(r->ready);
    pthread_barrier_wait(r->go);
    cpu0 = thread_cpu_ns();
    record_n(r->variant, r->tracer, r->spans);
    atomic_fetch_add(&r->cpu_ns, thread_cpu_ns() - cpu0);
    return NULL;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return (x > y) - (x < y);
}

struct result {
    double wall_ns;
    double cpu_ns; /* CPU time of the recording threads, summed */
    uint64_t allocs;
    uint64_t dropped;
};

/* One timed run: @p threads threads each record @p per_thread spans after a warm-up. */
static struct result
timed_run(bool disabled, enum variant variant, int threads, size_t per_thread)
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
    pthread_t tids[MAX_THREADS];
    pthread_barrier_t ready;
    pthread_barrier_t go;
    struct run run;
    struct result res = {0};
    uint64_t start = 0;
    uint64_t allocs0 = 0;

    if (weft_provider_new(&popts, &provider) != WEFT_OK ||
        weft_provider_get_tracer(provider, "span_bench", WEFT_VERSION, &tracer) != WEFT_OK ||
        weft_exporter_new(&discard_ops, NULL, &exporter) != WEFT_OK ||
        weft_batch_processor_new(exporter, &bopts, &proc) != WEFT_OK ||
        weft_provider_add_processor_take(provider, proc) != WEFT_OK) {
        fprintf(stderr, "span_bench: set-up failed\n");
        exit(1);
    }
    pthread_barrier_init(&ready, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&go, NULL, (unsigned)threads + 1);
    run.tracer = tracer;
    run.spans = per_thread;
    run.warmup = per_thread / 10 < 20000 ? per_thread / 10 : 20000;
    run.variant = variant;
    run.ready = &ready;
    run.go = &go;
    atomic_init(&run.cpu_ns, 0);
    for (int t = 0; t < threads; t++) {
        pthread_create(&tids[t], NULL, record_spans, &run);
    }
    pthread_barrier_wait(&ready);
    allocs0 = atomic_load(&alloc_count);
    start = weft_monotonic_ns();
    pthread_barrier_wait(&go);
    for (int t = 0; t < threads; t++) {
        pthread_join(tids[t], NULL);
    }
    res.wall_ns = (double)(weft_monotonic_ns() - start);
    res.allocs = atomic_load(&alloc_count) - allocs0;
    res.cpu_ns = (double)atomic_load(&run.cpu_ns);
    pthread_barrier_destroy(&ready);
    pthread_barrier_destroy(&go);
    weft_provider_shutdown(provider, 30000);
    weft_provider_get_stats(provider, &st);
    res.dropped = st.spans_dropped;
    weft_provider_free(provider);
    return res;
}

static double one_thread_rate;

static void
bench_hot_path(
    const char *name, bool disabled, enum variant variant, int threads, size_t spans, int runs)
{
    double ns_per_span[MAX_RUNS];
    double cpu_per_span[MAX_RUNS];
    double rate[MAX_RUNS];
    uint64_t dropped = 0;
    uint64_t allocs = 0;
    size_t per_thread = spans / (size_t)threads;
    double median_rate = 0;

    for (int r = 0; r < runs; r++) {
        struct result res = timed_run(disabled, variant, threads, per_thread);

        ns_per_span[r] = res.wall_ns / (double)per_thread;
        cpu_per_span[r] = res.cpu_ns / (double)(per_thread * (size_t)threads);
        rate[r] = (double)(per_thread * (size_t)threads) / (res.wall_ns / 1e9);
        dropped += res.dropped;
        allocs += res.allocs;
    }
    qsort(ns_per_span, (size_t)runs, sizeof(double), cmp_double);
    qsort(rate, (size_t)runs, sizeof(double), cmp_double);
    qsort(cpu_per_span, (size_t)runs, sizeof(double), cmp_double);
    median_rate = rate[runs / 2];
    if (threads == 1) {
        one_thread_rate = median_rate;
    }
    printf("{\"bench\":\"span_bench\",\"case\":\"%s\",\"threads\":%d,\"ns_per_span\":%.1f,"
           "\"ns_per_span_min\":%.1f,\"ns_per_span_max\":%.1f,\"cpu_ns_per_span\":%.1f,"
           "\"spans_per_sec\":%.0f,"
           "\"scaling\":%.2f,\"allocs_per_span\":%.6f,\"dropped\":%llu,\"runs\":%d,"
           "\"spans_per_run\":%zu}\n",
           name, threads, ns_per_span[runs / 2], ns_per_span[0], ns_per_span[runs - 1],
           cpu_per_span[runs / 2], median_rate,
           one_thread_rate > 0 ? median_rate / one_thread_rate : 0.0,
           (double)allocs / (double)(per_thread * (size_t)threads * (size_t)runs),
           (unsigned long long)dropped, runs, per_thread * (size_t)threads);
    fflush(stdout);
}

/* ---- export --------------------------------------------------------------------------- */

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
        a[1] = weft_attr_int("weft.step.id", (int64_t)i);
        a[2] = weft_attr_double("weft.step.score", 0.75);
        a[3] = weft_attr_bool("weft.step.final", true);
        a[4] = weft_attr_str("weft.step.status", "completed");
        s->attrs = a;
        s->attr_count = 5;
        s->status_code = WEFT_STATUS_OK;
        s->resource = res;
        s->scope = scope;
    }
}

enum compressor { NONE, ZLIB, LIBDEFLATE };

static weft_err
compress(enum compressor c, const struct weft__buf *in, struct weft__buf *out)
{
    switch (c) {
    case ZLIB:
        return weft__gzip_compress_zlib(in->data, in->len, 1, out);
    case LIBDEFLATE:
        return weft__gzip_compress(in->data, in->len, 1, out);
    default:
        return WEFT_OK;
    }
}

static void
bench_export(enum compressor c, int runs)
{
    enum { N = 512, ITER = 200 };
    static struct weft_span_data spans[N];
    static struct weft_attr attrs[N * 5];
    static const char *const names[] = {"none", "zlib", "libdeflate"};
    const struct weft_span_data *views[N];
    struct weft_attr res_attrs[1] = {weft_attr_str("service.name", "span_bench")};
    struct weft_resource res = {.attrs = res_attrs, .attr_count = 1};
    struct weft_scope scope = {.name = "weft", .version = WEFT_VERSION};
    struct weft__buf buf;
    struct weft__buf gz;
    double rate[MAX_RUNS];
    size_t bytes = 0;

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
            weft__buf_reset(&gz);
            if (weft__otlp_encode_proto(views, N, &buf) != WEFT_OK ||
                compress(c, &buf, &gz) != WEFT_OK) {
                fprintf(stderr, "span_bench: encode failed\n");
                exit(1);
            }
        }
        rate[r] = (double)N * ITER / ((double)(weft_monotonic_ns() - start) / 1e9);
        bytes = c == NONE ? buf.len : gz.len;
    }
    qsort(rate, (size_t)runs, sizeof(double), cmp_double);
    printf("{\"bench\":\"span_bench\",\"case\":\"export\",\"format\":\"protobuf\","
           "\"compression\":\"%s\",\"batch\":%d,\"spans_per_sec\":%.0f,\"bytes_per_span\":%.1f,"
           "\"runs\":%d}\n",
           names[c], N, rate[runs / 2], (double)bytes / N, runs);
    fflush(stdout);
    weft__buf_cleanup(&buf);
    weft__buf_cleanup(&gz);
}

int
main(int argc, char **argv)
{
    size_t spans = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 1000000;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    const char *only = argc > 3 ? argv[3] : NULL;
    static const int thread_counts[] = {1, 2, 4};
    static const struct {
        const char *name;
        bool disabled;
        enum variant variant;
    } cases[] = {{"attrs5", false, PLAIN},
                 {"attrs5_n", false, LENGTHS},
                 {"attrs5_k", false, INTERNED},
                 {"disabled", true, PLAIN},
                 {"disabled_k", true, INTERNED}};
    char tag[32];

    if (spans < 8 || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "usage: span_bench [spans_per_run >= 8] [runs 1..31]\n");
        return 2;
    }
    if (weft_set_allocator(count_malloc, count_realloc, free) != WEFT_OK) {
        fprintf(stderr, "span_bench: weft_set_allocator failed\n");
        return 1;
    }
    intern_keys();
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        for (size_t i = 0; i < sizeof(thread_counts) / sizeof(thread_counts[0]); i++) {
            snprintf(tag, sizeof(tag), "%s:%d", cases[c].name, thread_counts[i]);
            if (only == NULL || strcmp(only, tag) == 0) {
                bench_hot_path(cases[c].name, cases[c].disabled, cases[c].variant, thread_counts[i],
                               spans, runs);
            }
        }
    }
    if (only == NULL || strcmp(only, "export") == 0) {
        bench_export(NONE, runs);
        bench_export(ZLIB, runs);
        bench_export(LIBDEFLATE, runs);
    }
    return 0;
}
