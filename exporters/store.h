/* exporters/store.h - private helpers that the span store (store.c) shares with the console
 * exporter (console.c): an arena that owns copies of spans, the tree ordering of a trace's
 * spans, and the tree renderer behind both `weft trace show` and the console exporter, so the
 * two print traces the same way.
 *
 * All of it is implemented in store.c. Nothing here is public API.
 */
#ifndef WEFT_EXPORTERS_STORE_H
#define WEFT_EXPORTERS_STORE_H

#include <stdio.h>
#include <weft/export.h>

/* A bump allocator: many small allocations released together. Allocations are 8-byte
 * aligned; @c bytes counts everything allocated from the system (for caps). */
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

/* Tree order of @p count spans of one trace: depth-first from the roots, siblings by start
 * time (then end time, then name). A span is a root when it has no parent or its parent is
 * not among @p spans (an orphan); spans on a parent cycle are broken out as roots too, so
 * every span appears exactly once.
 * Fills order[i] (index into @p spans), depth[i] and, when not NULL, is_orphan[i] (the span
 * has a parent that is not present). @return WEFT_OK or WEFT_ENOMEM. */
weft_err weft__trace_tree(const struct weft_span_data *const *spans,
                          size_t count,
                          size_t *order,
                          size_t *depth,
                          bool *is_orphan);

/* Render @p count spans of one trace (any order) as a header and a tree; @p note, when not
 * NULL, is printed after the header (for example why a trace is incomplete). @p flags are
 * WEFT_RENDER_* from <weft/store.h>. @return WEFT_OK, WEFT_EIO (the stream failed),
 * WEFT_ENOMEM. */
weft_err weft__render_spans(FILE *stream,
                            const struct weft_span_data *const *spans,
                            size_t count,
                            unsigned flags,
                            const char *note);

#endif /* WEFT_EXPORTERS_STORE_H */
