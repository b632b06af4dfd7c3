/* tests/store/test_tree.c - tree order of a trace's spans (store/tree.c) and the sort it and
 * the outline read use (store/sort.c), against reference implementations written here the
 * plain way: qsort() by start, end and name, parents found by binary search over the ids (what
 * tree.c did before its sort and its id map). Random traces of up to a few thousand spans:
 * orphans whose parent is missing, self-parents and parent cycles, many spans starting at the
 * same instant, spans arriving in any order. */
#include "support/failalloc.h"
#include "support/weft_test.h"

#include "store/store.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

/* ---- a seeded generator (xorshift64*), so a failure repeats ----------------------------- */

static uint64_t rng_state;

static uint64_t
rng(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717u;
}

static size_t
rng_below(size_t n)
{
    return (size_t)(rng() % n);
}

/* ---- weft__store_sort() against qsort() ------------------------------------------------- */

struct sort_item {
    uint64_t key;
    uint64_t tie; /* what the tie comparison compares */
    size_t index;
};

static int
item_cmp(const void *a, const void *b)
{
    const struct sort_item *x = a;
    const struct sort_item *y = b;

    if (x->key != y->key) {
        return x->key < y->key ? -1 : 1;
    }
    if (x->tie != y->tie) {
        return x->tie < y->tie ? -1 : 1;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

static int
tie_cmp(const void *ctx, size_t a, size_t b)
{
    const uint64_t *tie = ctx;

    return tie[a] < tie[b] ? -1 : tie[a] > tie[b];
}

/* Sort @p n random keys (@p spread distinct values, over all 64 bits when @p is_wide) and
 * compare with qsort() of (key, tie, index); @p is_presorted: keys given in order. */
static void
check_sort(size_t n, uint64_t spread, bool is_wide, bool is_presorted, bool with_tie)
{
    uint64_t *key = calloc(n + 1, sizeof(*key));
    uint64_t *tie = calloc(n + 1, sizeof(*tie));
    size_t *order = calloc(n + 1, sizeof(*order));
    struct sort_item *ref = calloc(n + 1, sizeof(*ref));

    assert_non_null(key);
    assert_non_null(tie);
    assert_non_null(order);
    assert_non_null(ref);
    for (size_t i = 0; i < n; i++) {
        key[i] = 1700000000000000000u + rng() % spread * (is_wide ? 0x0101010101u : 1000u);
        tie[i] = with_tie ? rng() % 4 : 0;
    }
    if (is_presorted) {
        for (size_t i = 1; i < n; i++) {
            key[i] = key[i] < key[i - 1] ? key[i - 1] : key[i];
        }
    }
    for (size_t i = 0; i < n; i++) {
        ref[i] = (struct sort_item){key[i], tie[i], i};
    }
    qsort(ref, n, sizeof(*ref), item_cmp);
    assert_weft_ok(weft__store_sort(key, n, with_tie ? tie_cmp : NULL, tie, order));
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(order[i], ref[i].index);
    }
    free(key);
    free(tie);
    free(order);
    free(ref);
}

static void
test_sort_equals_a_stable_sort_with_ties(void **state)
{
    static const size_t sizes[] = {0, 1, 2, 3, 15, 16, 17, 100, 1000, 20000};

    (void)state;
    rng_state = 0x5eed0001u;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t n = sizes[s];
        check_sort(n, n / 3 + 1, false, false, true); /* ties everywhere */
        check_sort(n, UINT32_MAX, true, false, true); /* every byte differs */
        check_sort(n, n + 1, false, true, true);      /* already in order */
        check_sort(n, 1, false, false, true);         /* all at one instant */
        check_sort(n, n / 2 + 1, false, false, false);
    }
}

static void
test_sort_out_of_memory_fails_cleanly(void **state)
{
    uint64_t key[300];
    uint64_t tie[300];
    size_t order[300];
    bool is_done = false;

    (void)state;
    for (size_t i = 0; i < 300; i++) {
        key[i] = (300 - i) / 2 % 7; /* out of order, runs of ties longer than 16 */
        tie[i] = i % 3;
    }
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; !is_done; budget++) {
        weft_err err = WEFT_OK;

        failalloc_budget = budget;
        err = weft__store_sort(key, 300, tie_cmp, tie, order);
        assert_true(err == WEFT_OK || err == WEFT_ENOMEM);
        is_done = err == WEFT_OK;
    }
    failalloc_budget = -1;
    weft_set_allocator(NULL, NULL, NULL);
    for (size_t i = 1; i < 300; i++) {
        assert_true(
            key[order[i - 1]] < key[order[i]] ||
            (key[order[i - 1]] == key[order[i]] && tie_cmp(tie, order[i - 1], order[i]) <= 0));
    }
}

/* ---- tree order against the reference --------------------------------------------------- */

/* The reference: tree.c's walk as it was, with qsort() and bsearch(). */
struct ref_start {
    uint64_t start;
    uint64_t end;
    const char *name;
    size_t index;
};

