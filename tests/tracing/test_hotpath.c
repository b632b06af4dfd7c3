/* tests/tracing/test_hotpath.c - the span hot path: the length-carrying setters (exact bytes,
 * embedded NUL and invalid UTF-8, truncation to whole characters, bad keys, redaction), the
 * per-thread span cache (freed when its thread exits; no allocation per span once warm), and
 * the sharded batch queue (every span ended on threads that have exited is exported by flush,
 * and drops are counted exactly when the queue is full).
 *
 * main() installs a counting allocator before anything else, as weft_set_allocator() asks. */
#include "support/mem_exporter.h"
#include "support/weft_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define LIT(s) s, sizeof(s) - 1

/* ---- counting allocator ---------------------------------------------------------------- */

static atomic_long live_blocks; /* blocks handed out and not yet freed */
static atomic_long allocations; /* malloc and realloc calls */

static void *
count_malloc(size_t n)
{
    void *p = malloc(n);

    atomic_fetch_add(&allocations, 1);
    if (p != NULL) {
        atomic_fetch_add(&live_blocks, 1);
    }
    return p;
}

static void *
count_realloc(void *old, size_t n)
{
    void *p = realloc(old, n);

    atomic_fetch_add(&allocations, 1);
    if (old == NULL && p != NULL) {
        atomic_fetch_add(&live_blocks, 1);
    }
    return p;
}

static void
count_free(void *p)
{
    if (p != NULL) {
        atomic_fetch_sub(&live_blocks, 1);
    }
    free(p);
}

/* ---- an exporter that keeps nothing (so that it allocates nothing) --------------------- */

static atomic_size_t discarded;

static weft_err
discard_export(void *self,
               const struct weft_span_data *const *spans,
               size_t count,
               uint64_t deadline_ns,
               struct weft_export_result *result)
{
    (void)self;
    (void)spans;
    (void)deadline_ns;
    (void)result;
    atomic_fetch_add(&discarded, count);
    return WEFT_OK;
}

static const struct weft_exporter_ops discard_ops = {
    .name = "discard",
    .export_batch = discard_export,
};

/* ---- fixtures ---------------------------------------------------------------------------- */

struct fixture {
    struct weft_provider *provider;
    struct weft_tracer *tracer;
    struct mem_exporter *mem;
};

/* A provider with a simple processor into a memory exporter; @p value_limit is the
 * attribute value length limit (WEFT_LIMIT_NONE for none). */
static void
fixture_open(struct fixture *f, size_t value_limit, weft_redact_fn redact, void *redact_data)
{
    struct weft_span_limits limits;
    struct weft_provider_options opts = {.service_name = "hotpath"};

    weft_span_limits_from_env(&limits);
    limits.attr_value_length = value_limit;
    opts.limits = &limits;
    opts.redact = redact;
    opts.redact_user_data = redact_data;
    memset(f, 0, sizeof(*f));
    assert_weft_ok(mem_provider_new(&opts, &f->provider, &f->tracer, &f->mem));
}

static void
fixture_close(struct fixture *f)
{
    weft_provider_shutdown(f->provider, 1000);
    weft_provider_free(f->provider);
}

static const struct weft_attr *
find_attr(const struct mem_span *s, const char *key)
{
    for (size_t i = 0; i < s->attr_count; i++) {
        if (strcmp(s->attrs[i].key, key) == 0) {
            return &s->attrs[i];
        }
    }
    return NULL;
}

/* ---- length-carrying setters ------------------------------------------------------------- */

