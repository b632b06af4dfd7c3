/* tracing/clock.c - the public clock reads of include/weft/trace.h, on base/time.c. */
#include "base/time.h"

#include <weft/export.h>
#include <weft/trace.h>

uint64_t
weft_now_ns(void)
{
    return weft__now_ns();
}

uint64_t
weft_monotonic_ns(void)
{
    return weft__monotonic_ns();
}
