/* tests/store/test_pool.c - the span store's pool of read handles (weft_store_pool_*(),
 * store/pool.c) over a SQLite store; tests/serve_pg/test_serve_pg.c counts PostgreSQL
 * connections through `weft serve`.
 * - a released handle is handed out again (opened once, reused after), at most max_idle kept;
 * - a pooled handle sees the batches written after it was opened (no snapshot kept idle);
 * - eight threads acquiring and reading at once: every read right, handles never shared, the
 *   pool bounded (label `concurrency`: runs under ThreadSanitizer too);
 * - out of memory at every allocation: a clean failure, nothing leaked;
 * - bad arguments. */
#include "support/failalloc.h"
#include "support/store_spans.h"
#include "support/weft_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

#define TA "aa000000000000000000000000000001"
#define TB "bb000000000000000000000000000002"

struct fx {
    char dir[64];
    char path[128];
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-pool-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/weft.db", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* Write one trace of @p n spans into the store at @p path. */
static void
write_trace(const char *path, const char *trace, size_t n)
{
    struct weft_exporter *ex = NULL;
    struct weft_span_data spans[8];
    char ids[8][17];

    assert_true(n <= 8);
    for (size_t i = 0; i < n; i++) {
        snprintf(ids[i], sizeof(ids[i]), "%016zx", i + 1);
        spans[i] = store_spans_make(trace, ids[i], i == 0 ? NULL : "0000000000000001", "step",
                                    (uint64_t)i, 1);
    }
    assert_weft_ok(weft_store_exporter_new(path, &ex));
    assert_weft_ok(store_spans_export(ex, spans, n));
    weft_exporter_free(ex);
}

static size_t
traces_listed(struct weft_store *store)
{
    struct weft_trace_summary *list = NULL;
    size_t count = 0;

    assert_weft_ok(weft_store_list_traces(store, 10, &list, &count));
    weft_trace_summaries_free(list, count);
    return count;
}

static void
test_pool_reuses_a_released_handle(void **state)
{
    struct fx *f = *state;
    struct weft_store_pool *pool = NULL;
    struct weft_store *a = NULL;
    struct weft_store *b = NULL;
    struct weft_store *c = NULL;
    struct weft_store_pool_stats st;

    write_trace(f->path, TA, 2);
    assert_weft_ok(weft_store_pool_new(f->path, 1, &pool));
    weft_store_pool_stats(pool, &st);
    assert_int_equal(st.opened, 0); /* nothing opened before it is needed */
    assert_weft_ok(weft_store_pool_acquire(pool, &a));
    assert_int_equal(traces_listed(a), 1);
    weft_store_pool_release(pool, a);
    assert_weft_ok(weft_store_pool_acquire(pool, &b));
    assert_ptr_equal(a, b);                            /* the same handle, not a new open */
    assert_weft_ok(weft_store_pool_acquire(pool, &c)); /* the pool is empty: a new one */
    assert_ptr_not_equal(b, c);
    weft_store_pool_release(pool, b);
    weft_store_pool_release(pool, c); /* past max_idle 1: closed */
    weft_store_pool_stats(pool, &st);
    assert_int_equal(st.opened, 2);
    assert_int_equal(st.reused, 1);
    assert_int_equal(st.discarded, 0);
    assert_int_equal(st.idle, 1);
    weft_store_pool_release(pool, NULL); /* a no-op */
    weft_store_pool_free(pool);
}

static void
test_pool_handle_sees_later_writes(void **state)
{
    struct fx *f = *state;
    struct weft_store_pool *pool = NULL;
    struct weft_store *s = NULL;
    struct weft_trace *trace = NULL;

    write_trace(f->path, TA, 1);
    assert_weft_ok(weft_store_pool_new(f->path, 0, &pool));
    assert_weft_ok(weft_store_pool_acquire(pool, &s));
    assert_int_equal(traces_listed(s), 1);
    assert_weft_ok(weft_store_load_trace(s, TA, &trace)); /* a read transaction, ended */
    weft_trace_free(trace);
    weft_store_pool_release(pool, s);

    write_trace(f->path, TB, 3); /* while the handle is idle */
    assert_weft_ok(weft_store_pool_acquire(pool, &s));
    assert_int_equal(traces_listed(s), 2);
    write_trace(f->path, TA, 4); /* while it is held: spans 2..4 join TA */
    assert_weft_ok(weft_store_load_trace(s, TA, &trace));
    assert_int_equal(weft_trace_span_count(trace), 4);
    weft_trace_free(trace);
    weft_store_pool_release(pool, s);
    weft_store_pool_free(pool);
}

/* Threads that each take a handle, read, and give it back, many times. */
struct worker {
    struct weft_store_pool *pool;
    int failures;
};

static void *
work(void *arg)
{
    struct worker *w = arg;

    for (int i = 0; i < 200; i++) {
        struct weft_store *s = NULL;
        struct weft_trace *trace = NULL;

        if (weft_store_pool_acquire(w->pool, &s) != WEFT_OK) {
            w->failures++;
            continue;
        }
        if (weft_store_load_trace(s, TA, &trace) != WEFT_OK || weft_trace_span_count(trace) != 3) {
            w->failures++;
        }
        weft_trace_free(trace);
        weft_store_pool_release(w->pool, s);
    }
    return NULL;
}

static void
test_pool_threads_share_it_safely(void **state)
{
    struct fx *f = *state;
    struct weft_store_pool *pool = NULL;
    pthread_t threads[8];
    struct worker w[8];
    struct weft_store_pool_stats st;

    write_trace(f->path, TA, 3);
    assert_weft_ok(weft_store_pool_new(f->path, 2, &pool));
    for (int i = 0; i < 8; i++) {
        w[i] = (struct worker){pool, 0};
        assert_int_equal(pthread_create(&threads[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(threads[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
    weft_store_pool_stats(pool, &st);
    assert_int_equal(st.opened + st.reused, 8 * 200);
    assert_true(st.idle <= 2);
    assert_true(st.reused > st.opened); /* handles were reused, not opened per read */
    weft_store_pool_free(pool);
}

static void
test_pool_out_of_memory_fails_cleanly(void **state)
{
    struct fx *f = *state;
    bool has_passed = false;

    write_trace(f->path, TA, 2);
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; budget < 10000 && !has_passed; budget++) {
        struct weft_store_pool *pool = NULL;
        struct weft_store *s = NULL;
        weft_err err = WEFT_OK;

        failalloc_budget = budget;
        err = weft_store_pool_new(f->path, 0, &pool);
        if (err == WEFT_OK) {
            err = weft_store_pool_acquire(pool, &s);
            assert_true(err == WEFT_OK || err == WEFT_ENOMEM || err == WEFT_EIO);
            if (err == WEFT_OK) {
                weft_store_pool_release(pool, s);
                err = weft_store_pool_acquire(pool, &s); /* the idle one: no allocation */
                assert_weft_ok(err);
                weft_store_pool_release(pool, s);
                has_passed = true;
            }
        } else {
            assert_int_equal(err, WEFT_ENOMEM);
            assert_null(pool);
        }
        weft_store_pool_free(pool);
    }
    failalloc_budget = -1;
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(has_passed);
}

static void
test_pool_bad_arguments(void **state)
{
    struct weft_store_pool *pool = NULL;
    struct weft_store *s = (struct weft_store *)&pool;
    struct weft_store_pool_stats st;

    (void)state;
    assert_int_equal(weft_store_pool_new("x", 0, NULL), WEFT_EINVAL);
    assert_int_equal(weft_store_pool_acquire(NULL, &s), WEFT_EINVAL);
    assert_null(s);
    assert_weft_ok(weft_store_pool_new("/nonexistent/weft.db", 0, &pool));
    assert_int_equal(weft_store_pool_acquire(pool, NULL), WEFT_EINVAL);
    assert_int_equal(weft_store_pool_acquire(pool, &s), WEFT_ENOTFOUND);
    assert_null(s);
    weft_store_pool_stats(pool, &st);
    assert_int_equal(st.opened, 0);
    weft_store_pool_stats(NULL, &st);
    assert_int_equal(st.idle, 0);
    weft_store_pool_free(pool);
    weft_store_pool_free(NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pool_reuses_a_released_handle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_handle_sees_later_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_threads_share_it_safely, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_out_of_memory_fails_cleanly, setup, teardown),
        cmocka_unit_test(test_pool_bad_arguments),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
