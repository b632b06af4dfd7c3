/* tests/support/failalloc.c - see failalloc.h. */
#include "failalloc.h"

#include <stdlib.h>

long failalloc_budget = -1;

static int
spend(void)
{
    if (failalloc_budget == 0) {
        return 0;
    }
    if (failalloc_budget > 0) {
        failalloc_budget--;
    }
    return 1;
}

void *
failalloc_malloc(size_t n)
{
    return spend() ? malloc(n) : NULL;
}

void *
failalloc_realloc(void *p, size_t n)
{
    return spend() ? realloc(p, n) : NULL;
}
