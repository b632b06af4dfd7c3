/* tests/support/failalloc.h - an allocator that fails on demand, for out-of-memory loops:
 *
 *     assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
 *     for (long budget = 0;; budget++) {
 *         failalloc_budget = budget;   // the (budget+1)-th allocation fails
 *         ... run the operation, assert it failed cleanly or succeeded ...
 *     }
 *     failalloc_budget = -1;
 *     weft_set_allocator(NULL, NULL, NULL);
 */
#ifndef WEFT_TESTS_SUPPORT_FAILALLOC_H
#define WEFT_TESTS_SUPPORT_FAILALLOC_H

#include <stddef.h>

/* Allocations left before every further one fails; -1 means never fail. */
extern long failalloc_budget;

void *failalloc_malloc(size_t n);
void *failalloc_realloc(void *p, size_t n);

#endif
