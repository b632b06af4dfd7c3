/* tests/serve/test_rows_cache.c - view=rows's cache of outlines (serve/rows_cache.c) on its
 * own: a view is found under its trace id and stamp only, a stamp that changed drops it (a
 * miss), the byte bound evicts the least recently used first (a lookup makes a view the most
 * recent), a view over the bound alone is not kept, and a view in use when it is evicted stays
 * readable until its user releases it (ASan would see a use after free). Through the server,
 * tests/serve/test_traces.c checks that cached parts equal cold ones and that a trace that
 * gains spans is read again.
 */
#include "support/weft_test.h"

#include "base/mem.h"
#include "serve/rows_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A view of @p bytes for trace "<c>" x 32 at span count @p spans, in use once (refs 1). */
static struct weft__rows_view *
view_of(char c, size_t spans, size_t bytes)
{
    struct weft__rows_view *v = weft__calloc(1, sizeof(*v));

    assert_non_null(v);
    memset(v->trace_id, c, WEFT_TRACE_ID_HEX_LEN);
    v->stamp.span_count = spans;
    v->stamp.end_ns = 1000 + spans;
    v->bytes = bytes;
    v->refs = 1;
    return v;
}

static struct weft_trace_stamp
stamp_of(size_t spans)
{
    struct weft_trace_stamp st = {spans, 0, 0, 1000 + spans, true};
    return st;
}

static struct weft__rows_cache_stats
stats(struct weft__rows_cache *c)
{
    struct weft__rows_cache_stats st;
    weft__rows_cache_stats(c, &st);
    return st;
}

/* Put @p v and give the caller's reference back, as a request does when it is done. */
static void
keep(struct weft__rows_cache *c, struct weft__rows_view *v)
{
    weft__rows_cache_put(c, v);
    weft__rows_view_release(c, v);
}

static void
test_found_by_id_and_stamp_only(void **state)
{
    struct weft__rows_cache *c = NULL;
    struct weft_trace_stamp st = stamp_of(5);
    struct weft_trace_stamp grown = stamp_of(6);
    char a[WEFT_TRACE_ID_HEX_LEN + 1];
    char b[WEFT_TRACE_ID_HEX_LEN + 1];
    struct weft__rows_view *v = NULL;

    (void)state;
    memset(a, 'a', WEFT_TRACE_ID_HEX_LEN);
    a[WEFT_TRACE_ID_HEX_LEN] = '\0';
    memset(b, 'b', WEFT_TRACE_ID_HEX_LEN);
    b[WEFT_TRACE_ID_HEX_LEN] = '\0';
    assert_weft_ok(weft__rows_cache_new(1000, &c));
    assert_null(weft__rows_cache_get(c, a, &st)); /* empty: a miss */
    keep(c, view_of('a', 5, 100));
    v = weft__rows_cache_get(c, a, &st);
    assert_non_null(v);
    assert_int_equal(v->stamp.span_count, 5);
    weft__rows_view_release(c, v);
    assert_null(weft__rows_cache_get(c, b, &st));
    /* The trace gained a span: the view is dropped, not served. */
    assert_null(weft__rows_cache_get(c, a, &grown));
    assert_int_equal(stats(c).entries, 0);
    assert_int_equal(stats(c).bytes, 0);
    assert_null(weft__rows_cache_get(c, a, &st));
    assert_int_equal(stats(c).hits, 1);
    assert_int_equal(stats(c).misses, 4);
    assert_int_equal(stats(c).evictions, 0);
    /* A newer read of the same trace replaces the older one. */
    keep(c, view_of('a', 5, 100));
    keep(c, view_of('a', 6, 120));
    assert_int_equal(stats(c).entries, 1);
    assert_int_equal(stats(c).bytes, 120);
    v = weft__rows_cache_get(c, a, &grown);
    assert_non_null(v);
    weft__rows_view_release(c, v);
    weft__rows_cache_free(c);
}

static void
test_bound_evicts_least_recent_and_spares_views_in_use(void **state)
{
    struct weft__rows_cache *c = NULL;
    struct weft_trace_stamp st = stamp_of(1);
    char id[WEFT_TRACE_ID_HEX_LEN + 1];
    struct weft__rows_view *held = NULL;

    (void)state;
    id[WEFT_TRACE_ID_HEX_LEN] = '\0';
    assert_weft_ok(weft__rows_cache_new(300, &c));
    keep(c, view_of('a', 1, 100));
    keep(c, view_of('b', 1, 100));
    keep(c, view_of('c', 1, 100));
    assert_int_equal(stats(c).bytes, 300);
    /* 'a' used again: 'b' is now the least recent, and goes when 'd' comes. */
    memset(id, 'a', WEFT_TRACE_ID_HEX_LEN);
    held = weft__rows_cache_get(c, id, &st);
    assert_non_null(held);
    keep(c, view_of('d', 1, 100));
    assert_int_equal(stats(c).evictions, 1);
    memset(id, 'b', WEFT_TRACE_ID_HEX_LEN);
    assert_null(weft__rows_cache_get(c, id, &st));
    /* Two more push out 'c' and 'a', which a request still holds: still readable. */
    keep(c, view_of('e', 1, 100));
    keep(c, view_of('f', 1, 100));
    assert_int_equal(stats(c).evictions, 3);
    assert_int_equal(stats(c).entries, 3);
    assert_int_equal(stats(c).bytes, 300);
    assert_false(held->is_cached);
    assert_int_equal(held->trace_id[0], 'a');
    weft__rows_view_release(c, held);
    /* A view over the bound alone is not kept, and nothing is evicted for it. */
    held = view_of('g', 1, 301);
    weft__rows_cache_put(c, held);
    assert_false(held->is_cached);
    weft__rows_view_release(c, held);
    assert_int_equal(stats(c).entries, 3);
    assert_int_equal(stats(c).evictions, 3);
    /* No cache: nothing kept, nothing counted. */
    held = view_of('h', 1, 10);
    weft__rows_cache_put(NULL, held);
    assert_null(weft__rows_cache_get(NULL, held->trace_id, &st));
    weft__rows_view_release(NULL, held);
    weft__rows_cache_free(c);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_found_by_id_and_stamp_only),
        cmocka_unit_test(test_bound_evicts_least_recent_and_spares_views_in_use),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
