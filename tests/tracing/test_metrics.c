/* tests/tracing/test_metrics.c - the metrics SDK: sums per attribute set (order-insensitive),
 * counters refusing negative values, up-down counters, gauges set and observed by callback,
 * histogram buckets at their bounds with sum/count/min/max and exemplars from the current
 * sampled span, the cardinality bound with its overflow series, instrument identity and name
 * checks, exact sums from concurrent threads, and out-of-memory behaviour. */
#include "support/failalloc.h"
#include "support/mem_exporter.h"
#include "support/weft_test.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* What a collection saw, flattened: one entry per series. */
struct seen {
    char name[64];
    char attrs[256]; /* "k=v,k2=v2" */
    double value;
    uint64_t count;
    double sum;
    double min;
    double max;
    uint64_t buckets[32];
    struct weft_exemplar exemplars[32];
    uint64_t dropped;
    uint64_t overflowed;
};

struct collected {
    struct seen items[64];
    size_t count;
    size_t instruments;
};

static bool
collect_one(const struct weft_instrument_view *in, const struct weft_series_view *s, void *ud)
{
    struct collected *c = ud;
    struct seen *e = NULL;
    size_t len = 0;

    if (s == NULL) {
        c->instruments++;
        return true;
    }
    if (c->count >= 64) {
        return false;
    }
    e = &c->items[c->count++];
    memset(e, 0, sizeof(*e));
    snprintf(e->name, sizeof(e->name), "%s", in->name);
    for (size_t i = 0; i < s->attr_count; i++) {
        const struct weft_attr *a = &s->attrs[i];
        if (a->value.type == WEFT_VALUE_STRING) {
            len += (size_t)snprintf(e->attrs + len, sizeof(e->attrs) - len, "%s%s=%s",
                                    i > 0 ? "," : "", a->key, a->value.u.str);
        } else if (a->value.type == WEFT_VALUE_BOOL) {
            len += (size_t)snprintf(e->attrs + len, sizeof(e->attrs) - len, "%s%s=%s",
                                    i > 0 ? "," : "", a->key, a->value.u.b ? "true" : "false");
        } else {
            len += (size_t)snprintf(e->attrs + len, sizeof(e->attrs) - len, "%s%s=%lld",
                                    i > 0 ? "," : "", a->key, (long long)a->value.u.i);
        }
    }
    e->value = s->value;
    e->count = s->count;
    e->sum = s->sum;
    e->min = s->min;
    e->max = s->max;
    e->dropped = in->dropped;
    e->overflowed = in->overflowed;
    for (size_t b = 0; s->bucket_counts != NULL && b <= in->bound_count && b < 32; b++) {
        e->buckets[b] = s->bucket_counts[b];
        e->exemplars[b] = s->exemplars[b];
    }
    return true;
}

static const struct seen *
find(const struct collected *c, const char *name, const char *attrs)
{
    for (size_t i = 0; i < c->count; i++) {
        if (strcmp(c->items[i].name, name) == 0 && strcmp(c->items[i].attrs, attrs) == 0) {
            return &c->items[i];
        }
    }
    fail_msg("no series %s{%s}", name, attrs);
    return NULL;
}

static struct collected *
collect(struct weft_meter *m)
{
    static struct collected c;
    memset(&c, 0, sizeof(c));
    assert_weft_ok(weft_meter_collect(m, collect_one, &c));
    return &c;
}