static void
test_hotpath_string_n_copies_exact_bytes(void **state)
{
    /* The key is the first 17 bytes of a longer buffer; the value holds a NUL and bytes that
     * are not UTF-8, and is copied as given. */
    static const char key_buf[] = "gen_ai.agent.name-and-more";
    static const char value[] = {'a', '\0', 'b', '\xff', '\xfe', 'c'};
    struct fixture f;
    struct weft_span *span = NULL;
    const struct weft_attr *a = NULL;

    (void)state;
    fixture_open(&f, WEFT_LIMIT_NONE, NULL, NULL);
    span = weft_span_start(f.tracer, "s", NULL);
    assert_weft_ok(weft_span_set_string_n(span, key_buf, 17, value, sizeof(value)));
    assert_weft_ok(weft_span_set_string_n(span, LIT("empty"), NULL, 0));
    weft_span_end(span, 0);
    assert_int_equal(mem_exporter_count(f.mem), 1);
    a = find_attr(mem_exporter_span(f.mem, 0), "gen_ai.agent.name");
    assert_non_null(a);
    assert_int_equal(a->value.type, WEFT_VALUE_STRING);
    assert_int_equal(a->value.len, sizeof(value));
    assert_memory_equal(a->value.u.str, value, sizeof(value));
    a = find_attr(mem_exporter_span(f.mem, 0), "empty");
    assert_non_null(a);
    assert_int_equal(a->value.len, 0);
    assert_string_equal(a->value.u.str, "");
    fixture_close(&f);
}

static void
test_hotpath_string_n_truncates_to_whole_characters(void **state)
{
    struct fixture f;
    struct weft_span *span = NULL;
    const struct mem_span *s = NULL;
    const struct weft_attr *a = NULL;

    (void)state;
    fixture_open(&f, 3, NULL, NULL);
    span = weft_span_start(f.tracer, "s", NULL);
    /* "a€bc": three characters are five bytes. */
    assert_weft_ok(weft_span_set_string_n(span, LIT("euro"),
                                          LIT("a\xe2\x82\xac"
                                              "bc")));
    /* Invalid bytes count one character each. */
    assert_weft_ok(weft_span_set_string_n(span, LIT("invalid"), LIT("\xff\xfe\xfdxyz")));
    /* A sequence cut short by the given length is not read past it. */
    assert_weft_ok(weft_span_set_string_n(span, LIT("cut"), "ab\xe2\x82\xac", 4));
    weft_span_end(span, 0);
    s = mem_exporter_span(f.mem, 0);
    a = find_attr(s, "euro");
    assert_int_equal(a->value.len, 5);
    assert_memory_equal(a->value.u.str,
                        "a\xe2\x82\xac"
                        "b",
                        5);
    a = find_attr(s, "invalid");
    assert_int_equal(a->value.len, 3);
    assert_memory_equal(a->value.u.str, "\xff\xfe\xfd", 3);
    a = find_attr(s, "cut");
    assert_int_equal(a->value.len, 4);
    assert_memory_equal(a->value.u.str, "ab\xe2\x82", 4);
    fixture_close(&f);
}

static void
test_hotpath_n_setters_reject_bad_keys(void **state)
{
    struct fixture f;
    struct weft_span *span = NULL;
    const struct mem_span *s = NULL;

    (void)state;
    fixture_open(&f, WEFT_LIMIT_NONE, NULL, NULL);
    span = weft_span_start(f.tracer, "s", NULL);
    assert_weft_err(weft_span_set_string_n(span, "k", 0, "v", 1), WEFT_EINVAL);
    assert_weft_err(weft_span_set_string_n(span, "a\0b", 3, "v", 1), WEFT_EINVAL);
    assert_weft_err(weft_span_set_string_n(span, NULL, 1, "v", 1), WEFT_EINVAL);
    assert_weft_err(weft_span_set_string_n(span, "k", 1, NULL, 1), WEFT_EINVAL);
    assert_weft_err(weft_span_set_string_n(NULL, "k", 1, "v", 1), WEFT_EINVAL);
    assert_weft_err(weft_span_set_int_n(span, "k", 0, 1), WEFT_EINVAL);
    assert_weft_err(weft_span_set_bool_n(span, "a\0b", 3, true), WEFT_EINVAL);
    assert_weft_err(weft_span_set_double_n(NULL, "k", 1, 1.0), WEFT_EINVAL);
    weft_span_end(span, 0);
    /* A non-recording span accepts the call and records nothing. */
    assert_weft_ok(weft_span_set_string_n(span, LIT("late"), LIT("v")));
    assert_weft_ok(weft_span_set_int_n(span, LIT("late"), 1));
    s = mem_exporter_span(f.mem, 0);
    assert_int_equal(s->attr_count, 0);
    assert_int_equal(s->dropped_attrs, 0);
    fixture_close(&f);
}