static int
ref_by_start(const void *a, const void *b)
{
    const struct ref_start *x = a;
    const struct ref_start *y = b;
    int c = 0;

    if (x->start != y->start) {
        return x->start < y->start ? -1 : 1;
    }
    if (x->end != y->end) {
        return x->end > y->end ? -1 : 1;
    }
    c = strcmp(x->name, y->name);
    if (c != 0) {
        return c;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

struct ref_id {
    uint8_t id[WEFT_SPAN_ID_SIZE];
    size_t index;
};

static int
ref_by_id(const void *a, const void *b)
{
    const struct ref_id *x = a;
    const struct ref_id *y = b;
    int c = memcmp(x->id, y->id, WEFT_SPAN_ID_SIZE);

    return c != 0 ? c : (x->index < y->index ? -1 : x->index > y->index);
}

static int
ref_id_key(const void *key, const void *elem)
{
    return memcmp(key, ((const struct ref_id *)elem)->id, WEFT_SPAN_ID_SIZE);
}

static void
ref_tree(const struct weft__store_node *nodes, size_t n, size_t *order, size_t *depth)
{
    struct ref_start *starts = calloc(n + 1, sizeof(*starts));
    struct ref_id *ids = calloc(n + 1, sizeof(*ids));
    size_t *head = calloc(n + 1, sizeof(*head));
    size_t *next = calloc(n + 1, sizeof(*next));
    size_t *nd = calloc(n + 1, sizeof(*nd));
    size_t *stack = calloc(n + 1, sizeof(*stack));
    bool *seen = calloc(n + 1, sizeof(*seen));
    bool *is_root = calloc(n + 1, sizeof(*is_root));
    size_t emitted = 0;

    assert_true(starts && ids && head && next && nd && stack && seen && is_root);
    for (size_t i = 0; i < n; i++) {
        starts[i] = (struct ref_start){nodes[i].start, nodes[i].end, nodes[i].name, i};
        memcpy(ids[i].id, nodes[i].id, WEFT_SPAN_ID_SIZE);
        ids[i].index = i;
        head[i] = SIZE_MAX;
    }
    head[n] = SIZE_MAX;
    qsort(starts, n, sizeof(*starts), ref_by_start);
    qsort(ids, n, sizeof(*ids), ref_by_id);
    for (size_t k = 0; k < n; k++) {
        size_t i = starts[k].index;
        const struct ref_id *found =
            nodes[i].has_parent ? bsearch(nodes[i].parent, ids, n, sizeof(*ids), ref_id_key) : NULL;
        size_t p = found != NULL && found->index != i ? found->index : n;

        is_root[i] = p == n;
        next[i] = head[p];
        head[p] = i;
    }
    for (size_t pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < n; k++) {
            size_t r = starts[k].index;
            size_t top = 0;

            if (pass == 0 ? !is_root[r] : seen[r]) {
                continue;
            }
            nd[r] = 0;
            stack[top++] = r;
            while (top > 0) {
                size_t i = stack[--top];
                if (seen[i]) {
                    continue;
                }
                seen[i] = true;
                order[emitted] = i;
                depth[emitted++] = nd[i];
                for (size_t c = head[i]; c != SIZE_MAX; c = next[c]) {
                    if (!seen[c]) {
                        nd[c] = nd[i] + 1;
                        stack[top++] = c;
                    }
                }
            }
        }
    }
    assert_int_equal(emitted, n);
    free(starts);
    free(ids);
    free(head);
    free(next);
    free(nd);
    free(stack);
    free(seen);
    free(is_root);
}

static int
node_by_start_id(const void *a, const void *b)
{
    const struct weft__store_node *x = a;
    const struct weft__store_node *y = b;

    if (x->start != y->start) {
        return x->start < y->start ? -1 : 1;
    }
    return memcmp(x->id, y->id, WEFT_SPAN_ID_SIZE);
}

/* A random trace of @p n spans: a root or two, children of earlier spans mostly, some orphans
 * (a parent id that is no span's), a self-parent and a cycle now and then; starts on a coarse
 * grid so that many tie, names from a few; then shuffled, as spans arrive in any order. */
static void
random_trace(struct weft__store_node *nodes, size_t n)
{
    static const char *const names[] = {"step", "call", "tool", "agent"};

    for (size_t i = 0; i < n; i++) {
        uint64_t id = rng() | 1; /* non-zero */
        struct weft__store_node *x = &nodes[i];

        memset(x, 0, sizeof(*x));
        memcpy(x->id, &id, sizeof(id));
        x->start = 1000 + rng_below(n / 4 + 2) * 10;
        x->end = x->start + rng_below(5) * 10;
        x->name = names[rng_below(4)];
        if (i > 0 && rng_below(10) > 0) {
            size_t kind = rng_below(40);
            uint64_t missing = rng() | 1;
            x->has_parent = true;
            if (kind == 0) {
                memcpy(x->parent, &missing, sizeof(missing)); /* an orphan */
            } else if (kind == 1) {
                memcpy(x->parent, x->id, WEFT_SPAN_ID_SIZE); /* its own parent */
            } else {
                memcpy(x->parent, nodes[rng_below(i)].id, WEFT_SPAN_ID_SIZE);
            }
        }
    }
    if (n > 3 && rng_below(2) == 0) { /* a cycle: the first three spans' parents go round */
        for (size_t i = 0; i < 3; i++) {
            nodes[i].has_parent = true;
            memcpy(nodes[i].parent, nodes[(i + 1) % 3].id, WEFT_SPAN_ID_SIZE);
        }
    }
    for (size_t i = n; i > 1; i--) {
        size_t j = rng_below(i);
        struct weft__store_node t = nodes[i - 1];
        nodes[i - 1] = nodes[j];
        nodes[j] = t;
    }
}

static void
test_tree_order_equals_the_reference_on_random_traces(void **state)
{
    static const size_t sizes[] = {1, 2, 3, 5, 10, 64, 500, 3000};

    (void)state;
    rng_state = 0x7ee0001u;
    for (size_t round = 0; round < 8; round++) {
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            size_t n = sizes[s];
            struct weft__store_node *nodes = calloc(n, sizeof(*nodes));
            struct weft_span_data *spans = calloc(n, sizeof(*spans));
            const struct weft_span_data **ptrs = calloc(n, sizeof(*ptrs));
            size_t *order = calloc(n, sizeof(*order));
            size_t *depth = calloc(n, sizeof(*depth));
            size_t *ref_order = calloc(n, sizeof(*ref_order));
            size_t *ref_depth = calloc(n, sizeof(*ref_depth));
            bool *is_orphan = calloc(n, sizeof(*is_orphan));

            assert_true(nodes && spans && ptrs && order && depth && ref_order && ref_depth &&
                        is_orphan);
            random_trace(nodes, n);
            /* Nodes as read.c hands them over: by start, then span id. */
            qsort(nodes, n, sizeof(*nodes), node_by_start_id);
            ref_tree(nodes, n, ref_order, ref_depth);
            assert_weft_ok(weft__store_node_tree(nodes, n, order, depth));
            for (size_t i = 0; i < n; i++) {
                assert_int_equal(order[i], ref_order[i]);
                assert_int_equal(depth[i], ref_depth[i]);
            }
            /* The same spans loaded whole order alike, and say which are orphans. */
            for (size_t i = 0; i < n; i++) {
                memcpy(spans[i].span_id, nodes[i].id, WEFT_SPAN_ID_SIZE);
                memcpy(spans[i].parent_span_id, nodes[i].parent, WEFT_SPAN_ID_SIZE);
                spans[i].has_parent = nodes[i].has_parent;
                spans[i].start_time_ns = nodes[i].start;
                spans[i].end_time_ns = nodes[i].end;
                spans[i].name = nodes[i].name;
                ptrs[i] = &spans[i];
            }
            assert_weft_ok(weft__trace_tree(ptrs, n, order, depth, is_orphan));
            for (size_t i = 0; i < n; i++) {
                /* An orphan: a root that names a parent (missing, itself, or on a cycle). */
                assert_int_equal(order[i], ref_order[i]);
                assert_int_equal(depth[i], ref_depth[i]);
                assert_int_equal(is_orphan[i], depth[i] == 0 && nodes[order[i]].has_parent);
            }
            free(nodes);
            free(spans);
            free(ptrs);
            free(order);
            free(depth);
            free(ref_order);
            free(ref_depth);
            free(is_orphan);
        }
    }
}

