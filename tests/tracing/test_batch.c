/* tests/tracing/test_batch.c - the batch span processor: delivery on batch size and on the
 * schedule delay, flush, shutdown delivering what is queued, drops when the queue is full,
 * export failures and partial success counted, and span end never waiting on the exporter. */
#include "support/mem_exporter.h"
#include "support/weft_test.h"

#include <string.h>
#include <time.h>

struct fixture {
    struct weft_provider *provider;
    struct weft_tracer *tracer;
    struct mem_exporter *mem;
    struct weft_processor *proc;
};

static void
setup_with(struct fixture *f, size_t queue, size_t batch, uint32_t delay_ms)
{
    struct weft_exporter *exporter = NULL;
    struct weft_batch_options opts = {
        .max_queue_size = queue,
        .max_export_batch_size = batch,
        .schedule_delay_ms = delay_ms,
        .export_timeout_ms = 30000,
    };

    memset(f, 0, sizeof(*f));
    assert_weft_ok(weft_provider_new(NULL, &f->provider));
    assert_weft_ok(weft_provider_get_tracer(f->provider, "test", "1.0", &f->tracer));
    assert_weft_ok(mem_exporter_new(&exporter, &f->mem));
    assert_weft_ok(weft_batch_processor_new(exporter, &opts, &f->proc));
    assert_weft_ok(weft_provider_add_processor_take(f->provider, f->proc));
}

static void
teardown(struct fixture *f)
{
    weft_provider_free(f->provider);
}

static void
end_spans(struct fixture *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct weft_span *s = weft_span_start(f->tracer, "work", NULL);
        weft_span_set_int(s, "i", (int64_t)i);
        weft_span_end(s, 0);
    }
}

static uint64_t
ms_since(uint64_t start)
{
    return (weft_monotonic_ns() - start) / 1000000u;
}

/* Poll until the exporter holds n spans; fail after 5 s. */
static void
wait_for_count(struct mem_exporter *m, size_t n)
{
    uint64_t start = weft_monotonic_ns();

    while (mem_exporter_count(m) < n) {
        struct timespec ts = {0, 1000000};
        if (ms_since(start) > 5000) {
            fail_msg("only %zu of %zu spans exported", mem_exporter_count(m), n);
        }
        nanosleep(&ts, NULL);
    }
}

static void
test_batch_exports_when_batch_is_full(void **state)
{
    struct fixture f;

    (void)state;
    /* A one-hour delay: only a full batch can trigger this export. */
    setup_with(&f, 64, 8, 3600000);
    end_spans(&f, 8);
    wait_for_count(f.mem, 8);
    assert_int_equal(mem_exporter_batches(f.mem), 1);
    teardown(&f);
}

static void
test_batch_exports_after_schedule_delay(void **state)
{
    struct fixture f;
    uint64_t start = 0;

    (void)state;
    setup_with(&f, 64, 32, 50);
    start = weft_monotonic_ns();
    end_spans(&f, 3);
    wait_for_count(f.mem, 3);
    assert_true(ms_since(start) < 3000);
    teardown(&f);
}

static void
test_batch_force_flush_delivers_everything_queued(void **state)
{
    struct fixture f;
    struct weft_processor_stats ps;

    (void)state;
    setup_with(&f, 1024, 512, 3600000);
    end_spans(&f, 700);
    assert_weft_ok(weft_provider_force_flush(f.provider, 5000));
    assert_int_equal(mem_exporter_count(f.mem), 700);
    assert_true(mem_exporter_flushes(f.mem) >= 1);
    assert_weft_ok(weft_processor_get_stats(f.proc, &ps));
    assert_int_equal(ps.exported, 700);
    assert_int_equal(ps.enqueued, 700);
    assert_int_equal(ps.queue_len, 0);
    teardown(&f);
}

