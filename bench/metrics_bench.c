/* bench/metrics_bench.c - the metrics record path and a full scrape.
 *
 * Prints machine-readable lines:
 *   metrics_bench case=counter_add threads=1 ns_per_op=...
 *   metrics_bench case=histogram_record threads=2 ns_per_op=...
 *   metrics_bench case=scrape series=10000 ms=... bytes=...
 * Each op records with two string attributes (agent, outcome) on an existing series; ns_per_op
 * is wall time per op on each thread (median of 5 runs). The scrape renders the Prometheus text
 * of 10,000 series (100 counters x 100 label values). A benchmark, not a test.
 */
#include "base/buf.h"
#include "exporters/otlp_encode.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

#define OPS 2000000

struct job {
    struct weft_instrument *in;
    bool is_histogram;
    double ns;
};

static void *
work(void *arg)
{
    struct job *j = arg;
    struct weft_attr a[2] = {weft_attr_str("gen_ai.agent.name", "coder"),
                             weft_attr_str("outcome", "success")};
    uint64_t t0 = weft_monotonic_ns();

    for (int i = 0; i < OPS; i++) {
        if (j->is_histogram) {
            weft_histogram_record(j->in, (double)(i & 1023) / 100.0, a, 2);
        } else {
            weft_counter_add(j->in, 1, a, 2);
        }
    }
    j->ns = (double)(weft_monotonic_ns() - t0) / OPS;
    return NULL;
}

static int
cmp(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

static double
measure(struct weft_instrument *in, bool is_histogram, int threads)
{
    double runs[5];

    for (int r = 0; r < 5; r++) {
        pthread_t t[2];
        struct job jobs[2];
        double total = 0;
        for (int i = 0; i < threads; i++) {
            jobs[i].in = in;
            jobs[i].is_histogram = is_histogram;
            pthread_create(&t[i], NULL, work, &jobs[i]);
        }
        for (int i = 0; i < threads; i++) {
            pthread_join(t[i], NULL);
            total += jobs[i].ns;
        }
        runs[r] = total / threads;
    }
    qsort(runs, 5, sizeof(runs[0]), cmp);
    return runs[2];
}

int
main(void)
{
    struct weft_meter_options o = {.max_series = 200};
    struct weft_meter *m = NULL;
    struct weft_instrument *c = NULL;
    struct weft_instrument *h = NULL;
    char *text = NULL;
    size_t len = 0;
    uint64_t t0 = 0;

    if (weft_meter_new(&o, &m) != WEFT_OK ||
        weft_meter_instrument(m, WEFT_INSTRUMENT_COUNTER, "bench.counter", NULL, NULL, NULL, 0,
                              &c) != WEFT_OK ||
        weft_meter_instrument(m, WEFT_INSTRUMENT_HISTOGRAM, "bench.histogram", "s", NULL, NULL, 0,
                              &h) != WEFT_OK) {
        return 1;
    }
    for (int threads = 1; threads <= 2; threads++) {
        printf("metrics_bench case=counter_add threads=%d ns_per_op=%.1f\n", threads,
               measure(c, false, threads));
        printf("metrics_bench case=histogram_record threads=%d ns_per_op=%.1f\n", threads,
               measure(h, true, threads));
    }
    for (int i = 0; i < 100; i++) {
        char name[64];
        struct weft_instrument *in = NULL;
        snprintf(name, sizeof(name), "bench.family_%d", i);
        if (weft_meter_instrument(m, WEFT_INSTRUMENT_COUNTER, name, NULL, NULL, NULL, 0, &in) !=
            WEFT_OK) {
            return 1;
        }
        for (int v = 0; v < 100; v++) {
            struct weft_attr a = weft_attr_int("series", v);
            weft_counter_add(in, v, &a, 1);
        }
    }
    t0 = weft_monotonic_ns();
    if (weft_prometheus_render(m, &text, &len) != WEFT_OK) {
        return 1;
    }
    printf("metrics_bench case=scrape series=10000 ms=%.2f bytes=%zu\n",
           (double)(weft_monotonic_ns() - t0) / 1e6, len);
    free(text);
    /* One OTLP metrics export of the same 10,000 series: protobuf, then JSON. */
    for (int is_json = 0; is_json <= 1; is_json++) {
        struct weft__buf buf;
        size_t points = 0;

        weft__buf_init(&buf, 64u << 20);
        t0 = weft_monotonic_ns();
        if ((is_json ? weft__otlp_metrics_encode_json(m, &buf, &points)
                     : weft__otlp_metrics_encode_proto(m, &buf, &points)) != WEFT_OK) {
            return 1;
        }
        printf("metrics_bench case=otlp_encode_%s series=%zu ms=%.2f bytes=%zu\n",
               is_json ? "json" : "proto", points, (double)(weft_monotonic_ns() - t0) / 1e6,
               buf.len);
        weft__buf_cleanup(&buf);
    }
    weft_meter_free(m);
    return 0;
}
