/* base/arena.h - a bump allocator: many small allocations released together (arena.c).
 * Used by the store's reader for loaded traces and by the console exporter for held spans.
 * Nothing here is public API.
 */
#ifndef WEFT_BASE_ARENA_H
#define WEFT_BASE_ARENA_H

#include <stddef.h>

struct weft__arena_block;

/* Allocations are 8-byte aligned; @c bytes counts everything allocated from the system (for
 * caps). */
struct weft__arena {
    struct weft__arena_block *head;
    size_t bytes;
};

void weft__arena_init(struct weft__arena *arena);
void weft__arena_cleanup(struct weft__arena *arena); /* frees every block; may be repeated */
void *weft__arena_alloc(struct weft__arena *arena, size_t size); /* zeroed; NULL on ENOMEM */
/* Copy @p len bytes and a NUL. NULL @p s gives NULL (not an error: check s first). */
char *weft__arena_strndup(struct weft__arena *arena, const char *s, size_t len);
char *weft__arena_strdup(struct weft__arena *arena, const char *s);

#endif /* WEFT_BASE_ARENA_H */