static void
test_metrics_counter_sums_per_attribute_set(void **state)
{
    struct weft_meter *m = NULL;
    struct weft_instrument *c = NULL;
    struct weft_attr ab[2] = {weft_attr_str("agent", "coder"), weft_attr_str("outcome", "ok")};
    struct weft_attr ba[2] = {weft_attr_str("outcome", "ok"), weft_attr_str("agent", "coder")};
    struct weft_attr other = weft_attr_str("agent", "reviewer");
    struct collected *got = NULL;

    (void)state;
    assert_weft_ok(weft_meter_new(NULL, &m));
    assert_weft_ok(weft_meter_instrument(m, WEFT_INSTRUMENT_COUNTER, "weft.agent.invocations",
                                         "{invocation}", "Agent invocations", NULL, 0, &c));
    assert_weft_ok(weft_counter_add(c, 1, ab, 2));
    assert_weft_ok(weft_counter_add(c, 2, ba, 2)); /* same set, other order */
    assert_weft_ok(weft_counter_add(c, 5, &other, 1));
    assert_weft_ok(weft_counter_add(c, 0.5, NULL, 0));
    assert_weft_err(weft_counter_add(c, -1, NULL, 0), WEFT_EINVAL);
    got = collect(m);
    assert_int_equal(got->count, 3);
    assert_true(find(got, "weft.agent.invocations", "agent=coder,outcome=ok")->value == 3.0);
    assert_true(find(got, "weft.agent.invocations", "agent=reviewer")->value == 5.0);
    assert_true(find(got, "weft.agent.invocations", "")->value == 0.5);
    assert_int_equal(find(got, "weft.agent.invocations", "")->dropped, 1);
    weft_meter_free(m);
}

static void
test_metrics_updown_and_gauges(void **state)
{
    struct weft_meter *m = NULL;
    struct weft_instrument *u = NULL;
    struct weft_instrument *g = NULL;
    struct weft_instrument *cb = NULL;
    int calls = 0;
    struct collected *got = NULL;

    (void)state;
    assert_weft_ok(weft_meter_new(NULL, &m));
    assert_weft_ok(weft_meter_instrument(m, WEFT_INSTRUMENT_UPDOWN_COUNTER, "weft.runs.active",
                                         "{run}", NULL, NULL, 0, &u));
    assert_weft_ok(
        weft_meter_instrument(m, WEFT_INSTRUMENT_GAUGE, "weft.queue.fill", "1", NULL, NULL, 0, &g));
    assert_weft_ok(
        weft_meter_instrument(m, WEFT_INSTRUMENT_GAUGE, "weft.callback", NULL, NULL, NULL, 0, &cb));
    assert_weft_ok(weft_counter_add(u, 3, NULL, 0));
    assert_weft_ok(weft_counter_add(u, -2, NULL, 0));
    assert_weft_ok(weft_gauge_set(g, 0.25, NULL, 0));
    assert_weft_ok(weft_gauge_set(g, 0.75, NULL, 0));
    assert_weft_err(weft_gauge_set_callback(u, NULL, NULL), WEFT_EINVAL);
    assert_weft_ok(weft_gauge_set_callback(cb, NULL, NULL));
    got = collect(m);
    assert_int_equal(got->instruments, 3);
    assert_int_equal(got->count, 2); /* the callback gauge has no value: no series */
    assert_true(find(got, "weft.runs.active", "")->value == 1.0);
    assert_true(find(got, "weft.queue.fill", "")->value == 0.75);
    (void)calls;
    weft_meter_free(m);
}

static void
observe(struct weft_instrument *gauge, void *user_data)
{
    int *calls = user_data;
    struct weft_attr a = weft_attr_str("pool", "main");
    (*calls)++;
    weft_gauge_observe(gauge, 42.0 + *calls, &a, 1);
}

static void
test_metrics_callback_gauge_runs_at_each_collection(void **state)
{
    struct weft_meter *m = NULL;
    struct weft_instrument *g = NULL;
    int calls = 0;

    (void)state;
    assert_weft_ok(weft_meter_new(NULL, &m));
    assert_weft_ok(weft_meter_instrument(m, WEFT_INSTRUMENT_GAUGE, "weft.oldest_run.age", "s", NULL,
                                         NULL, 0, &g));
    assert_weft_ok(weft_gauge_set_callback(g, observe, &calls));
    assert_true(find(collect(m), "weft.oldest_run.age", "pool=main")->value == 43.0);
    assert_true(find(collect(m), "weft.oldest_run.age", "pool=main")->value == 44.0);
    assert_int_equal(calls, 2);
    weft_meter_free(m);
}

