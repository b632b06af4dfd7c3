/* bench/tail_bench.c - what tail sampling (include/weft/sampling.h) costs.
 *
 * Prints one JSON object per line. Cases:
 *   record   the recording thread: run-shaped traces (a root and CHILDREN spans with five
 *            attributes each; the root carries a keep or drop decision, 5 % kept) through a
 *            batch processor into an exporter that encodes them as OTLP protobuf (an OTLP
 *            exporter short of the network), with and without a run buffer
 *            in front of it. cpu_ns_per_span is the median over the runs of the recording
 *            thread's CPU time per span; ratio is tail over plain (the buffer sits behind the
 *            export thread, so it should stay near 1).
 *   held     memory held per in-flight run: the encoded bytes the buffer keeps per span while
 *            a run is undecided, and for a 25-step run with 50 LLM calls (~200 spans).
 *   export   the export thread: spans/s through the buffer (hold, then release or drop on the
 *            decision) against spans/s straight into the discarding exporter, from the
 *            processor's time spent in export calls (weft_processor_stats.export_ns).
 * Usage: tail_bench [traces_per_run] [runs] [record-plain|record-tail]   (defaults 2000, 5)
 *   record-plain / record-tail: only record the traces once (no output), for
 *   valgrind --tool=callgrind --toggle-collect=record_trace: instructions on the recording
 *   thread, which a shared machine does not disturb.
 * A benchmark, not a test: it asserts nothing about speed.
 */
#include "base/buf.h"
#include "bench_util.h"
#include "exporters/otlp_encode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/weft.h>

#define CHILDREN 99 /* + the root: 100 spans a trace */
#define MAX_RUNS 31

/* The wrapped exporter does what an OTLP exporter does short of the network: encode each
 * batch as protobuf (into a reused buffer), so that both cases pay a real exporter's work. */
static weft_err
encode_export(void *self,
              const struct weft_span_data *const *spans,
              size_t count,
              uint64_t deadline,
              struct weft_export_result *result)
{
    struct weft__buf *buf = self;

    (void)deadline;
    (void)result;
    weft__buf_reset(buf);
    return weft__otlp_encode_proto(spans, count, buf);
}

static void
encode_destroy(void *self)
{
    weft__buf_cleanup(self);
    free(self);
}

static const struct weft_exporter_ops encode_ops = {
    .name = "encode", .export_batch = encode_export, .destroy = encode_destroy};

static double
cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

struct setup {
    struct weft_provider *provider;
    struct weft_tracer *tracer;
    struct weft_tail *tail;
};

static int
make(struct setup *s, bool is_tail)
{
    struct weft_exporter *ex = NULL;
    struct weft_processor *proc = NULL;
    struct weft__buf *buf = NULL;
    struct weft_batch_options bo = {.max_queue_size = 1u << 20,
                                    .max_export_batch_size = 512,
                                    .schedule_delay_ms = 3600000,
                                    .export_timeout_ms = 30000};

    memset(s, 0, sizeof(*s));
    if (weft_provider_new(NULL, &s->provider) != WEFT_OK ||
        weft_provider_get_tracer(s->provider, "bench", "1", &s->tracer) != WEFT_OK ||
        (buf = calloc(1, sizeof(*buf))) == NULL) {
        return -1;
    }
    weft__buf_init(buf, 0);
    if (weft_exporter_new(&encode_ops, buf, &ex) != WEFT_OK) {
        return -1;
    }
    if (is_tail &&
        (weft_tail_new(NULL, &s->tail) != WEFT_OK || weft_tail_wrap(s->tail, ex, &ex) != WEFT_OK)) {
        return -1;
    }
    if (weft_batch_processor_new(ex, &bo, &proc) != WEFT_OK ||
        weft_provider_add_processor_take(s->provider, proc) != WEFT_OK) {
        return -1;
    }
    return 0;
}

static void
destroy(struct setup *s)
{
    weft_provider_free(s->provider);
    weft_tail_unref(s->tail);
}

