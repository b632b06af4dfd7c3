/* tracing/ring.c - set-up and tear-down of the bounded MPMC ring (see ring.h). */
#include "ring.h"

#include "base/mem.h"

weft_err
weft__ring_init(struct weft__ring *ring, size_t cap)
{
    if (cap == 0) {
        return WEFT_EINVAL;
    }
    /* With one slot, a filled slot's sequence (pos + 1) equals what the next push expects:
     * the ring would overwrite its item. Two slots is the least the algorithm allows. */
    if (cap == 1) {
        cap = 2;
    }
    ring->slots = weft__calloc(cap, sizeof(*ring->slots));
    if (ring->slots == NULL) {
        return WEFT_ENOMEM;
    }
    ring->cap = cap;
    ring->mask = (cap & (cap - 1)) == 0 ? cap - 1 : 0;
    for (size_t i = 0; i < cap; i++) {
        atomic_init(&ring->slots[i].seq, i);
    }
    atomic_init(&ring->tail, 0);
    atomic_init(&ring->head, 0);
    return WEFT_OK;
}

void
weft__ring_cleanup(struct weft__ring *ring)
{
    weft__free(ring->slots);
    ring->slots = NULL;
}
