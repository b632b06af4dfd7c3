/* tests/tracing/test_concurrency.c - several threads record spans while export threads run;
 * run under ThreadSanitizer by `make test`. Every span must be exported or counted as dropped,
 * and parent links must stay within each thread's own trace. */
#include "support/mem_exporter.h"
#include "support/weft_test.h"

#include <pthread.h>
#include <string.h>

#define THREADS    4
#define PER_THREAD 2000

struct worker {
    struct weft_tracer *tracer;
    int index;
};

static void *
work(void *arg)
{
    struct worker *w = arg;

    for (int i = 0; i < PER_THREAD / 2; i++) {
        struct weft_span *parent = weft_span_start(w->tracer, "parent", NULL);
        size_t token = weft_context_attach(parent);
        struct weft_span *child = weft_span_start(w->tracer, "child", NULL);

        weft_span_set_int(child, "thread", w->index);
        weft_span_set_str(child, "note", "concurrent");
        weft_span_add_event(child, "tick", NULL, 0, 0);
        weft_span_end(child, 0);
        weft_context_detach(token);
        weft_span_set_int(parent, "thread", w->index);
        weft_span_end(parent, 0);
    }
    return NULL;
}

static void
run_threads(struct weft_tracer *tracer)
{
    pthread_t threads[THREADS];
    struct worker workers[THREADS];

    for (int t = 0; t < THREADS; t++) {
        workers[t].tracer = tracer;
        workers[t].index = t;
        assert_int_equal(pthread_create(&threads[t], NULL, work, &workers[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
    }
}

static void
test_concurrency_all_spans_accounted_for(void **state)
{
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_exporter *exporter = NULL;
    struct mem_exporter *m = NULL;
    struct weft_processor *proc = NULL;
    struct weft_batch_options opts = {512, 64, 5, 30000};
    struct weft_trace_stats st;

    (void)state;
    assert_weft_ok(weft_provider_new(NULL, &provider));
    assert_weft_ok(weft_provider_get_tracer(provider, "conc", NULL, &tracer));
    assert_weft_ok(mem_exporter_new(&exporter, &m));
    assert_weft_ok(weft_batch_processor_new(exporter, &opts, &proc));
    assert_weft_ok(weft_provider_add_processor_take(provider, proc));

    run_threads(tracer);
    assert_weft_ok(weft_provider_shutdown(provider, 10000));
    weft_provider_get_stats(provider, &st);
    assert_int_equal(st.spans_started, THREADS * PER_THREAD);
    assert_int_equal(st.spans_ended, THREADS * PER_THREAD);
    assert_int_equal(st.spans_exported + st.spans_dropped, THREADS * PER_THREAD);
    assert_int_equal(mem_exporter_count(m), st.spans_exported);
    assert_true(st.spans_exported > 0);

    /* Each exported child's parent, when exported too, shares its trace id and thread. */
    for (size_t i = 0; i < mem_exporter_count(m); i++) {
        const struct mem_span *s = mem_exporter_span(m, i);

        if (strcmp(s->name, "child") == 0) {
            assert_true(s->has_parent);
            for (size_t j = 0; j < mem_exporter_count(m); j++) {
                const struct mem_span *p = mem_exporter_span(m, j);
                if (memcmp(p->span_id, s->parent_span_id, 8) == 0) {
                    assert_memory_equal(p->trace_id, s->trace_id, 16);
                    assert_int_equal(mem_span_attr(p, "thread")->u.i,
                                     mem_span_attr(s, "thread")->u.i);
                    break;
                }
            }
        } else {
            assert_false(s->has_parent);
        }
    }
    weft_provider_free(provider);
}

static void
test_concurrency_flush_while_recording(void **state)
{
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_exporter *exporter = NULL;
    struct mem_exporter *m = NULL;
    struct weft_processor *proc = NULL;
    struct weft_batch_options opts = {8192, 256, 3600000, 30000};
    pthread_t threads[THREADS];
    struct worker workers[THREADS];
    struct weft_trace_stats st;

    (void)state;
    assert_weft_ok(weft_provider_new(NULL, &provider));
    assert_weft_ok(weft_provider_get_tracer(provider, "conc", NULL, &tracer));
    assert_weft_ok(mem_exporter_new(&exporter, &m));
    assert_weft_ok(weft_batch_processor_new(exporter, &opts, &proc));
    assert_weft_ok(weft_provider_add_processor_take(provider, proc));
    for (int t = 0; t < THREADS; t++) {
        workers[t].tracer = tracer;
        workers[t].index = t;
        assert_int_equal(pthread_create(&threads[t], NULL, work, &workers[t]), 0);
    }
    for (int i = 0; i < 5; i++) {
        assert_weft_ok(weft_provider_force_flush(provider, 10000));
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
    }
    assert_weft_ok(weft_provider_force_flush(provider, 10000));
    weft_provider_get_stats(provider, &st);
    assert_int_equal(st.spans_exported + st.spans_dropped, THREADS * PER_THREAD);
    weft_provider_free(provider);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrency_all_spans_accounted_for),
        cmocka_unit_test(test_concurrency_flush_while_recording),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