static void
test_metrics_histogram_buckets_and_exemplars(void **state)
{
    static const double bounds[] = {0.1, 1, 10};
    struct weft_meter *m = NULL;
    struct weft_instrument *h = NULL;
    struct weft_instrument *d = NULL;
    struct weft_provider *p = NULL;
    struct weft_tracer *tracer = NULL;
    struct mem_exporter *mem = NULL;
    struct weft_span *span = NULL;
    struct weft_span_context ctx;
    const struct seen *s = NULL;
    size_t token = 0;

    (void)state;
    assert_weft_ok(weft_meter_new(NULL, &m));
    assert_weft_ok(weft_meter_instrument(m, WEFT_INSTRUMENT_HISTOGRAM, "weft.step.duration", "s",
                                         NULL, bounds, 3, &h));
    assert_weft_ok(
        weft_meter_instrument(m, WEFT_INSTRUMENT_HISTOGRAM, "plain", NULL, NULL, NULL, 0, &d));
    /* (-inf, 0.1], (0.1, 1], (1, 10], (10, +inf): a value equal to a bound is in its bucket. */
    assert_weft_ok(weft_histogram_record(h, 0.1, NULL, 0));
    assert_weft_ok(weft_histogram_record(h, 0.5, NULL, 0));
    assert_weft_ok(weft_histogram_record(h, 10, NULL, 0));
    assert_weft_ok(mem_provider_new(NULL, &p, &tracer, &mem));
    span = weft_span_start(tracer, "chat slow", NULL);
    weft_span_context_of(span, &ctx);
    token = weft_context_attach(span);
    assert_weft_ok(weft_histogram_record(h, 42, NULL, 0)); /* inside the span: an exemplar */
    weft_context_detach(token);
    weft_span_end(span, 0);
    assert_weft_err(weft_histogram_record(h, NAN, NULL, 0), WEFT_EINVAL);
    assert_weft_ok(weft_histogram_record(d, 7, NULL, 0));
    s = find(collect(m), "weft.step.duration", "");
    assert_int_equal(s->count, 4);
    assert_int_equal(s->buckets[0], 1);
    assert_int_equal(s->buckets[1], 1);
    assert_int_equal(s->buckets[2], 1);
    assert_int_equal(s->buckets[3], 1);
    assert_true(s->sum > 52.59 && s->sum < 52.61);
    assert_true(s->min == 0.1);
    assert_true(s->max == 42);
    assert_int_equal(s->dropped, 1);
    assert_true(s->exemplars[3].value == 42);
    assert_true(s->exemplars[3].time_ns != 0);
    assert_memory_equal(s->exemplars[3].trace_id, ctx.trace_id, WEFT_TRACE_ID_SIZE);
    assert_memory_equal(s->exemplars[3].span_id, ctx.span_id, WEFT_SPAN_ID_SIZE);
    assert_int_equal(s->exemplars[0].time_ns, 0); /* recorded outside any span */
    /* The default bounds: 7 lands in (5, 10]. */
    assert_int_equal(find(collect(m), "plain", "")->buckets[2], 1);
    weft_meter_free(m);
    weft_provider_shutdown(p, 1000);
    weft_provider_free(p);
}

static void
test_metrics_cardinality_overflows_into_one_series(void **state)
{
    struct weft_meter_options o = {.max_series = 3};
    struct weft_meter *m = NULL;
    struct weft_instrument *c = NULL;
    struct collected *got = NULL;

    (void)state;
    assert_weft_ok(weft_meter_new(&o, &m));
    assert_weft_ok(weft_meter_instrument(m, WEFT_INSTRUMENT_COUNTER, "c", NULL, NULL, NULL, 0, &c));
    for (int i = 0; i < 6; i++) {
        struct weft_attr a = weft_attr_int("run", i);
        weft_err err = weft_counter_add(c, 1, &a, 1);
        assert_true(err == (i < 2 ? WEFT_OK : WEFT_ELIMIT));
    }
    got = collect(m);
    assert_int_equal(got->count, 3); /* two real series and the overflow series */
    assert_true(find(got, "c", "otel.metric.overflow=true")->value == 4.0);
    assert_int_equal(find(got, "c", "run=0")->overflowed, 4);
    weft_meter_free(m);
}

