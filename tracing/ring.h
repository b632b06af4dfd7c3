/* tracing/ring.h - a bounded multi-producer multi-consumer ring of pointers (Dmitry Vyukov's
 * bounded MPMC queue): each slot carries a sequence number, so push and pop each claim a slot
 * with one CAS and never wait; a full ring refuses the push, an empty one the pop.
 * Used by the batch processor's queue and the span pool. */
#ifndef WEFT_TRACING_RING_H
#define WEFT_TRACING_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>

struct weft__ring_slot {
    atomic_size_t seq;
    void *item;
};

struct weft__ring {
    struct weft__ring_slot *slots;
    size_t cap;
    size_t mask; /* cap - 1 when cap is a power of two, else 0 (then pos % cap) */
    _Alignas(64) atomic_size_t tail;
    _Alignas(64) atomic_size_t head;
};

/* @return WEFT_OK, WEFT_EINVAL (cap 0), WEFT_ENOMEM. A cap of 1 holds 2 (the least that works). */
weft_err weft__ring_init(struct weft__ring *ring, size_t cap);
void weft__ring_cleanup(struct weft__ring *ring);

static inline struct weft__ring_slot *
weft__ring_slot(struct weft__ring *ring, size_t pos)
{
    return &ring->slots[ring->mask != 0 ? (pos & ring->mask) : (pos % ring->cap)];
}

/* Push @p item; false when full. *pos gets the item's position (for fill estimates). */
static inline bool
weft__ring_push(struct weft__ring *ring, void *item, size_t *pos_out)
{
    size_t pos = atomic_load_explicit(&ring->tail, memory_order_relaxed);
    struct weft__ring_slot *s = NULL;

    for (;;) {
        size_t seq = 0;
        intptr_t diff = 0;

        s = weft__ring_slot(ring, pos);
        seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        diff = (intptr_t)seq - (intptr_t)pos;
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&ring->tail, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                break;
            }
        } else if (diff < 0) {
            return false;
        } else {
            pos = atomic_load_explicit(&ring->tail, memory_order_relaxed);
        }
    }
    s->item = item;
    atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
    if (pos_out != NULL) {
        *pos_out = pos;
    }
    return true;
}

/* weft__ring_push() in one attempt: false when full, or when another producer claimed the slot
 * first (the caller then takes weft__ring_push()). Without the retry loop, the common push is
 * straight-line code that inlines into its caller with few registers. */
static inline bool
weft__ring_try_push(struct weft__ring *ring, void *item, size_t *pos_out)
{
    size_t pos = atomic_load_explicit(&ring->tail, memory_order_relaxed);
    struct weft__ring_slot *s = weft__ring_slot(ring, pos);

    if (atomic_load_explicit(&s->seq, memory_order_acquire) != pos ||
        !atomic_compare_exchange_strong_explicit(&ring->tail, &pos, pos + 1, memory_order_relaxed,
                                                 memory_order_relaxed)) {
        return false;
    }
    s->item = item;
    atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
    *pos_out = pos;
    return true;
}

/* Pop the oldest item; NULL when empty (or the next slot is claimed but not yet filled). */
static inline void *
weft__ring_pop(struct weft__ring *ring)
{
    size_t pos = atomic_load_explicit(&ring->head, memory_order_relaxed);
    struct weft__ring_slot *s = NULL;
    void *item = NULL;

    for (;;) {
        size_t seq = 0;
        intptr_t diff = 0;

        s = weft__ring_slot(ring, pos);
        seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        diff = (intptr_t)seq - (intptr_t)(pos + 1);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&ring->head, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                break;
            }
        } else if (diff < 0) {
            return NULL;
        } else {
            pos = atomic_load_explicit(&ring->head, memory_order_relaxed);
        }
    }
    item = s->item;
    s->item = NULL;
    atomic_store_explicit(&s->seq, pos + ring->cap, memory_order_release);
    return item;
}

/* Items in the ring now (an estimate while others push and pop). */
static inline size_t
weft__ring_len(struct weft__ring *ring)
{
    size_t tail = atomic_load_explicit(&ring->tail, memory_order_relaxed);
    size_t head = atomic_load_explicit(&ring->head, memory_order_relaxed);

    return tail > head ? tail - head : 0;
}

#endif /* WEFT_TRACING_RING_H */