static void
test_hotpath_scalar_n_setters_share_keys_with_the_others(void **state)
{
    struct fixture f;
    struct weft_span *span = NULL;
    const struct mem_span *s = NULL;

    (void)state;
    fixture_open(&f, WEFT_LIMIT_NONE, NULL, NULL);
    span = weft_span_start(f.tracer, "s", NULL);
    assert_weft_ok(weft_span_set_int(span, "weft.step.id", 1));
    assert_weft_ok(weft_span_set_int_n(span, "weft.step.id=2", 12, 2)); /* replaces */
    assert_weft_ok(weft_span_set_double_n(span, LIT("score"), 0.5));
    assert_weft_ok(weft_span_set_bool_n(span, LIT("final"), true));
    assert_weft_ok(weft_span_set_str(span, "final", "yes")); /* replaces, with a string */
    weft_span_end(span, 0);
    s = mem_exporter_span(f.mem, 0);
    assert_int_equal(s->attr_count, 3);
    assert_int_equal(find_attr(s, "weft.step.id")->value.u.i, 2);
    assert_true(find_attr(s, "score")->value.u.d == 0.5);
    assert_int_equal(find_attr(s, "final")->value.type, WEFT_VALUE_STRING);
    assert_string_equal(find_attr(s, "final")->value.u.str, "yes");
    fixture_close(&f);
}

/* A callback that checks it receives a terminated key, and replaces the value of "k1". */
static const char *
redact_k1(const char *key,
          const char *value,
          size_t len,
          char *scratch,
          size_t scratch_len,
          void *user_data)
{
    int *calls = user_data;

    (void)value;
    (void)len;
    (void)scratch;
    (void)scratch_len;
    (*calls)++;
    return strcmp(key, "k1") == 0 ? "hidden" : NULL;
}

static void
test_hotpath_string_n_passes_through_redaction(void **state)
{
    struct fixture f;
    struct weft_span *span = NULL;
    const struct mem_span *s = NULL;
    int calls = 0;

    (void)state;
    fixture_open(&f, WEFT_LIMIT_NONE, redact_k1, &calls);
    span = weft_span_start(f.tracer, "s", NULL);
    /* Keys given by length, cut from longer buffers: the secret-name rule and the callback
     * both see the key alone. */
    assert_weft_ok(weft_span_set_string_n(span, "api_key_and_more", 7, LIT("plain-value")));
    assert_weft_ok(weft_span_set_string_n(span, "note-x", 4, LIT("use Bearer abcdefghijklmnop")));
    assert_weft_ok(weft_span_set_string_n(span, "k1k1", 2, LIT("visible")));
    weft_span_end(span, 0);
    s = mem_exporter_span(f.mem, 0);
    assert_string_equal(find_attr(s, "api_key")->value.u.str, WEFT_REDACTED);
    assert_string_equal(find_attr(s, "note")->value.u.str, "use Bearer " WEFT_REDACTED);
    assert_string_equal(find_attr(s, "k1")->value.u.str, "hidden");
    assert_int_equal(calls, 3);
    fixture_close(&f);
}

static void
test_hotpath_attr_strn_carries_its_length(void **state)
{
    struct fixture f;
    struct weft_span *span = NULL;
    struct weft_attr a = weft_attr_strn("k", "abc\0def", 7);
    const struct weft_attr *got = NULL;

    (void)state;
    assert_int_equal(weft_attr_strn("k", NULL, 5).value.len, 0);
    fixture_open(&f, WEFT_LIMIT_NONE, NULL, NULL);
    span = weft_span_start(f.tracer, "s", NULL);
    assert_weft_ok(weft_span_set_attr(span, &a));
    weft_span_end(span, 0);
    got = find_attr(mem_exporter_span(f.mem, 0), "k");
    assert_int_equal(got->value.len, 7);
    assert_memory_equal(got->value.u.str, "abc\0def", 7);
    fixture_close(&f);
}