static void
test_metrics_instrument_identity_and_names(void **state)
{
    static const double b1[] = {1, 2};
    static const double bad[] = {2, 1};
    struct weft_meter *m = NULL;
    struct weft_instrument *a = NULL;
    struct weft_instrument *b = NULL;

    (void)state;
    assert_weft_ok(weft_meter_new(NULL, &m));
    assert_weft_ok(
        weft_meter_instrument(m, WEFT_INSTRUMENT_COUNTER, "x.y", "s", NULL, NULL, 0, &a));
    assert_weft_ok(
        weft_meter_instrument(m, WEFT_INSTRUMENT_COUNTER, "x.y", "s", NULL, NULL, 0, &b));
    assert_ptr_equal(a, b);
    assert_weft_err(weft_meter_instrument(m, WEFT_INSTRUMENT_GAUGE, "x.y", "s", NULL, NULL, 0, &b),
                    WEFT_EINVAL);
    assert_null(b);
    assert_weft_err(
        weft_meter_instrument(m, WEFT_INSTRUMENT_COUNTER, "9lives", NULL, NULL, NULL, 0, &b),
        WEFT_EINVAL);
    assert_weft_err(
        weft_meter_instrument(m, WEFT_INSTRUMENT_COUNTER, "a b", NULL, NULL, NULL, 0, &b),
        WEFT_EINVAL);
    assert_weft_err(
        weft_meter_instrument(m, WEFT_INSTRUMENT_HISTOGRAM, "h", NULL, NULL, bad, 2, &b),
        WEFT_EINVAL);
    assert_weft_ok(weft_meter_instrument(m, WEFT_INSTRUMENT_HISTOGRAM, "h", NULL, NULL, b1, 2, &b));
    assert_weft_err(weft_counter_add(b, 1, NULL, 0), WEFT_EINVAL); /* wrong kind */
    assert_weft_err(weft_histogram_record(a, 1, NULL, 0), WEFT_EINVAL);
    weft_meter_free(m);
    weft_meter_free(NULL);
}

struct worker {
    struct weft_instrument *c;
    struct weft_instrument *h;
};

static void *
hammer(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < 50000; i++) {
        struct weft_attr a = weft_attr_str("agent", (i & 1) != 0 ? "odd" : "even");
        weft_counter_add(w->c, 1, &a, 1);
        weft_histogram_record(w->h, (double)(i % 20), &a, 1);
    }
    return NULL;
}

static void
test_metrics_concurrent_recording_is_exact(void **state)
{
    struct weft_meter *m = NULL;
    struct worker w;
    pthread_t t[4];
    struct collected *got = NULL;

    (void)state;
    assert_weft_ok(weft_meter_new(NULL, &m));
    assert_weft_ok(
        weft_meter_instrument(m, WEFT_INSTRUMENT_COUNTER, "c", NULL, NULL, NULL, 0, &w.c));
    assert_weft_ok(
        weft_meter_instrument(m, WEFT_INSTRUMENT_HISTOGRAM, "h", NULL, NULL, NULL, 0, &w.h));
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, hammer, &w), 0);
    }
    (void)collect(m); /* collecting while recorders run must be safe */
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
    }
    got = collect(m);
    assert_true(find(got, "c", "agent=odd")->value == 100000.0);
    assert_true(find(got, "c", "agent=even")->value == 100000.0);
    assert_int_equal(find(got, "h", "agent=even")->count, 100000);
    weft_meter_free(m);
}