/* One run-shaped trace; @p decision NULL leaves the root open (returned). */
static struct weft_span *
record_trace(struct weft_tracer *tracer, const char *decision)
{
    struct weft_span_start_options so = {.is_root = true};
    struct weft_span *root = weft_span_start(tracer, "invoke_workflow bench", &so);

    for (unsigned i = 0; i < CHILDREN; i++) {
        struct weft_span_start_options co = {.parent = root};
        struct weft_span *s = weft_span_start(tracer, "invoke_agent coder", &co);

        weft_span_set_str(s, "gen_ai.agent.name", "coder");
        weft_span_set_int(s, "weft.step.attempt", (int64_t)i);
        weft_span_set_double(s, "weft.reward", 1.0);
        weft_span_set_bool(s, "weft.ok", true);
        weft_span_set_str(s, "weft.step.id", "step-42");
        weft_span_end(s, 0);
    }
    if (decision == NULL) {
        return root;
    }
    weft_span_set_str(root, WEFT_SAMPLING_DECISION_ATTR, decision);
    weft_span_set_str(root, WEFT_SAMPLING_RULE_ATTR, "sample");
    weft_span_end(root, 0);
    return NULL;
}

static int
bench_record_and_export(unsigned traces, int runs)
{
    double rec[2][MAX_RUNS];
    double exp_rate[2][MAX_RUNS];

    for (int r = 0; r < runs; r++) {
        for (int t = 0; t < 2; t++) {
            struct setup s;
            double c0 = 0;

            if (make(&s, t == 1) != 0) {
                fprintf(stderr, "tail_bench: set-up failed\n");
                return 1;
            }
            c0 = cpu_ns();
            for (unsigned i = 0; i < traces; i++) {
                record_trace(s.tracer, i % 20 == 0 ? "keep" : "drop");
            }
            rec[t][r] = (cpu_ns() - c0) / ((double)traces * (CHILDREN + 1));
            (void)weft_provider_force_flush(s.provider, 600000);
            {
                struct weft_processor_stats ps;

                weft_processor_get_stats(weft_provider_processor(s.provider, 0), &ps);
                exp_rate[t][r] = (double)ps.exported / ((double)ps.export_ns / 1e9);
            }
            destroy(&s);
        }
    }
    {
        double plain = median(rec[0], runs);
        double tail = median(rec[1], runs);
        double eplain = median(exp_rate[0], runs);
        double etail = median(exp_rate[1], runs);

        printf("{\"bench\":\"tail_bench\",\"case\":\"record\",\"spans_per_trace\":%d,"
               "\"attrs_per_span\":5,\"cpu_ns_per_span_plain\":%.1f,"
               "\"cpu_ns_per_span_tail\":%.1f,\"ratio\":%.3f}\n",
               CHILDREN + 1, plain, tail, tail / plain);
        printf(
            "{\"bench\":\"tail_bench\",\"case\":\"export\",\"kept_share\":0.05,"
            "\"ns_per_span_plain\":%.1f,\"ns_per_span_tail\":%.1f,\"spans_per_sec_tail\":%.0f}\n",
            1e9 / eplain, 1e9 / etail, etail);
    }
    return 0;
}

static int
bench_held(void)
{
    struct setup s;
    struct weft_span *roots[8];
    struct weft_tail_stats st;
    double per_span = 0;

    if (make(&s, true) != 0) {
        fprintf(stderr, "tail_bench: set-up failed\n");
        return 1;
    }
    for (int i = 0; i < 8; i++) {
        roots[i] = record_trace(s.tracer, NULL);
    }
    (void)weft_provider_force_flush(s.provider, 60000);
    weft_tail_get_stats(s.tail, &st);
    per_span = st.spans_held > 0 ? (double)(st.bytes_held + st.bytes_spilled) / st.spans_held : 0;
    printf("{\"bench\":\"tail_bench\",\"case\":\"held\",\"attrs_per_span\":5,"
           "\"spans_held\":%llu,\"bytes_per_span\":%.1f,\"bytes_per_200_span_run\":%.0f}\n",
           (unsigned long long)st.spans_held, per_span, per_span * 200);
    for (int i = 0; i < 8; i++) {
        weft_span_set_str(roots[i], WEFT_SAMPLING_DECISION_ATTR, "drop");
        weft_span_end(roots[i], 0);
    }
    destroy(&s);
    return 0;
}

int
main(int argc, char **argv)
{
    unsigned traces = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 2000;
    int runs = argc > 2 ? atoi(argv[2]) : 5;

    if (traces == 0 || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "usage: tail_bench [traces_per_run] [runs 1..%d] [record-plain|tail]\n",
                MAX_RUNS);
        return 2;
    }
    if (argc > 3) {
        struct setup s;

        if (make(&s, strcmp(argv[3], "record-tail") == 0) != 0) {
            return 1;
        }
        for (unsigned i = 0; i < traces; i++) {
            record_trace(s.tracer, i % 20 == 0 ? "keep" : "drop");
        }
        destroy(&s);
        return 0;
    }
    return bench_record_and_export(traces, runs) | bench_held();
}