static void
test_batch_shutdown_delivers_queued_spans(void **state)
{
    struct fixture f;
    struct weft_trace_stats st;

    (void)state;
    setup_with(&f, 1024, 512, 3600000);
    end_spans(&f, 100);
    assert_weft_ok(weft_provider_shutdown(f.provider, 5000));
    assert_int_equal(mem_exporter_count(f.mem), 100);
    assert_true(mem_exporter_is_shut_down(f.mem));
    /* Spans after shutdown are not recorded; a second shutdown is refused. */
    end_spans(&f, 5);
    weft_provider_get_stats(f.provider, &st);
    assert_int_equal(st.spans_exported, 100);
    assert_int_equal(st.spans_started, 100);
    assert_weft_err(weft_provider_shutdown(f.provider, 100), WEFT_ESTATE);
    teardown(&f);
}

static void
test_batch_full_queue_drops_and_counts_without_blocking(void **state)
{
    struct fixture f;
    struct weft_trace_stats st;

    (void)state;
    setup_with(&f, 16, 4, 3600000);
    mem_exporter_block(f.mem); /* the export thread stalls on its first batch */
    end_spans(&f, 1000);
    /* 1000 span ends against a stalled exporter did not wait for it: they all returned while
     * the exporter still holds its first batch (nothing exported yet), with no clock in the
     * proof (a span end that waited would wait for ever: the exporter is released below). */
    weft_provider_get_stats(f.provider, &st);
    assert_int_equal(st.spans_ended, 1000);
    assert_int_equal(st.spans_exported, 0);
    /* At most the queue plus the batch held by the stalled export survive. */
    assert_true(st.spans_dropped >= 1000 - 16 - 4);
    mem_exporter_release(f.mem);
    assert_weft_ok(weft_provider_shutdown(f.provider, 5000));
    weft_provider_get_stats(f.provider, &st);
    /* Every span is accounted for: exported or dropped. */
    assert_int_equal(st.spans_exported + st.spans_dropped, 1000);
    assert_int_equal(mem_exporter_count(f.mem), st.spans_exported);
    teardown(&f);
}

static void
test_batch_export_failure_counts_failed(void **state)
{
    struct fixture f;
    struct weft_trace_stats st;

    (void)state;
    setup_with(&f, 64, 8, 3600000);
    mem_exporter_set_result(f.mem, WEFT_EHTTP, 0);
    end_spans(&f, 10);
    /* The flush says it could not deliver everything, and the next one starts clean. */
    assert_weft_err(weft_provider_force_flush(f.provider, 5000), WEFT_EIO);
    mem_exporter_set_result(f.mem, WEFT_OK, 0);
    assert_weft_ok(weft_provider_force_flush(f.provider, 5000));
    weft_provider_get_stats(f.provider, &st);
    assert_int_equal(st.spans_failed, 10);
    assert_int_equal(st.spans_exported, 0);
    teardown(&f);
}

static void
test_batch_partial_success_counts_rejected(void **state)
{
    struct fixture f;
    struct weft_trace_stats st;

    (void)state;
    setup_with(&f, 64, 10, 3600000);
    mem_exporter_set_result(f.mem, WEFT_OK, 3);
    end_spans(&f, 10);
    assert_weft_ok(weft_provider_force_flush(f.provider, 5000));
    weft_provider_get_stats(f.provider, &st);
    assert_int_equal(st.spans_failed, 3);
    assert_int_equal(st.spans_exported, 7);
    teardown(&f);
}

static void
test_batch_flush_times_out_on_stalled_exporter(void **state)
{
    struct fixture f;
    uint64_t start = 0;

    (void)state;
    setup_with(&f, 64, 8, 3600000);
    mem_exporter_block(f.mem);
    end_spans(&f, 8);
    start = weft_monotonic_ns();
    assert_weft_err(weft_provider_force_flush(f.provider, 100), WEFT_ETIMEDOUT);
    assert_true(ms_since(start) < 2000);
    mem_exporter_release(f.mem);
    teardown(&f);
}