static void
test_metrics_provider_health_gauges(void **state)
{
    struct weft_meter *m = NULL;
    struct weft_provider *p = NULL;
    struct weft_tracer *tracer = NULL;
    struct mem_exporter *mem = NULL;
    struct collected *got = NULL;

    (void)state;
    assert_weft_ok(weft_meter_new(NULL, &m));
    assert_weft_ok(mem_provider_new(NULL, &p, &tracer, &mem));
    assert_weft_ok(weft_meter_observe_provider(m, p));
    for (int i = 0; i < 3; i++) {
        weft_span_end(weft_span_start(tracer, "s", NULL), 0);
    }
    got = collect(m);
    assert_true(find(got, "weft.spans.ended", "")->value == 3.0);
    /* Per exporter, so that one failing exporter is not hidden behind a healthy one. */
    assert_true(find(got, "weft.spans.exported", "exporter=memory")->value == 3.0);
    assert_true(find(got, "weft.spans.dropped", "exporter=memory")->value == 0.0);
    assert_true(find(got, "weft.spans.failed", "exporter=memory")->value == 0.0);
    assert_weft_err(weft_meter_observe_provider(m, NULL), WEFT_EINVAL);
    weft_meter_free(m);
    weft_provider_shutdown(p, 1000);
    weft_provider_free(p);
}

/* Queue fill per batch processor: spans waiting for their batch show in the gauges, labelled
 * with the exporter's name. */
static void
test_metrics_provider_queue_fill(void **state)
{
    struct weft_batch_options bo = {
        .max_queue_size = 8, .max_export_batch_size = 8, .schedule_delay_ms = 60000};
    struct weft_meter *m = NULL;
    struct weft_provider *p = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_exporter *ex = NULL;
    struct mem_exporter *mem = NULL;
    struct weft_processor *proc = NULL;
    struct collected *got = NULL;

    (void)state;
    assert_weft_ok(weft_meter_new(NULL, &m));
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_weft_ok(mem_exporter_new(&ex, &mem));
    assert_weft_ok(weft_batch_processor_new(ex, &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(p, proc));
    assert_weft_ok(weft_provider_get_tracer(p, "t", NULL, &tracer));
    assert_weft_ok(weft_meter_observe_provider(m, p));
    got = collect(m);
    assert_true(find(got, "weft.exporter.queue.size", "exporter=memory")->value == 0.0);
    for (int i = 0; i < 3; i++) {
        weft_span_end(weft_span_start(tracer, "s", NULL), 0);
    }
    got = collect(m);
    assert_true(find(got, "weft.exporter.queue.size", "exporter=memory")->value == 3.0);
    assert_true(find(got, "weft.exporter.queue.utilization", "exporter=memory")->value ==
                3.0 / 8.0);
    weft_provider_shutdown(p, 1000);
    got = collect(m);
    assert_true(find(got, "weft.exporter.queue.size", "exporter=memory")->value == 0.0);
    weft_meter_free(m);
    weft_provider_free(p);
}

static void
test_metrics_out_of_memory(void **state)
{
    (void)state;
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0;; budget++) {
        struct weft_meter *m = NULL;
        struct weft_instrument *h = NULL;
        struct weft_attr a = weft_attr_str("k", "v");
        weft_err err = WEFT_OK;

        failalloc_budget = budget;
        err = weft_meter_new(NULL, &m);
        if (err == WEFT_OK) {
            err = weft_meter_instrument(m, WEFT_INSTRUMENT_HISTOGRAM, "h", NULL, NULL, NULL, 0, &h);
        }
        if (err == WEFT_OK) {
            err = weft_histogram_record(h, 1, &a, 1);
        }
        failalloc_budget = -1;
        weft_meter_free(m);
        if (err == WEFT_OK) {
            break;
        }
        assert_int_equal(err, WEFT_ENOMEM);
    }
    weft_set_allocator(NULL, NULL, NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_counter_sums_per_attribute_set),
        cmocka_unit_test(test_metrics_updown_and_gauges),
        cmocka_unit_test(test_metrics_provider_queue_fill),
        cmocka_unit_test(test_metrics_callback_gauge_runs_at_each_collection),
        cmocka_unit_test(test_metrics_histogram_buckets_and_exemplars),
        cmocka_unit_test(test_metrics_cardinality_overflows_into_one_series),
        cmocka_unit_test(test_metrics_instrument_identity_and_names),
        cmocka_unit_test(test_metrics_concurrent_recording_is_exact),
        cmocka_unit_test(test_metrics_provider_health_gauges),
        cmocka_unit_test(test_metrics_out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
