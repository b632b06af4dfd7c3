/* base/mem.c - allocation through the replaceable allocator (weft_set_allocator) and the error
 * strings. */
#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

static void *(*alloc_malloc)(size_t) = malloc;
static void *(*alloc_realloc)(void *, size_t) = realloc;
static void (*alloc_free)(void *) = free;

const char *
weft_strerror(weft_err err)
{
    switch (err) {
    case WEFT_OK:
        return "success";
    case WEFT_EINVAL:
        return "invalid argument";
    case WEFT_ENOMEM:
        return "out of memory";
    case WEFT_ELIMIT:
        return "limit reached (dropped and counted)";
    case WEFT_EIO:
        return "input/output error";
    case WEFT_ETIMEDOUT:
        return "timed out";
    case WEFT_ESTATE:
        return "invalid state";
    case WEFT_EPARSE:
        return "parse error";
    case WEFT_EHTTP:
        return "HTTP error";
    case WEFT_ENOTFOUND:
        return "not found";
    case WEFT_EDISABLED:
        return "SDK disabled";
    }
    return "unknown error";
}

weft_err
weft_set_allocator(void *(*malloc_fn)(size_t),
                   void *(*realloc_fn)(void *, size_t),
                   void (*free_fn)(void *))
{
    if (malloc_fn == NULL && realloc_fn == NULL && free_fn == NULL) {
        alloc_malloc = malloc;
        alloc_realloc = realloc;
        alloc_free = free;
        return WEFT_OK;
    }
    if (malloc_fn == NULL || realloc_fn == NULL || free_fn == NULL) {
        return WEFT_EINVAL;
    }
    alloc_malloc = malloc_fn;
    alloc_realloc = realloc_fn;
    alloc_free = free_fn;
    return WEFT_OK;
}

void *
weft__malloc(size_t size)
{
    return alloc_malloc(size == 0 ? 1 : size);
}

void *
weft__calloc(size_t count, size_t size)
{
    void *p = NULL;

    if (size != 0 && count > SIZE_MAX / size) {
        return NULL;
    }
    p = weft__malloc(count * size);
    if (p != NULL) {
        memset(p, 0, count * size);
    }
    return p;
}

void *
weft__realloc(void *ptr, size_t size)
{
    return alloc_realloc(ptr, size == 0 ? 1 : size);
}

void
weft__free(void *ptr)
{
    if (ptr != NULL) {
        alloc_free(ptr);
    }
}

void
weft__wipe(void *p, size_t n)
{
    volatile char *v = p;

    for (size_t i = 0; i < n; i++) {
        v[i] = 0;
    }
}

char *
weft__strndup(const char *s, size_t len)
{
    char *copy = weft__malloc(len + 1);

    if (copy == NULL) {
        return NULL;
    }
    memcpy(copy, s, len);
    copy[len] = '\0';
    return copy;
}

char *
weft__strdup(const char *s)
{
    return s == NULL ? NULL : weft__strndup(s, strlen(s));
}
