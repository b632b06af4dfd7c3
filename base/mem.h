/* base/mem.h - allocation through the replaceable allocator (weft_set_allocator). Every weft module
 * allocates through these so that a user's allocator sees all of weft's memory.
 *
 * Internal to weft (names carry the weft__ prefix); base/ depends on libc and
 * include/weft/common.h only.
 */
#ifndef WEFT_BASE_MEM_H
#define WEFT_BASE_MEM_H

#include <weft/common.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *weft__malloc(size_t size);
void *weft__calloc(size_t count, size_t size);
void *weft__realloc(void *ptr, size_t size);
void weft__free(void *ptr);
char *weft__strdup(const char *s);
char *weft__strndup(const char *s, size_t len);

/* Overwrite @p n bytes at @p p with zeros through a volatile pointer, so that the compiler
 * cannot drop the stores as dead (C11 has no portable memset_s): for secrets before free. */
void weft__wipe(void *p, size_t n);

#endif /* WEFT_BASE_MEM_H */