static void
test_batch_shutdown_is_bounded_by_timeout(void **state)
{
    struct fixture f;
    uint64_t start = 0;

    (void)state;
    setup_with(&f, 64, 8, 3600000);
    mem_exporter_block(f.mem); /* the exporter's shutdown releases it */
    end_spans(&f, 20);
    start = weft_monotonic_ns();
    assert_weft_err(weft_provider_shutdown(f.provider, 200), WEFT_ETIMEDOUT);
    assert_true(ms_since(start) < 3000);
    teardown(&f);
}

static void
test_batch_two_processors_do_not_wait_on_each_other(void **state)
{
    struct fixture f;
    struct weft_exporter *exporter = NULL;
    struct mem_exporter *fast = NULL;
    struct weft_processor *proc = NULL;
    struct weft_batch_options opts = {64, 8, 3600000, 30000};

    (void)state;
    setup_with(&f, 64, 8, 3600000);
    assert_weft_ok(mem_exporter_new(&exporter, &fast));
    assert_weft_ok(weft_batch_processor_new(exporter, &opts, &proc));
    assert_weft_ok(weft_provider_add_processor_take(f.provider, proc));
    mem_exporter_block(f.mem); /* the first exporter is stuck */
    end_spans(&f, 8);
    wait_for_count(fast, 8); /* the second still delivers */
    assert_int_equal(mem_exporter_count(f.mem), 0);
    mem_exporter_release(f.mem);
    assert_weft_ok(weft_provider_force_flush(f.provider, 5000));
    assert_int_equal(mem_exporter_count(f.mem), 8);
    teardown(&f);
}

static void
test_batch_rejects_bad_options(void **state)
{
    struct weft_exporter *exporter = NULL;
    struct mem_exporter *m = NULL;
    struct weft_processor *proc = NULL;
    struct weft_batch_options opts = {0, 8, 10, 10};

    (void)state;
    assert_weft_ok(mem_exporter_new(&exporter, &m));
    /* The exporter is taken even on failure (no leak under ASan). */
    assert_weft_err(weft_batch_processor_new(exporter, &opts, &proc), WEFT_EINVAL);
    assert_null(proc);
    assert_weft_err(weft_batch_processor_new(NULL, NULL, &proc), WEFT_EINVAL);
}

static void
test_simple_processor_exports_synchronously(void **state)
{
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_exporter *exporter = NULL;
    struct mem_exporter *m = NULL;
    struct weft_processor *proc = NULL;
    struct weft_span *span = NULL;

    (void)state;
    assert_weft_ok(weft_provider_new(NULL, &provider));
    assert_weft_ok(weft_provider_get_tracer(provider, "t", NULL, &tracer));
    assert_weft_ok(mem_exporter_new(&exporter, &m));
    assert_weft_ok(weft_simple_processor_new(exporter, &proc));
    assert_weft_ok(weft_provider_add_processor_take(provider, proc));
    span = weft_span_start(tracer, "sync", NULL);
    assert_int_equal(mem_exporter_count(m), 0);
    weft_span_end(span, 0);
    assert_int_equal(mem_exporter_count(m), 1);
    assert_string_equal(mem_exporter_span(m, 0)->name, "sync");
    weft_provider_free(provider);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_exports_when_batch_is_full),
        cmocka_unit_test(test_batch_exports_after_schedule_delay),
        cmocka_unit_test(test_batch_force_flush_delivers_everything_queued),
        cmocka_unit_test(test_batch_shutdown_delivers_queued_spans),
        cmocka_unit_test(test_batch_full_queue_drops_and_counts_without_blocking),
        cmocka_unit_test(test_batch_export_failure_counts_failed),
        cmocka_unit_test(test_batch_partial_success_counts_rejected),
        cmocka_unit_test(test_batch_flush_times_out_on_stalled_exporter),
        cmocka_unit_test(test_batch_shutdown_is_bounded_by_timeout),
        cmocka_unit_test(test_batch_two_processors_do_not_wait_on_each_other),
        cmocka_unit_test(test_batch_rejects_bad_options),
        cmocka_unit_test(test_simple_processor_exports_synchronously),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
