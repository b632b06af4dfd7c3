/* base/arena.c - a bump allocator: many small allocations released together. The store's
 * reader keeps a loaded trace in one (weft_store_load_trace), and the console exporter keeps
 * its copies of the spans of a trace waiting for its root in another.
 *
 * Invariants: every block comes from weft__malloc; allocations are 8-byte aligned and zeroed;
 * @c bytes counts what was taken from the system, for the callers' caps.
 */
#include "base/arena.h"
#include "base/mem.h"

#include <string.h>

#define ARENA_BLOCK_BYTES 16384

struct weft__arena_block {
    struct weft__arena_block *next;
    size_t used;
    size_t cap;
    max_align_t data[];
};

void
weft__arena_init(struct weft__arena *arena)
{
    arena->head = NULL;
    arena->bytes = 0;
}

void
weft__arena_cleanup(struct weft__arena *arena)
{
    struct weft__arena_block *block = NULL;

    if (arena == NULL) {
        return;
    }
    block = arena->head;
    while (block != NULL) {
        struct weft__arena_block *next = block->next;

        weft__free(block);
        block = next;
    }
    arena->head = NULL;
    arena->bytes = 0;
}

void *
weft__arena_alloc(struct weft__arena *arena, size_t size)
{
    struct weft__arena_block *block = arena->head;
    unsigned char *p = NULL;

    if (size > SIZE_MAX / 2) {
        return NULL;
    }
    size = (size + 15u) & ~(size_t)15u;
    if (block == NULL || block->cap - block->used < size) {
        /* A large request gets a block of its own, linked behind the current one so that
         * the free room left there is still used by later small requests. */
        size_t cap = size > ARENA_BLOCK_BYTES / 4 ? size : ARENA_BLOCK_BYTES;
        struct weft__arena_block *fresh = weft__malloc(sizeof(*fresh) + cap);

        if (fresh == NULL) {
            return NULL;
        }
        fresh->used = 0;
        fresh->cap = cap;
        arena->bytes += sizeof(*fresh) + cap;
        if (block != NULL && cap != ARENA_BLOCK_BYTES) {
            fresh->next = block->next;
            block->next = fresh;
        } else {
            fresh->next = block;
            arena->head = fresh;
        }
        block = fresh;
    }
    p = (unsigned char *)block->data + block->used;
    block->used += size;
    memset(p, 0, size);
    return p;
}

char *
weft__arena_strndup(struct weft__arena *arena, const char *s, size_t len)
{
    char *copy = NULL;

    if (s == NULL || len == SIZE_MAX) {
        return NULL;
    }
    copy = weft__arena_alloc(arena, len + 1);
    if (copy != NULL) {
        memcpy(copy, s, len);
        copy[len] = '\0';
    }
    return copy;
}

char *
weft__arena_strdup(struct weft__arena *arena, const char *s)
{
    return s == NULL ? NULL : weft__arena_strndup(arena, s, strlen(s));
}