static void
test_tree_out_of_memory_fails_cleanly(void **state)
{
    struct weft__store_node nodes[200];
    size_t order[200];
    size_t depth[200];
    size_t ref_order[200];
    size_t ref_depth[200];
    bool is_done = false;

    (void)state;
    rng_state = 0x00f00du;
    random_trace(nodes, 200);
    qsort(nodes, 200, sizeof(*nodes), node_by_start_id);
    ref_tree(nodes, 200, ref_order, ref_depth);
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; !is_done; budget++) {
        weft_err err = WEFT_OK;

        failalloc_budget = budget;
        err = weft__store_node_tree(nodes, 200, order, depth);
        assert_true(err == WEFT_OK || err == WEFT_ENOMEM);
        is_done = err == WEFT_OK;
    }
    failalloc_budget = -1;
    weft_set_allocator(NULL, NULL, NULL);
    assert_memory_equal(order, ref_order, sizeof(order));
    assert_memory_equal(depth, ref_depth, sizeof(depth));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sort_equals_a_stable_sort_with_ties),
        cmocka_unit_test(test_sort_out_of_memory_fails_cleanly),
        cmocka_unit_test(test_tree_order_equals_the_reference_on_random_traces),
        cmocka_unit_test(test_tree_out_of_memory_fails_cleanly),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