/* ---- span memory --------------------------------------------------------------------------- */

struct discard_fixture {
    struct weft_provider *provider;
    struct weft_tracer *tracer;
};

static void
discard_open(struct discard_fixture *f, bool batch, const struct weft_batch_options *bo)
{
    struct weft_exporter *ex = NULL;
    struct weft_processor *proc = NULL;

    assert_weft_ok(weft_provider_new(NULL, &f->provider));
    assert_weft_ok(weft_exporter_new(&discard_ops, NULL, &ex));
    if (batch) {
        assert_weft_ok(weft_batch_processor_new(ex, bo, &proc));
    } else {
        assert_weft_ok(weft_simple_processor_new(ex, &proc));
    }
    assert_weft_ok(weft_provider_add_processor_take(f->provider, proc));
    assert_weft_ok(weft_provider_get_tracer(f->provider, "t", NULL, &f->tracer));
}

static void
record_attrs5(struct weft_tracer *tracer, int64_t i)
{
    struct weft_span *s = weft_span_start(tracer, "invoke_agent planner", NULL);

    weft_span_set_str(s, "gen_ai.operation.name", "invoke_agent");
    weft_span_set_int(s, "weft.step.id", i);
    weft_span_set_double(s, "weft.step.score", 0.75);
    weft_span_set_bool(s, "weft.step.final", true);
    weft_span_set_string_n(s, LIT("weft.step.status"), LIT("completed"));
    weft_span_end(s, 0);
}

static void
test_hotpath_steady_state_allocates_nothing(void **state)
{
    struct discard_fixture f;
    long before = 0;

    (void)state;
    discard_open(&f, false, NULL);
    for (int i = 0; i < 10; i++) {
        record_attrs5(f.tracer, i); /* warm: the span comes back to this thread's cache */
    }
    before = atomic_load(&allocations);
    for (int i = 0; i < 10000; i++) {
        record_attrs5(f.tracer, i);
    }
    assert_int_equal(atomic_load(&allocations) - before, 0);
    weft_provider_shutdown(f.provider, 1000);
    weft_provider_free(f.provider);
}

static void *
record_one_and_exit(void *arg)
{
    record_attrs5(arg, 1);
    return NULL;
}

static void
test_hotpath_thread_exit_frees_its_span_cache(void **state)
{
    struct discard_fixture f;
    pthread_t thread;
    long before = 0;

    (void)state;
    discard_open(&f, false, NULL);
    record_attrs5(f.tracer, 0); /* this thread's own cache and the shared pool exist now */
    before = atomic_load(&live_blocks);
    /* The thread allocates a span, ends it (the simple processor exports at once), keeps it
     * in its cache, and exits: the cache must be freed with it. */
    assert_int_equal(pthread_create(&thread, NULL, record_one_and_exit, f.tracer), 0);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(atomic_load(&live_blocks), before);
    weft_provider_shutdown(f.provider, 1000);
    weft_provider_free(f.provider);
}

/* ---- sharded queue --------------------------------------------------------------------------- */

#define THREADS    4
#define PER_THREAD 500

static void *
record_many(void *arg)
{
    for (int i = 0; i < PER_THREAD; i++) {
        record_attrs5(arg, i);
    }
    return NULL;
}

static void
run_threads(struct weft_tracer *tracer)
{
    pthread_t threads[THREADS];

    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(pthread_create(&threads[t], NULL, record_many, tracer), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(pthread_join(threads[t], NULL), 0);
    }
}

