/* tests/tracing/test_ring.c - the bounded MPMC ring behind the batch queue and the span pool:
 * FIFO order, refusal when full, capacities that are not powers of two, and no loss or
 * duplication with several producers and consumers (also run under ThreadSanitizer). */
#include "support/weft_test.h"
#include "tracing/ring.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

static void
test_ring_is_fifo_and_refuses_when_full(void **state)
{
    struct weft__ring ring;
    int items[5];
    size_t pos = 99;

    (void)state;
    assert_weft_ok(weft__ring_init(&ring, 4));
    for (int i = 0; i < 4; i++) {
        assert_true(weft__ring_push(&ring, &items[i], &pos));
        assert_int_equal(pos, (size_t)i);
    }
    assert_false(weft__ring_push(&ring, &items[4], NULL));
    assert_int_equal(weft__ring_len(&ring), 4);
    for (int i = 0; i < 4; i++) {
        assert_ptr_equal(weft__ring_pop(&ring), &items[i]);
    }
    assert_null(weft__ring_pop(&ring));
    assert_int_equal(weft__ring_len(&ring), 0);
    weft__ring_cleanup(&ring);
}

static void
test_ring_wraps_with_capacity_not_power_of_two(void **state)
{
    struct weft__ring ring;
    int items[3];

    (void)state;
    assert_weft_ok(weft__ring_init(&ring, 3));
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < 3; i++) {
            assert_true(weft__ring_push(&ring, &items[i], NULL));
        }
        assert_false(weft__ring_push(&ring, &items[0], NULL));
        for (int i = 0; i < 3; i++) {
            assert_ptr_equal(weft__ring_pop(&ring), &items[i]);
        }
    }
    weft__ring_cleanup(&ring);
}

static void
test_ring_rejects_zero_capacity(void **state)
{
    struct weft__ring ring;

    (void)state;
    assert_weft_err(weft__ring_init(&ring, 0), WEFT_EINVAL);
}

#define PRODUCERS    3
#define CONSUMERS    2
#define PER_PRODUCER 20000

struct shared {
    struct weft__ring ring;
    atomic_size_t consumed;
    atomic_size_t sum;
    int next_producer;
    pthread_mutex_t lock;
};

static void *
produce(void *arg)
{
    struct shared *sh = arg;
    int id = 0;

    pthread_mutex_lock(&sh->lock);
    id = sh->next_producer++;
    pthread_mutex_unlock(&sh->lock);
    for (uintptr_t i = 1; i <= PER_PRODUCER; i++) {
        uintptr_t v = (uintptr_t)id * PER_PRODUCER + i;
        while (!weft__ring_push(&sh->ring, (void *)v, NULL)) {
            sched_yield();
        }
    }
    return NULL;
}

static void *
consume(void *arg)
{
    struct shared *sh = arg;

    while (atomic_load(&sh->consumed) < PRODUCERS * PER_PRODUCER) {
        void *item = weft__ring_pop(&sh->ring);

        if (item == NULL) {
            sched_yield();
            continue;
        }
        atomic_fetch_add(&sh->sum, (size_t)(uintptr_t)item);
        atomic_fetch_add(&sh->consumed, 1);
    }
    return NULL;
}

static void
test_ring_concurrent_producers_and_consumers_lose_nothing(void **state)
{
    struct shared sh = {.next_producer = 0};
    pthread_t p[PRODUCERS];
    pthread_t c[CONSUMERS];
    size_t n = PRODUCERS * PER_PRODUCER;

    (void)state;
    pthread_mutex_init(&sh.lock, NULL);
    atomic_init(&sh.consumed, 0);
    atomic_init(&sh.sum, 0);
    assert_weft_ok(weft__ring_init(&sh.ring, 64));
    for (int i = 0; i < CONSUMERS; i++) {
        pthread_create(&c[i], NULL, consume, &sh);
    }
    for (int i = 0; i < PRODUCERS; i++) {
        pthread_create(&p[i], NULL, produce, &sh);
    }
    for (int i = 0; i < PRODUCERS; i++) {
        pthread_join(p[i], NULL);
    }
    for (int i = 0; i < CONSUMERS; i++) {
        pthread_join(c[i], NULL);
    }
    /* Values 1..n each exactly once: their sum is n(n+1)/2. */
    assert_int_equal(atomic_load(&sh.consumed), n);
    assert_int_equal(atomic_load(&sh.sum), n * (n + 1) / 2);
    assert_null(weft__ring_pop(&sh.ring));
    weft__ring_cleanup(&sh.ring);
    pthread_mutex_destroy(&sh.lock);
}

static void
test_ring_of_one_never_overwrites(void **state)
{
    struct weft__ring ring;
    int a = 1;
    int b = 2;
    int c = 3;

    (void)state;
    assert_weft_ok(weft__ring_init(&ring, 1));
    assert_true(weft__ring_push(&ring, &a, NULL));
    assert_true(weft__ring_push(&ring, &b, NULL));
    assert_false(weft__ring_push(&ring, &c, NULL));
    assert_ptr_equal(weft__ring_pop(&ring), &a);
    assert_ptr_equal(weft__ring_pop(&ring), &b);
    assert_null(weft__ring_pop(&ring));
    weft__ring_cleanup(&ring);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_of_one_never_overwrites),
        cmocka_unit_test(test_ring_is_fifo_and_refuses_when_full),
        cmocka_unit_test(test_ring_wraps_with_capacity_not_power_of_two),
        cmocka_unit_test(test_ring_rejects_zero_capacity),
        cmocka_unit_test(test_ring_concurrent_producers_and_consumers_lose_nothing),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