static void
test_hotpath_flush_exports_spans_of_exited_threads(void **state)
{
    /* No timer and no full batch before the flush: only force_flush can export these. */
    struct weft_batch_options bo = {.max_queue_size = 4 * THREADS * PER_THREAD,
                                    .max_export_batch_size = 4 * THREADS * PER_THREAD,
                                    .schedule_delay_ms = 600000,
                                    .export_timeout_ms = 1000};
    struct discard_fixture f;
    struct weft_processor_stats ps;
    struct weft_trace_stats ts;
    size_t before = atomic_load(&discarded);

    (void)state;
    discard_open(&f, true, &bo);
    run_threads(f.tracer);
    assert_weft_ok(weft_provider_force_flush(f.provider, 10000));
    assert_int_equal(atomic_load(&discarded) - before, THREADS * PER_THREAD);
    assert_weft_ok(weft_processor_get_stats(weft_provider_processor(f.provider, 0), &ps));
    assert_int_equal(ps.enqueued, THREADS * PER_THREAD);
    assert_int_equal(ps.exported, THREADS * PER_THREAD);
    assert_int_equal(ps.dropped, 0);
    assert_int_equal(ps.queue_len, 0);
    assert_int_equal(ps.queue_cap, 4 * THREADS * PER_THREAD);
    weft_provider_shutdown(f.provider, 1000);
    weft_provider_get_stats(f.provider, &ts);
    assert_int_equal(ts.spans_ended, THREADS * PER_THREAD);
    weft_provider_free(f.provider);
}

static void
test_hotpath_full_queue_drops_are_counted_exactly(void **state)
{
    /* A blocked exporter holds at most one batch; the queue (64 slots over the shards, each
     * thread overflowing into the others' shards) takes 64 more; the rest is dropped. */
    struct weft_batch_options bo = {.max_queue_size = 64,
                                    .max_export_batch_size = 8,
                                    .schedule_delay_ms = 1,
                                    .export_timeout_ms = 1000};
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_exporter *ex = NULL;
    struct mem_exporter *mem = NULL;
    struct weft_processor *proc = NULL;
    struct weft_processor_stats ps;
    struct weft_trace_stats ts;

    (void)state;
    assert_weft_ok(weft_provider_new(NULL, &provider));
    assert_weft_ok(mem_exporter_new(&ex, &mem));
    mem_exporter_block(mem);
    assert_weft_ok(weft_batch_processor_new(ex, &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(provider, proc));
    assert_weft_ok(weft_provider_get_tracer(provider, "t", NULL, &tracer));
    run_threads(tracer);
    assert_weft_ok(weft_processor_get_stats(proc, &ps));
    assert_int_equal(ps.queue_cap, 64);
    assert_int_equal(ps.enqueued + ps.dropped, THREADS * PER_THREAD);
    assert_true(ps.enqueued >= 64 && ps.enqueued <= 64 + 8);
    mem_exporter_release(mem);
    assert_weft_ok(weft_provider_shutdown(provider, 10000));
    assert_weft_ok(weft_processor_get_stats(proc, &ps));
    assert_int_equal(ps.exported + ps.dropped, THREADS * PER_THREAD);
    assert_int_equal(mem_exporter_count(mem), ps.exported);
    weft_provider_get_stats(provider, &ts);
    assert_int_equal(ts.spans_dropped, ps.dropped);
    weft_provider_free(provider);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hotpath_string_n_copies_exact_bytes),
        cmocka_unit_test(test_hotpath_string_n_truncates_to_whole_characters),
        cmocka_unit_test(test_hotpath_n_setters_reject_bad_keys),
        cmocka_unit_test(test_hotpath_scalar_n_setters_share_keys_with_the_others),
        cmocka_unit_test(test_hotpath_string_n_passes_through_redaction),
        cmocka_unit_test(test_hotpath_attr_strn_carries_its_length),
        cmocka_unit_test(test_hotpath_steady_state_allocates_nothing),
        cmocka_unit_test(test_hotpath_thread_exit_frees_its_span_cache),
        cmocka_unit_test(test_hotpath_flush_exports_spans_of_exited_threads),
        cmocka_unit_test(test_hotpath_full_queue_drops_are_counted_exactly),
    };

    if (weft_set_allocator(count_malloc, count_realloc, count_free) != WEFT_OK) {
        return 1;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
